"""Which way is better for a metric, and whether a change of it is an improvement or a regression: the one
rule that detection, alerts, compare, PR impact and every page use. No Django here."""

from __future__ import annotations

from typing import Literal

ChangeKind = Literal["improvement", "regression"]

HIGHER_IS_BETTER_PREFIXES: tuple[str, ...] = (
    "output_throughput",
    "request_throughput",
    "requests_successful",
    "capacity_",
    "goodput_",
    "slo_attainment",
    "accuracy_",
)


# How a slow run (a node in its slow mode, a noisy neighbour) moves a metric: throughput down, every
# latency up. Counts, scores and capacities are not read that way.
SLOWER_IS_LOWER_PREFIXES: tuple[str, ...] = ("output_throughput", "request_throughput")
SLOWER_IS_HIGHER_PREFIXES: tuple[str, ...] = ("ttft_", "itl_", "tpot_", "latency_")


def metric_slower_sign(metric: str) -> float:
    """+1 when a slower run reads higher, -1 when it reads lower, 0 when speed does not move the metric."""
    if metric.startswith(SLOWER_IS_LOWER_PREFIXES):
        return -1.0
    return 1.0 if metric.startswith(SLOWER_IS_HIGHER_PREFIXES) else 0.0


def metric_higher_is_better(metric: str) -> bool:
    return metric.startswith(HIGHER_IS_BETTER_PREFIXES)


def kind_for(*, change_pct: float, higher_is_better: bool) -> ChangeKind:
    """A change is an improvement when it moves the metric the way that is better for it."""
    return "improvement" if (change_pct > 0) == higher_is_better else "regression"


def change_kind(*, metric: str, change_pct: float) -> ChangeKind:
    """Whether a change of `metric` by `change_pct` made it better or worse."""
    return kind_for(change_pct=change_pct, higher_is_better=metric_higher_is_better(metric))


def improvement_pct(*, metric: str, change_pct: float) -> float:
    """The change signed so that positive is better, whichever way the metric is better."""
    return change_pct if metric_higher_is_better(metric) else -change_pct
