"""Writes: one alert per series and range, in the group of that range, judged as a whole."""

from __future__ import annotations

from dataclasses import dataclass

from dashboard.benchmarks.models import Series
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind, TriageStatus


def group_refresh(group: AlertGroup) -> None:
    """Judge the group's metrics together: all worse, all better, or some of each."""
    alerts = list(group.alerts.values_list("kind", "change_pct", "status"))
    counted = [a for a in alerts if a[2] != TriageStatus.INVALID] or alerts
    kinds = {kind for kind, _, _ in counted}
    if kinds == {AlertKind.REGRESSION}:
        group.kind = GroupKind.REGRESSION
    elif kinds == {AlertKind.IMPROVEMENT}:
        group.kind = GroupKind.IMPROVEMENT
    else:
        group.kind = GroupKind.TRADE_OFF
    group.magnitude_pct = max((abs(change) for _, change, _ in counted), default=0.0)
    group.save(update_fields=["kind", "magnitude_pct", "updated_at"])


@dataclass(frozen=True)
class AlertValues:
    kind: str
    before: float
    after: float
    change_pct: float
    p_value: float | None


def alert_upsert(
    *,
    series: Series,
    base_commit_id: int,
    head_commit_id: int,
    kind: str,
    before: float,
    after: float,
    change_pct: float,
    p_value: float | None,
    source: str = Alert.Source.DETECTOR,
) -> tuple[Alert, bool]:
    """The alert of `series` in the range (base, head], created or refreshed, and its group judged again."""
    group, _ = AlertGroup.objects.get_or_create(
        base_commit_id=base_commit_id, head_commit_id=head_commit_id, defaults={"kind": kind}
    )
    values = AlertValues(kind=kind, before=before, after=after, change_pct=change_pct, p_value=p_value)
    return alert_store(group_id=group.pk, series=series, values=values, source=source)


def alert_store(
    *, group_id: int, series: Series, values: AlertValues, source: str = Alert.Source.DETECTOR
) -> tuple[Alert, bool]:
    # Alerts of other series may join the same group concurrently: judging it under its row lock means
    # the last writer sees every alert, so a trade-off is never judged from half of its metrics.
    group = AlertGroup.objects.select_for_update().get(pk=group_id)
    fields = {
        "kind": values.kind,
        "before_value": values.before,
        "after_value": values.after,
        "change_pct": values.change_pct,
        "p_value": values.p_value,
    }
    alert, created = Alert.objects.update_or_create(
        series=series, group=group, defaults=fields, create_defaults={**fields, "source": source}
    )
    group_refresh(group)
    return alert, created
