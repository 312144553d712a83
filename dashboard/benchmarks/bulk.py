"""Loading many rows at once: PostgreSQL's COPY where it runs, bulk INSERTs elsewhere."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.db import connection, models
from django.utils import timezone


def _field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field), f"{name} is not a column of {model.__name__}"
    return field


def _defaults(model: type[models.Model], named: Sequence[str]) -> dict[str, Any]:
    """Database values of the fields not named: their defaults, as an INSERT through the ORM stores."""
    values: dict[str, Any] = {}
    now = timezone.now()
    for field in model._meta.concrete_fields:
        if field.primary_key or field.name in named or field.attname in named:
            continue
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            values[str(field.column)] = now
        else:
            values[str(field.column)] = field.get_db_prep_save(field.get_default(), connection)
    return values


def rows_copy(*, model: type[models.Model], fields: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert `rows` (values of `fields`, in that order) into `model`'s table, every other field at its
    default, and say how many. One COPY on PostgreSQL, batches of INSERTs elsewhere."""
    if connection.vendor != "postgresql":
        return _rows_insert(model=model, fields=fields, rows=rows)
    defaults = _defaults(model, fields)
    columns = [str(_field(model, name).column) for name in fields] + list(defaults)
    fixed = tuple(defaults.values())
    quoted = ", ".join(connection.ops.quote_name(column) for column in columns)
    statement = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({quoted}) FROM STDIN"
    count = 0
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row((*row, *fixed))
            count += 1
    return count


def _rows_insert(*, model: type[models.Model], fields: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    attnames = [_field(model, name).attname for name in fields]
    manager = model._default_manager

    def batches() -> Iterator[list[models.Model]]:
        batch: list[models.Model] = []
        for row in rows:
            batch.append(model(**dict(zip(attnames, row, strict=True))))
            if len(batch) == 5000:
                yield batch
                batch = []
        yield batch

    return sum(len(manager.bulk_create(batch)) for batch in batches())
