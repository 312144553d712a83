"""The culprit search where one group holds more than one change, or where the prior alone would decide: a
docs-only commit beside the likeliest culprit is run before it is ruled out (a CI image bump can be the
culprit); two suites of one group that changed at different commits end in two groups, each at its own
commit; and a group whose culprit another confirmed group already names joins that group."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import cast

import pytest

from dashboard.benchmarks.models import Commit, Measurement, Run, RunKind, RunStatus, Series, Suite
from dashboard.benchmarks.subjects import ChangeClass
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState, TriageStatus
from dashboard.regressions.sheriff.evidence import TESTED
from dashboard.regressions.sheriff.search import group_search
from dashboard.regressions.sheriff.settle import groups_search
from tests.conftest import DispatchLog
from tests.factories import CommitFactory, run_with_values
from tests.regressions.conftest import suite_create
from tests.regressions.test_alerts import THROUGHPUT

pytestmark = pytest.mark.django_db

LEVEL = 725.0
NOISE = 0.01
BASE, HEAD = 29, 37

Level = Callable[[int], float]


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    return dispatched.runs


class Suites:
    """Commits 0..66 and suites whose throughput at commit i is their `level(i)` times fresh noise; every
    commit outside the range (BASE, HEAD) has a run (the ends three), the inside none."""

    def __init__(self, levels: dict[str, Level], *, seed: int) -> None:
        self.rng = random.Random(seed)
        self.commits = [cast(Commit, CommitFactory()) for _ in range(67)]
        self.levels = levels
        self.suites: dict[str, Suite] = {}
        self.series: dict[str, Series] = {}
        for name in levels:
            suite = suite_create(name=name)
            self.suites[name] = suite
            for index, commit in enumerate(self.commits):
                repeats = 3 if index in (BASE, HEAD) else 0 if BASE < index < HEAD else 1
                for _ in range(repeats):
                    run_with_values(
                        commit=commit, suite=suite, values={(16, THROUGHPUT): self.value(name, index)}
                    )
            self.series[name] = Series.objects.get(suite=suite, metric=THROUGHPUT)

    def value(self, name: str, index: int) -> float:
        return self.levels[name](index) * (1 + self.rng.gauss(0, NOISE))

    def confirmed(self, *, base: int = BASE, head: int = HEAD) -> AlertGroup:
        group = AlertGroup.objects.create(
            base_commit=self.commits[base],
            head_commit=self.commits[head],
            kind=GroupKind.REGRESSION,
            state=GroupState.CONFIRMED,
        )
        for name, series in self.series.items():
            before, after = self.levels[name](base), self.levels[name](head)
            Alert.objects.create(
                group=group,
                series=series,
                kind=GroupKind.REGRESSION,
                before_value=before,
                after_value=after,
                change_pct=(after - before) / before * 100,
                p_value=1e-9,
            )
        return group

    def search(self, group: AlertGroup, *, limit: int = 60) -> list[tuple[str, int]]:
        """Run the search's runs one at a time; returns (suite, commit index) of each, in order."""
        ran: list[tuple[str, int]] = []
        group_search(group_id=group.pk)
        pending = Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.BISECTION)
        while (run := pending.order_by("pk").first()) is not None and len(ran) < limit:
            name = run.suite.name
            index = self.commits.index(run.commit)
            ran.append((name, index))
            Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
            Measurement.objects.create(
                run=run, series=self.series[name], commit=run.commit, value=self.value(name, index)
            )
            for suite in self.suites.values():
                groups_search(suite_id=suite.pk, hardware_class=suite.hardware_class)
        return ran

    def range_of(self, group: AlertGroup) -> tuple[int, int]:
        group.refresh_from_db()
        return self.commits.index(group.base_commit), self.commits.index(group.head_commit)


def _step(at: int, factor: float) -> Level:
    return lambda index: LEVEL * (factor if index >= at else 1.0)


def test_a_docs_only_commit_beside_the_likeliest_culprit_is_run_before_it_is_ruled_out() -> None:
    # A CI image bump at 33 (CI files only) is the culprit; commit 34 is ordinary code.
    world = Suites({"kimi": _step(33, 0.94)}, seed=11)
    Commit.objects.filter(pk=world.commits[33].pk).update(change_class=ChangeClass.DOCS_TESTS_CI)
    group = world.confirmed()

    ran = world.search(group)

    assert ("kimi", 33) in ran  # the prior alone (0.05 against 1) would have named 34
    assert world.range_of(group) == (32, 33)
    assert group.evidence["search"]["culprit"] == world.commits[33].sha


