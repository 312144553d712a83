"""Writes: one alert per series and range, in the group of that range, judged as a whole."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from dashboard.benchmarks.models import Series
from dashboard.regressions.models import (
    Alert,
    AlertGroup,
    AlertKind,
    GroupKind,
    GroupState,
    TriageEvent,
    TriageStatus,
)


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
    """The alert of `series` in the group, created or refreshed, and the group judged again."""
    return alerts_store(group_id=group_id, alerts=[(series, values)], source=source)[0]


def alerts_store(
    *,
    group_id: int,
    alerts: Sequence[tuple[Series, AlertValues]],
    source: str = Alert.Source.DETECTOR,
) -> list[tuple[Alert, bool]]:
    """The alerts of these series in the group, created or refreshed, and the group judged once after
    them all: a change seen on sixty series writes in a handful of statements, not sixty round trips."""
    # Alerts of other series may join the same group concurrently: judging it under its row lock means
    # the last writer sees every alert, so a trade-off is never judged from half of its metrics. Every
    # writer of a group's alerts takes this lock first, so the unique (series, group) cannot race. The
    # lock needs a transaction: a caller outside one (a task in autocommit) gets its own here, and one
    # inside one spends no savepoint on it (an error here is the caller's error as well).
    with transaction.atomic(savepoint=False):
        return _alerts_store_locked(group_id=group_id, alerts=alerts, source=source)


def _alerts_store_locked(
    *, group_id: int, alerts: Sequence[tuple[Series, AlertValues]], source: str
) -> list[tuple[Alert, bool]]:
    group = AlertGroup.objects.select_for_update().get(pk=group_id)
    existing = {
        alert.series_id: alert
        for alert in Alert.objects.filter(group=group, series_id__in=[series.pk for series, _ in alerts])
    }
    now = timezone.now()
    stored: list[tuple[Alert, bool]] = []
    created: list[Alert] = []
    changed: list[Alert] = []
    for series, values in alerts:
        fields = dict(
            zip(
                _STORED_FIELDS,
                (values.kind, values.before, values.after, values.change_pct, values.p_value),
                strict=True,
            )
        )
        alert = existing.get(series.pk)
        if alert is None:
            alert = Alert(series=series, group=group, source=source, **fields)
            created.append(alert)
        else:
            for name, value in fields.items():
                setattr(alert, name, value)
            alert.updated_at = now
            changed.append(alert)
        stored.append((alert, series.pk not in existing))
    Alert.objects.bulk_create(created)
    _alerts_update(changed, now=now)
    group_refresh(group)
    return stored


_STORED_FIELDS = ("kind", "before_value", "after_value", "change_pct", "p_value")
_STORED_TYPES = ("varchar", "double precision", "double precision", "double precision", "double precision")


def _alerts_update(alerts: Sequence[Alert], *, now: datetime) -> None:
    """Write the stored fields of these alerts in one statement."""
    if not alerts:
        return
    if connection.vendor != "postgresql":
        Alert.objects.bulk_update(alerts, fields=[*_STORED_FIELDS, "updated_at"])
        return
    # One UPDATE from a VALUES list: bulk_update's CASE per field and row costs more to build than to run.
    row = "(%s::bigint, " + ", ".join(f"%s::{kind}" for kind in _STORED_TYPES) + ")"
    assignments = ", ".join(f"{field} = v.{field}" for field in _STORED_FIELDS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Alert._meta.db_table} AS a SET {assignments}, updated_at = %s "
            f"FROM (VALUES {', '.join([row] * len(alerts))}) AS v(id, {', '.join(_STORED_FIELDS)}) "
            "WHERE a.id = v.id",
            [
                now,
                *(
                    value
                    for alert in alerts
                    for value in (alert.pk, *(getattr(alert, f) for f in _STORED_FIELDS))
                ),
            ],
        )


# The evidence key of the moment a reopened group's verification repeats count from (ISO 8601).
FRESH_SINCE = "fresh_since"


def group_reopen(*, group: AlertGroup, why: str, fresh: bool) -> bool:
    """A dismissed group suspected again, for a new change found at its very range (one range is one
    group): a new first round of verification, the dismissed verdict kept beside. With `fresh`, only
    repeats queued from now on count (`FRESH_SINCE`): the new change was found on runs that include the
    old repeats, and judging it on them would reuse what raised it. Returns whether it reopened; a group a
    person closed stays as it is."""
    if group.status not in (TriageStatus.UNTRIAGED, TriageStatus.INVESTIGATING):
        return False
    now = timezone.now()
    evidence: dict[str, object] = {"rounds": 1, "dismissed_before": group.evidence}
    if fresh:
        evidence[FRESH_SINCE] = now.isoformat()
    reopened = AlertGroup.objects.filter(pk=group.pk, state=GroupState.DISMISSED).update(
        state=GroupState.SUSPECTED, state_changed_at=now, evidence=evidence, updated_at=now
    )
    if reopened:
        TriageEvent.objects.create(
            group=group, field="state", old_value=GroupState.DISMISSED, new_value=f"suspected again: {why}"
        )
        group.state = GroupState.SUSPECTED
        group.evidence = evidence
    return bool(reopened)


def group_fresh_since(group: AlertGroup) -> datetime:
    """The moment a group's verification repeats count from: its creation, or its reopening for a change
    found on its old repeats (`group_reopen`)."""
    since = group.evidence.get(FRESH_SINCE) if isinstance(group.evidence, dict) else None
    try:
        return datetime.fromisoformat(since) if isinstance(since, str) else group.created_at
    except ValueError:
        return group.created_at
