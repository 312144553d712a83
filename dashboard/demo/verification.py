"""The demo's GPU node, played from the demo's model: the embedded demo has no runner, so this loop takes
the runs that the product's own sheriff asks for and runs them. For each suspected group, the real
verification queues its repeats (`group_verify`) and judges them (`group_judge`); a confirmed group's
real culprit search (`settle.groups_search`) queues its bisection runs, narrows the range and opens what
a culprit leaves. Each queued run is finished as the node would: its numbers drawn from the demo's model
at that commit with fresh run-to-run noise for every metric and level, stored by the one results writer.
It loops until nothing more is queued.

The node plays in the history's time: a group is found just after the run at its head, its runs follow
one after another on the node, and what the product wrote during a step (runs queued, groups opened,
verdicts, triage events) is dated at that step's time on the node's clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from dashboard import dispatch
from dashboard.benchmarks.models import Run, RunKind, Runner, RunStatus, run_priority
from dashboard.benchmarks.runs import run_cancel
from dashboard.benchmarks.services import run_results_store
from dashboard.demo.history import demo_accuracy_store, demo_report, demo_run_finish
from dashboard.demo.model import DEMO_SEED, demo_model
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState, Notification, TriageEvent
from dashboard.regressions.selectors import group_range_commits
from dashboard.regressions.sheriff.settle import groups_search
from dashboard.regressions.sheriff.verdicts import group_judge, group_verify

# Rounds of (the sheriff queues, the node runs) for one group and what it opens: past this the demo stops
# playing it, whatever is still queued (a search ends well before: its run cap is 16).
NODE_ROUNDS = 40
# Detection sees a change once the run at its head is stored; the sheriff queues its repeats at once.
FOUND_AFTER = timedelta(minutes=10)
PLAYED_KINDS: tuple[str, ...] = (RunKind.VERIFICATION, RunKind.BISECTION)


@contextmanager
def _node_in_process() -> Iterator[None]:
    """The demo's node is this loop: the message asking a node to take a run is not sent (the demo has
    no broker, and no node would find the run still queued)."""
    send = dispatch.run_execute
    dispatch.run_execute = lambda **_: dispatch.RUN_EXECUTE
    try:
        yield
    finally:
        dispatch.run_execute = send


def _stamp(*, since: datetime, at: datetime) -> None:
    """Date what the product wrote since `since` (real time) at `at`, the node's clock."""
    Run.objects.filter(status=RunStatus.QUEUED, queued_at__gte=since).update(queued_at=at, dispatched_at=at)
    for field in ("created_at", "state_changed_at", "updated_at"):
        AlertGroup.objects.filter(**{f"{field}__gte": since}).update(**{field: at})
    for field in ("created_at", "updated_at"):
        Alert.objects.filter(**{f"{field}__gte": since}).update(**{field: at})
    TriageEvent.objects.filter(created_at__gte=since).update(created_at=at)
    Notification.objects.filter(created_at__gte=since).update(created_at=at)


class _Node:
    """The demo's nodes (one per hardware class), each taking one run at a time."""

    def __init__(self, *, seed: int) -> None:
        self.model = demo_model(seed=seed)
        self.noise = random.Random(seed + 3)  # the re-runs' numbers, apart from the history's
        self.records = random.Random(seed + 1)  # their stages, telemetry and logs
        self.runners = {runner.hardware_class: runner for runner in Runner.objects.order_by("-pk")}
        self.free_at: dict[str, datetime] = {}
        self.taken = 0

    def take(self, *, runs: Sequence[Run], at: datetime) -> datetime:
        """Run `runs` (queued at `at`), most urgent kind first; returns when the last one finished."""
        last = at
        for run in sorted(
            runs, key=lambda run: (run_priority(kind=run.kind, spare_time=run.spare_time), run.pk)
        ):
            runner = self.runners[run.hardware_class]
            waited = timedelta(minutes=self.records.uniform(1.0, 6.0))
            started_at = max(at + waited, self.free_at.get(run.hardware_class, at))
            position = run.commit.position or 0
            with transaction.atomic():
                demo_run_finish(run=run, runner=runner, started_at=started_at, rng=self.records)
                report = demo_report(model=self.model, suite=run.suite, position=position, rng=self.noise)
                run_results_store(run=run, report=report, raw_report=None, detect=False)
                demo_accuracy_store(model=self.model, run=run, position=position, rng=self.noise)
            assert run.finished_at is not None
            self.free_at[run.hardware_class] = run.finished_at
            last = max(last, run.finished_at)
            self.taken += 1
        return last + timedelta(minutes=1)

    def decline(self, *, at: datetime) -> None:
        """Cancel the profile runs a found culprit asked for: the node records no traces (`profile_demo`
        gives the demo's regression the two it ships)."""
        for run in Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.PROFILE):
            run_cancel(run_id=run.pk, user=AnonymousUser())
            Run.objects.filter(pk=run.pk).update(
                finished_at=at, failure_reason="cancelled: the demo's node records no profile traces"
            )


