"""Joint attribution over the series of one suite and hardware class, without a database."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dashboard.regressions.detect.attribution import HistoryInvalid, SeriesHistory, changes_locate
from dashboard.regressions.detect.detector import change_points_detect
from lab.attribution_evaluation import (
    attribution_score,
    history_generate,
    joint_attribute,
    per_series_attribute,
)
from tests.regressions.suites import LENGTH, STEP, SUITE, decode, suite_history


def ranges(histories: list[SeriesHistory]) -> list[tuple[int, int]]:
    return [(change.first, change.last) for change in changes_locate(series=histories)]


@pytest.mark.parametrize("seed", range(6))
def test_a_slow_run_right_before_a_step_widens_the_range_to_hold_it_instead_of_blaming_it(seed) -> None:
    histories = suite_history(seed=seed, steps=decode(16, STEP, -0.06), slow_runs={STEP - 1: 0.08})

    located = changes_locate(series=histories)

    assert [(change.first, change.last) for change in located] == [(STEP - 1, STEP)]
    assert located[0].outliers == (STEP - 1,)
    moved = {change.key: change.change_pct for change in located[0].changes}
    assert set(moved) == set(decode(16, STEP, -0.06))
    assert moved[("throughput", 16)] == pytest.approx(-6.0, abs=1.0)


def test_the_slow_run_fools_each_series_on_its_own() -> None:
    """The case above is a real trap: the throughput series alone blames the slow run's commit."""
    histories = suite_history(seed=0, steps=decode(16, STEP, -0.06), slow_runs={STEP - 1: 0.08})
    throughput = next(history for history in histories if history.key == ("throughput", 16))

    alone = change_points_detect(values=np.asarray(throughput.values))

    assert [change.index for change in alone] == [STEP - 1]


@pytest.mark.parametrize("seed", range(6))
def test_two_steps_four_points_apart_on_one_series_are_two_changes_each_at_its_point(seed) -> None:
    first, second = decode(16, STEP, 0.12), decode(16, STEP + 4, -0.05)
    steps = {key: first[key] + second[key] for key in first}

    located = changes_locate(series=suite_history(seed=seed, steps=steps))

    assert [(change.first, change.last) for change in located] == [(STEP, STEP), (STEP + 4, STEP + 4)]
    assert not any(change.widened for change in located)


@pytest.mark.parametrize("seed", range(6))
def test_one_change_in_throughput_and_ttft_at_one_commit_is_one_change(seed) -> None:
    steps = {("throughput", 4): [(STEP, -0.06)], ("ttft", 4): [(STEP, 0.06)]}

    located = changes_locate(series=suite_history(seed=seed, steps=steps))

    assert [(change.first, change.last) for change in located] == [(STEP, STEP)]
    assert {change.key for change in located[0].changes} == {("throughput", 4), ("ttft", 4)}


def test_a_series_missing_points_is_located_from_the_points_it_has() -> None:
    # (Seed 3 put the point before the gap halfway between the levels: ambiguous whatever the rule.)
    histories = suite_history(seed=4, steps={("throughput", 16): [(STEP, -0.08)]})
    number = list(SUITE).index(("throughput", 16))
    values = np.asarray(histories[number].values).copy()
    values[STEP - 5 : STEP - 1] = math.nan  # four runs that did not measure this series
    histories[number] = SeriesHistory(key=histories[number].key, values=values)

    assert ranges(histories) == [(STEP, STEP)]


def test_a_step_that_one_run_cannot_place_gets_a_range_that_says_so() -> None:
    # 2 % at 1.5 % noise on one series: detectable over many points, not placeable to one.
    histories = suite_history(seed=11, steps={("throughput", 16): [(STEP, -0.03)]}, noise=0.015)

    located = changes_locate(series=histories)

    assert len(located) == 1
    change = located[0]
    assert change.first <= STEP <= change.last
    assert change.widened and change.ambiguous


def test_a_step_free_suite_has_no_change() -> None:
    assert ranges(suite_history(seed=5, steps={}, slow_runs={30: 0.12, 80: 0.10})) == []


def test_repeated_runs_weigh_more_in_the_location() -> None:
    histories = suite_history(seed=11, steps={("throughput", 16): [(STEP, -0.03)]})
    widened = changes_locate(series=histories)[0]
    # Five runs at every point of the uncertain range, each at its true level, pin it.
    number = list(SUITE).index(("throughput", 16))
    throughput = histories[number]
    values = np.asarray(throughput.values).copy()
    runs = np.ones(LENGTH, dtype=int)
    for point in range(widened.first - 1, widened.last + 1):
        values[point] = SUITE[("throughput", 16)][0] * (0.97 if point >= STEP else 1.0)
        runs[point] = 5
    histories[number] = SeriesHistory(key=throughput.key, values=values, runs=list(runs))

    assert ranges(histories) == [(STEP, STEP)]


def test_series_of_different_lengths_are_refused() -> None:
    with pytest.raises(HistoryInvalid):
        changes_locate(
            series=[SeriesHistory(key=1, values=[1.0] * 10), SeriesHistory(key=2, values=[1.0] * 9)]
        )


def test_on_histories_it_was_not_tuned_on_joint_attribution_is_never_less_right_than_series_alone() -> None:
    histories = [history_generate(seed=seed, commits=300) for seed in (901, 902, 903)]

    joint = attribution_score(histories=histories, attribute=joint_attribute)
    alone = attribution_score(histories=histories, attribute=per_series_attribute)

    assert joint.contained >= alone.contained
    assert joint.wrong <= alone.wrong
    assert joint.false <= alone.false
    assert joint.per_step == pytest.approx(1.0, abs=0.05)
    assert alone.per_step > 1.1