def test_two_suites_that_changed_at_different_commits_end_in_two_groups() -> None:
    world = Suites({"kimi": _step(32, 0.94), "llama": _step(35, 0.94)}, seed=12)
    group = world.confirmed()
    tested = {"base": world.commits[BASE].sha, "head": world.commits[HEAD].sha}
    AlertGroup.objects.filter(pk=group.pk).update(evidence={"rounds": 1, "alerts": [], TESTED: tested})

    ran = world.search(group)

    assert len(ran) <= 24
    groups = {world.range_of(item): item for item in AlertGroup.objects.all()}
    assert set(groups) == {(31, 32), (34, 35)}
    suites = {
        span: set(item.alerts.values_list("series__suite__name", flat=True)) for span, item in groups.items()
    }
    assert suites == {(31, 32): {"kimi"}, (34, 35): {"llama"}}
    split = next(item for item in groups.values() if item.pk != group.pk)
    assert split.state == GroupState.CONFIRMED
    assert split.evidence["split_from"] == group.pk
    # The verdicts it takes along say which range their repeats were of: not the split's own.
    assert split.evidence[TESTED] == tested
    # Where it was judged stays on record: the range it came from.
    event = split.events.filter(field="range").order_by("pk").first()
    assert event is not None
    assert event.old_value == f"{world.commits[BASE].short_sha}..{world.commits[HEAD].short_sha}"


def test_one_change_that_moved_two_suites_stays_one_group() -> None:
    world = Suites({"kimi": _step(33, 0.94), "llama": _step(33, 0.95)}, seed=13)
    group = world.confirmed()

    world.search(group)

    assert world.range_of(group) == (32, 33)
    assert AlertGroup.objects.count() == 1
    assert set(group.alerts.values_list("series__suite__name", flat=True)) == {"kimi", "llama"}


def test_a_group_whose_culprit_another_confirmed_group_holds_joins_it() -> None:
    world = Suites({"kimi": _step(34, 0.94), "llama": _step(34, 0.94)}, seed=14)
    group = world.confirmed()
    # llama's change was already found at 34 by a group of its own.
    holder = AlertGroup.objects.create(
        base_commit=world.commits[33],
        head_commit=world.commits[34],
        kind=GroupKind.REGRESSION,
        state=GroupState.CONFIRMED,
    )
    Alert.objects.filter(group=group, series=world.series["llama"]).update(group=holder)

    world.search(group)

    group.refresh_from_db()
    assert group.status == TriageStatus.MERGED
    assert group.evidence["merged_into"] == holder.pk
    assert not group.alerts.exists()
    assert set(holder.alerts.values_list("series__suite__name", flat=True)) == {"kimi", "llama"}
    assert holder.events.filter(field="search", new_value__contains=f"group #{group.pk}").exists()


def test_a_suite_without_runs_at_the_culprits_parent_is_run_there_before_it_is_named_with_it() -> None:
    # kimi's routine runs already cover the range and put its change at 34; llama changed at 33, a CI image
    # bump (docs-only prior), where it has no run: named with kimi's culprit on the prior alone, it would
    # be credited to the wrong commit.
    world = Suites({"kimi": _step(34, 0.94), "llama": _step(33, 0.94)}, seed=15)
    Commit.objects.filter(pk=world.commits[33].pk).update(change_class=ChangeClass.DOCS_TESTS_CI)
    for index in range(BASE + 1, HEAD):
        for _ in range(3):
            run_with_values(
                commit=world.commits[index],
                suite=world.suites["kimi"],
                values={(16, THROUGHPUT): world.value("kimi", index)},
            )
    group = world.confirmed()

    ran = world.search(group)

    assert ("llama", 33) in ran
    groups = {world.range_of(item): item for item in AlertGroup.objects.exclude(status=TriageStatus.MERGED)}
    suites = {
        span: set(item.alerts.values_list("series__suite__name", flat=True)) for span, item in groups.items()
    }
    assert suites == {(33, 34): {"kimi"}, (32, 33): {"llama"}}
