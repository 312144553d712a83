import math

import numpy as np
import pytest

from dashboard.benchmarks.statistics import (
    ChangeEstimate,
    NoiseEstimate,
    StatisticsInvalid,
    change_estimate,
    commit_value,
    noise_estimate,
)


def measured(change: ChangeEstimate) -> tuple[float, float, float]:
    """The interval and p-value of a change that has them."""
    assert change.low_pct is not None and change.high_pct is not None and change.p_value is not None
    return change.low_pct, change.high_pct, change.p_value


def runs(*, level: float, noise: float, count: int, seed: int) -> np.ndarray:
    return level * np.exp(noise * np.random.default_rng(seed).normal(size=count))


def test_a_commits_value_is_the_median_of_its_runs_with_their_range():
    value = commit_value([100.0, 130.0, 98.0])

    assert (value.value, value.low, value.high, value.runs) == (100.0, 98.0, 130.0, 3)
    assert value.spread_pct == pytest.approx(16.0)


def test_a_single_run_has_no_spread():
    value = commit_value([42.0])

    assert (value.value, value.runs, value.spread_pct) == (42.0, 1, 0.0)


def test_noise_comes_from_repeats_where_a_commit_has_several_runs():
    rng = np.random.default_rng(3)
    # Levels that jump by 20 % between commits: only the within-commit spread is noise.
    commits = [level * np.exp(0.01 * rng.normal(size=4)) for level in (100.0, 120.0, 100.0, 120.0) * 25]

    noise = noise_estimate(runs_by_commit=commits)

    assert noise.source == "repeats"
    assert noise.relative
    assert noise.sigma == pytest.approx(0.01, rel=0.15)
    assert noise.degrees_of_freedom == 300


def test_without_repeats_noise_comes_from_first_differences_and_ignores_a_step():
    values = runs(level=100.0, noise=0.02, count=200, seed=1)
    stepped = np.concatenate([values[:100], values[100:] * 1.3])

    noise = noise_estimate(runs_by_commit=[[value] for value in stepped])

    assert noise.source == "differences"
    assert noise.sigma == pytest.approx(0.02, rel=0.15)


def test_noise_of_too_short_a_series_is_unknown():
    assert noise_estimate(runs_by_commit=[[1.0], [2.0]]).sigma == 0.0
    assert noise_estimate(runs_by_commit=[]).source == "none"


def test_a_clear_step_over_repeated_runs_is_significant_with_an_interval_around_it():
    before = runs(level=100.0, noise=0.02, count=5, seed=1)
    after = runs(level=90.0, noise=0.02, count=5, seed=2)

    change = change_estimate(before=before, after=after, min_relative_change=0.02)

    low, high, p_value = measured(change)
    assert change.change_pct == pytest.approx(-10.0, abs=2.5)
    assert low < change.change_pct < high
    assert low < -5.0 and high < 0.0
    assert p_value < 1e-3
    assert (change.n_before, change.n_after) == (5, 5)
    assert change.significant
    assert change.before == pytest.approx(float(np.median(before)))


def test_a_change_smaller_than_the_metrics_minimum_is_not_significant_even_when_certain():
    before = runs(level=100.0, noise=0.001, count=10, seed=1)
    after = runs(level=101.0, noise=0.001, count=10, seed=2)

    change = change_estimate(before=before, after=after, min_relative_change=0.02)

    assert measured(change)[2] < 1e-6
    assert not change.significant


def test_single_runs_are_judged_against_the_series_noise():
    # 2.2 % between two single runs on a series whose runs differ by 2 % is noise.
    noisy = change_estimate(before=[100.0], after=[102.2], noise=0.02)
    # The same difference on a quiet series is a change.
    quiet = change_estimate(before=[100.0], after=[102.2], noise=0.002)

    assert noisy.change_pct == pytest.approx(2.2)
    low, high, p_value = measured(noisy)
    assert not noisy.significant and p_value > 0.3
    assert low < 0.0 < high
    assert quiet.significant and measured(quiet)[0] > 0.0


