"""Roles, ordered: owner > admin > member > read-only.

- read-only: read topics and the organisation;
- member: also create, alter and delete topics;
- admin: also manage service accounts, API keys, ACLs, service-account quotas, members
  (except owners), and read the audit log;
- owner: also grant and remove the owner role.
Platform staff (Django ``is_staff``) change organisation quotas through /api/v1/platform/.
"""

from __future__ import annotations

OWNER = "owner"
ADMIN = "admin"
MEMBER = "member"
READ_ONLY = "read-only"

RANK = {READ_ONLY: 0, MEMBER: 1, ADMIN: 2, OWNER: 3}
MEMBERSHIP_ROLES = [
    (OWNER, "Owner"),
    (ADMIN, "Admin"),
    (MEMBER, "Member"),
    (READ_ONLY, "Read-only"),
]
# A service account is never an owner: owners are people.
SERVICE_ACCOUNT_ROLES = [(ADMIN, "Admin"), (MEMBER, "Member"), (READ_ONLY, "Read-only")]


def at_least(role: str, required: str) -> bool:
    return RANK.get(role, -1) >= RANK[required]
