"""Migration operations the embedded SQLite demo needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import migrations


class AddRunColumnInPlace(migrations.AddField):
    """SQLite (the embedded demo) adds a NOT NULL column by rebuilding the run table with every index of the
    model, run_finished_newest's NULLS LAST included, which it cannot create: there it adds the column in
    place, as `column_sql` (the column's definition after ADD COLUMN) says."""

    def __init__(self, *args: Any, column_sql: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.column_sql = column_sql

    def deconstruct(self) -> tuple[str, Sequence[Any], dict[str, Any]]:
        name, args, kwargs = super().deconstruct()
        return name, args, {**kwargs, "column_sql": self.column_sql}

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute(f"ALTER TABLE benchmarks_run ADD COLUMN {self.column_sql}")
        else:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute(f"ALTER TABLE benchmarks_run DROP COLUMN {self.name}")
        else:
            super().database_backwards(app_label, schema_editor, from_state, to_state)
