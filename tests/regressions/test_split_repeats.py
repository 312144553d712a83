"""Two repeats of one end that disagree beyond noise get a third before the verdict: a node's slow run among
two repeats looks like a change, and the third lets the verdict set it aside."""

from __future__ import annotations

import pytest

from dashboard.benchmarks.models import Measurement, Run, RunKind, RunStatus
from dashboard.regressions.models import GroupState
from dashboard.regressions.sheriff.verdicts import group_judge, group_verify
from tests.conftest import DispatchLog
from tests.regressions.test_search import LEVEL, World

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    return dispatched.runs


def _finish_queued(world: World) -> list[int]:
    """Finish the queued verification runs with the world's values; returns their commits' indexes."""
    done = []
    for run in Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION).order_by("pk"):
        index = world.commits.index(run.commit)
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
        Measurement.objects.create(run=run, series=world.series, commit=run.commit, value=world.value(index))
        done.append(index)
    return done


def test_a_slow_repeat_among_two_gets_a_third_and_confirms_nothing(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 2
    # No change at all; the head's second repeat ran on a node in its slow mode (8 % down).
    world = World(level=lambda index: LEVEL, benchmarked=lambda i: i <= 20, seed=31)
    group = world.suspected(base=19, head=20, change_pct=-6.0)
    world.overrides[20] = [LEVEL, LEVEL * 0.92]
    group_verify(group_id=group.pk)
    assert sorted(_finish_queued(world)) == [19, 19, 20, 20]

    assert group_judge(group_id=group.pk) == GroupState.SUSPECTED
    extra = Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION)
    assert list(extra.values_list("commit_id", flat=True)) == [world.commits[20].pk]
    assert _finish_queued(world) == [20]

    assert group_judge(group_id=group.pk) != GroupState.CONFIRMED
    group.refresh_from_db()
    (verdict,) = group.evidence["alerts"]
    assert len(verdict["head_values"]) == 3


def test_repeats_that_agree_are_judged_at_once(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 2
    world = World(
        level=lambda index: LEVEL * (0.94 if index >= 20 else 1.0), benchmarked=lambda i: i <= 20, seed=32
    )
    group = world.suspected(base=19, head=20, change_pct=-6.0)
    group_verify(group_id=group.pk)
    _finish_queued(world)

    assert group_judge(group_id=group.pk) == GroupState.CONFIRMED
    assert not Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION).exists()
