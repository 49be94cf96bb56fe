"""``manage.py seed_demo``: a demo organisation, its owner and an API key, printed once.

Idempotent for the organisation, user and service account; every run issues a new API key
(a key's secret cannot be shown again), so ``make up`` can print a working key each time.
``--json`` prints one JSON object for scripts.
"""

from __future__ import annotations

import json
import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from backend.core.context import RequestContext
from backend.keys.services import api_key_create
from backend.tenancy import roles
from backend.tenancy.models import Organisation, ServiceAccount
from backend.tenancy.services import organisation_create, service_account_create


class Command(BaseCommand):
    help = "Create a demo organisation, owner user and API key; print the key once."

    def add_arguments(self, parser):
        parser.add_argument("--organisation", default="demo", help="organisation slug")
        parser.add_argument("--username", default="demo")
        parser.add_argument(
            "--password",
            default=os.environ.get("SLUICE_DEMO_PASSWORD", ""),
            help="the owner's password (default: $SLUICE_DEMO_PASSWORD, else generated)",
        )
        parser.add_argument("--service-account", default="demo-app")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    @transaction.atomic
    def handle(self, *args, **opts):
        User = get_user_model()
        user = User.objects.filter(username=opts["username"]).first()
        password = None
        if user is None:
            password = opts["password"] or secrets.token_urlsafe(12)
            user = User.objects.create_user(username=opts["username"], password=password)
        elif opts["password"]:
            password = opts["password"]
            user.set_password(password)
            user.save(update_fields=["password"])

        org = Organisation.objects.filter(slug=opts["organisation"]).first()
        if org is None:
            org = organisation_create(
                ctx=RequestContext.system(), slug=opts["organisation"], name="Demo", owner=user
            )
        ctx = RequestContext.system(org, role=roles.OWNER)
        sa = ServiceAccount.objects.filter(organisation=org, name=opts["service_account"]).first()
        if sa is None:
            sa = service_account_create(
                ctx=ctx,
                name=opts["service_account"],
                description="created by seed_demo",
                role=roles.ADMIN,
            )
        created = api_key_create(ctx=ctx, service_account=sa, description="seed_demo")
        out = {
            "organisation": org.slug,
            "organisation_id": str(org.id),
            "username": user.get_username(),
            "password": password,  # None when the user existed and no password was given
            "service_account": sa.name,
            "api_key": created.token,
        }
        if opts["json"]:
            self.stdout.write(json.dumps(out))
            return
        self.stdout.write(f"organisation: {org.slug} ({org.id})")
        self.stdout.write(f"console user: {out['username']}")
        if password:
            self.stdout.write(f"password:     {password}")
        self.stdout.write(f"API key ({sa.name}, shown once): {created.token}")
