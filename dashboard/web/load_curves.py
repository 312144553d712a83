"""Load-curve charts: latency against achieved request rate for one or two commits, the suite's objectives
as horizontal lines and each commit's capacity marked. Figures are plain dicts, drawn by charts.js."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dashboard.benchmarks.capacity_selectors import CommitCurve
from dashboard.benchmarks.metrics import metric_display
from dashboard.web.figures import MUTED, chart_layout

# (metric family, chart title); each chart draws p50 and p99 of its family.
FAMILIES: tuple[tuple[str, str], ...] = (
    ("ttft_ms", "Time to first token"),
    ("itl_ms", "Inter-token latency"),
)
STATISTICS: tuple[tuple[str, str], ...] = (("p50", "dot"), ("p99", "solid"))
# Older commit muted, newer commit strong: the eye follows the change.
COMMIT_COLORS: tuple[str, ...] = ("#94a3b8", "#2563eb")
OBJECTIVE_COLOR = "#dc2626"


@dataclass(frozen=True)
class LoadCurveChart:
    key: str
    title: str
    figure: dict[str, Any]


def _points(curve: CommitCurve, metric: str) -> tuple[list[float], list[float], list[str]]:
    ordered = sorted(curve.points, key=lambda point: point.load_req_s)
    return (
        [point.load_req_s for point in ordered],
        [point.metrics[metric] for point in ordered],
        [point.label for point in ordered],
    )


def _capacity_y(curve: CommitCurve, metric: str, capacity_req_s: float) -> float:
    xs, ys, _ = _points(curve, metric)
    return float(np.interp(capacity_req_s, xs, ys))


def load_curve_figure(*, family: str, curves: Sequence[tuple[str, CommitCurve]]) -> dict[str, Any]:
    """One chart of `family` (e.g. ttft_ms): per commit (name, curve) its p50 and p99 against request
    rate; the objectives on this family as lines; a capacity point per commit with one."""
    unit = metric_display(metric=f"{family}_p99").unit
    data: list[dict[str, Any]] = []
    objectives = [o for o in curves[0][1].objectives if o.metric.startswith(f"{family}_")] if curves else []
    capacities = []
    for index, (name, curve) in enumerate(curves):
        color = COMMIT_COLORS[index % len(COMMIT_COLORS)] if len(curves) > 1 else COMMIT_COLORS[1]
        for statistic, dash in STATISTICS:
            xs, ys, labels = _points(curve, f"{family}_{statistic}")
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{name} {statistic}",
                    "x": xs,
                    "y": ys,
                    "text": labels,
                    "line": {"color": color, "width": 2 if statistic == "p99" else 1.4, "dash": dash},
                    "marker": {"color": color, "size": 6},
                    "hovertemplate": (
                        f"<b>{name}</b> · %{{text}}<br>%{{x:.2f}} req/s<br>"
                        f"{statistic} %{{y:,.1f}} {unit}<extra></extra>"
                    ),
                }
            )
        capacity = curve.capacity
        if capacity is None:
            continue
        # The point sits on the curve of the statistic the objective judges (p99 when none is on it).
        metric = objectives[0].metric if objectives else f"{family}_p99"
        y = _capacity_y(curve, metric, capacity.capacity_req_s)
        broke = f"broke at {capacity.breaking_level}" if capacity.bounded else "no level broke an objective"
        capacities.append({"commit": name, "capacity_req_s": capacity.capacity_req_s})
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{name} capacity",
                "x": [capacity.capacity_req_s],
                "y": [y],
                "marker": {
                    "color": color,
                    "size": 14,
                    "symbol": "diamond",
                    "line": {"color": "#0f172a", "width": 1.5},
                },
                "hovertemplate": (f"<b>{name} capacity</b> %{{x:.2f}} req/s<br>{broke}<extra></extra>"),
            }
        )
    shapes = []
    annotations = []
    for objective in objectives:
        display = metric_display(metric=objective.metric)
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": objective.max,
                "y1": objective.max,
                "line": {"color": OBJECTIVE_COLOR, "width": 1.5, "dash": "dash"},
            }
        )
        annotations.append(
            {
                "xref": "paper",
                "x": 0,
                "xanchor": "left",
                "yref": "y",
                "y": objective.max,
                "yanchor": "bottom",
                "text": f"objective: {display.short_label} ≤ {objective.max:,g} {display.unit}",
                "showarrow": False,
                "font": {"color": OBJECTIVE_COLOR, "size": 11},
            }
        )
    layout = chart_layout(unit=unit, height=320)
    x_title = {"text": "achieved request rate (req/s)", "font": {"color": MUTED}}
    layout["xaxis"] = {**layout["xaxis"], "title": x_title}
    layout.update(
        showlegend=True,
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        shapes=shapes,
        annotations=annotations,
        meta={
            "kind": "load_curve",
            "family": family,
            "objectives": [{"metric": o.metric, "max": o.max} for o in objectives],
            "capacities": capacities,
        },
    )
    return {"data": data, "layout": layout}


def load_curve_charts(*, curves: Sequence[tuple[str, CommitCurve]]) -> list[LoadCurveChart]:
    """The load-curve charts of one suite for one or two commits (named, oldest first)."""
    if not curves:
        return []
    return [
        LoadCurveChart(key=family, title=title, figure=load_curve_figure(family=family, curves=curves))
        for family, title in FAMILIES
        if all(f"{family}_p99" in point.metrics for _, curve in curves for point in curve.points)
    ]


@dataclass(frozen=True)
class CapacityRow:
    """One commit's capacity as the page states it."""

    name: str
    sha: str
    capacity: str
    output: str
    goodput: str
    breaking: str


