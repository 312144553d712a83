"""Writes: bisection runs that halve an open culprit range, one forced run at a time."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction

from dashboard.benchmarks.models import Commit, Run, RunKind, RunStatus, Suite
from dashboard.benchmarks.runs import run_enqueue, run_promote
from dashboard.benchmarks.subjects import ChangeClass
from dashboard.regressions.budget import suite_budget_use
from dashboard.regressions.models import AlertGroup, GroupKind, GroupState, TriageStatus
from dashboard.regressions.selectors import PENDING_RUN_STATUSES
from runners.suites import InstallMethod

logger = logging.getLogger(__name__)

BISECTED_KINDS: tuple[str, ...] = (GroupKind.REGRESSION, GroupKind.TRADE_OFF)
BISECTED_STATUSES: tuple[str, ...] = (
    TriageStatus.UNTRIAGED,
    TriageStatus.INVESTIGATING,
    TriageStatus.ACKNOWLEDGED,
)


def groups_around(*, commit_id: int) -> list[int]:
    """Open groups whose range holds the commit, its ends included (a narrowed range ends at it)."""
    position = Commit.objects.filter(pk=commit_id).values_list("position", flat=True).first()
    if position is None:
        return []
    return list(
        AlertGroup.objects.filter(
            state=GroupState.CONFIRMED,
            kind__in=BISECTED_KINDS,
            status__in=BISECTED_STATUSES,
            base_commit__position__lte=position,
            head_commit__position__gte=position,
        ).values_list("pk", flat=True)
    )


def _bisection_commit(*, inside: Sequence[Commit], suite: Suite, hardware_class: str) -> Commit | None:
    """The middle of the commits after the last one this suite benchmarked in the range, head excluded;
    None while a bisection run inside the range is still pending (its result decides which half is next)."""
    runs = Run.objects.filter(
        suite=suite, hardware_class=hardware_class, commit_id__in=[commit.pk for commit in inside]
    )
    # A queued new-commit or backfill run may wait for hours behind others: only a bisection run holds it up.
    if runs.filter(status__in=PENDING_RUN_STATUSES, kind=RunKind.BISECTION).exists():
        return None
    benchmarked = set(runs.filter(status=RunStatus.SUCCEEDED).values_list("commit_id", flat=True))
    last = max((index for index, commit in enumerate(inside) if commit.pk in benchmarked), default=-1)
    # A commit touching only docs, tests or CI cannot be the culprit of a performance change.
    candidates = [commit for commit in inside[last + 1 :] if commit.change_class != ChangeClass.DOCS_TESTS_CI]
    return candidates[len(candidates) // 2] if candidates else None


def group_bisect(*, group_id: int) -> list[Run]:
    """Queue one forced run at the middle unbenchmarked commit of a confirmed, open regression or trade-off
    range, per suite and hardware class of its alerts; idempotent, returns the runs it queued.

    Release suites install versions, not commits, so they cannot bisect; a range whose middle commit
    repeats could not place stays as it is.
    """
    queued: list[Run] = []
    with transaction.atomic():
        # The group's row lock serialises two detections bisecting it at once.
        group = (
            AlertGroup.objects.select_for_update()
            .filter(
                pk=group_id, state=GroupState.CONFIRMED, kind__in=BISECTED_KINDS, status__in=BISECTED_STATUSES
            )
            .select_related("base_commit", "head_commit")
            .first()
        )
        if group is None or group.base_commit.position is None or group.head_commit.position is None:
            return []
        if "bisection_stopped" in group.evidence:
            return []
        inside = list(
            Commit.objects.filter(
                repository_id=group.head_commit.repository_id,
                position__gt=group.base_commit.position,
                position__lt=group.head_commit.position,
            ).order_by("position")
        )
        if not inside:
            return []
        pairs = sorted(set(group.alerts.values_list("series__suite_id", "series__hardware_class")))
        suites = Suite.objects.in_bulk([suite_id for suite_id, _ in pairs])
        for suite_id, hardware_class in pairs:
            suite = suites[suite_id]
            if suite.install_settings.get("method") == InstallMethod.PYPI_RELEASE:
                continue
            commit = _bisection_commit(inside=inside, suite=suite, hardware_class=hardware_class)
            if commit is None:
                continue
            taken = Run.objects.filter(commit=commit, suite=suite, hardware_class=hardware_class).exclude(
                status__in=(RunStatus.FAILED, RunStatus.CANCELLED)
            )
            waiting = taken.filter(status=RunStatus.QUEUED).exclude(kind=RunKind.BISECTION).first()
            if waiting is not None and run_promote(run_id=waiting.pk, kind=RunKind.BISECTION):
                queued.append(waiting)
                continue
            if taken.exists() or not suite_budget_use(suite=suite).allows_another:
                continue
            queued.append(
                run_enqueue(
                    commit=commit,
                    suite=suite,
                    hardware_class=hardware_class,
                    forced=True,
                    kind=RunKind.BISECTION,
                )
            )
    if queued:
        logger.info("group %s: bisection queued runs %s", group_id, [run.pk for run in queued])
    return queued
