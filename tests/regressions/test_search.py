"""The culprit search of confirmed groups against a world with fresh noise in every run: it ends at the exact
culprit when that commit's only run was an outlier, when every commit of the range already has a run,
and for an improvement; a culprit that explains only part of its group leaves a second group; and
verification judges fresh repeats only, never the runs that raised the alarm."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import cast

import numpy as np
import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit, Measurement, Run, RunKind, RunStatus, Series
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState
from dashboard.regressions.sheriff import search as search_module
from dashboard.regressions.sheriff.posterior import Choice, two_changes
from dashboard.regressions.sheriff.search import group_search
from dashboard.regressions.sheriff.settle import groups_search, run_settle
from dashboard.regressions.sheriff.verdicts import group_judge, group_verify
from tests.conftest import DispatchLog
from tests.factories import CommitFactory, run_with_values
from tests.regressions.conftest import suite_create
from tests.regressions.test_alerts import THROUGHPUT

pytestmark = pytest.mark.django_db

LEVEL = 725.0
NOISE = 0.01  # relative run-to-run noise of every run
BASE, HEAD = 29, 37  # the confirmed range (29, 37]: eight candidate culprits


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    """The runs whose message would go out to a GPU node (there is none here)."""
    return dispatched.runs


class World:
    """Commits 0..66 of one suite whose throughput at commit i is `level(i)` times fresh noise per run."""

    def __init__(
        self, *, level: Callable[[int], float], benchmarked: Callable[[int], bool], seed: int
    ) -> None:
        self.level = level
        self.rng = random.Random(seed)
        self.suite = suite_create()
        self.commits = [cast(Commit, CommitFactory()) for _ in range(67)]
        self.overrides: dict[int, list[float]] = {}  # commit -> the values of its next runs, in turn
        for index, commit in enumerate(self.commits):
            # The ends of the range also hold the repeats that verified the change.
            for _ in range(3 if index in (BASE, HEAD) else 1 if benchmarked(index) else 0):
                run_with_values(commit=commit, suite=self.suite, values={(16, THROUGHPUT): self.value(index)})
        self.series = Series.objects.get(suite=self.suite, metric=THROUGHPUT)

    def value(self, index: int) -> float:
        if self.overrides.get(index):
            return self.overrides[index].pop(0)
        return self.level(index) * (1 + self.rng.gauss(0, NOISE))

    def confirmed(self, *, base: int = BASE, head: int = HEAD) -> AlertGroup:
        """The group detection and verification would leave for (base, head]."""
        before, after = self.level(base), self.level(head)
        change = (after - before) / before * 100
        kind = GroupKind.REGRESSION if change < 0 else GroupKind.IMPROVEMENT
        group = AlertGroup.objects.create(
            base_commit=self.commits[base],
            head_commit=self.commits[head],
            kind=kind,
            state=GroupState.CONFIRMED,
        )
        Alert.objects.create(
            group=group,
            series=self.series,
            kind=kind,
            before_value=before,
            after_value=after,
            change_pct=change,
            p_value=1e-9,
        )
        return group

    def suspected(self, *, base: int, head: int, change_pct: float) -> AlertGroup:
        """A suspected regression group for (base, head] with one alert of `change_pct` on the series."""
        group = AlertGroup.objects.create(
            base_commit=self.commits[base], head_commit=self.commits[head], kind=GroupKind.REGRESSION
        )
        Alert.objects.create(
            group=group,
            series=self.series,
            kind="regression",
            before_value=LEVEL,
            after_value=LEVEL * (1 + change_pct / 100),
            change_pct=change_pct,
            p_value=1e-9,
        )
        return group

    def search(self, group: AlertGroup, *, limit: int = 40) -> list[int]:
        """Run the search's runs one at a time, as one node would; returns the commits it ran, in order."""
        ran: list[int] = []
        group_search(group_id=group.pk)
        pending = Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.BISECTION)
        while (run := pending.order_by("pk").first()) is not None and len(ran) < limit:
            index = self.commits.index(run.commit)
            ran.append(index)
            Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
            Measurement.objects.create(
                run=run, series=self.series, commit=run.commit, value=self.value(index)
            )
            groups_search(suite_id=self.suite.pk, hardware_class=self.suite.hardware_class)
        return ran

    def range_of(self, group: AlertGroup) -> tuple[int, int]:
        group.refresh_from_db()
        return self.commits.index(group.base_commit), self.commits.index(group.head_commit)


