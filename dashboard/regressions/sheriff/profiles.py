"""Why, not only which: profile runs of a group's culprit and its parent, and what got slower between them.

`profiles_request` is called once a group's culprit is found (or, while the change is still a range,
once it is confirmed: the range's head stands in for the culprit). It queues a profile run of the culprit
and one of its parent for every suite of the group that declares a profiling stage, on the group's
hardware class, within the suite's GPU-hour budget. `group_profile_comparison` finds the newest profiled
commit of the range whose parent is profiled too, and diffs the two.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from dashboard.benchmarks.models import Commit, Run, RunKind, RunProfile, RunStatus, Suite
from dashboard.benchmarks.profiles import ProfileComparison, profile_compare, profile_latest
from dashboard.benchmarks.runs import run_enqueue
from dashboard.regressions.models import Alert, AlertGroup
from dashboard.regressions.sheriff.budget import suite_budget_use

logger = logging.getLogger(__name__)


def commit_parent(*, commit: Commit) -> Commit | None:
    """The commit before `commit` on the default branch's first-parent history, else its first parent."""
    if commit.position is not None:
        parent = Commit.objects.filter(
            repository_id=commit.repository_id, position=commit.position - 1
        ).first()
        if parent is not None:
            return parent
    if commit.parents:
        return Commit.objects.filter(repository_id=commit.repository_id, sha=commit.parents[0]).first()
    return None


def _group_scopes(group: AlertGroup) -> list[tuple[Suite, str]]:
    """The (suite, hardware class) pairs of the group's alerts whose suite declares a profiling stage; one
    query when there is none (the group page asks on every view)."""
    pairs = sorted(
        set(
            group.alerts.filter(series__suite__benchmark_settings__has_key="profiling").values_list(
                "series__suite_id", "series__hardware_class"
            )
        )
    )
    if not pairs:
        return []
    suites = Suite.objects.in_bulk([suite_id for suite_id, _ in pairs])
    return [(suites[suite_id], hardware_class) for suite_id, hardware_class in pairs]


def _release_version(*, commit: Commit, suite: Suite, hardware_class: str) -> str | None:
    """The release a pypi_release suite installed for `commit` ('' for suites that install commits)."""
    if not suite.installs_releases:
        return ""
    return (
        Run.objects.filter(commit=commit, suite=suite, hardware_class=hardware_class)
        .exclude(vllm_version_requested="")
        .order_by("-queued_at")
        .values_list("vllm_version_requested", flat=True)
        .first()
    )


def profiles_request(*, group_id: int, culprit_sha: str | None = None) -> list[Run]:
    """Queue profile runs of the group's culprit (`culprit_sha`, else the range's head) and of its parent.

    Idempotent: a commit with a profile run queued, running or done is not queued again; nothing goes
    beyond a suite's daily budget (a later call queues the rest). Returns the runs queued now.
    """
    queued: list[Run] = []
    with transaction.atomic():
        group = (
            AlertGroup.objects.select_for_update().select_related("head_commit").filter(pk=group_id).first()
        )
        if group is None:
            return []
        culprit = group.head_commit
        if culprit_sha:
            culprit = Commit.objects.filter(
                repository_id=group.head_commit.repository_id, sha__startswith=culprit_sha
            ).get()
        parent = commit_parent(commit=culprit)
        if parent is None:
            logger.info("group %s: culprit %s has no known parent: no profiles", group_id, culprit.short_sha)
            return []
        for suite, hardware_class in _group_scopes(group):
            for commit in (culprit, parent):
                taken = Run.objects.filter(
                    commit=commit, suite=suite, hardware_class=hardware_class, kind=RunKind.PROFILE
                ).exclude(status__in=(RunStatus.FAILED, RunStatus.CANCELLED))
                if taken.exists() or not suite_budget_use(suite=suite).allows_another:
                    continue
                version = _release_version(commit=commit, suite=suite, hardware_class=hardware_class)
                if version is None:
                    continue
                queued.append(
                    run_enqueue(
                        commit=commit,
                        suite=suite,
                        hardware_class=hardware_class,
                        version=version,
                        forced=True,
                        kind=RunKind.PROFILE,
                    )
                )
    if queued:
        logger.info("group %s: profile runs queued %s", group_id, [run.pk for run in queued])
    return queued


@dataclass(frozen=True)
class GroupProfile:
    """What got slower in a group: its suite and hardware class, and the diff of culprit and parent."""

    suite: str
    hardware_class: str
    comparison: ProfileComparison


def group_profile_comparison(*, group_id: int) -> GroupProfile | None:
    """The diff of the newest profiled commit of the group's range whose parent is profiled too (same
    suite and hardware class); None while the group has no such pair."""
    group = AlertGroup.objects.select_related("base_commit", "head_commit").filter(pk=group_id).first()
    return None if group is None else group_profile(group=group)


def group_profile(*, group: AlertGroup, alerts: Sequence[Alert] | None = None) -> GroupProfile | None:
    """As group_profile_comparison, for a group already read with its base and head commits (and, from the
    group page, its alerts with their series and suites: then a group without profiles costs no query)."""
    if group.head_commit.position is None or group.base_commit.position is None:
        return None
    scopes = (
        _group_scopes(group)
        if alerts is None
        else sorted(
            {
                (alert.series.suite, alert.series.hardware_class)
                for alert in alerts
                if alert.series.suite.benchmark_settings.get("profiling")
            },
            key=lambda scope: (scope[0].pk, scope[1]),
        )
    )
    for suite, hardware_class in scopes:
        heads = (
            RunProfile.objects.filter(
                run__suite=suite,
                run__hardware_class=hardware_class,
                run__status=RunStatus.SUCCEEDED,
                run__commit__repository_id=group.head_commit.repository_id,
                run__commit__position__gt=group.base_commit.position,
                run__commit__position__lte=group.head_commit.position,
            )
            .select_related("run__commit")
            .order_by("-run__commit__position", "-run__finished_at", "-pk")
        )
        seen: set[int] = set()
        for head in heads:
            if head.run.commit_id in seen:
                continue
            seen.add(head.run.commit_id)
            parent = commit_parent(commit=head.run.commit)
            base = parent and profile_latest(commit=parent, suite_id=suite.pk, hardware_class=hardware_class)
            if base:
                return GroupProfile(
                    suite=suite.name,
                    hardware_class=hardware_class,
                    comparison=profile_compare(base=base, head=head),
                )
    return None
