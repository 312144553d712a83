"""A suspected change is judged on its alerted series together as well as one by one: three TTFT series
that each moved 3.2 % fall short alone, and together they confirm the group; a slow repeat everywhere, or
a change below every series' minimum, confirms nothing."""

from __future__ import annotations

import math
import random
from typing import cast

import pytest
from django.utils import timezone

from dashboard.benchmarks.models import Commit, Measurement, Run, RunKind, RunStatus, Series
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState
from dashboard.regressions.sheriff.verdicts import MAX_ROUNDS, group_judge
from tests.factories import CommitFactory, RunFactory, run_with_values
from tests.regressions.conftest import suite_create

pytestmark = pytest.mark.django_db

TTFT = "ttft_ms_mean"
LEVELS = (1, 4, 16)
NOISE = 0.02  # each series' run-to-run noise, log scale
SHARED = 0.25  # the share of that noise all series of one run have in common
# The repeats' own offsets (log), the same on every series of a run, and a little apart per series.
OFFSETS = (0.004, -0.004, 0.002, -0.002)
APART = {1: 0.001, 4: -0.001, 16: 0.0}
BASE, HEAD = 39, 40
REPEATS = 6  # an end's repeats where the joint test is to hold: the group's 1 % is shared among its rounds


class Suite3:
    """One suite's TTFT at three levels over commits 0..40, one run each, noise shared within a run."""

    def __init__(self, *, seed: int) -> None:
        self.rng = random.Random(seed)
        self.suite = suite_create()
        self.commits = [cast(Commit, CommitFactory()) for _ in range(HEAD + 1)]
        for commit in self.commits:
            run_with_values(commit=commit, suite=self.suite, values=self.run_values(level=1.0))
        self.series = {
            series.concurrency: series for series in Series.objects.filter(suite=self.suite, metric=TTFT)
        }

    def run_values(self, *, level: float, slow: float = 0.0) -> dict[tuple[int, str], float]:
        shared = self.rng.gauss(0, 1)
        return {
            (concurrency, TTFT): 500.0
            * level
            * math.exp(
                slow + NOISE * (math.sqrt(SHARED) * shared + math.sqrt(1 - SHARED) * self.rng.gauss(0, 1))
            )
            for concurrency in LEVELS
        }

    def suspected(self, *, change_pct: float) -> AlertGroup:
        group = AlertGroup.objects.create(
            base_commit=self.commits[BASE], head_commit=self.commits[HEAD], kind=GroupKind.REGRESSION
        )
        for series in self.series.values():
            Alert.objects.create(
                group=group,
                series=series,
                kind="regression",
                before_value=500.0,
                after_value=500.0 * (1 + change_pct / 100),
                change_pct=change_pct,
                p_value=1e-9,
            )
        return group

    def repeat(self, *, index: int, values: dict[tuple[int, str], float]) -> None:
        run = cast(
            Run,
            RunFactory(
                commit=self.commits[index],
                suite=self.suite,
                hardware_class=self.suite.hardware_class,
                kind=RunKind.VERIFICATION,
                status=RunStatus.SUCCEEDED,
                queued_at=timezone.now(),
            ),
        )
        for (concurrency, _), value in values.items():
            Measurement.objects.create(
                run=run, series=self.series[concurrency], commit=self.commits[index], value=value
            )

    def repeats(self, *, head_level: float, slow_head: float = 0.0, count: int = 4) -> None:
        """`count` repeats at each end, the base at the old level and the head at `head_level`, with the
        same small offsets at both ends; the head's last one `slow_head` (log) slower everywhere."""
        for number in range(count):
            for index, level in ((BASE, 1.0), (HEAD, head_level)):
                offset = OFFSETS[number % len(OFFSETS)]
                slow = slow_head if index == HEAD and number == count - 1 else 0.0
                values = {
                    (concurrency, TTFT): 500.0 * level * math.exp(offset + slow + APART[concurrency])
                    for concurrency in LEVELS
                }
                self.repeat(index=index, values=values)


@pytest.fixture(autouse=True)
def repeats_setting(settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = 4


def _judged(world: Suite3, group: AlertGroup, *, head_level: float = 1.0) -> tuple[str, dict]:
    """Judge the group on this round's repeats; a repeat it asks for where two disagreed is run at the
    end's level (another round is not)."""
    for _ in range(3):
        state = group_judge(group_id=group.pk)
        extra = list(Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION))
        group.refresh_from_db()
        if not extra or group.evidence.get("alerts"):
            break
        for run in extra:
            index = world.commits.index(run.commit)
            Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
            world.repeat(index=index, values=world.run_values(level=head_level if index == HEAD else 1.0))
    group.refresh_from_db()
    return state, group.evidence


# Histories whose own noise leaves each series short alone (the first assertion says so).
@pytest.mark.parametrize("seed", [2, 3, 4, 7, 10])
def test_three_series_that_each_fall_short_confirm_the_group_together(seed: int, settings) -> None:
    # Six repeats an end: the group's error rate is shared among its three rounds, so one round of
    # four is short of it together too on some of these histories.
    settings.PERFWATCH_VERIFICATION_REPEATS = REPEATS
    world = Suite3(seed=seed)
    group = world.suspected(change_pct=3.4)
    world.repeats(head_level=1.034, count=REPEATS)

    state, evidence = _judged(world, group, head_level=1.034)

    assert state == GroupState.CONFIRMED
    (joint,) = evidence["joint"]
    assert joint["holds"] and joint["series"] == 3 and joint["base_runs"] >= 4
    assert not any(verdict["holds"] for verdict in evidence["alerts"]), "one series alone already held"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_slow_repeat_everywhere_confirms_nothing(seed: int) -> None:
    world = Suite3(seed=seed)
    group = world.suspected(change_pct=4.0)
    world.repeats(head_level=1.0, slow_head=0.10)

    state, evidence = _judged(world, group)

    assert state != GroupState.CONFIRMED
    (joint,) = evidence["joint"]
    assert not joint["holds"] and joint["head_runs"] >= 4


def test_a_joint_change_below_every_series_minimum_confirms_nothing() -> None:
    # 2 % on each series is clear with the last round's repeats, and below TTFT's 3 % minimum by more than
    # its standard error.
    world = Suite3(seed=4)
    group = world.suspected(change_pct=2.0)
    world.repeats(head_level=1.02, count=4 * MAX_ROUNDS)
    AlertGroup.objects.filter(pk=group.pk).update(evidence={"rounds": MAX_ROUNDS})  # the last round

    state, evidence = _judged(world, group, head_level=1.02)

    assert state == GroupState.DISMISSED
    (joint,) = evidence["joint"]
    assert joint["p_value"] < 0.001 and not joint["holds"]


def test_the_group_page_shows_the_joint_test(client, settings) -> None:
    settings.PERFWATCH_VERIFICATION_REPEATS = REPEATS
    world = Suite3(seed=2)
    group = world.suspected(change_pct=3.4)
    world.repeats(head_level=1.034, count=REPEATS)
    _judged(world, group, head_level=1.034)

    page = client.get(f"/alerts/{group.pk}/")

    assert page.status_code == 200
    row = page.content.decode().split('<tr class="joint">', 1)[1].split("</tr>", 1)[0]
    assert "3 series together" in row and f"{REPEATS} + {REPEATS}" in row and "yes" in row
