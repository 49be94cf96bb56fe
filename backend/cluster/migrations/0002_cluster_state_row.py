from django.db import migrations


def create_state(apps, schema_editor):
    apps.get_model("cluster", "ClusterState").objects.get_or_create(pk=1)


class Migration(migrations.Migration):
    dependencies = [("cluster", "0001_initial")]

    operations = [migrations.RunPython(create_state, migrations.RunPython.noop)]
