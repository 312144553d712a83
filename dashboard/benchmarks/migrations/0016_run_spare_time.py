from django.db import migrations, models


class AddRunColumnInPlace(migrations.AddField):
    """SQLite (the embedded demo) adds a NOT NULL column by rebuilding the run table with every index of the
    model, run_finished_newest's NULLS LAST included, which it cannot create: there it adds it in place."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute("ALTER TABLE benchmarks_run ADD COLUMN spare_time bool NOT NULL DEFAULT 0")
        else:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute("ALTER TABLE benchmarks_run DROP COLUMN spare_time")
        else:
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0015_suite_created_at"),
    ]

    operations = [
        AddRunColumnInPlace(
            model_name="run",
            name="spare_time",
            field=models.BooleanField(
                default=False,
                help_text="Queued beyond its suite's daily budget: taken only when no new commit waits",
            ),
        ),
    ]