@dataclass(frozen=True)
class LoadCurveSection:
    suite: str
    hardware_class: str
    objectives: tuple[str, ...]
    rows: tuple[CapacityRow, ...]
    charts: tuple[LoadCurveChart, ...]
    element_prefix: str
    change: str = ""


def _capacity_row(name: str, curve: CommitCurve) -> CapacityRow:
    capacity = curve.capacity
    if capacity is None:
        return CapacityRow(name, curve.commit.sha, "–", "–", "–", "no objectives")
    breaking = (
        f"{capacity.breaking_level} broke "
        + ", ".join(metric_display(metric=metric).short_label for metric in capacity.broken_objectives)
        if capacity.bounded
        else "no level broke an objective (a lower bound)"
    )
    goodput = f"{capacity.goodput_req_s:,.2f}" if capacity.goodput_req_s is not None else "–"
    return CapacityRow(
        name=name,
        sha=curve.commit.sha,
        capacity=f"{capacity.capacity_req_s:,.2f}",
        output=f"{capacity.capacity_output_tok_s:,.1f}",
        goodput=goodput,
        breaking=breaking,
    )


def _objective_text(curve: CommitCurve) -> tuple[str, ...]:
    texts = []
    for objective in curve.objectives:
        display = metric_display(metric=objective.metric)
        texts.append(f"{display.short_label} ≤ {objective.max:,g} {display.unit}")
    return tuple(texts)


def load_curve_section(*, curves: Sequence[tuple[str, CommitCurve]], element_prefix: str) -> LoadCurveSection:
    """A suite's load curves for one or two commits (oldest first), with each commit's capacity and,
    for two, the change of capacity from the first to the second."""
    first = curves[0][1]
    change = ""
    if len(curves) == 2:
        base, head = curves[0][1].capacity, curves[1][1].capacity
        if base is not None and head is not None and base.capacity_req_s > 0:
            change = f"{(head.capacity_req_s / base.capacity_req_s - 1) * 100:+.1f} %"
    return LoadCurveSection(
        suite=first.suite.name,
        hardware_class=first.hardware_class,
        objectives=_objective_text(first),
        rows=tuple(_capacity_row(name, curve) for name, curve in curves),
        charts=tuple(load_curve_charts(curves=curves)),
        element_prefix=element_prefix,
        change=change,
    )
