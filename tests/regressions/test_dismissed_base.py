"""Dismissed groups never swallow a real change. A suspected group whose range starts one benchmarked commit
late (its base already at the new level) is dismissed by verification, since both of its ends moved; the
change is then looked for before it: the base's runs against the commits before it open the range that holds
the change, verified like any other. A change a culprit leaves at the very range of a dismissed group
reopens that group, judged on fresh repeats only."""

from __future__ import annotations

import pytest

from dashboard.benchmarks.models import Measurement, Run, RunKind, RunStatus
from dashboard.regressions.models import AlertGroup, GroupState
from dashboard.regressions.sheriff.beside import dismissed_base_check
from dashboard.regressions.sheriff.verdicts import group_judge, group_verify
from tests.conftest import DispatchLog
from tests.regressions.test_search import BASE, HEAD, LEVEL, World, _repeats

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    """The runs whose message would go out to a GPU node (there is none here)."""
    return dispatched.runs


def _judged(world: World, *, base: int, head: int, change_pct: float) -> AlertGroup:
    """A suspected group for (base, head] verified to its verdict: every queued run measured as the world
    says, each suspected group judged after each run (as settle does)."""
    group = world.suspected(base=base, head=head, change_pct=change_pct)
    group_verify(group_id=group.pk)
    while (run := Run.objects.filter(status=RunStatus.QUEUED).order_by("pk").first()) is not None:
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
        value = world.value(world.commits.index(run.commit))
        Measurement.objects.create(run=run, series=world.series, commit=run.commit, value=value)
        for group_id in AlertGroup.objects.filter(state=GroupState.SUSPECTED).values_list("pk", flat=True):
            group_judge(group_id=group_id)
    group.refresh_from_db()
    return group


def test_a_group_dismissed_with_its_base_already_moved_opens_the_range_before_it(settings) -> None:
    # -8 % at commit 20; detection's range (20, 24] starts one commit late: 20 is already down.
    world = World(
        level=lambda index: LEVEL * (0.92 if index >= 20 else 1.0), benchmarked=lambda i: i <= 30, seed=21
    )
    settings.PERFWATCH_VERIFICATION_REPEATS = 3

    late = _judged(world, base=20, head=24, change_pct=-8.0)

    assert late.state == GroupState.DISMISSED
    before = AlertGroup.objects.exclude(pk=late.pk).get()
    assert world.range_of(before) == (19, 20)
    assert before.follows_id == late.pk
    assert before.alerts.get().change_pct < 0
    # Verified on fresh repeats of its own ends, and confirmed: the change is found, not lost.
    assert before.state == GroupState.CONFIRMED
    assert late.events.filter(field="search", new_value__contains=f"group #{before.pk}").exists()


def test_a_group_dismissed_with_its_base_where_the_commits_before_are_opens_nothing(settings) -> None:
    # Nothing changed: the alarm was noise, and the base sits where the commits before it do.
    world = World(level=lambda index: LEVEL, benchmarked=lambda i: i <= 30, seed=22)
    settings.PERFWATCH_VERIFICATION_REPEATS = 3

    group = _judged(world, base=20, head=24, change_pct=-8.0)

    assert group.state == GroupState.DISMISSED
    assert AlertGroup.objects.count() == 1


def test_a_group_opened_before_a_dismissed_one_looks_no_further_back() -> None:
    # -8 % at commit 19: the group before the dismissed (20, 24] is (19, 20], whose own base has moved too;
    # dismissed in turn, it does not walk the history back one commit at a time.
    world = World(
        level=lambda index: LEVEL * (0.92 if index >= 19 else 1.0), benchmarked=lambda i: i <= 30, seed=23
    )
    _repeats(world, 19, 3)
    late = world.suspected(base=20, head=24, change_pct=-8.0)
    before = world.suspected(base=19, head=20, change_pct=-8.0)
    AlertGroup.objects.filter(pk__in=[late.pk, before.pk]).update(state=GroupState.DISMISSED)
    AlertGroup.objects.filter(pk=before.pk).update(follows=late)

    assert dismissed_base_check(group_id=before.pk) is None
    # Without the group it follows, the same base would have opened (18, 19].
    AlertGroup.objects.filter(pk=before.pk).update(follows=None)
    opened = dismissed_base_check(group_id=before.pk)
    assert opened is not None
    assert world.range_of(AlertGroup.objects.get(pk=opened)) == (18, 19)


def test_a_change_left_at_the_range_of_a_dismissed_group_reopens_it_on_fresh_repeats(settings) -> None:
    # -4 % at 32 and -6 % at 35 in (29, 37]: the search names 35 and leaves (29, 34], where a group was
    # dismissed before on repeats of its own, which the remainder test read too.
    def level(index: int) -> float:
        return LEVEL * (0.96 if index >= 32 else 1.0) * (0.94 if index >= 35 else 1.0)

    world = World(level=level, benchmarked=lambda i: not BASE < i < HEAD, seed=4)
    dismissed = world.suspected(base=29, head=34, change_pct=-4.0)
    for index in (29, 34):
        _repeats(world, index, 1)
        old = Run.objects.filter(commit=world.commits[index]).latest("pk")
        Run.objects.filter(pk=old.pk).update(kind=RunKind.VERIFICATION, queued_at=dismissed.created_at)
    AlertGroup.objects.filter(pk=dismissed.pk).update(state=GroupState.DISMISSED)
    group = world.confirmed()
    settings.PERFWATCH_VERIFICATION_REPEATS = 2

    world.search(group)

    dismissed.refresh_from_db()
    assert world.range_of(group) == (34, 35)
    assert AlertGroup.objects.count() == 2
    assert dismissed.state == GroupState.SUSPECTED
    assert group.events.filter(field="search", new_value__contains=f"reopened group #{dismissed.pk}").exists()
    # Its old repeats do not count: two fresh ones are queued at each end.
    fresh = Run.objects.filter(kind=RunKind.VERIFICATION, status=RunStatus.QUEUED)
    assert sorted(world.commits.index(run.commit) for run in fresh) == [29, 29, 34, 34]
