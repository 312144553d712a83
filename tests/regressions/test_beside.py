"""The commits on either side of a found culprit (`sheriff.beside`): a second change right after it opens a
group of its own, a side whose commits are not run yet waits for them, a close call gets more runs before
it is decided, a search whose runs are spent still names a commit that holds 95 %, and a culprit found
where a dismissed group sits confirms that group."""

from __future__ import annotations

import pytest

from dashboard.benchmarks.models import Measurement, Run, RunKind, RunStatus
from dashboard.regressions.models import AlertGroup, GroupState, TriageStatus
from dashboard.regressions.sheriff.search import group_search
from dashboard.regressions.sheriff.settle import groups_verify_pending
from tests.conftest import DispatchLog
from tests.factories import run_with_values
from tests.regressions.test_alerts import THROUGHPUT
from tests.regressions.test_search import BASE, HEAD, LEVEL, World, _repeats, _step

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    return dispatched.runs


def _two_steps(index: int) -> float:
    """-7 % at commit 34, and another -6 % at 35."""
    return LEVEL * (0.93 if index >= 34 else 1.0) * (0.94 if index >= 35 else 1.0)


def _confirmed_at_34(world: World) -> AlertGroup:
    _repeats(world, 33, 2)
    _repeats(world, 34, 2)
    return world.confirmed(base=33, head=34)


def _others(group: AlertGroup) -> list[AlertGroup]:
    return list(AlertGroup.objects.exclude(pk=group.pk).order_by("pk"))


def _complete(world: World, kind: str) -> int:
    """Finish every queued run of `kind` with the world's values; returns how many."""
    done = 0
    for run in Run.objects.filter(status=RunStatus.QUEUED, kind=kind).order_by("pk"):
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
        index = world.commits.index(run.commit)
        Measurement.objects.create(run=run, series=world.series, commit=run.commit, value=world.value(index))
        done += 1
    return done


def test_a_second_change_just_after_a_culprit_opens_a_group_after_it() -> None:
    world = World(level=_two_steps, benchmarked=lambda i: True, seed=21)
    group = _confirmed_at_34(world)

    step = group_search(group_id=group.pk)

    after = AlertGroup.objects.get(pk__in=step.opened)
    base, head = world.range_of(after)
    assert base == 34 and 35 <= head <= 38
    assert after.state == GroupState.SUSPECTED
    assert after.alerts.get().change_pct < 0
    assert "after group" in after.range_reason
    group.refresh_from_db()
    assert group.evidence["search"]["beside"]["after"]["state"] == "checked"
    assert group.evidence["search"]["beside_waiting"] is False
    # Checked once: the group's next step opens nothing more.
    assert group_search(group_id=group.pk).opened == []


def test_a_culprit_without_a_second_change_opens_nothing_on_either_side() -> None:
    world = World(level=_step(34, factor=0.93), benchmarked=lambda i: True, seed=22)
    group = _confirmed_at_34(world)

    assert group_search(group_id=group.pk).opened == []
    assert _others(group) == []
    group.refresh_from_db()
    assert {side["state"] for side in group.evidence["search"]["beside"].values()} == {"checked"}


def test_the_side_after_a_culprit_waits_for_its_later_commits_to_be_run() -> None:
    world = World(level=_two_steps, benchmarked=lambda i: i <= 34, seed=23)
    later = Run.objects.filter(commit__in=world.commits[35:])
    Measurement.objects.filter(run__in=later).delete()
    later.delete()
    group = _confirmed_at_34(world)

    assert group_search(group_id=group.pk).opened == []
    group.refresh_from_db()
    assert group.evidence["search"]["beside"]["after"]["state"] == "waiting"
    assert group.evidence["search"]["beside_waiting"] is True

    # The routine runs the commits after it; the sweep then tests the side and opens the second change.
    for index in range(35, 39):
        run_with_values(
            commit=world.commits[index], suite=world.suite, values={(16, THROUGHPUT): world.value(index)}
        )
    groups_verify_pending()

    (after,) = _others(group)
    assert world.range_of(after)[0] == 34
    assert after.state == GroupState.SUSPECTED
    # It is verified like any suspected group: fresh repeats of both its ends were queued.
    verification = Run.objects.filter(kind=RunKind.VERIFICATION, status=RunStatus.QUEUED)
    assert set(verification.values_list("commit_id", flat=True)) == {
        after.base_commit_id,
        after.head_commit_id,
    }