def _found_at(group: AlertGroup) -> datetime:
    """When detection found the group: just after the newest run at its head of one of its suites."""
    pairs = group.alerts.values("series__suite_id")
    finished = Run.objects.filter(
        commit_id=group.head_commit_id, suite_id__in=pairs, status=RunStatus.SUCCEEDED
    ).aggregate(last=Max("finished_at"))["last"]
    return (finished or group.created_at) + FOUND_AFTER


def _describe(group_id: int) -> str:
    group = AlertGroup.objects.select_related("base_commit", "head_commit").get(pk=group_id)
    commits = len(group_range_commits(group=group))
    search = group.evidence.get("search", {})
    told = f" ({search['stopped']})" if search.get("stopped") else ""
    return (
        f"group {group.pk} {group.base_commit.short_sha}..{group.head_commit.short_sha} "
        f"({commits} commit{'s' if commits != 1 else ''}): {group.state}{told}"
    )


def _group_play(*, group_id: int, at: datetime, node: _Node) -> tuple[list[int], bool]:
    """Play the node for one group until the sheriff queues nothing more for it or what it opened.
    Returns the groups played (the group first), and whether the rounds ran out first."""
    played = [group_id]
    AlertGroup.objects.filter(pk=group_id).update(created_at=at)
    for _ in range(NODE_ROUNDS):
        since = timezone.now()
        for played_id in played:
            group_verify(group_id=played_id)
            group_judge(group_id=played_id)
        groups_search()
        opened = AlertGroup.objects.filter(created_at__gte=since).order_by("pk")
        played.extend(opened.values_list("pk", flat=True))
        _stamp(since=since, at=at)
        queued = Run.objects.filter(status=RunStatus.QUEUED, kind__in=PLAYED_KINDS)
        runs = list(queued.select_related("commit", "suite"))
        node.decline(at=at)
        if not runs:
            return played, False
        at = node.take(runs=runs, at=at)
    return played, True


def demo_groups_verify(
    *, limit: int | None = None, seed: int = DEMO_SEED, progress: Callable[[str], Any] | None = None
) -> dict[int, str]:
    """Play the node for up to `limit` suspected groups (every one by default; the regression first,
    then the largest): verification, and for a confirmed group its culprit search. Returns the state of
    every group played, the groups a search opened or split off included."""
    node = _Node(seed=seed)
    groups = sorted(
        AlertGroup.objects.filter(state=GroupState.SUSPECTED),
        key=lambda group: (group.kind != GroupKind.REGRESSION, -abs(group.magnitude_pct or 0.0), group.pk),
    )[:limit]
    states: dict[int, str] = {}
    with _node_in_process():
        for group in sorted(groups, key=_found_at):
            taken = node.taken
            played, capped = _group_play(group_id=group.pk, at=_found_at(group), node=node)
            for group_id in played:
                states[group_id] = AlertGroup.objects.values_list("state", flat=True).get(pk=group_id)
            if progress is not None:
                opened = [_describe(group_id) for group_id in played[1:]]
                progress(
                    f"{_describe(group.pk)} after {node.taken - taken} runs"
                    + "".join(f"; opened {line}" for line in opened)
                    + (f"; stopped after {NODE_ROUNDS} rounds with runs still queued" if capped else "")
                )
    return states
