"""Alert markers on a timeline figure: one symbol per alert group at the head of its culprit range, read
in two queries and drawn as one trace."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import F, QuerySet
from django.urls import reverse

from dashboard.benchmarks.models import Suite
from dashboard.regressions.models import Alert, AlertGroup, TriageStatus


@dataclass(frozen=True)
class AlertMarker:
    """Where a timeline draws an alert: at the head commit of its range; clicking opens `url`."""

    commit_sha: str
    group_id: int
    kind: str
    url: str
    position: int | None = None
    label: str = ""
    moved_up: bool = True  # which way the (largest) change of the charted metric went
    pr_number: int | None = None  # of the head commit: the chart labels the marker with it


def alert_markers(*, suite: Suite, hardware_class: str, metric: str | None = None) -> list[AlertMarker]:
    """Markers for the alert groups touching a suite on a hardware class (and `metric`, when given), oldest
    first; false positives (`invalid`) are left out. Two queries."""
    alerts = Alert.objects.filter(series__suite=suite, series__hardware_class=hardware_class)
    if metric:
        alerts = alerts.filter(series__metric=metric)
    return _markers(alerts=alerts, by_metric=False)[None]


def alert_markers_by_metric(
    *,
    suite: Suite,
    hardware_class: str,
    metrics: Sequence[str],
    positions: tuple[int, int] | None = None,
) -> dict[str, list[AlertMarker]]:
    """`alert_markers` of each of `metrics`, each group's direction taken from that metric's alerts; only
    the groups whose head lies within `positions` on main (inclusive), when given (a zoomed timeline
    draws no other). Two queries whatever the number of metrics (a timeline draws one chart per
    metric)."""
    alerts = Alert.objects.filter(
        series__suite=suite, series__hardware_class=hardware_class, series__metric__in=metrics
    )
    if positions is not None:
        alerts = alerts.filter(
            group__head_commit__position__gte=positions[0], group__head_commit__position__lte=positions[1]
        )
    found = _markers(alerts=alerts, by_metric=True)
    return {metric: found.get(metric, []) for metric in metrics}


def _markers(*, alerts: QuerySet[Alert], by_metric: bool) -> dict[str | None, list[AlertMarker]]:
    """The markers of the groups of `alerts` (false positives left out), oldest first, by the alerts'
    metric (or all under None): the alerts' changes, then their groups with the head commits."""
    changes: dict[int, dict[str | None, list[float]]] = defaultdict(lambda: defaultdict(list))
    for group_id, metric, change_pct in alerts.values_list("group_id", "series__metric", "change_pct"):
        changes[group_id][metric if by_metric else None].append(change_pct)
    groups = (
        AlertGroup.objects.filter(pk__in=list(changes))
        .exclude(status=TriageStatus.INVALID)
        .select_related("head_commit")
        .order_by(F("head_commit__position").asc(nulls_last=True), "pk")
    )
    url = _route("regressions:alert-group")
    markers: dict[str | None, list[AlertMarker]] = defaultdict(list)
    for group in groups:
        for key, charted in changes[group.pk].items():
            markers[key].append(
                AlertMarker(
                    commit_sha=group.head_commit.sha,
                    group_id=group.pk,
                    kind=group.kind,
                    url=url(group.pk),
                    position=group.head_commit.position,
                    label=f"{group.get_kind_display().capitalize()}: up to {group.magnitude_pct:.1f} % "
                    f"({group.get_status_display()})"
                    + (
                        f"<br>PR #{group.head_commit.pr_number} {group.head_commit.subject}"
                        if group.head_commit.pr_number
                        else ""
                    ),
                    moved_up=max(max(charted), min(charted), key=abs) >= 0,
                    pr_number=group.head_commit.pr_number,
                )
            )
    return markers


def _route(name: str) -> Callable[[int], str]:
    """pk -> path of the route `name`, reversed once rather than once per marker."""
    pattern = reverse(name, args=[987654321])
    return lambda pk: pattern.replace("987654321", str(pk))


# On the overlay axis (0 to 1 over the plot): the lowest row of the lane the lines leave free.
ALERT_ROW_Y = 0.71
KIND_COLORS = {"regression": "#dc2626", "improvement": "#16a34a", "trade_off": "#d97706"}


def alert_markers_traces(
    *, markers: Sequence[AlertMarker], x_of: Mapping[str, float]
) -> list[dict[str, Any]]:
    """One trace drawing each alert group as a symbol at the bottom of the label lane, above the lines
    (the chart keeps the top of its plot for labels); clicking it opens the group. customdata: (group
    url, hover text, the PR label "#51830" the chart script places above the marker where there is room,
    or "", the group's kind: regressions are labelled first)."""
    drawn = [marker for marker in markers if marker.commit_sha in x_of]
    if not drawn:
        return []
    return [
        {
            "type": "scatter",
            "x": [x_of[marker.commit_sha] for marker in drawn],
            "y": [ALERT_ROW_Y] * len(drawn),
            "yaxis": "y2",
            "mode": "markers",
            "marker": {
                # Colour says good or bad; the triangle points the way the metric moved.
                "symbol": ["triangle-up" if marker.moved_up else "triangle-down" for marker in drawn],
                "color": [KIND_COLORS.get(marker.kind, "#64748b") for marker in drawn],
                "size": 11,
                "line": {"color": "#ffffff", "width": 1},
            },
            "name": "alerts",
            "customdata": [
                [marker.url, marker.label, f"#{marker.pr_number}" if marker.pr_number else "", marker.kind]
                for marker in drawn
            ],
            "hovertemplate": "<b>Alert</b> %{customdata[1]}<br>click to open<extra></extra>",
            "cliponaxis": False,
            "meta": {"kind": "alerts"},
        }
    ]