def test_single_runs_without_any_noise_estimate_have_no_interval_and_are_never_significant():
    change = change_estimate(before=[100.0], after=[150.0])

    assert change.change_pct == pytest.approx(50.0)
    assert (change.low_pct, change.high_pct, change.p_value) == (None, None, None)
    assert not change.significant


def test_the_interval_covers_the_true_change_about_as_often_as_it_says():
    covered = 0
    trials = 400
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        before = 100.0 * np.exp(0.03 * rng.normal(size=3))
        after = 95.0 * np.exp(0.03 * rng.normal(size=3))
        change = change_estimate(before=before, after=after, noise=NoiseEstimate(0.03, 50.0, "repeats", True))
        low, high, _ = measured(change)
        covered += low <= -5.0 <= high
    assert 0.92 <= covered / trials <= 0.98


def test_false_positive_rate_under_no_change_is_about_one_minus_confidence():
    significant = sum(
        change_estimate(
            before=runs(level=50.0, noise=0.02, count=3, seed=2 * seed),
            after=runs(level=50.0, noise=0.02, count=3, seed=2 * seed + 1),
        ).significant
        for seed in range(500)
    )
    assert significant / 500 <= 0.08


def test_values_that_can_be_negative_are_compared_in_their_own_units():
    change = change_estimate(before=[-1.0, 1.0, 0.0, 2.0], after=[10.0, 11.0, 9.0, 10.0])

    assert change.change_pct == pytest.approx(1900.0)  # 0.5 -> 10
    assert change.significant


def test_identical_repeats_make_any_difference_certain():
    change = change_estimate(before=[10.0, 10.0], after=[11.0, 11.0], min_relative_change=0.05)

    assert change.p_value == 0.0 and change.low_pct == pytest.approx(10.0)
    assert change.significant


@pytest.mark.parametrize(
    ("before", "after", "kwargs"),
    [
        ([], [1.0], {}),
        ([1.0], [math.nan], {}),
        ([1.0], [2.0], {"confidence": 1.0}),
        ([1.0], [2.0], {"noise": -0.1}),
        ([[1.0]], [2.0], {}),
    ],
)
def test_bad_input_is_refused_with_a_reason(before, after, kwargs):
    with pytest.raises(StatisticsInvalid):
        change_estimate(before=before, after=after, **kwargs)


@pytest.mark.parametrize("repeated", [False, True])
def test_noise_from_one_array_of_runs_is_the_noise_from_runs_per_commit(repeated) -> None:
    from dashboard.benchmarks.statistics import noise_from_runs

    rng = np.random.default_rng(3)
    runs_by_commit = [
        list(100 * rng.normal(1, 0.02, 3 if repeated and index % 4 == 0 else 1)) for index in range(50)
    ]
    commits = [index for index, runs in enumerate(runs_by_commit) for _ in runs]

    one = noise_from_runs(values=[value for runs in runs_by_commit for value in runs], commits=commits)
    per_commit = noise_estimate(runs_by_commit=runs_by_commit)

    assert one.source == per_commit.source == ("repeats" if repeated else "differences")
    assert one.sigma == pytest.approx(per_commit.sigma, rel=1e-12)
    assert one.degrees_of_freedom == per_commit.degrees_of_freedom


def test_a_change_smaller_than_the_metrics_minimum_never_needs_its_noise() -> None:
    from dashboard.benchmarks.statistics import change_could_matter

    before, after = [100.0, 101.0], [102.0]
    assert not change_could_matter(before=before, after=after, min_relative_change=0.02)
    assert change_could_matter(before=before, after=[97.0], min_relative_change=0.02)
    # Whatever noise it is judged against, a change below the minimum is never significant.
    for noise in (None, 0.0001, 0.5):
        estimate = change_estimate(before=before, after=after, noise=noise, min_relative_change=0.02)
        assert not estimate.significant


def test_a_change_is_judged_on_numpys_medians_to_the_bit() -> None:
    rng = np.random.default_rng(11)
    for size in (1, 2, 3, 4, 7, 40):
        before, after = list(100 * rng.normal(1, 0.05, size)), list(100 * rng.normal(1, 0.05, size))
        estimate = change_estimate(before=before, after=after, noise=0.02)
        assert estimate.before == float(np.median(before))
        assert estimate.after == float(np.median(after))
