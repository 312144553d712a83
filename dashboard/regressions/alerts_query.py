"""Reads for `GET /api/alerts/`: the query string parsed into filters, and alert groups as plain values."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Prefetch, Q
from django.utils.dateparse import parse_date, parse_datetime

from dashboard.benchmarks.models import Commit, Suite
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState, TriageStatus

_SLUG = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")


class AlertsQueryInvalid(ValueError):
    """A filter value the API does not accept; the message is the one-line reason."""


@dataclass(frozen=True)
class AlertsQuery:
    suite: str = ""
    hardware_class: str = ""
    kind: str = ""
    state: str = ""
    status: str = ""
    since: datetime | None = None


def _choice(query: Mapping[str, str], name: str, allowed: list[str]) -> str:
    value = query.get(name, "").strip()
    if value and value not in allowed:
        raise AlertsQueryInvalid(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def alerts_query_parse(*, query: Mapping[str, str]) -> AlertsQuery:
    """Filters from a query string; raises AlertsQueryInvalid on the first bad value."""
    suite = query.get("suite", "").strip()
    hardware = query.get("hardware", "").strip()
    for name, value in (("suite", suite), ("hardware", hardware)):
        if value and not _SLUG.match(value):
            raise AlertsQueryInvalid(f"{name} must be a name of letters, digits, - and _, not {value!r}")
    since_text = query.get("since", "").strip()
    since = None
    if since_text:
        try:
            since = parse_datetime(since_text)
            if since is None and (day := parse_date(since_text)) is not None:
                since = datetime(day.year, day.month, day.day, tzinfo=UTC)
        except ValueError:
            since = None
        if since is None:
            raise AlertsQueryInvalid(f"since must be an ISO 8601 date or time, not {since_text!r}")
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
    return AlertsQuery(
        suite=suite,
        hardware_class=hardware,
        kind=_choice(query, "kind", list(GroupKind.values)),
        state=_choice(query, "state", list(GroupState.values)),
        status=_choice(query, "status", list(TriageStatus.values)),
        since=since,
    )


# The most groups one answer holds (newest first); `since` reads further back in steps.
ALERTS_MAX_GROUPS = 500


def alerts_export(*, filters: AlertsQuery) -> list[dict[str, object]]:
    """Groups matching `filters`, newest first, at most ALERTS_MAX_GROUPS, as the API's JSON values; three
    queries whatever the size.

    `since` keeps the groups created or given a verdict at or after it.
    """
    if filters.suite and not Suite.objects.filter(name=filters.suite).exists():
        raise AlertsQueryInvalid(f"unknown suite {filters.suite!r}")
    groups = AlertGroup.objects.all()
    if filters.suite:
        groups = groups.for_suite(filters.suite)
    if filters.hardware_class:
        groups = groups.for_hardware(filters.hardware_class)
    for field in ("kind", "state", "status"):
        if value := getattr(filters, field):
            groups = groups.filter(**{field: value})
    if filters.since is not None:
        groups = groups.filter(Q(created_at__gte=filters.since) | Q(state_changed_at__gte=filters.since))
    rows = list(
        groups.order_by("-pk")[:ALERTS_MAX_GROUPS]
        .select_related("base_commit", "head_commit")
        .prefetch_related(
            Prefetch("alerts", queryset=Alert.objects.select_related("series__suite").order_by("pk"))
        )
    )
    pulls = _range_pull_requests(rows)
    return [
        {
            "id": group.pk,
            "kind": group.kind,
            "state": group.state,
            "status": group.status,
            "base_commit": group.base_commit.sha,
            "head_commit": group.head_commit.sha,
            "culprit_commit": group.head_commit.sha if _one_commit(group) else None,
            "pull_requests": pulls.get(group.pk, []),
            "alerts": [
                {
                    "suite": alert.series.suite.name,
                    "hardware": alert.series.hardware_class,
                    "concurrency": alert.series.concurrency,
                    "metric": alert.series.metric,
                    "before": alert.before_value,
                    "after": alert.after_value,
                    "change_pct": alert.change_pct,
                    "p_value": alert.p_value,
                }
                for alert in group.alerts.all()
            ],
        }
        for group in rows
    ]


def _one_commit(group: AlertGroup) -> bool:
    base, head = group.base_commit.position, group.head_commit.position
    return base is not None and head is not None and head - base == 1


def _range_pull_requests(groups: list[AlertGroup]) -> dict[int, list[int]]:
    """PR numbers of the commits in each group's range (base, head], oldest first, in one query."""
    ranges = [
        (group.pk, group.head_commit.repository_id, group.base_commit.position, group.head_commit.position)
        for group in groups
    ]
    condition = Q()
    for _, repository_id, base, head in ranges:
        if base is not None and head is not None:
            condition |= Q(repository_id=repository_id, position__gt=base, position__lte=head)
    pulls: dict[int, list[int]] = defaultdict(list)
    if not condition:
        for group in groups:  # positions unknown: only the head's PR can be named
            if group.head_commit.pr_number:
                pulls[group.pk].append(group.head_commit.pr_number)
        return pulls
    commits = (
        Commit.objects.filter(condition, pr_number__isnull=False)
        .order_by("position")
        .values_list("repository_id", "position", "pr_number")
    )
    by_repository: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for repository_id, position, pr_number in commits:
        if position is not None and pr_number is not None:
            by_repository[repository_id].append((position, pr_number))
    for (group_id, repository_id, base, head), group in zip(ranges, groups, strict=True):
        if base is None or head is None:
            if group.head_commit.pr_number:
                pulls[group_id].append(group.head_commit.pr_number)
            continue
        for position, pr_number in by_repository[repository_id]:
            if base < position <= head and pr_number not in pulls[group_id]:
                pulls[group_id].append(pr_number)
    return pulls