def _step(at: int, *, factor: float) -> Callable[[int], float]:
    return lambda index: LEVEL * (factor if index >= at else 1.0)


def test_a_culprit_whose_only_run_was_an_outlier_ends_at_that_commit() -> None:
    world = World(level=_step(35, factor=0.94), benchmarked=lambda i: True, seed=1)
    # The culprit's one stored run was a slow run, far below both levels; later runs of it are normal.
    Measurement.objects.filter(series=world.series, commit=world.commits[35]).update(value=LEVEL * 0.6)
    group = world.confirmed()

    ran = world.search(group)

    assert world.range_of(group) == (34, 35)
    assert ran[0] == 35  # the commit whose only run told nothing is run again first
    assert group.evidence["search"]["culprit"] == world.commits[35].sha


def test_a_range_whose_every_commit_has_a_run_narrows_to_its_culprit() -> None:
    # A step of three times the noise: one run per commit cannot tell, repeats where it matters can.
    world = World(level=_step(33, factor=0.97), benchmarked=lambda i: True, seed=2)
    group = world.confirmed()

    ran = world.search(group)

    assert world.range_of(group) == (32, 33)
    assert ran and set(ran) <= set(range(BASE + 1, HEAD))
    assert len(ran) <= 16


def test_an_improvement_is_searched_to_its_culprit() -> None:
    world = World(level=_step(32, factor=1.06), benchmarked=lambda i: not BASE < i < HEAD, seed=3)
    group = world.confirmed()
    assert group.kind == GroupKind.IMPROVEMENT

    ran = world.search(group)

    assert world.range_of(group) == (31, 32)
    assert 2 <= len(ran) <= 8


def test_a_culprit_that_explains_part_of_the_change_leaves_a_second_group() -> None:
    # -6 % at commit 35 and another -4 % at 32, both inside the confirmed range.
    def level(index: int) -> float:
        return LEVEL * (0.96 if index >= 32 else 1.0) * (0.94 if index >= 35 else 1.0)

    world = World(level=level, benchmarked=lambda i: not BASE < i < HEAD, seed=4)
    group = world.confirmed()

    world.search(group)

    assert world.range_of(group) == (34, 35)
    second = AlertGroup.objects.exclude(pk=group.pk).get()
    base, head = world.range_of(second)
    assert base < 32 <= head < 35
    assert second.state == GroupState.SUSPECTED
    assert list(second.alerts.values_list("series_id", flat=True)) == [world.series.pk]
    assert second.kind == GroupKind.REGRESSION
    # It is verified like any suspected group: fresh repeats of its own ends.
    verification = Run.objects.filter(kind=RunKind.VERIFICATION)
    assert set(verification.values_list("commit_id", flat=True)) == {
        second.base_commit_id,
        second.head_commit_id,
    }
    assert group.events.filter(field="search", new_value__contains=f"group #{second.pk}").exists()


def test_a_culprit_that_explains_its_whole_change_leaves_no_second_group() -> None:
    world = World(level=_step(35, factor=0.94), benchmarked=lambda i: not BASE < i < HEAD, seed=5)
    group = world.confirmed()

    world.search(group)

    assert world.range_of(group) == (34, 35)
    assert AlertGroup.objects.count() == 1


@pytest.mark.parametrize("seed", [5, 8])
def test_a_wide_range_with_a_small_step_is_searched_to_its_culprit_within_the_default_cap(seed) -> None:
    # 57 commits, each run once, and a step of two and a half times the noise near the head: halving the
    # range takes several runs a time here. These two histories stop short of any commit after 16 runs
    # and name the culprit (at 95 %) with 32.
    world = World(level=_step(52, factor=0.975), benchmarked=lambda i: True, seed=seed)
    group = world.confirmed(base=3, head=60)

    world.search(group, limit=80)

    assert world.range_of(group) == (51, 52)
    assert group.evidence["search"]["culprit"] == world.commits[52].sha


