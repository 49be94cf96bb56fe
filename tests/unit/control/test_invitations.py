"""Joining an organisation takes the person's consent: an admin invites a username, the answer
does not tell whether a user has that name, and only that person accepts or declines."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from backend.audit.models import AuditEvent
from backend.tenancy import roles
from backend.tenancy.models import Invitation, Membership

from .conftest import key_client, session_client


def _invite(client, username: str, role: str = roles.MEMBER):
    return client.post("/api/v1/members/", {"username": username, "role": role}, format="json")


def test_inviting_a_known_or_unknown_name_answers_alike(world, a_admin):
    known = _invite(a_admin, "bravo-member")
    unknown = _invite(a_admin, "nobody-has-this-name")
    assert known.status_code == unknown.status_code == 202, (known.content, unknown.content)
    assert set(known.json()) == set(unknown.json())
    assert known.json()["username"] == "bravo-member" and known.json()["role"] == roles.MEMBER
    # nobody joined; both invitations wait
    assert not Membership.objects.filter(organisation=world.a.org, user__username="bravo-member")
    listed = {i["username"] for i in a_admin.get("/api/v1/invitations/").json()}
    assert {"bravo-member", "nobody-has-this-name"} <= listed
    # a second invitation renews the first one
    again = _invite(a_admin, "bravo-member", roles.READ_ONLY)
    assert again.status_code == 202 and again.json()["id"] == known.json()["id"]
    assert again.json()["role"] == roles.READ_ONLY


def test_an_invitation_leaves_the_invited_persons_console_working(world, a_admin):
    person = world.b.users[roles.MEMBER]
    assert _invite(a_admin, person.username).status_code == 202
    console = session_client(person)  # no organisation chosen: the only membership applies
    assert console.get("/api/v1/topics/").status_code == 200
    assert console.get("/api/v1/auth/me").json()["organisation"]["slug"] == "bravo"


def test_the_invited_person_accepts_and_keeps_their_current_organisation(world, a_admin):
    person = world.b.users[roles.MEMBER]
    inv = _invite(a_admin, person.username, roles.READ_ONLY).json()
    console = session_client(person)
    mine = console.get("/api/v1/auth/invitations").json()
    assert [(i["id"], i["organisation"]["slug"], i["role"]) for i in mine] == [
        (inv["id"], "alpha", roles.READ_ONLY)
    ]
    # nobody else sees or answers it
    other = session_client(world.b.users[roles.ADMIN])
    assert other.get("/api/v1/auth/invitations").json() == []
    assert other.post(f"/api/v1/auth/invitations/{inv['id']}/accept").status_code == 404

    accepted = console.post(f"/api/v1/auth/invitations/{inv['id']}/accept")
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["organisation"]["slug"] == "bravo"  # still the one in use
    assert {m["organisation"]["slug"] for m in accepted.json()["memberships"]} == {
        "alpha",
        "bravo",
    }
    assert console.get("/api/v1/topics/").status_code == 200
    m = Membership.objects.get(organisation=world.a.org, user=person)
    assert m.role == roles.READ_ONLY
    assert not Invitation.objects.filter(pk=inv["id"]).exists()
    event = AuditEvent.objects.get(organisation=world.a.org, action="invitation.accept")
    assert event.object_id == str(m.id)
    assert console.post(f"/api/v1/auth/invitations/{inv['id']}/accept").status_code == 404


def test_the_invited_person_declines(world, a_admin):
    person = world.b.users[roles.MEMBER]
    inv = _invite(a_admin, person.username).json()
    console = session_client(person)
    assert console.post(f"/api/v1/auth/invitations/{inv['id']}/decline").status_code == 204
    assert not Membership.objects.filter(organisation=world.a.org, user=person).exists()
    assert console.get("/api/v1/auth/invitations").json() == []
    assert AuditEvent.objects.filter(organisation=world.a.org, action="invitation.decline")


def test_revoked_and_expired_invitations_cannot_be_accepted(world, a_admin):
    person = world.b.users[roles.MEMBER]
    console = session_client(person)
    inv = _invite(a_admin, person.username).json()
    assert a_admin.delete(f"/api/v1/invitations/{inv['id']}").status_code == 204
    assert console.post(f"/api/v1/auth/invitations/{inv['id']}/accept").status_code == 404
    inv = _invite(a_admin, person.username).json()
    Invitation.objects.filter(pk=inv["id"]).update(expires_at=timezone.now() - timedelta(1))
    assert console.get("/api/v1/auth/invitations").json() == []
    assert console.post(f"/api/v1/auth/invitations/{inv['id']}/accept").status_code == 404
    assert inv["id"] not in {i["id"] for i in a_admin.get("/api/v1/invitations/").json()}
    assert not Membership.objects.filter(organisation=world.a.org, user=person).exists()


def test_role_rules_and_members(world, a_admin, a_owner):
    refused = _invite(a_admin, "someone", roles.OWNER)
    assert refused.status_code == 403 and refused.json()["error_code"] == "PERMISSION_DENIED"
    assert _invite(a_owner, "someone", roles.OWNER).status_code == 202
    member = _invite(a_admin, world.a.users[roles.MEMBER].username)
    assert member.status_code == 409 and member.json()["error_code"] == "CONFLICT"
    # an invitation to a name a user takes later is theirs to answer
    newcomer = get_user_model().objects.create_user(username="someone", password="pw")
    assert len(session_client(newcomer).get("/api/v1/auth/invitations").json()) == 1
    # keys cannot answer invitations (they are a person's)
    assert key_client(world.a.token(roles.ADMIN)).get("/api/v1/auth/invitations").status_code == 403
