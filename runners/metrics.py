"""vLLM's Prometheus /metrics: parse the text format and keep the counters a run page needs.

Scraped before and after the benchmark; the difference of the counters is what the benchmark did
(prefix-cache hits, speculative-decoding drafts and accepted tokens), the gauges are a moment's state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from runners.errors import RunnerError

# Our name -> the vLLM metric names that carry it, newest first (vLLM renamed some across versions).
TRACKED_METRICS: Mapping[str, tuple[str, ...]] = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "kv_cache_usage_ratio": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "spec_decode_num_drafts": ("vllm:spec_decode_num_drafts_total",),
    "spec_decode_num_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_decode_num_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
    "preemptions": ("vllm:num_preemptions_total",),
}
# Gauges describe a moment, so "after minus before" means nothing for them.
GAUGES = frozenset({"kv_cache_usage_ratio", "requests_running", "requests_waiting"})

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class MetricsUnreadable(RunnerError):
    """The /metrics text does not follow the Prometheus exposition format."""


@dataclass(frozen=True)
class PrometheusSample:
    name: str
    labels: Mapping[str, str]
    value: float


def _value_parse(text: str) -> float:
    special = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
    if text in special:
        return special[text]
    return float(text)


def prometheus_parse(*, text: str) -> tuple[PrometheusSample, ...]:
    """Every sample of a Prometheus text exposition, comments and blank lines skipped."""
    samples = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise MetricsUnreadable(f"line {number} is not a sample: {line[:120]!r}")
        try:
            value = _value_parse(match["value"])
        except ValueError as exc:
            raise MetricsUnreadable(f"line {number} has no numeric value: {line[:120]!r}") from exc
        labels = {
            key: raw.replace('\\"', '"').replace("\\\\", "\\")
            for key, raw in _LABEL.findall(match["labels"] or "")
        }
        samples.append(PrometheusSample(name=match["name"], labels=labels, value=value))
    return tuple(samples)


@dataclass(frozen=True)
class MetricsSnapshot:
    """The tracked metrics at one moment, each summed over its label sets (engines, models)."""

    values: Mapping[str, float] = field(default_factory=dict)

    def counters_since(self, *, before: MetricsSnapshot) -> dict[str, float]:
        """What each counter grew by since `before` (gauges left out)."""
        return {
            name: value - before.values[name]
            for name, value in self.values.items()
            if name not in GAUGES and name in before.values
        }


def metrics_snapshot(*, text: str) -> MetricsSnapshot:
    """Pick the tracked metrics out of a /metrics page; metrics this vLLM does not expose are absent."""
    totals: dict[str, float] = {}
    for sample in prometheus_parse(text=text):
        totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    values: dict[str, float] = {}
    for ours, candidates in TRACKED_METRICS.items():
        found = next((candidate for candidate in candidates if candidate in totals), None)
        # A NaN or infinite value says nothing about the run, and the dashboard refuses one.
        if found is not None and math.isfinite(totals[found]):
            values[ours] = totals[found]
    return MetricsSnapshot(values=values)
