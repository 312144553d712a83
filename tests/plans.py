"""Executed query plans, for tests that pin how much of a table a read touches."""

from __future__ import annotations

from typing import Any, cast

from django.db import connection


def plan_rows_read(plan: dict[str, Any], table: str) -> int:
    """Rows a plan read from `table` (its heap or one of its indexes): what each scan returned on every
    loop, and what it read only to throw away by a filter."""
    read = 0
    if plan.get("Relation Name") == table:
        read += int(plan["Actual Rows"] * plan["Actual Loops"])
        read += int(plan.get("Rows Removed by Filter", 0) * plan["Actual Loops"])
    return read + sum(plan_rows_read(child, table) for child in plan.get("Plans", ()))


def executed_plan(sql: str, params: Any, *, refused: tuple[str, ...] = ("seqscan",)) -> dict[str, Any]:
    """EXPLAIN ANALYZE of `sql` after fresh statistics, with the planner's `refused` methods off (the
    sequential scan by default): a test's tables are small enough that a sequential scan is cheapest
    whatever the query; without it the plan is the one a real history of millions of rows gets."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        for method in refused:
            cursor.execute(f"SET LOCAL enable_{method} = off")
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
        for method in refused:
            cursor.execute(f"SET LOCAL enable_{method} = on")
    return cast(dict[str, Any], plan[0]["Plan"])
