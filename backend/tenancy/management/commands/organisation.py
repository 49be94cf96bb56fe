"""``manage.py organisation deactivate|activate <slug> [--reason ...]``: the operator's switch
for a whole tenant (see ``organisation_set_active``). Prints the organisation's new state."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from backend.core.context import RequestContext
from backend.tenancy.models import Organisation
from backend.tenancy.services import organisation_set_active


class Command(BaseCommand):
    help = "Deactivate or reactivate an organisation (all of its keys and sessions)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["deactivate", "activate"])
        parser.add_argument("slug", help="the organisation's slug")
        parser.add_argument("--reason", default="", help="recorded in the audit log")

    def handle(self, *args, **opts):
        org = Organisation.objects.filter(slug=opts["slug"]).first()
        if org is None:
            raise CommandError(f"no organisation with slug {opts['slug']!r}")
        org = organisation_set_active(
            ctx=RequestContext.system(org),
            organisation=org,
            active=opts["action"] == "activate",
            reason=opts["reason"],
        )
        state = "active" if org.is_active else "deactivated"
        self.stdout.write(f"organisation {org.slug} ({org.id}) is {state}")
