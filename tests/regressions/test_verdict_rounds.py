"""A suspected change that falls short is looked at again on more repeats: three rounds for any that is not
hopeless, two more for one that came close. Each look is one more chance for noise to pass, so the
group's error rate is shared among its rounds (ROUND_ALPHA_SHARES) as among its tests."""

from __future__ import annotations

import pytest

from dashboard.benchmarks.models import Measurement, Run, RunKind, RunStatus
from dashboard.regressions.models import AlertGroup, GroupState
from dashboard.regressions.sheriff.evidence import TESTED
from dashboard.regressions.sheriff.verdicts import (
    CONFIRM_ALPHA,
    MAX_ROUNDS,
    PLAIN_ROUNDS,
    PROMISING_P,
    ROUND_ALPHA_SHARES,
    group_judge,
    group_verify,
    round_alpha,
)
from tests.conftest import DispatchLog
from tests.regressions.test_search import LEVEL, World

pytestmark = pytest.mark.django_db

SPREAD = 0.018
# Run-to-run offsets of the repeats at each end, in turn.
OFFSETS = (
    0.0,
    SPREAD,
    -SPREAD,
    SPREAD / 2,
    -SPREAD / 2,
    0.0,
    SPREAD / 4,
    -SPREAD / 4,
    0.75 * SPREAD,
    -0.75 * SPREAD,
)


@pytest.fixture(autouse=True)
def dispatched(dispatched: DispatchLog) -> list[int]:
    return dispatched.runs


def _judged_on_round(*, rounds: int, head_factor: float, world: World | None = None) -> tuple[str, dict]:
    """A one-alert group judged on round `rounds`: two repeats an end per round so far, the head's
    `head_factor` times the base's, run to run."""
    world = world or World(level=lambda index: LEVEL, benchmarked=lambda i: i <= 20, seed=41)
    group = world.suspected(base=19, head=20, change_pct=-3.0)
    AlertGroup.objects.filter(pk=group.pk).update(evidence={"rounds": rounds})
    runs = [LEVEL * (1.0 + OFFSETS[index % len(OFFSETS)]) for index in range(2 * rounds)]
    world.overrides[19] = list(runs)
    world.overrides[20] = [value * head_factor for value in runs]
    group_verify(group_id=group.pk)
    for run in Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION).order_by("pk"):
        index = world.commits.index(run.commit)
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
        Measurement.objects.create(run=run, series=world.series, commit=run.commit, value=world.value(index))
    state = group_judge(group_id=group.pk)
    group.refresh_from_db()
    return state, group.evidence


def test_the_rounds_spend_at_most_the_groups_error_rate() -> None:
    assert len(ROUND_ALPHA_SHARES) == MAX_ROUNDS > PLAIN_ROUNDS
    assert sum(ROUND_ALPHA_SHARES) <= 1.0 + 1e-12
    assert round_alpha(rounds=MAX_ROUNDS, tests=4) == CONFIRM_ALPHA * ROUND_ALPHA_SHARES[-1] / 4


def test_a_change_that_came_close_on_the_last_plain_round_gets_another(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 2

    state, evidence = _judged_on_round(rounds=PLAIN_ROUNDS, head_factor=0.978)

    (verdict,) = evidence["alerts"]
    assert len(verdict["head_values"]) == 2 * PLAIN_ROUNDS
    assert round_alpha(rounds=PLAIN_ROUNDS, tests=1) < verdict["p_value"] < PROMISING_P
    assert state == GroupState.SUSPECTED and evidence["rounds"] == PLAIN_ROUNDS + 1


def test_a_change_far_from_passing_on_the_last_plain_round_is_dismissed(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 2

    state, evidence = _judged_on_round(rounds=PLAIN_ROUNDS, head_factor=0.986)

    (verdict,) = evidence["alerts"]
    assert PROMISING_P < verdict["p_value"] < 0.5
    assert state == GroupState.DISMISSED


def test_a_change_that_passes_only_the_whole_error_rate_on_the_last_round_is_dismissed(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 2

    state, evidence = _judged_on_round(rounds=MAX_ROUNDS, head_factor=0.98)

    (verdict,) = evidence["alerts"]
    assert len(verdict["head_values"]) == 2 * MAX_ROUNDS and verdict["change_pct"] <= -1.9
    # One alert, one test: the whole rate would have confirmed it, the last round's share does not.
    assert round_alpha(rounds=MAX_ROUNDS, tests=1) < verdict["p_value"] < CONFIRM_ALPHA
    assert state == GroupState.DISMISSED


def test_the_same_step_that_came_close_is_confirmed_on_the_last_round(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 2

    state, evidence = _judged_on_round(rounds=MAX_ROUNDS, head_factor=0.978)

    (verdict,) = evidence["alerts"]
    assert verdict["p_value"] < round_alpha(rounds=MAX_ROUNDS, tests=1)
    assert state == GroupState.CONFIRMED


def test_a_verdict_says_which_commits_its_repeats_were_of(settings) -> None:
    # A search narrows the group afterwards, and a split or merge hands its verdicts to another group:
    # each interval is the change across these two commits, whatever the group's range becomes.
    settings.PERFWATCH_VERIFICATION_REPEATS = 2
    world = World(level=lambda index: LEVEL, benchmarked=lambda i: i <= 20, seed=41)

    state, evidence = _judged_on_round(rounds=1, head_factor=0.9, world=world)

    assert state == GroupState.CONFIRMED
    assert evidence[TESTED] == {"base": world.commits[19].sha, "head": world.commits[20].sha}
