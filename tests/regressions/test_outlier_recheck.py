"""Outlier runs are run again, through the per-run path a node's runs take (`run_settle`): a regression
reverted two commits later, too short for a segment of its own, is found at its commit and its revert at
its own; a lone slow run is outvoted by its commit's repeats and raises nothing."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, Measurement, Run, RunKind, RunStatus, Series
from dashboard.regressions.models import AlertGroup, GroupKind, GroupState
from dashboard.regressions.sheriff.settle import run_settle
from tests.conftest import DispatchLog
from tests.factories import CommitFactory, run_with_values
from tests.regressions.conftest import suite_create
from tests.regressions.test_alerts import THROUGHPUT

pytestmark = pytest.mark.django_db

LEVEL = 725.0
NOISE = 0.01
COMMITS = 60


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    return dispatched.runs


class Node:
    """Main's commits benchmarked once each, in order, and every run the sheriff queues run at once."""

    def __init__(self, *, level: Callable[[int], float], seed: int) -> None:
        self.level = level
        self.rng = random.Random(seed)
        self.suite = suite_create()
        self.commits = [cast(Commit, CommitFactory()) for _ in range(COMMITS)]
        self.first_values: dict[int, float] = {}  # commit -> the value of its first run, when set

    def value(self, index: int, *, first: bool) -> float:
        if first and index in self.first_values:
            return self.first_values[index]
        return self.level(index) * (1 + self.rng.gauss(0, NOISE))

    def history(self) -> list[int]:
        """Benchmark every commit in turn; returns the commits the sheriff ran again, in order."""
        again: list[int] = []
        for index, commit in enumerate(self.commits):
            run = run_with_values(
                commit=commit, suite=self.suite, values={(16, THROUGHPUT): self.value(index, first=True)}
            )
            run_settle(run_id=run.pk)
            again.extend(self._queued_run())
        return again

    def _queued_run(self) -> list[int]:
        ran: list[int] = []
        series = Series.objects.get(suite=self.suite, metric=THROUGHPUT)
        while (run := Run.objects.in_dispatch_order().first()) is not None:
            assert len(ran) < 40, "the sheriff keeps queueing runs"
            index = self.commits.index(run.commit)
            ran.append(index)
            Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
            Measurement.objects.create(
                run=run, series=series, commit=run.commit, value=self.value(index, first=False)
            )
            run_settle(run_id=run.pk)
        return ran

    def named(self) -> set[tuple[str, int]]:
        """(kind, culprit) of every confirmed group that names one commit."""
        return {
            (group.kind, self.commits.index(group.head_commit))
            for group in AlertGroup.objects.filter(state=GroupState.CONFIRMED).select_related(
                "base_commit", "head_commit"
            )
            if self.commits.index(group.head_commit) - self.commits.index(group.base_commit) == 1
        }


def test_a_regression_reverted_two_commits_later_is_found_with_its_revert() -> None:
    node = Node(level=lambda index: LEVEL * (0.9 if 40 <= index < 42 else 1.0), seed=3)

    again = node.history()

    assert {40, 41} <= set(again)  # each had one run that fit neither side
    # Speculative repeats: backfill, taken when nothing else waits, never a group's fresh repeats.
    assert Run.objects.filter(kind=RunKind.BACKFILL, forced=True, commit=node.commits[40]).count() == 2
    assert {(GroupKind.REGRESSION, 40), (GroupKind.IMPROVEMENT, 42)} <= node.named()


def test_a_lone_slow_run_is_outvoted_by_its_repeats_and_raises_nothing() -> None:
    node = Node(level=lambda index: LEVEL, seed=5)
    node.first_values[40] = LEVEL * 0.9  # one slow run: its commit is as fast as the rest

    again = node.history()

    assert again.count(40) == 2  # run again up to three runs, once
    assert not AlertGroup.objects.filter(state=GroupState.CONFIRMED).exists()
