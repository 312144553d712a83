import numpy as np
import pytest

from dashboard.benchmarks.statistics import local_scales
from dashboard.regressions.detect.detector import (
    ChangePoint,
    SeriesInvalid,
    change_point_kind,
    change_points_detect,
)


def noisy(*, levels: list[tuple[float, int]], noise: float, seed: int) -> np.ndarray:
    """Concatenated stretches of (level, length) with multiplicative Gaussian noise."""
    rng = np.random.default_rng(seed)
    level = np.concatenate([np.full(length, value) for value, length in levels])
    return level * (1.0 + noise * rng.normal(size=level.size))


@pytest.mark.parametrize("seed", range(5))
def test_ten_percent_step_at_two_percent_noise_is_found_at_its_index(seed):
    values = noisy(levels=[(1000.0, 150), (900.0, 150)], noise=0.02, seed=seed)

    changes = change_points_detect(values=values)

    assert len(changes) == 1
    assert abs(changes[0].index - 150) <= 1
    assert changes[0].p_value < 1e-4


def test_regression_and_improvement_are_both_found_with_their_sign():
    values = noisy(levels=[(200.0, 100), (180.0, 100), (216.0, 100)], noise=0.02, seed=7)

    changes = change_points_detect(values=values)

    assert [change.index for change in changes] == [100, 200]
    assert changes[0].change_pct == pytest.approx(-10.0, abs=1.5)
    assert changes[1].change_pct == pytest.approx(20.0, abs=1.5)


def test_before_and_after_are_segment_means_in_original_units():
    values = noisy(levels=[(183.0, 412), (171.0, 200)], noise=0.01, seed=3)

    (change,) = change_points_detect(values=values)

    assert change.index == 412
    assert change.before == pytest.approx(float(np.mean(values[:412])), rel=1e-3)
    assert change.after == pytest.approx(float(np.mean(values[412:])), rel=1e-3)
    assert change.change_pct == pytest.approx((change.after - change.before) / change.before * 100.0)


@pytest.mark.parametrize("position", [0, 1, 60, 118, 119])
def test_single_outlier_raises_nothing(position):
    values = noisy(levels=[(100.0, 120)], noise=0.02, seed=position)
    values[position] *= 0.5

    assert change_points_detect(values=values) == []


@pytest.mark.parametrize("seed", range(10))
def test_step_free_noise_raises_nothing(seed):
    rng = np.random.default_rng(seed)
    length = int(rng.integers(50, 3000))

    assert change_points_detect(values=noisy(levels=[(50.0, length)], noise=0.05, seed=seed)) == []


@pytest.mark.parametrize("seed", range(5))
def test_autocorrelated_step_free_noise_raises_nothing(seed):
    rng = np.random.default_rng(seed)
    shocks = np.zeros(2000)
    for position in range(1, shocks.size):
        shocks[position] = 0.6 * shocks[position - 1] + rng.normal()

    assert change_points_detect(values=100.0 * (1.0 + 0.02 * shocks)) == []


def test_two_steps_are_both_found():
    values = noisy(levels=[(50.0, 80), (55.0, 60), (50.0, 80)], noise=0.02, seed=11)

    changes = change_points_detect(values=values)

    assert [change.index for change in changes] == [80, 140]


def test_step_right_at_the_end_is_found_after_three_points():
    values = noisy(levels=[(100.0, 100), (80.0, 3)], noise=0.01, seed=5)

    assert [change.index for change in change_points_detect(values=values)] == [100]


@pytest.mark.parametrize("length", range(6))
def test_short_series_has_no_change_points(length):
    assert change_points_detect(values=[1.0, 100.0, 1.0, 100.0, 1.0][:length]) == []


def test_change_below_the_minimum_relative_change_is_not_reported():
    values = noisy(levels=[(100.0, 200), (103.0, 200)], noise=0.002, seed=2)

    assert [change.index for change in change_points_detect(values=values)] == [200]
    assert change_points_detect(values=values, min_relative_change=0.05) == []


def test_stricter_significance_drops_a_weak_change():
    values = noisy(levels=[(100.0, 40), (104.0, 40)], noise=0.03, seed=4)

    (change,) = change_points_detect(values=values)

    assert change_points_detect(values=values, p_threshold=change.p_value / 10.0) == []


def test_series_crossing_zero_is_analysed_on_a_linear_scale():
    values = np.concatenate([np.full(50, -1.0), np.full(50, 1.0)]) + 0.05 * np.random.default_rng(0).normal(
        size=100
    )

    (change,) = change_points_detect(values=values)

    assert change.index == 50
    assert change.before == pytest.approx(-1.0, abs=0.05)
    assert change.change_pct == pytest.approx(200.0, abs=10.0)


def test_noiseless_step_is_found_and_constant_series_is_not():
    assert [change.index for change in change_points_detect(values=[5.0] * 10 + [6.0] * 10)] == [10]
    assert change_points_detect(values=[5.0] * 20) == []


@pytest.mark.parametrize("bad", [[1.0, float("nan")] * 5, [1.0, float("inf")] * 5])
def test_non_finite_values_are_rejected(bad):
    with pytest.raises(SeriesInvalid):
        change_points_detect(values=bad)


@pytest.mark.parametrize(
    ("change_pct", "higher_is_better", "kind"),
    [
        (-6.0, True, "regression"),
        (6.0, True, "improvement"),
        (6.0, False, "regression"),
        (-6.0, False, "improvement"),
    ],
)
def test_kind_follows_the_direction_that_is_better(change_pct, higher_is_better, kind):
    change = ChangePoint(index=3, before=100.0, after=100.0 + change_pct, change_pct=change_pct, p_value=1e-9)

    assert change_point_kind(change=change, higher_is_better=higher_is_better) == kind


@pytest.mark.parametrize("seed", [0, 2])
def test_appending_points_leaves_earlier_change_points_where_they_were(seed):
    # Intervals spread evenly over the whole series moved these change points by a commit as points came.
    values = noisy(levels=[(100.0, 120), (94.0, 90), (99.0, 290)], noise=0.02, seed=seed)
    first = [change.index for change in change_points_detect(values=values[:250])]

    later = [
        [change.index for change in change_points_detect(values=values[:end])] for end in range(251, 500, 3)
    ]

    assert len(first) == 2
    assert all(indices == first for indices in later)


def test_the_detector_given_the_scales_it_would_take_finds_the_same_changes() -> None:
    # Detection hands the detector the local scales it already took of the same values.
    rng = np.random.default_rng(3)
    values = 100.0 * np.where(np.arange(200) >= 120, 0.95, 1.0) * (1 + rng.normal(0, 0.01, 200))
    own = change_points_detect(values=values)
    given = change_points_detect(values=values, scales=local_scales(np.log(values)))

    assert [point.index for point in given] == [point.index for point in own] == [120]
    # They are the ones it judges on: ten times the noise hides the step.
    assert change_points_detect(values=values, scales=10 * local_scales(np.log(values))) == []
    with pytest.raises(SeriesInvalid):
        change_points_detect(values=values, scales=np.ones(10))
