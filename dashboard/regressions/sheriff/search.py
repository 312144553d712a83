"""The culprit search: which commit of a confirmed range runs next, and what its runs say.

All of bisection lives here: choosing the middle commit, placing a run on one side of the change, asking
for a repeat while the odds are too even, and narrowing the range.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard.benchmarks.models import (
    PENDING_RUN_STATUSES,
    Commit,
    Run,
    RunKind,
    RunStatus,
    Series,
    Suite,
)
from dashboard.benchmarks.runs import run_enqueue, run_promote
from dashboard.benchmarks.subjects import ChangeClass
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState, TriageEvent, TriageStatus
from dashboard.regressions.sheriff.budget import suite_budget_use
from dashboard.regressions.sheriff.evidence import (
    end_runs,
    end_values,
    log_values,
    robust_mean,
)

logger = logging.getLogger(__name__)

# Odds at which a middle commit is put on the old or the new side of a change, and how many runs of it
# may be asked for before giving up (the range then stays as wide as the evidence allows).
BISECT_ODDS = 100.0
BISECT_MAX_RUNS = 3

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
            if suite.installs_releases:
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


# Bisection with repeats


def _bisection_reference(group: AlertGroup) -> dict[str, float] | None:
    """The series that confirmed the group most clearly: its id and the levels on both sides."""
    verdicts = [verdict for verdict in group.evidence.get("alerts", []) if verdict.get("holds")]
    if not verdicts:
        return None
    best = max(verdicts, key=lambda v: abs(v["head_log"] - v["base_log"]) / max(v["sigma_log"], 1e-9))
    series_id = Alert.objects.filter(pk=best["alert_id"]).values_list("series_id", flat=True).first()
    if series_id is None:
        return None
    return {
        "series_id": series_id,
        "base_log": best["base_log"],
        "head_log": best["head_log"],
        "sigma_log": best["sigma_log"],
    }


def _narrow(*, group: AlertGroup, base: Commit, head: Commit, why: str) -> bool:
    try:
        with transaction.atomic():
            narrowed = AlertGroup.objects.filter(
                pk=group.pk, base_commit_id=group.base_commit_id, head_commit_id=group.head_commit_id
            ).update(base_commit_id=base.pk, head_commit_id=head.pk, updated_at=timezone.now())
    except IntegrityError:
        return False  # another group holds that range: merging two groups is a person's call
    if narrowed:
        TriageEvent.objects.create(
            group=group,
            field="range",
            old_value=f"{group.base_commit.short_sha}..{group.head_commit.short_sha}",
            new_value=f"{base.short_sha}..{head.short_sha} ({why})",
        )
        group.base_commit, group.head_commit = base, head
    return bool(narrowed)


def _narrow_past_docs(group: AlertGroup) -> None:
    """A range whose only commit that can change performance is its head names that commit."""
    base, head = group.base_commit, group.head_commit
    if base.position is None or head.position is None or head.position - base.position <= 1:
        return
    inside = Commit.objects.filter(
        repository_id=head.repository_id, position__gt=base.position, position__lt=head.position
    )
    if inside.exclude(change_class=ChangeClass.DOCS_TESTS_CI).exists():
        return
    parent = Commit.objects.filter(repository_id=head.repository_id, position=head.position - 1).first()
    if parent is not None:
        _narrow(
            group=group,
            base=parent,
            head=head,
            why="the commits before the head touch only docs, tests or CI",
        )


def group_bisect_decide(*, group_id: int, commit_id: int) -> str:
    """Put commit `commit_id`, run inside a confirmed group's range, on the old or the new side of the
    change, from all its runs against the verified levels of both ends; ask for another run of it while
    the odds are too even, and stop bisecting when repeats cannot tell. Returns what was done."""
    with transaction.atomic():
        group = (
            AlertGroup.objects.select_for_update()
            .filter(pk=group_id, state=GroupState.CONFIRMED)
            .select_related("base_commit", "head_commit")
            .first()
        )
        commit = Commit.objects.filter(pk=commit_id).first()
        if group is None or commit is None or "bisection_stopped" in group.evidence:
            return "nothing"
        base, head = group.base_commit, group.head_commit
        if None in (base.position, head.position, commit.position) or not (
            base.position < commit.position < head.position  # type: ignore[operator]
        ):
            return "nothing"
        reference = _bisection_reference(group)
        if reference is None:
            return "nothing"
        series = Series.objects.select_related("suite").get(pk=int(reference["series_id"]))
        runs = end_runs(commit_id=commit.pk, suite=series.suite, hardware_class=series.hardware_class)
        if not runs or any(run.status != RunStatus.SUCCEEDED for run in runs):
            return "waiting"
        logs = log_values(end_values(series_id=series.pk, commit_id=commit.pk))
        if not logs:
            return "nothing"
        sigma = reference["sigma_log"]
        level = robust_mean(logs, sigma)
        # Log-odds of "as before the change" over "as after it", from n runs of known noise.
        log_odds = (
            len(logs)
            * ((level - reference["head_log"]) ** 2 - (level - reference["base_log"]) ** 2)
            / (2 * sigma**2)
        )
        if abs(log_odds) < math.log(BISECT_ODDS):
            if len(runs) < BISECT_MAX_RUNS and suite_budget_use(suite=series.suite).allows_another:
                run_enqueue(
                    commit=commit,
                    suite=series.suite,
                    hardware_class=series.hardware_class,
                    forced=True,
                    kind=RunKind.BISECTION,
                )
                return "repeat"
            AlertGroup.objects.filter(pk=group.pk).update(
                evidence={**group.evidence, "bisection_stopped": commit.sha}
            )
            TriageEvent.objects.create(
                group=group,
                field="bisection",
                new_value=f"stopped: {len(runs)} runs of {commit.short_sha} lie between both sides",
            )
            return "stopped"
        if log_odds > 0:
            done = _narrow(group=group, base=commit, head=head, why=f"{commit.short_sha} measures as before")
        else:
            done = _narrow(group=group, base=base, head=commit, why=f"{commit.short_sha} measures as after")
        if done:
            _narrow_past_docs(group)
        return "narrowed" if done else "nothing"