def test_the_search_stops_at_its_run_cap(settings) -> None:
    settings.PERFWATCH_SEARCH_MAX_RUNS = 2
    world = World(level=_step(33, factor=0.985), benchmarked=lambda i: not BASE < i < HEAD, seed=6)
    group = world.confirmed()

    ran = world.search(group)

    assert len(ran) == 2
    group.refresh_from_db()
    assert group.evidence["search"]["stopped"] == "cap"
    assert group.events.filter(field="search", new_value__startswith="stopped after 2 runs").exists()
    assert world.range_of(group) == (BASE, HEAD)


def test_a_search_stopped_at_its_cap_names_its_culprit_once_runs_land_in_its_range(settings) -> None:
    settings.PERFWATCH_SEARCH_MAX_RUNS = 2
    world = World(level=_step(33, factor=0.97), benchmarked=lambda i: not BASE < i < HEAD, seed=6)
    group = world.confirmed()
    world.search(group)
    group.refresh_from_db()
    assert group.evidence["search"]["stopped"] == "cap" and world.range_of(group) == (BASE, HEAD)

    # Idle nodes backfill the range's commits, twice each: the search's own runs were spent.
    backfill = [
        run_with_values(
            commit=world.commits[index], suite=world.suite, values={(16, THROUGHPUT): world.value(index)}
        )
        for index in range(BASE + 1, HEAD)
        for _ in range(2)
    ]
    Run.objects.filter(pk__in=[run.pk for run in backfill]).update(kind=RunKind.BACKFILL)
    run_settle(run_id=backfill[-1].pk)

    assert world.range_of(group) == (32, 33)
    assert group.evidence["search"]["culprit"] == world.commits[33].sha
    assert group.evidence["search"]["stopped"] == "found_at_cap"
    assert not Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.BISECTION).exists()


def test_a_search_stopped_at_its_cap_queues_nothing_more_unless_the_cap_is_raised(settings) -> None:
    settings.PERFWATCH_SEARCH_MAX_RUNS = 2
    world = World(level=_step(33, factor=0.985), benchmarked=lambda i: not BASE < i < HEAD, seed=6)
    group = world.confirmed()
    world.search(group)
    events = group.events.filter(field="search").count()

    # One run inside the range that leaves it unsure: looked at again, nothing queued, nothing said.
    inside = run_with_values(
        commit=world.commits[35], suite=world.suite, values={(16, THROUGHPUT): world.value(35)}
    )
    run_settle(run_id=inside.pk)
    group.refresh_from_db()
    assert group.evidence["search"]["stopped"] == "cap" and world.range_of(group) == (BASE, HEAD)
    assert not Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.BISECTION).exists()
    assert group.events.filter(field="search").count() == events
    page = Client().get(f"/alerts/{group.pk}/").content.decode()
    assert "stopped at its cap of 2 runs" in page and "a run that lands in its range still counts" in page

    # A higher cap: the next run there goes on with the search.
    settings.PERFWATCH_SEARCH_MAX_RUNS = 16
    again = run_with_values(
        commit=world.commits[31], suite=world.suite, values={(16, THROUGHPUT): world.value(31)}
    )
    run_settle(run_id=again.pk)
    group.refresh_from_db()
    assert "stopped" not in group.evidence["search"]
    assert Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.BISECTION).count() == 1


def test_regressions_are_searched_before_improvements() -> None:
    def level(index: int) -> float:
        return LEVEL * (1.06 if index >= 12 else 1.0) * (0.94 if index >= 35 else 1.0)

    world = World(level=level, benchmarked=lambda i: not (BASE < i < HEAD or 7 < i < 15), seed=7)
    improvement = world.confirmed(base=7, head=15)
    regression = world.confirmed()

    group_search(group_id=improvement.pk)
    group_search(group_id=regression.pk)
    # The improvement's next run waits while the regression's run waits for the node.
    groups_search(suite_id=world.suite.pk, hardware_class=world.suite.hardware_class)

    queued = list(Run.objects.filter(status=RunStatus.QUEUED).order_by("pk"))
    assert [world.commits.index(run.commit) for run in queued] == [11, 33]
    Run.objects.filter(pk=queued[0].pk).delete()  # say the improvement's first run had not been queued
    groups_search(suite_id=world.suite.pk, hardware_class=world.suite.hardware_class)
    assert [world.commits.index(run.commit) for run in Run.objects.filter(status=RunStatus.QUEUED)] == [33]


