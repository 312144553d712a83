"""What follows a stored run, in one place: detection around it, more runs of the outlier commits beside
it, verification of what it found, the verdicts it completes, the culprit search, and the suite's next
runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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
from dashboard.regressions.sheriff.beside import beside_check, groups_beside_waiting
from dashboard.regressions.sheriff.recheck import outliers_recheck
from dashboard.regressions.sheriff.search import group_search, groups_at_cap_around, groups_searching
from dashboard.regressions.sheriff.verdicts import group_judge, group_verify, groups_verify

logger = logging.getLogger(__name__)


def run_settle(*, run_id: int) -> DetectionOutcome:
    """Everything a stored run sets off: detection around its commit, more runs of the outlier commits
    beside it, verification of the groups it found, the verdicts it completes, the next step of every
    culprit search of its suite and hardware class (the run may lie inside a range or beside one, where
    it refines a side's level), a second look at the searches stopped at their run cap whose range holds
    it, and the suite's next runs."""
    outcome = run_detect(run_id=run_id)
    outliers_recheck(outliers=outcome.outliers)
    groups_verify(group_ids=outcome.group_ids)
    run_verdicts(run_id=run_id)
    run = Run.objects.select_related("suite", "commit").get(pk=run_id)
    groups_search(suite_id=run.suite_id, hardware_class=run.hardware_class)
    if run.status == RunStatus.SUCCEEDED:
        searches_step(
            group_ids=groups_at_cap_around(
                suite_id=run.suite_id, hardware_class=run.hardware_class, position=run.commit.position
            )
        )
    # The node that ran it takes its next run now rather than at the scheduler's next beat.
    if run.source == Run.Source.RUNNER and not run.suite.installs_releases:
        runs_schedule(suite=run.suite, hardware_class=run.hardware_class)
    return outcome


def run_verdicts(*, run_id: int) -> list[int]:
    """After a run is stored: judge the suspected groups it ends. Returns them."""
    run = (
        Run.objects.filter(pk=run_id, status=RunStatus.SUCCEEDED)
        .values("commit_id", "suite_id", "hardware_class")
        .first()
    )
    if run is None:
        return []
    touching = Alert.objects.filter(
        series__suite_id=run["suite_id"], series__hardware_class=run["hardware_class"]
    )
    ends = list(
        AlertGroup.objects.filter(pk__in=touching.values("group_id"), state=GroupState.SUSPECTED)
        .filter(Q(base_commit_id=run["commit_id"]) | Q(head_commit_id=run["commit_id"]))
        .values_list("pk", flat=True)
    )
    for group_id in ends:
        group_judge(group_id=group_id)
    return ends


def groups_search(*, suite_id: int | None = None, hardware_class: str | None = None) -> list[Run]:
    """The next step of every open culprit search (of one suite and hardware class, or all), the most
    urgent kind of change first."""
    return searches_step(group_ids=groups_searching(suite_id=suite_id, hardware_class=hardware_class))


def searches_step(*, group_ids: Sequence[int]) -> list[Run]:
    """The next step of the culprit search of each of `group_ids`, in turn; the suspected groups a found
    culprit leaves are verified, and a suite that changed elsewhere starts its own search at once."""
    queued: list[Run] = []
    for group_id in group_ids:
        step = group_search(group_id=group_id)
        queued.extend(step.queued)
        queued.extend(groups_verify(group_ids=step.opened))
        for split_id in step.split:
            # A suite that changed elsewhere in the range starts its own search at once.
            split_step = group_search(group_id=split_id)
            queued.extend(split_step.queued)
            queued.extend(groups_verify(group_ids=split_step.opened))
    return queued


def groups_verify_pending() -> list[Run]:
    """Safety net: queue what suspected groups still lack (a budget that refilled, a failed repeat), judge
    those whose repeats are all in (a lost message), take the next step of every open search, and go on
    with the tests of found culprits' sides that were waiting for runs."""
    queued: list[Run] = []
    for group_id in AlertGroup.objects.filter(state=GroupState.SUSPECTED).values_list("pk", flat=True):
        queued.extend(group_verify(group_id=group_id))
        group_judge(group_id=group_id)
    queued.extend(groups_search())
    for group_id in groups_beside_waiting():
        opened, runs = beside_check(group_id=group_id)
        queued.extend(runs)
        queued.extend(groups_verify(group_ids=opened))
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
