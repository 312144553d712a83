"""A suspected change that falls short is looked at again on more repeats, up to three rounds; each look is
one more chance for noise to pass, so the group's error rate is shared among its rounds as among its
tests. A change that passes only the whole rate on its last round is dismissed."""

from __future__ import annotations

import pytest

from dashboard.benchmarks.models import Measurement, Run, RunKind, RunStatus
from dashboard.regressions.models import AlertGroup, GroupState
from dashboard.regressions.sheriff.verdicts import CONFIRM_ALPHA, MAX_ROUNDS, group_judge, group_verify
from tests.conftest import DispatchLog
from tests.regressions.test_search import LEVEL, World

pytestmark = pytest.mark.django_db

SPREAD = 0.018
BASE_RUNS = [LEVEL * (1.0 + offset) for offset in (0.0, SPREAD, -SPREAD, SPREAD / 2, -SPREAD / 2, 0.0)]


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    return dispatched.runs


def _judged_on_last_round(*, head_factor: float) -> tuple[str, dict]:
    """A one-alert group in its last round: six repeats at each end, the head's `head_factor` times the
    base's, run to run."""
    world = World(level=lambda index: LEVEL, benchmarked=lambda i: i <= 20, seed=41)
    group = world.suspected(base=19, head=20, change_pct=-3.0)
    AlertGroup.objects.filter(pk=group.pk).update(evidence={"rounds": MAX_ROUNDS})
    world.overrides[19] = list(BASE_RUNS)
    world.overrides[20] = [value * head_factor for value in BASE_RUNS]
    group_verify(group_id=group.pk)
    for run in Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION).order_by("pk"):
        index = world.commits.index(run.commit)
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
        Measurement.objects.create(run=run, series=world.series, commit=run.commit, value=world.value(index))
    state = group_judge(group_id=group.pk)
    group.refresh_from_db()
    return state, group.evidence


def test_a_change_that_passes_only_the_whole_error_rate_on_the_last_round_is_dismissed(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 2

    state, evidence = _judged_on_last_round(head_factor=0.978)

    (verdict,) = evidence["alerts"]
    assert len(verdict["head_values"]) == 6 and verdict["change_pct"] <= -2.0
    # One alert, one test: the whole rate would have confirmed it, a third of it does not.
    assert CONFIRM_ALPHA / MAX_ROUNDS < verdict["p_value"] < CONFIRM_ALPHA
    assert state == GroupState.DISMISSED


def test_a_clear_change_on_the_last_round_is_confirmed(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 2

    state, evidence = _judged_on_last_round(head_factor=0.97)

    (verdict,) = evidence["alerts"]
    assert verdict["p_value"] < CONFIRM_ALPHA / MAX_ROUNDS
    assert state == GroupState.CONFIRMED
