"""Whether a person may still read an organisation's topics: asked when a live tail opens and
again every few seconds while it stays open (``consumers.LiveTailConsumer``), so removing a
member, lowering their role below reading, deactivating them or the organisation ends their
open tails too, not only their next request."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from backend.tenancy import roles
from backend.tenancy.models import Membership, Organisation

READ_ROLE = roles.READ_ONLY  # the role a tail needs, as for every other read (TenantAPIView)


def read_access_problem(*, user_id, organisation_id) -> str | None:
    """None while the user may read the organisation's topics, else the reason in words
    (shown to the person when their tail closes)."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None or not user.is_active:
        return "your account was deactivated"
    org = Organisation.objects.filter(pk=organisation_id).first()
    if org is None or not org.is_active:
        return "the organisation was deactivated"
    membership = Membership.objects.filter(user=user, organisation=org).first()
    if membership is None:
        return f"you are no longer a member of {org.name}"
    if not roles.at_least(membership.role, READ_ROLE):
        return f"your role in {org.name} no longer allows reading its topics"
    return None
