"""What follows a stored run, in one place: detection around it, verification of what it found, the
verdicts it completes, the culprit search, and the suite's next runs.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db.models import Q

from dashboard.benchmarks.models import (
    Run,
    RunStatus,
)
from dashboard.benchmarks.scheduling import runs_schedule
from dashboard.regressions.detect.alerts import (
    DetectionOutcome,
    run_detect,
    runs_detect_recent,
    suite_detect_history,
)
from dashboard.regressions.models import Alert, AlertGroup, GroupState
from dashboard.regressions.notifications import notifications_schedule
from dashboard.regressions.sheriff.search import group_bisect, group_bisect_decide, groups_around
from dashboard.regressions.sheriff.verdicts import group_judge, group_verify, groups_verify

logger = logging.getLogger(__name__)


def run_settle(*, run_id: int) -> DetectionOutcome:
    """Everything a stored run sets off: detection around its commit, verification of the groups it found,
    the verdicts it completes, the next bisection runs, and the suite's next runs."""
    outcome = run_detect(run_id=run_id)
    groups_verify(group_ids=outcome.group_ids)
    touched = run_verdicts(run_id=run_id)
    # Only once the run has been placed does the next middle commit follow from the narrowed range.
    run = Run.objects.select_related("suite").get(pk=run_id)
    for group_id in sorted(set(touched) | set(groups_around(commit_id=run.commit_id))):
        group_bisect(group_id=group_id)
    # The node that ran it takes its next run now rather than at the scheduler's next beat.
    if run.source == Run.Source.RUNNER and not run.suite.installs_releases:
        runs_schedule(suite=run.suite, hardware_class=run.hardware_class)
    return outcome


def run_verdicts(*, run_id: int) -> list[int]:
    """After a run is stored: judge the suspected groups it ends, and place it in the confirmed ranges it
    lies inside. Returns the groups it touched."""
    run = (
        Run.objects.filter(pk=run_id, status=RunStatus.SUCCEEDED)
        .values("commit_id", "commit__position", "suite_id", "hardware_class")
        .first()
    )
    if run is None:
        return []
    touching = Alert.objects.filter(
        series__suite_id=run["suite_id"], series__hardware_class=run["hardware_class"]
    )
    groups = AlertGroup.objects.filter(pk__in=touching.values("group_id"))
    ends = list(
        groups.filter(state=GroupState.SUSPECTED)
        .filter(Q(base_commit_id=run["commit_id"]) | Q(head_commit_id=run["commit_id"]))
        .values_list("pk", flat=True)
    )
    for group_id in ends:
        group_judge(group_id=group_id)
    inside: list[int] = []
    if run["commit__position"] is not None:
        inside = list(
            groups.filter(
                state=GroupState.CONFIRMED,
                base_commit__position__lt=run["commit__position"],
                head_commit__position__gt=run["commit__position"],
            ).values_list("pk", flat=True)
        )
        for group_id in inside:
            group_bisect_decide(group_id=group_id, commit_id=run["commit_id"])
    return sorted(set(ends) | set(inside))


def groups_verify_pending() -> list[Run]:
    """Safety net: queue what suspected groups still lack (a budget that refilled, a failed repeat) and
    judge those whose repeats are all in (a lost message)."""
    queued: list[Run] = []
    for group_id in AlertGroup.objects.filter(state=GroupState.SUSPECTED).values_list("pk", flat=True):
        queued.extend(group_verify(group_id=group_id))
        group_judge(group_id=group_id)
    return queued


def runs_settle_recent(*, since: datetime) -> DetectionOutcome:
    """Safety net for lost messages: detection over the trailing window of every series with a run
    finished since, and the notifications of the confirmed groups it touched."""
    outcome = runs_detect_recent(since=since)
    if outcome.group_ids:
        notifications_schedule(group_ids=sorted(outcome.group_ids))
    return outcome


def history_settle(
    *, suite_name: str | None = None, hardware_class: str | None = None, notify: bool = False
) -> DetectionOutcome:
    """Detection over a whole stored history; with `notify`, the confirmed groups it found are told."""
    outcome = suite_detect_history(suite_name=suite_name, hardware_class=hardware_class)
    if notify and outcome.group_ids:
        notifications_schedule(group_ids=sorted(outcome.group_ids))
    return outcome