def test_a_close_call_before_a_culprit_gets_more_runs_and_then_a_verdict() -> None:
    # The culprit's parent already dropped 3 % (three times the noise) on its one run: too little to tell
    # from one run, close enough to be worth two more.
    def level(index: int) -> float:
        return LEVEL * (0.97 if index >= 33 else 1.0) * (0.93 if index >= 34 else 1.0)

    world = World(level=level, benchmarked=lambda i: True, seed=24)
    world.overrides[33] = [LEVEL * 0.97]
    Measurement.objects.filter(series=world.series, commit=world.commits[33]).update(value=LEVEL * 0.97)
    _repeats(world, 34, 2)
    group = world.confirmed(base=33, head=34)

    step = group_search(group_id=group.pk)

    assert step.opened == []
    extra = Run.objects.filter(kind=RunKind.BISECTION, status=RunStatus.QUEUED)
    assert list(extra.values_list("commit_id", flat=True)) == [world.commits[33].pk] * 2
    group.refresh_from_db()
    assert group.evidence["search"]["beside"]["before"]["state"] == "waiting"

    assert _complete(world, RunKind.BISECTION) == 2
    groups_verify_pending()

    (before,) = _others(group)
    assert world.range_of(before) == (32, 33)
    assert "began" in before.range_reason
    group.refresh_from_db()
    assert group.evidence["search"]["beside"]["before"]["state"] == "checked"


def test_a_search_with_no_run_left_names_a_commit_that_holds_95_percent(settings) -> None:
    # Every commit of the range has a run and the step is six times the noise; the culprit has two more,
    # one of them back at the old level (a fast run, or a flaky one). The runs place the change at 33
    # beyond 95 %, though not past the stricter test that stops a search early (99 % without any one
    # run at the boundary).
    settings.PERFWATCH_SEARCH_MAX_RUNS = 0
    world = World(level=_step(33, factor=0.94), benchmarked=lambda i: True, seed=25)
    world.overrides[33] = [LEVEL * 0.94, LEVEL]
    _repeats(world, 33, 2)
    group = world.confirmed()

    group_search(group_id=group.pk)

    assert world.range_of(group) == (32, 33)
    group.refresh_from_db()
    assert group.evidence["search"]["stopped"] == "found_at_cap"
    assert group.evidence["search"]["culprit"] == world.commits[33].sha


def test_a_search_with_no_run_left_keeps_its_range_below_95_percent(settings) -> None:
    settings.PERFWATCH_SEARCH_MAX_RUNS = 0
    world = World(level=_step(33, factor=0.94), benchmarked=lambda i: True, seed=25)
    world.overrides[33] = [LEVEL]
    _repeats(world, 33, 1)
    group = world.confirmed()

    group_search(group_id=group.pk)

    assert world.range_of(group) == (29, 37)
    group.refresh_from_db()
    assert group.evidence["search"]["stopped"] == "cap"


def test_a_culprit_found_where_a_dismissed_group_sits_confirms_that_group() -> None:
    # Detection once raised (32, 33] on its own and its few repeats dismissed it; the search of the
    # wider confirmed range finds its culprit there. The range is one group's, now confirmed.
    world = World(level=_step(33, factor=0.94), benchmarked=lambda i: not BASE < i < HEAD, seed=27)
    dismissed = world.suspected(base=32, head=33, change_pct=-6.0)
    AlertGroup.objects.filter(pk=dismissed.pk).update(state=GroupState.DISMISSED)
    group = world.confirmed()

    world.search(group)

    dismissed.refresh_from_db()
    group.refresh_from_db()
    assert dismissed.state == GroupState.CONFIRMED
    assert dismissed.evidence["search"]["culprit"] == world.commits[33].sha
    assert group.status == TriageStatus.MERGED
    assert group.evidence["merged_into"] == dismissed.pk
    assert dismissed.events.filter(field="state", new_value__contains=f"group #{group.pk}").exists()


def test_a_second_change_three_commits_after_a_culprit_is_told_by_the_farthest_commits() -> None:
    # -7 % at 34, and a smaller -3 % at 37: pooled, the four commits after 34 sit half way, under the
    # 2 % minimum change; the two farthest show it.
    def level(index: int) -> float:
        return LEVEL * (0.93 if index >= 34 else 1.0) * (0.97 if index >= 37 else 1.0)

    world = World(level=level, benchmarked=lambda i: True, seed=28)
    group = _confirmed_at_34(world)

    step = group_search(group_id=group.pk)

    after = AlertGroup.objects.get(pk__in=step.opened)
    assert world.range_of(after) == (34, 38)


def test_a_search_next_to_another_change_takes_its_side_level_from_this_side_of_it() -> None:
    # +6 % at 32 (its own confirmed group), then -6 % at 35 inside the confirmed range (32, 37]: the
    # commits before 32 measure a third level and are not this range's old side.
    def level(index: int) -> float:
        return LEVEL * (1.06 if index >= 32 else 1.0) * (0.94 if index >= 35 else 1.0)

    world = World(level=level, benchmarked=lambda i: not 32 < i < HEAD, seed=29)
    _repeats(world, 32, 2)
    world.confirmed(base=31, head=32)
    group = world.confirmed(base=32, head=HEAD)

    world.search(group)

    assert world.range_of(group) == (34, 35)
