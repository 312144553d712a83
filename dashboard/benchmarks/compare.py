"""Compare maths: two sets of measurements of one suite side by side. Pure: no Django.

Changes are computed from the values as given (a page shows rounded numbers, and the change printed
next to them must be the one a reader gets from those numbers: 258.3 → 725.0 is +180.7 %).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MetricKey = tuple[int, str]  # (concurrency, metric)


@dataclass(frozen=True)
class CompareRow:
    concurrency: int
    metric: str
    base: float
    head: float
    change_pct: float | None  # None when the base is zero: no relative change exists


def change_pct(*, base: float, head: float) -> float | None:
    """(head − base) / base in %, rounded to one decimal; None when ``base`` is zero."""
    if base == 0:
        return None
    return round((head - base) / abs(base) * 100.0, 1)


def compare_rows(
    *, base: Mapping[MetricKey, float], head: Mapping[MetricKey, float], metrics: Sequence[str]
) -> list[CompareRow]:
    """One row per (concurrency, metric in ``metrics``) that both sides have, by concurrency then metric."""
    rows = [
        CompareRow(
            concurrency=concurrency,
            metric=metric,
            base=base[(concurrency, metric)],
            head=head[(concurrency, metric)],
            change_pct=change_pct(base=base[(concurrency, metric)], head=head[(concurrency, metric)]),
        )
        for concurrency, metric in base.keys() & head.keys()
        if metric in metrics
    ]
    return sorted(rows, key=lambda row: (row.concurrency, metrics.index(row.metric)))


def change_pct_format(value: float | None) -> str:
    """``+120.0 %`` / ``−57.2 %`` (a real minus sign), or ``n/a``."""
    if value is None:
        return "n/a"
    sign = "+" if value > 0 else "−" if value < 0 else "±"
    return f"{sign}{abs(value):.1f} %"


@dataclass(frozen=True)
class MetricColumn:
    """How one metric is printed: its heading and how many decimals its values get."""

    metric: str
    heading: str
    decimals: int


def compare_markdown(*, rows: Sequence[CompareRow], columns: Sequence[MetricColumn]) -> str:
    """A Markdown table laid out like DESIGN.md's: a row per concurrency, ``old → new (change)`` cells.

    Only columns with at least one value are printed; a missing value is an en dash.
    """
    cells = {(row.concurrency, row.metric): row for row in rows}
    shown = [column for column in columns if any(row.metric == column.metric for row in rows)]
    lines = [
        "| concurrency | " + " | ".join(column.heading for column in shown) + " |",
        "|---|" + "---|" * len(shown),
    ]
    for concurrency in sorted({row.concurrency for row in rows}):
        values = []
        for column in shown:
            row = cells.get((concurrency, column.metric))
            if row is None:
                values.append("–")
                continue
            values.append(
                f"{row.base:.{column.decimals}f} → {row.head:.{column.decimals}f} "
                f"({change_pct_format(row.change_pct)})"
            )
        lines.append(f"| {concurrency} | " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"
