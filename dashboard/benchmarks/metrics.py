"""How a metric key reads on a page: its label, unit, precision and which direction is better."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dashboard.benchmarks.models import metric_higher_is_better

_METRIC_PATTERN = re.compile(r"^(?P<base>[a-z_]+?)_(?P<unit>tok_s|req_s|ms|s)(?:_(?P<statistic>mean|p\d+))?$")
_UNITS = {"tok_s": "tok/s", "req_s": "req/s", "ms": "ms", "s": "s"}
# Seconds need more digits than milliseconds to show the same relative change.
_DECIMALS = {"tok_s": 1, "req_s": 2, "ms": 1, "s": 2}
_NAMES = {
    "output_throughput": ("Output throughput", "Throughput"),
    "request_throughput": ("Request throughput", "Req/s"),
    "ttft": ("Time to first token", "TTFT"),
    "itl": ("Inter-token latency", "ITL"),
    "tpot": ("Time per output token", "TPOT"),
    "latency": ("Request latency", "Latency"),
    "capacity": ("Capacity at the objectives", "Capacity"),
    "capacity_output": ("Output throughput at capacity", "Capacity tok/s"),
    "goodput_at_capacity": ("Goodput at capacity", "Goodput"),
    "goodput": ("Goodput", "Goodput"),
}
_COUNTS = {
    "requests_successful": "Successful requests",
    "requests_errored": "Errored requests",
    "requests_incomplete": "Incomplete requests",
}


@dataclass(frozen=True)
class MetricDisplay:
    key: str
    label: str
    short_label: str
    unit: str
    decimals: int
    higher_is_better: bool
    # "mean", "p50", "p90", "p99" … where the key ends in one; "" for a metric without statistics.
    statistic: str = ""

    @property
    def family(self) -> str:
        """The key without its statistic: `ttft_ms_p99` and `ttft_ms_mean` are both of `ttft_ms`."""
        return self.key.removesuffix(f"_{self.statistic}") if self.statistic else self.key

    @property
    def family_label(self) -> str:
        """The short label without its statistic: "TTFT" for "TTFT p99"."""
        return self.short_label.removesuffix(f" {self.statistic}") if self.statistic else self.short_label

    def format(self, value: float) -> str:
        return f"{value:,.{self.decimals}f}"


def metric_display(*, metric: str) -> MetricDisplay:
    """Presentation of a metric key such as `ttft_ms_p99`; unknown keys read as themselves."""
    higher_is_better = metric_higher_is_better(metric)
    if metric in _COUNTS:
        return MetricDisplay(metric, _COUNTS[metric], _COUNTS[metric], "", 0, higher_is_better)
    if metric.startswith("accuracy_"):
        task = metric.removeprefix("accuracy_")
        task = task.upper() if task.isalnum() else task  # gsm8k reads GSM8K
        return MetricDisplay(metric, f"Accuracy ({task})", f"Accuracy {task}", "%", 2, higher_is_better)
    if metric == "slo_attainment_pct":
        return MetricDisplay(metric, "Requests meeting the objectives", "SLO met", "%", 1, higher_is_better)
    match = _METRIC_PATTERN.match(metric)
    if match is None or match["base"] not in _NAMES:
        return MetricDisplay(metric, metric, metric, "", 2, higher_is_better)
    label, short_label = _NAMES[match["base"]]
    statistic = match["statistic"]
    if statistic == "mean":
        label, short_label = f"{label} (mean)", f"{short_label} mean"
    elif statistic:
        label, short_label = f"{label} ({statistic})", f"{short_label} {statistic}"
    unit = match["unit"]
    return MetricDisplay(
        metric, label, short_label, _UNITS[unit], _DECIMALS[unit], higher_is_better, statistic or ""
    )


def statistic_rank(statistic: str) -> int:
    """Where a statistic sits among its family's: none or the mean first, then the percentiles in order."""
    return int(statistic[1:]) if statistic.startswith("p") and statistic[1:].isdigit() else -1