def test_verification_ignores_the_runs_that_raised_the_alarm(settings) -> None:
    # The stored history shows a drop at commit 20 (the alarm); run again, both ends measure the same.
    world = World(
        level=lambda index: LEVEL * (0.9 if index == 20 else 1.0), benchmarked=lambda i: i <= 20, seed=8
    )
    group = world.suspected(base=19, head=20, change_pct=-10.0)
    settings.PERFWATCH_VERIFICATION_REPEATS = 3

    group_verify(group_id=group.pk)
    while (run := Run.objects.filter(status=RunStatus.QUEUED).order_by("pk").first()) is not None:
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
        Measurement.objects.create(
            run=run, series=world.series, commit=run.commit, value=LEVEL * (1 + world.rng.gauss(0, NOISE))
        )
        group_judge(group_id=group.pk)

    group.refresh_from_db()
    assert group.state == GroupState.DISMISSED
    verdict = group.evidence["alerts"][0]
    # Only the repeats were judged: the alarm's own run (at -10 %) is not among the head's values.
    assert len(verdict["head_values"]) == len(verdict["base_values"]) >= 3
    assert min(verdict["head_values"]) > LEVEL * 0.95


def _repeats(world: World, index: int, count: int) -> None:
    """`count` more runs of commit `index`, as its verification repeats leave it."""
    for _ in range(count):
        run_with_values(
            commit=world.commits[index], suite=world.suite, values={(16, THROUGHPUT): world.value(index)}
        )


def test_a_change_over_two_commits_named_at_its_second_opens_a_group_at_its_first() -> None:
    # -3.5 % at commit 33 and as much again at 34: detection named 34, whose parent had already moved.
    def level(index: int) -> float:
        return LEVEL * (0.965 if index >= 33 else 1.0) * (0.965 if index >= 34 else 1.0)

    world = World(level=level, benchmarked=lambda i: True, seed=9)
    _repeats(world, 33, 2)
    _repeats(world, 34, 2)
    group = world.confirmed(base=33, head=34)

    step = group_search(group_id=group.pk)

    onset = AlertGroup.objects.exclude(pk=group.pk).get()
    assert step.opened == [onset.pk]
    assert world.range_of(onset) == (32, 33)
    assert onset.state == GroupState.SUSPECTED
    assert onset.alerts.get().change_pct < 0
    assert "began" in onset.range_reason
    # Checked once: the group's next step opens nothing more.
    assert group_search(group_id=group.pk).opened == []


def test_a_change_at_one_commit_opens_no_group_before_it() -> None:
    world = World(level=_step(34, factor=0.93), benchmarked=lambda i: True, seed=10)
    _repeats(world, 33, 2)
    _repeats(world, 34, 2)
    group = world.confirmed(base=33, head=34)

    assert group_search(group_id=group.pk).opened == []
    assert AlertGroup.objects.count() == 1


def test_a_verdict_waits_for_its_own_repeats_only(settings) -> None:
    # A real drop at 20; once the repeats are in, a backfill run queued at the head (an outlier's
    # recheck, taken in idle node time) does not hold the verdict back.
    world = World(level=_step(20, factor=0.9), benchmarked=lambda i: i <= 20, seed=11)
    group = world.suspected(base=19, head=20, change_pct=-10.0)
    settings.PERFWATCH_VERIFICATION_REPEATS = 2
    group_verify(group_id=group.pk)
    for run in Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION).order_by("pk"):
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
        Measurement.objects.create(
            run=run,
            series=world.series,
            commit=run.commit,
            value=world.value(world.commits.index(run.commit)),
        )
    Run.objects.create(
        commit=world.commits[20],
        suite=world.suite,
        hardware_class=world.suite.hardware_class,
        kind=RunKind.BACKFILL,
        status=RunStatus.QUEUED,
    )

    assert group_judge(group_id=group.pk) == GroupState.CONFIRMED


