"""Intervals that mean 95 %: over many draws with a known step, about 95 % of the 95 % intervals hold it."""

from __future__ import annotations

import math

import numpy as np

from dashboard.benchmarks.statistics import change_estimate, noise_estimate
from dashboard.regressions.detect.attribution import SeriesHistory, changes_locate

DRAWS = 600


def _covered(low: float | None, high: float | None, truth_pct: float) -> bool:
    assert low is not None and high is not None
    return low <= truth_pct <= high


def test_a_pages_interval_between_two_commits_holds_the_true_step_95_times_in_100() -> None:
    """The PR, commit and compare tables: the runs at two commits, the series' noise from its window."""
    rng = np.random.default_rng(19)
    held = 0
    for _ in range(DRAWS):
        sigma = rng.uniform(0.01, 0.03)
        step = rng.uniform(-0.1, 0.1)
        repeats = int(rng.integers(1, 4))
        # Sixty commits of one run, then the two compared commits with their repeats.
        window = [[float(v)] for v in 1000.0 * np.exp(sigma * rng.normal(size=60))]
        base = list(1000.0 * np.exp(sigma * rng.normal(size=repeats)))
        head = list(1000.0 * math.exp(step) * np.exp(sigma * rng.normal(size=repeats)))
        noise = noise_estimate(runs_by_commit=[*window, base])
        estimate = change_estimate(before=base, after=head, noise=noise)
        held += _covered(estimate.low_pct, estimate.high_pct, math.expm1(step) * 100.0)

    print("pages coverage", held, DRAWS)
    assert 0.93 <= held / DRAWS <= 0.97


def test_a_located_changes_interval_holds_the_true_step_95_times_in_100_also_beside_noisy_stretches() -> None:
    """Group pages and the tracking changelog: detection's change, judged on the local noise."""
    rng = np.random.default_rng(23)
    held = measured = 0
    for draw in range(DRAWS // 3):
        noise = np.full(120, rng.uniform(0.01, 0.02))
        if draw % 2:
            noise[rng.integers(0, 80) :][:40] *= 2.0  # a stretch of doubled noise somewhere
        step = rng.choice([-1.0, 1.0]) * rng.uniform(0.05, 0.12)
        values = 1000.0 * np.exp(noise * rng.normal(size=120))
        values[60:] *= math.exp(step)
        located = changes_locate(series=[SeriesHistory(key="throughput", values=values)])
        at_step = [change for change in located if change.first <= 60 <= change.last]
        if not at_step:
            continue
        (moved,) = at_step[0].changes
        measured += 1
        held += _covered(moved.low_pct, moved.high_pct, math.expm1(step) * 100.0)

    print("located coverage", held, measured)
    assert measured >= DRAWS // 3 * 0.9
    assert 0.92 <= held / measured <= 0.98
