"""The Commenters group: contributors who are not staff may add comments to alert groups (and only that)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

COMMENTERS = "Commenters"


def commenters_create(apps, schema_editor):
    # Permissions are made after migrations by default; this one is needed now.
    config = apps.get_app_config("regressions")
    config.models_module = True  # what create_permissions asks of an app before it looks at its models
    create_permissions(config, apps=apps, verbosity=0)
    config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=COMMENTERS)
    group.permissions.add(
        Permission.objects.get(content_type__app_label="regressions", codename="add_comment")
    )


def commenters_remove(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=COMMENTERS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("regressions", "0008_detectionsetting_moved_to_benchmarks"),
    ]

    operations = [migrations.RunPython(commenters_create, commenters_remove)]
