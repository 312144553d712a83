"""Moving many rows at once: PostgreSQL's COPY where it runs (into a table, or numbers out of a query
straight into an array), bulk INSERTs and plain fetches elsewhere."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
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


def numbers_read(*, sql: str, params: Sequence[Any], width: int) -> npt.NDArray[np.float64]:
    """The rows of the query `sql` (`width` numeric columns, none NULL) as a (rows, width) float array.
    On PostgreSQL as one value: every row's numbers packed by the server (float8send, big-endian) into
    one bytea, fetched in binary into the array. A hundred thousand rows never become Python tuples,
    whose memory a web worker keeps long after the request, nor as many reads of a COPY, which the
    driver hands over a row at a time (165,000 Python calls for a year's timeline), nor hex text."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return np.array(rows, dtype=np.float64).reshape(len(rows), width)
    import psycopg  # PostgreSQL's driver, only where it runs

    packed = " || ".join(f"float8send(c{index}::float8)" for index in range(width))
    names = ", ".join(f"c{index}" for index in range(width))
    statement = f"SELECT COUNT(*), string_agg({packed}, ''::bytea) FROM ({sql}) AS found ({names})"
    connection.ensure_connection()
    start = time.monotonic()
    # Django's cursors bind on the client, which cannot fetch in binary: a driver cursor of its own.
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(statement, params, binary=True)
        row = cursor.fetchone()
    assert row is not None  # an aggregate without GROUP BY has its one row
    count, data = row
    if connection.queries_logged:  # counted as the query it is, where queries are counted (tests, DEBUG)
        connection.queries_log.append({"sql": statement, "time": f"{time.monotonic() - start:.3f}"})
    # A NULL makes its row's bytes NULL, which string_agg leaves out: the rows would not add up.
    if len(data or b"") != count * width * 8:
        raise ValueError(f"numbers_read expects {width} numeric columns without NULL")
    return np.frombuffer(data or b"", dtype=">f8").astype(np.float64).reshape(count, width)
