"""A change spread over neighbouring commits: two dismissed groups side by side, tested as one.

A change made over two or three commits (a feature landed in parts, a revert of half of it) shows to
detection as two smaller steps a commit or a few apart. Each becomes a group of its own, and each part
may stay below the metric's minimum change on its own repeats, so both are dismissed although together
they moved the series well past it. When a group is dismissed next to the dismissed group it follows
(the same kind of change on a suite and hardware class they share, at most `NEAR` commits between their
ranges), one suspected group over both ranges is opened and verified on fresh repeats of its own ends
like any other; it links the group it came from, and the search finds its culprit if it holds.
"""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from dashboard.benchmarks.direction import change_kind
from dashboard.regressions.detect.alert_groups import AlertValues, alerts_store
from dashboard.regressions.models import Alert, AlertGroup, GroupState, TriageEvent

logger = logging.getLogger(__name__)

# Commits between the two ranges (from the earlier one's head to the later one's base) for them to be
# parts of one change.
NEAR = 4


def _detector_alerts(group: AlertGroup) -> dict[int, Alert]:
    """The group's detected alerts by series id."""
    alerts = group.alerts.filter(source=Alert.Source.DETECTOR).select_related("series")
    return {alert.series_id: alert for alert in alerts}


def _pairs(alerts: dict[int, Alert]) -> set[tuple[int, str]]:
    return {(alert.series.suite_id, alert.series.hardware_class) for alert in alerts.values()}


def gradual_union(*, group_id: int) -> int | None:
    """The suspected group over the dismissed group `group_id` and the dismissed group it follows, when
    both are parts of one change (see the module); None when they are not, or when that range has a group
    already."""
    group = (
        AlertGroup.objects.filter(pk=group_id, state=GroupState.DISMISSED)
        .select_related("base_commit", "head_commit", "follows__base_commit", "follows__head_commit")
        .first()
    )
    earlier = group.follows if group is not None else None
    if group is None or earlier is None or earlier.state != GroupState.DISMISSED:
        return None
    if earlier.kind != group.kind:
        return None
    first, second = sorted((earlier, group), key=lambda item: item.base_commit.position or 0)
    if (second.base_commit.position or 0) - (first.head_commit.position or 0) > NEAR:
        return None
    befores, afters = _detector_alerts(first), _detector_alerts(second)
    if not _pairs(befores) & _pairs(afters):
        return None
    head = max((first, second), key=lambda item: item.head_commit.position or 0).head_commit
    alerts = []
    for series_id in sorted(set(befores) | set(afters)):
        before = befores.get(series_id) or afters[series_id]
        after = afters.get(series_id) or befores[series_id]
        if not before.before_value:
            continue
        change_pct = (after.after_value - before.before_value) / before.before_value * 100
        alerts.append(
            (
                before.series,
                AlertValues(
                    kind=change_kind(metric=before.series.metric, change_pct=change_pct),
                    before=before.before_value,
                    after=after.after_value,
                    change_pct=change_pct,
                    p_value=None,
                ),
            )
        )
    if not alerts:
        return None
    # The union, its alerts and both lines of history at once: a crash between them left a group with no
    # alert, which nothing verifies.
    with transaction.atomic():
        try:
            with transaction.atomic():
                union = AlertGroup.objects.create(
                    base_commit=first.base_commit,
                    head_commit=head,
                    kind=group.kind,
                    follows=group,
                    range_reason=(
                        f"groups #{first.pk} and #{second.pk}, each dismissed on its own, as one change "
                        "spread over their commits"
                    ),
                )
        except IntegrityError:
            return None  # that range has a group already
        alerts_store(group_id=union.pk, alerts=alerts)
        TriageEvent.objects.create(
            group=union,
            field="state",
            new_value=f"suspected: groups #{first.pk} and #{second.pk} tested as one change",
        )
        TriageEvent.objects.create(
            group=group,
            field="search",
            new_value=(
                f"dismissed next to group #{earlier.pk}: both tested as one change in group #{union.pk}"
            ),
        )
    logger.info("groups %s and %s: tested as one change in group %s", first.pk, second.pk, union.pk)
    return union.pk
