"""A run slower than both sides on every series that speed moves, by too little to stand out in any one
series, is a slow run as a whole: left out of detection and of the noise scales, and reported as an outlier
so that its commit is run again. Without a database."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dashboard.regressions.detect.attribution import SeriesHistory, changes_and_outliers_locate
from tests.regressions.suites import LENGTH, STEP, decode, suite_history

NOISE = 0.015


def _without_speed(histories: list[SeriesHistory]) -> list[SeriesHistory]:
    """The same histories with no series marked as moved by speed (the rule has nothing to read)."""
    return [dataclasses.replace(history, slower=0.0) for history in histories]


def test_a_run_three_noise_scales_slower_everywhere_is_left_out_as_a_slow_run() -> None:
    caught = caught_alone = 0
    for seed in range(30):
        histories = suite_history(seed=seed, steps={}, slow_runs={50: 3.0 * NOISE}, noise=NOISE)
        caught += 50 in changes_and_outliers_locate(series=histories)[1]
        caught_alone += 50 in changes_and_outliers_locate(series=_without_speed(histories))[1]

    assert caught >= 26
    # Series by series it rarely stands out: 3 noise scales from the nearer side in half of them.
    assert caught_alone <= 10


@pytest.mark.parametrize("seed", range(6))
def test_the_first_commit_of_a_regression_is_not_taken_for_a_slow_run(seed) -> None:
    steps = {
        key: changes
        for concurrency in (1, 4, 16)
        for key, changes in decode(concurrency, STEP, -0.04).items()
    }
    histories = suite_history(seed=seed, steps=steps, noise=NOISE)

    located, outliers = changes_and_outliers_locate(series=histories)

    assert STEP not in outliers
    assert [(change.first, change.last) for change in located] == [(STEP, STEP)]


def _excursion_edges(*, histories: list[SeriesHistory], start: int, length: int) -> bool:
    located, _ = changes_and_outliers_locate(series=histories)
    return any(change.first - 1 <= start <= change.last + 1 for change in located) and any(
        change.first - 1 <= start + length <= change.last + 1 for change in located
    )


def test_excursions_among_slow_runs_are_found_with_both_edges() -> None:
    """A regression of decode speed at every level reverted five commits later, 2.5 noise scales deep,
    in histories where one run in twenty is 4-10 % slow everywhere."""
    found = unread = 0
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        slow = {
            int(point): float(rng.uniform(0.04, 0.10)) for point in np.flatnonzero(rng.random(LENGTH) < 0.05)
        }
        steps: dict[tuple[str, int], list[tuple[int, float]]] = {}
        for concurrency in (1, 4, 16):
            for key, changes in decode(concurrency, STEP, -2.5 * NOISE).items():
                back = 1.0 / (1.0 + changes[0][1]) - 1.0
                steps[key] = [*changes, (STEP + 5, back)]
        histories = suite_history(seed=seed, steps=steps, slow_runs=slow, noise=NOISE)
        found += _excursion_edges(histories=histories, start=STEP, length=5)
        unread += _excursion_edges(histories=_without_speed(histories), start=STEP, length=5)

    assert found >= 30
    assert found >= unread + 6
