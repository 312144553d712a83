"""Notes become the first comment of their group's thread; alerts follow their group's status unless
someone set theirs on the alert itself."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def notes_to_comments(apps, schema_editor):
    """Each group's notes become its first comment, by whoever last wrote them and when."""
    AlertGroup = apps.get_model("regressions", "AlertGroup")
    Comment = apps.get_model("regressions", "Comment")
    TriageEvent = apps.get_model("regressions", "TriageEvent")
    for group in AlertGroup.objects.exclude(notes="").order_by("pk"):
        written = (
            TriageEvent.objects.filter(group=group, alert__isnull=True, field="notes", new_value=group.notes)
            .order_by("-created_at", "-pk")
            .first()
        )
        Comment.objects.create(
            group=group,
            author_id=written.user_id if written else None,
            text=group.notes,
            created_at=written.created_at if written else group.updated_at,
        )


def alerts_follow_their_group(apps, schema_editor):
    """An alert whose status was set apart from its group's keeps it; an untouched one follows the group."""
    Alert = apps.get_model("regressions", "Alert")
    for alert in Alert.objects.select_related("group").exclude(status=models.F("group__status")):
        if alert.status == "untriaged":
            alert.status = alert.group.status
        else:
            alert.status_set_individually = True
        alert.save(update_fields=["status", "status_set_individually"])


class Migration(migrations.Migration):
    dependencies = [
        ("regressions", "0004_alertgroup_range_reason"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Comment",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("text", models.TextField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "author",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "group",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="comments",
                        to="regressions.alertgroup",
                    ),
                ),
            ],
            options={"ordering": ["created_at", "id"]},
        ),
        migrations.AddField(
            model_name="alert",
            name="status_set_individually",
            field=models.BooleanField(
                default=False,
                help_text="Its status was set on the alert itself: the group's status no longer moves it",
            ),
        ),
        migrations.RunPython(notes_to_comments, migrations.RunPython.noop),
        migrations.RunPython(alerts_follow_their_group, migrations.RunPython.noop),
        migrations.RemoveField(model_name="alertgroup", name="notes"),
    ]
