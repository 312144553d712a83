"""A change over two commits whose parts are each below the metric's minimum: detection raises two groups
side by side, verification dismisses each on its own repeats, and the two are tested as one change."""

from __future__ import annotations

import pytest

from dashboard.benchmarks.models import Measurement, Run, RunKind, RunStatus
from dashboard.regressions.models import AlertGroup, GroupKind, GroupState
from dashboard.regressions.sheriff.gradual import NEAR
from dashboard.regressions.sheriff.verdicts import MAX_ROUNDS, group_judge, group_verify
from tests.conftest import DispatchLog
from tests.regressions.test_search import LEVEL, World

pytestmark = pytest.mark.django_db

# Each part: below the throughput's 2 % minimum change; both together: past it.
PART = 0.9875


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    return dispatched.runs


@pytest.fixture(autouse=True)
def repeats(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 6


def _gradual(first: int) -> World:
    """Throughput down by PART at `first` and again at the commit after it."""
    return World(
        level=lambda index: LEVEL * PART ** ((index >= first) + (index >= first + 1)),
        benchmarked=lambda index: True,
        seed=53,
    )


def _judged(world: World, group: AlertGroup) -> str:
    """Verify `group` round after round, every queued verification run done, until it is decided."""
    while True:
        group_verify(group_id=group.pk)
        for run in Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION).order_by("pk"):
            index = world.commits.index(run.commit)
            Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
            Measurement.objects.create(
                run=run, series=world.series, commit=run.commit, value=world.value(index)
            )
        state = group_judge(group_id=group.pk)
        if state != GroupState.SUSPECTED:
            return state


def _part(world: World, *, base: int, head: int, follows: AlertGroup | None = None) -> AlertGroup:
    group = world.suspected(base=base, head=head, change_pct=(PART - 1) * 100)
    # Its last look: a part alone is dismissed without the rounds a close call would get first.
    AlertGroup.objects.filter(pk=group.pk).update(evidence={"rounds": MAX_ROUNDS}, follows=follows)
    # Detection's segment means either side, as it would store them.
    group.alerts.update(before_value=world.level(base), after_value=world.level(head))
    group.refresh_from_db()
    return group


# In autocommit, as the verdict task runs it: the union's alerts are stored under the group's row lock,
# which needs a transaction of its own there.
@pytest.mark.django_db(transaction=True)
def test_two_dismissed_parts_of_one_change_are_tested_as_one_and_hold() -> None:
    world = _gradual(31)
    first = _part(world, base=30, head=31)
    assert _judged(world, first) == GroupState.DISMISSED
    second = _part(world, base=31, head=32, follows=first)

    assert _judged(world, second) == GroupState.DISMISSED

    union = AlertGroup.objects.get(base_commit=world.commits[30], head_commit=world.commits[32])
    assert union.follows_id == second.pk
    assert union.kind == GroupKind.REGRESSION
    (alert,) = union.alerts.all()
    assert alert.change_pct == pytest.approx((PART**2 - 1) * 100)
    assert second.events.filter(new_value__contains=f"group #{union.pk}").exists()
    assert _judged(world, union) == GroupState.CONFIRMED


def test_dismissed_groups_further_apart_stay_apart() -> None:
    world = _gradual(31)
    first = _part(world, base=30, head=31)
    assert _judged(world, first) == GroupState.DISMISSED
    later = 31 + NEAR + 1
    second = _part(world, base=later, head=later + 1, follows=first)

    assert _judged(world, second) == GroupState.DISMISSED

    assert AlertGroup.objects.count() == 2


def test_a_dismissed_group_next_to_one_of_another_kind_stays_apart() -> None:
    world = _gradual(31)
    first = _part(world, base=30, head=31)
    assert _judged(world, first) == GroupState.DISMISSED
    AlertGroup.objects.filter(pk=first.pk).update(kind=GroupKind.IMPROVEMENT)
    second = _part(world, base=31, head=32, follows=first)

    assert _judged(world, second) == GroupState.DISMISSED

    assert AlertGroup.objects.count() == 2
