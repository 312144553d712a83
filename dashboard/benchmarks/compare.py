"""Compare maths: two sets of measurements of one suite side by side. Pure: no Django.

Each side's value is the median of its runs. Changes are computed from the values as given (a page shows
rounded numbers, and the change printed next to them must be the one a reader gets from those numbers:
258.3 → 725.0 is +180.7 %); each change also carries its uncertainty from the runs and the series' noise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dashboard.benchmarks.statistics import ChangeEstimate, change_estimate, commit_value

MetricKey = tuple[int, str]  # (concurrency, metric)


@dataclass(frozen=True)
class CompareRow:
    concurrency: int
    metric: str
    base: float
    head: float
    change_pct: float | None  # None when the base is zero: no relative change exists
    estimate: ChangeEstimate | None = None  # interval, p-value, runs on each side, significance
    base_spread_pct: float = 0.0  # half the range of each side's runs, in % of its value
    head_spread_pct: float = 0.0


def change_pct(*, base: float, head: float) -> float | None:
    """(head − base) / base in %, rounded to one decimal; None when ``base`` is zero."""
    if base == 0:
        return None
    return round((head - base) / abs(base) * 100.0, 1)


Estimate = Callable[..., ChangeEstimate]


def compare_rows(
    *,
    base: Mapping[MetricKey, Sequence[float]],
    head: Mapping[MetricKey, Sequence[float]],
    metrics: Sequence[str],
    estimate: Estimate | None = None,
) -> list[CompareRow]:
    """One row per (concurrency, metric in ``metrics``) that both sides have, by concurrency then metric:
    the median of each side's runs, the change, and ``estimate(concurrency=, metric=, before=, after=)``
    (its interval and significance against the series' noise) when given."""
    rows = []
    for concurrency, metric in base.keys() & head.keys():
        if metric not in metrics:
            continue
        before_runs, after_runs = base[(concurrency, metric)], head[(concurrency, metric)]
        before, after = commit_value(before_runs), commit_value(after_runs)
        rows.append(
            CompareRow(
                concurrency=concurrency,
                metric=metric,
                base=before.value,
                head=after.value,
                change_pct=change_pct(base=before.value, head=after.value),
                estimate=estimate(
                    concurrency=concurrency, metric=metric, before=before_runs, after=after_runs
                )
                if estimate
                else change_estimate(before=before_runs, after=after_runs),
                base_spread_pct=before.spread_pct,
                head_spread_pct=after.spread_pct,
            )
        )
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
