"""Serving capacity from a load curve: the highest load at which every latency objective still holds.

Pure: it reads the stored levels of one run and a suite's objectives, so changing an objective changes
capacity without running anything again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runners.guidellm_report import GOODPUT_KEY
from runners.suites import ObjectiveSpec

LOAD_KEY = "request_throughput_req_s"
OUTPUT_KEY = "output_throughput_tok_s"


@dataclass(frozen=True)
class CurvePoint:
    """One level of a stored load curve: its label and its metrics (request and output throughput,
    latency statistics, and guidellm's goodput where it judged objectives)."""

    label: str
    metrics: Mapping[str, float]

    @property
    def load_req_s(self) -> float:
        return self.metrics[LOAD_KEY]


@dataclass(frozen=True)
class Capacity:
    """The capacity of one run.

    `capacity_req_s` is interpolated between the last level that met every objective and the first
    that broke one (`breaking_level`, with the objectives it broke). When no level broke an objective,
    `breaking_level` is None and the capacity is the highest load measured: a lower bound.
    """

    capacity_req_s: float
    capacity_output_tok_s: float
    goodput_req_s: float | None
    breaking_level: str | None
    breaking_load_req_s: float | None
    broken_objectives: tuple[str, ...]

    @property
    def bounded(self) -> bool:
        """True when a level broke an objective, so the capacity is a measured limit."""
        return self.breaking_level is not None

    def measurements(self) -> dict[str, float]:
        """The capacity as metric values of the run."""
        values = {
            "capacity_req_s": self.capacity_req_s,
            "capacity_output_tok_s": self.capacity_output_tok_s,
        }
        if self.goodput_req_s is not None:
            values["goodput_at_capacity_req_s"] = self.goodput_req_s
        return values


def _between(low: float, high: float, fraction: float) -> float:
    return low + (high - low) * fraction


def _crossing(objective: ObjectiveSpec, *, met: Mapping[str, float], broken: Mapping[str, float]) -> float:
    """Fraction of the way from the met level to the broken one where the metric reaches its limit."""
    low, high = met[objective.metric], broken[objective.metric]
    if high <= low:
        return 0.0
    return min(1.0, max(0.0, (objective.max - low) / (high - low)))


def capacity_derive(*, curve: Sequence[CurvePoint], objectives: Sequence[ObjectiveSpec]) -> Capacity | None:
    """The capacity of a load curve under `objectives`; None without objectives or levels.

    Levels are taken in the order of the load they achieved. Below the lowest level nothing is known,
    so a curve whose lowest level already breaks an objective has a capacity of 0.
    """
    if not objectives or not curve:
        return None
    ordered = sorted(curve, key=lambda point: point.load_req_s)
    last_met: CurvePoint | None = None
    for point in ordered:
        broken = tuple(o.metric for o in objectives if point.metrics[o.metric] > o.max)
        if not broken:
            last_met = point
            continue
        if last_met is None:
            return Capacity(
                capacity_req_s=0.0,
                capacity_output_tok_s=0.0,
                goodput_req_s=0.0 if GOODPUT_KEY in point.metrics else None,
                breaking_level=point.label,
                breaking_load_req_s=point.load_req_s,
                broken_objectives=broken,
            )
        fraction = min(
            _crossing(objective, met=last_met.metrics, broken=point.metrics)
            for objective in objectives
            if objective.metric in broken
        )
        goodput = None
        if GOODPUT_KEY in last_met.metrics and GOODPUT_KEY in point.metrics:
            goodput = _between(last_met.metrics[GOODPUT_KEY], point.metrics[GOODPUT_KEY], fraction)
        return Capacity(
            capacity_req_s=_between(last_met.load_req_s, point.load_req_s, fraction),
            capacity_output_tok_s=_between(last_met.metrics[OUTPUT_KEY], point.metrics[OUTPUT_KEY], fraction),
            goodput_req_s=goodput,
            breaking_level=point.label,
            breaking_load_req_s=point.load_req_s,
            broken_objectives=broken,
        )
    assert last_met is not None
    return Capacity(
        capacity_req_s=last_met.load_req_s,
        capacity_output_tok_s=last_met.metrics[OUTPUT_KEY],
        goodput_req_s=last_met.metrics.get(GOODPUT_KEY),
        breaking_level=None,
        breaking_load_req_s=None,
        broken_objectives=(),
    )
