"""The question an open live tail asks every few seconds: may this person still read the
organisation's topics? (The tail closing on the answer runs in tests/e2e against real
brokers.)"""

from __future__ import annotations

from backend.console.access import read_access_problem
from backend.tenancy import roles
from backend.tenancy.models import Membership


def test_a_reader_may_read_until_removed(world):
    user, org = world.a.users[roles.READ_ONLY], world.a.org
    assert read_access_problem(user_id=user.pk, organisation_id=org.pk) is None
    # a member of another organisation only: not a reader of this one
    other = world.b.users[roles.OWNER]
    assert "no longer a member of ALPHA" in read_access_problem(
        user_id=other.pk, organisation_id=org.pk
    )
    Membership.objects.filter(user=user, organisation=org).delete()
    assert read_access_problem(user_id=user.pk, organisation_id=org.pk) == (
        "you are no longer a member of ALPHA"
    )


def test_a_role_that_cannot_read_ends_access(world):
    user, org = world.a.users[roles.MEMBER], world.a.org
    Membership.objects.filter(user=user, organisation=org).update(role="suspended")
    assert "no longer allows reading" in read_access_problem(
        user_id=user.pk, organisation_id=org.pk
    )


def test_deactivated_organisations_and_accounts_end_access(world):
    user, org = world.a.users[roles.OWNER], world.a.org
    org.is_active = False
    org.save(update_fields=["is_active"])
    assert read_access_problem(user_id=user.pk, organisation_id=org.pk) == (
        "the organisation was deactivated"
    )
    user2, org2 = world.b.users[roles.ADMIN], world.b.org
    user2.is_active = False
    user2.save(update_fields=["is_active"])
    assert read_access_problem(user_id=user2.pk, organisation_id=org2.pk) == (
        "your account was deactivated"
    )
