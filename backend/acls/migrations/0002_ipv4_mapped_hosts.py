"""Stored hosts in the authorizer's canonical form: an IPv4-mapped IPv6 address
(``::ffff:127.0.0.1``) becomes the IPv4 address it maps, as ``AclBinding`` now stores it.
A row whose canonical form duplicates an existing binding keeps its text (brokers read both as
the same rule; deleting it through the API publishes its removal)."""

import ipaddress

from django.db import migrations

KEPT_FIELDS = (
    "organisation_id",
    "principal",
    "resource_type",
    "resource_name",
    "pattern_type",
    "operation",
    "permission",
)


def forwards(apps, schema_editor):
    AclBinding = apps.get_model("acls", "AclBinding")
    for b in AclBinding.objects.filter(host__icontains="ffff"):
        try:
            address = ipaddress.ip_address(b.host)
        except ValueError:
            continue
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is None:
            continue
        fields = {f: getattr(b, f) for f in KEPT_FIELDS}
        if not AclBinding.objects.filter(host=str(mapped), **fields).exists():
            b.host = str(mapped)
            b.save(update_fields=["host"])


class Migration(migrations.Migration):
    dependencies = [("acls", "0001_initial")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