def test_a_range_of_two_changes_whose_cap_is_spent_names_the_larger_and_opens_the_smaller(settings) -> None:
    # -4 % at 32 and -4.5 % at 35, three runs at every commit of the range: the runs between them sit
    # halfway, so the one-change posterior splits between the two commits and names neither, and the cap
    # leaves no run to tell them apart.
    settings.PERFWATCH_SEARCH_MAX_RUNS = 0

    def level(index: int) -> float:
        return LEVEL * (0.96 if index >= 32 else 1.0) * (0.955 if index >= 35 else 1.0)

    world = World(level=level, benchmarked=lambda i: True, seed=7)
    for index in range(BASE + 1, HEAD):
        _repeats(world, index, 2)
    group = world.confirmed()

    group_search(group_id=group.pk)

    group.refresh_from_db()
    assert group.evidence["search"]["stopped"] == "found_at_cap_of_two"
    assert world.range_of(group) == (34, 35)
    assert (
        "as the larger of two changes in the range" in Client().get(f"/alerts/{group.pk}/").content.decode()
    )
    second = AlertGroup.objects.exclude(pk=group.pk).get()
    base, head = world.range_of(second)
    assert base < 32 <= head < 35
    assert second.kind == GroupKind.REGRESSION


def test_a_range_of_two_changes_is_searched_at_their_boundaries_until_the_larger_is_named(settings) -> None:
    # -4.5 % at 32 and -5 % at 34, one run at every commit of the range: the runs at 32 and 33 sit about
    # halfway. The one-change search keeps running 33 (where its posterior splits), whose runs cannot
    # tell its candidates apart, and would spend its cap there; once half of it is spent, the range is
    # read as two changes, the runs go to the commits beside each change, and the search names the
    # larger before its cap.
    def level(index: int) -> float:
        return LEVEL * (0.955 if index >= 32 else 1.0) * (0.95 if index >= 34 else 1.0)

    world = World(level=level, benchmarked=lambda i: True, seed=9)
    group = world.confirmed()

    ran = world.search(group)

    group.refresh_from_db()
    assert group.evidence["search"]["stopped"] == "found_of_two"
    assert world.range_of(group) == (33, 34)
    page = Client().get(f"/alerts/{group.pk}/").content.decode()
    assert "found as the larger of two changes in the range: the pair of commits holds at least 99 %" in page
    assert {31, 32, 33, 34} <= set(ran)
    assert len(ran) < settings.PERFWATCH_SEARCH_MAX_RUNS
    second = AlertGroup.objects.exclude(pk=group.pk).get()
    base, head = world.range_of(second)
    assert base < 32 <= head < 34


def test_a_two_change_reading_that_expects_nothing_more_anywhere_still_queues_a_run(monkeypatch) -> None:
    # A two-change reading sure of every commit's level tells nothing by another run anywhere, while its
    # pair may still wait for a second run at a boundary: the next run then comes from the one-change
    # posterior, or the search would queue nothing and never end.
    world = World(level=_step(33, factor=0.985), benchmarked=lambda i: True, seed=13)
    group = world.confirmed()
    group.evidence = {"search": {"runs_queued": 8}}  # half the cap spent: the two-change guide leads
    group.save(update_fields=["evidence"])
    sure = two_changes(prior=np.full(8, 1 / 8), observations=[], length=8)
    monkeypatch.setattr(search_module, "_two_changes_read", lambda **_: sure)
    monkeypatch.setattr(search_module, "_two_changes_culprit", lambda **_: None)
    monkeypatch.setattr(search_module, "two_changes_next", lambda **_: Choice(index=4, gain=0.0))

    step = group_search(group_id=group.pk)

    assert len(step.queued) == 1
    assert BASE < world.commits.index(step.queued[0].commit) < HEAD


def test_a_change_over_two_commits_inside_a_range_is_named_where_it_began() -> None:
    # -4 % at commit 33 and as much again at 34, inside the confirmed range (29, 37]: one step read from
    # these runs puts 33, half-way, at the old level and names 34.
    def level(index: int) -> float:
        return LEVEL * (0.96 if index >= 33 else 1.0) * (0.96 if index >= 34 else 1.0)

    world = World(level=level, benchmarked=lambda i: True, seed=12)
    group = world.confirmed()

    world.search(group)

    assert world.range_of(group) == (32, 33)
    began = group.evidence["search"]["began"]
    assert began["named"] == world.commits[34].sha
    assert 0.25 <= began["parent_share"] <= 0.75
    assert group.events.filter(field="search", new_value__contains="the change began before").exists()
    # The rest, from 33 on, is a change of its own, verified on fresh runs like any other.
    rest = AlertGroup.objects.exclude(pk=group.pk).get()
    assert rest.state == GroupState.SUSPECTED
    assert world.range_of(rest)[0] == 33
    assert rest.alerts.get().change_pct < 0
