"""Alert markers on a timeline figure: one symbol per alert group at the head of its culprit range, read
in one query and drawn as one trace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import F, Max, Min, Q
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
    first; false positives (`invalid`) are left out. One query."""
    alerts = Alert.objects.filter(series__suite=suite, series__hardware_class=hardware_class)
    if metric:
        alerts = alerts.filter(series__metric=metric)
    charted = Q(alerts__pk__in=alerts.values("pk"))
    groups = (
        AlertGroup.objects.filter(pk__in=alerts.values("group_id"))
        .exclude(status=TriageStatus.INVALID)
        .annotate(
            largest_rise=Max("alerts__change_pct", filter=charted),
            largest_fall=Min("alerts__change_pct", filter=charted),
        )
        .select_related("head_commit")
        .order_by(F("head_commit__position").asc(nulls_last=True), "pk")
    )
    return [
        AlertMarker(
            commit_sha=group.head_commit.sha,
            group_id=group.pk,
            kind=group.kind,
            url=reverse("regressions:alert-group", args=[group.pk]),
            position=group.head_commit.position,
            label=f"{group.get_kind_display().capitalize()}: up to {group.magnitude_pct:.1f} % "
            f"({group.get_status_display()})"
            + (
                f"<br>PR #{group.head_commit.pr_number} {group.head_commit.subject}"
                if group.head_commit.pr_number
                else ""
            ),
            moved_up=max(group.largest_rise or 0.0, group.largest_fall or 0.0, key=abs) >= 0,
            pr_number=group.head_commit.pr_number,
        )
        for group in groups
    ]


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
