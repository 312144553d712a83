"""How sure a change is: run-to-run noise, a commit's value, and a change with its interval (no Django).

Performance numbers have multiplicative noise, so the maths works on logarithms of strictly positive
values: a change is a ratio, its interval is a ratio interval, and a noise of 0.02 means about 2 % of the
value whatever its level. Series that can be zero or negative are handled in their own units, relative to
the level before.

The rules every page and the detector share:

- a commit's value is the median of its runs, shown with the lowest and highest run and their number
  (:func:`commit_value`);
- a series' noise comes from repeated runs of one commit where there are any (pooled within-commit
  spread), else from the median absolute deviation of first differences of the commits' values, which a
  level shift barely moves (:func:`noise_estimate`);
- noise is local: detection scales every point by the noise of the stretch around it
  (:func:`local_scales`), and a change's interval uses the local noise of the points it compares
  (:func:`noise_of_sides`), never one number for a whole window, so a noisy stretch raises no alarm and
  a quiet one hides none;
- a change is the ratio of the medians of the runs after and before, with a Student-t interval that
  pools the runs' own spread with the series' noise and allows for a median's larger variance
  (:func:`change_estimate`); it is *significant* when
  the test rejects "no change" at the interval's level AND it moves the metric by at least the metric's
  minimum relative change.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special

# MAD of a standard normal is 0.6745 σ; a difference of two iid values has √2 σ.
MAD_TO_SIGMA = 1.0 / 0.6744897501960817
# Root mean square of the 90 % smallest |z| of a standard normal is 0.789: dividing by it gives σ.
TRIMMED_SHARE = 0.1
TRIMMED_TO_SIGMA = 1.0 / 0.7893
# A noise estimate from first differences of n values has about n/2 degrees of freedom worth of evidence
# (MAD is less efficient than a standard deviation); cap it so one long series never acts as certainty.
MAX_NOISE_DEGREES = 200.0

# Variance of the median of n normal values relative to their mean (n = 1, 2: the same; large n: π/2).
MEDIAN_VARIANCE = {1: 1.0, 2: 1.0, 3: 1.352, 4: 1.193, 5: 1.432, 6: 1.283, 7: 1.47, 8: 1.34}

Values = Sequence[float] | npt.NDArray[np.floating]


class StatisticsInvalid(ValueError):
    """Values that cannot be summarised (not finite, empty where one is needed, a bad level)."""


@dataclass(frozen=True)
class CommitValue:
    """One commit's value on one series: the median of its runs, with their spread."""

    value: float
    low: float
    high: float
    runs: int

    @property
    def spread_pct(self) -> float:
        """Half the lowest-to-highest range, in % of the value (0 for a single run)."""
        if self.value == 0.0:
            return 0.0
        return (self.high - self.low) / 2.0 / abs(self.value) * 100.0


@dataclass(frozen=True)
class NoiseEstimate:
    """Run-to-run noise of a series: a relative standard deviation (log space) or one in the series' units."""

    sigma: float
    degrees_of_freedom: float
    source: Literal["repeats", "differences", "given", "none"]
    relative: bool  # True: sigma is a fraction of the value (0.02 is 2 %)

    @property
    def pct(self) -> float | None:
        return self.sigma * 100.0 if self.relative else None


NO_NOISE = NoiseEstimate(sigma=0.0, degrees_of_freedom=0.0, source="none", relative=True)


@dataclass(frozen=True)
class ChangeEstimate:
    """A change from `before` runs to `after` runs, with its interval at `confidence`.

    `low_pct`, `high_pct` and `p_value` are None when nothing measures the noise (one run on each side and
    no series noise).
    """

    before: float  # median of the runs before
    after: float  # median of the runs after
    change_pct: float
    low_pct: float | None
    high_pct: float | None
    p_value: float | None
    n_before: int
    n_after: int
    confidence: float
    significant: bool


def commit_value(values: Values) -> CommitValue:
    """The median of a commit's runs with the lowest and highest run."""
    if isinstance(values, list | tuple) and values and all(math.isfinite(value) for value in values):
        # Plain Python for the few runs of a commit: detection asks for thousands of these, and numpy's
        # per-call overhead is most of the cost at this size. The median is numpy's to the bit.
        ordered = sorted(float(value) for value in values)
        return CommitValue(
            value=_ordered_median(ordered), low=ordered[0], high=ordered[-1], runs=len(ordered)
        )
    array = _finite(values, what="a commit's runs")
    if array.size == 0:
        raise StatisticsInvalid("a commit's value needs at least one run")
    return CommitValue(
        value=float(np.median(array)), low=float(array.min()), high=float(array.max()), runs=int(array.size)
    )


def commit_value_variance(runs: int) -> float:
    """The variance of a commit's value (the median of its `runs` runs) in units of one run's variance."""
    return _median_variance(runs) / max(runs, 1)


def noise_estimate(*, runs_by_commit: Sequence[Values]) -> NoiseEstimate:
    """The series' run-to-run noise from its commits' runs, in commit order.

    Commits with two or more runs give the pooled within-commit standard deviation (the direct measure);
    without any, the median absolute deviation of first differences of the commits' medians stands in.
    """
    # Checked and transformed as one array, not commit by commit: pages ask for the noise of hundreds of
    # series of 200 commits each, and per-commit numpy calls were most of their time.
    groups = [np.asarray(runs, dtype=np.float64) for runs in runs_by_commit]
    if shapes := [group.shape for group in groups if group.ndim != 1]:
        raise StatisticsInvalid(f"a commit's runs must be one-dimensional, got shape {shapes[0]}")
    groups = [group for group in groups if group.size]
    if not groups:
        return NO_NOISE
    values = np.concatenate(groups)
    if not np.all(np.isfinite(values)):
        raise StatisticsInvalid("a commit's runs must be finite numbers")
    relative = bool(np.all(values > 0))
    repeated = [np.log(group) if relative else group for group in groups if group.size >= 2]
    if repeated:
        squares = sum(float(np.sum((group - group.mean()) ** 2)) for group in repeated)
        degrees = float(sum(group.size - 1 for group in repeated))
        return NoiseEstimate(
            sigma=math.sqrt(squares / degrees),
            degrees_of_freedom=degrees,
            source="repeats",
            relative=relative,
        )
    # One run per commit: each commit's median is its run.
    return _differences_noise(medians=np.log(values) if relative else values, relative=relative)


def noise_from_runs(*, values: Values, commits: Sequence[int]) -> NoiseEstimate:
    """:func:`noise_estimate` of runs given as one array in commit order, with each run's commit beside it
    (a commit's runs are neighbours): the same estimate without an array per commit, for pages that ask
    for thousands of series at once."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size != len(commits):
        raise StatisticsInvalid("runs and their commits must be two sequences of one length")
    if array.size == 0:
        return NO_NOISE
    if not np.all(np.isfinite(array)):
        raise StatisticsInvalid("a commit's runs must be finite numbers")
    relative = bool(np.all(array > 0))
    transformed = np.log(array) if relative else array
    ids = np.asarray(commits)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sizes = np.diff(np.r_[starts, array.size])
    repeated = sizes >= 2
    if not np.any(repeated):
        return _differences_noise(medians=transformed, relative=relative)
    means = np.add.reduceat(transformed, starts) / sizes
    squares = np.add.reduceat((transformed - np.repeat(means, sizes)) ** 2, starts)
    degrees = float(np.sum(sizes[repeated] - 1))
    return NoiseEstimate(
        sigma=math.sqrt(float(np.sum(squares[repeated])) / degrees),
        degrees_of_freedom=degrees,
        source="repeats",
        relative=relative,
    )


def noise_from_values(values: Values) -> NoiseEstimate:
    """The noise of a series with one value per commit (see :func:`noise_estimate`), in commit order."""
    array = _finite(values, what="a series' values")
    relative = bool(array.size) and bool(np.all(array > 0))
    return _differences_noise(medians=np.log(array) if relative else array, relative=relative)


def _differences_noise(*, medians: npt.NDArray[np.float64], relative: bool) -> NoiseEstimate:
    if medians.size < 3:
        return replace(NO_NOISE, relative=relative)
    sigma = _differences_sigma(np.diff(medians))
    degrees = min(MAX_NOISE_DEGREES, (medians.size - 1) / 2.0)
    return NoiseEstimate(sigma=sigma, degrees_of_freedom=degrees, source="differences", relative=relative)


def _differences_sigma(differences: npt.NDArray[np.float64]) -> float:
    """The noise of values from their first differences."""
    if differences.size == 0:
        return 0.0
    deviations = np.abs(differences - np.median(differences))
    mad_sigma = float(np.median(deviations)) * MAD_TO_SIGMA / math.sqrt(2.0)
    # The MAD is blind to level shifts but collapses on quantised or patterned noise (most differences
    # equal); the root mean square of the differences without the largest tenth (the level shifts) does
    # not. The larger of the two is the noise: underestimating it would make every point an outlier.
    kept = np.sort(deviations)[: max(1, math.ceil(deviations.size * (1.0 - TRIMMED_SHARE)))]
    trimmed_sigma = float(np.sqrt(np.mean(kept**2))) * TRIMMED_TO_SIGMA / math.sqrt(2.0)
    return max(mad_sigma, trimmed_sigma)


# First differences on each side of a point that measure its local noise: 30 give the noise within
# about a fifth of itself, and a stretch of doubled noise shows from its first point.
LOCAL_NOISE_POINTS = 30
NOISE_CHANGE_RATIO = 1.5


def local_scales(signal: npt.NDArray[np.float64], *, unbiased: bool = False) -> npt.NDArray[np.float64]:
    """Per value, the noise (a standard deviation) of the stretch around it, from the LOCAL_NOISE_POINTS
    first differences just before it and those just after it: pooled when the two sides agree, the
    larger when they do not. `unbiased` for an interval's noise, else the cautious scale detection uses.

    Two sides, not a centred window: a centred window averages a noisy stretch's first points with the
    quiet ones before it, and those points then look like a change. `signal` is one value per
    commit, in commit order, already in the space the noise is measured in (logarithms for strictly
    positive series). A side that would reach past an end is moved inside; a series shorter than one
    side gets its own noise everywhere.
    """
    cautious, fair = local_scales_both(signal)
    return fair if unbiased else cautious


def local_scales_both(
    signal: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """:func:`local_scales` of `signal` both ways, (detection's, unbiased), from one pass over its
    windows: detection takes both of every series it reads."""
    signal = np.asarray(signal, dtype=np.float64)
    size = signal.size
    span = LOCAL_NOISE_POINTS
    if size - 1 < span + 1:
        whole = np.full(size, _differences_sigma(np.diff(signal)) if size >= 3 else 0.0)
        return whole, whole.copy()
    windows = np.lib.stride_tricks.sliding_window_view(np.diff(signal), span)
    # Each window's median from one partition (np.median's own arithmetic, without its per-call layers:
    # detection takes this thousands of times in a rescan).
    middle = [(span - 1) // 2, span // 2]
    medians = np.partition(windows, middle, axis=1)[:, middle].mean(axis=1, keepdims=True)
    deviations = np.abs(windows - medians)
    ordered = np.sort(deviations, axis=1)
    # The root mean square without the largest tenth: unbiased on normal noise and blind to the one or
    # two differences a step makes. Detection takes the larger of it and the MAD, as noise_from_values
    # does (about 8 % too large on normal noise: it errs towards fewer false alarms); an interval takes
    # it alone, or it would hold the truth more often than it says.
    kept = ordered[:, : max(1, math.ceil(span * (1.0 - TRIMMED_SHARE)))]
    fair = np.sqrt(np.mean(kept**2, axis=1)) * TRIMMED_TO_SIGMA / math.sqrt(2.0)
    mad = ordered[:, (span - 1) // 2 : span // 2 + 1].mean(axis=1) * MAD_TO_SIGMA / math.sqrt(2.0)
    return _sides_pooled(np.maximum(fair, mad), size), _sides_pooled(fair, size)


def _sides_pooled(sigma: npt.NDArray[np.float64], size: int) -> npt.NDArray[np.float64]:
    """Per value, from the noise of each window of differences: the windows just before and just after
    it, pooled when they agree, the larger when they do not."""
    span = LOCAL_NOISE_POINTS
    # Window w holds differences w .. w+span-1, that is values w .. w+span: it ends at value w+span and
    # starts at value w.
    points = np.arange(size)
    before = sigma[np.clip(points - span, 0, sigma.size - 1)]
    after = sigma[np.clip(points, 0, sigma.size - 1)]
    # Alike sides are one stretch: their pooled noise, unbiased. Sides that differ by more than the
    # sampling error of 30 differences allows are a change of noise: the point takes the larger one.
    pooled = np.sqrt((before**2 + after**2) / 2.0)
    differ = np.maximum(before, after) > NOISE_CHANGE_RATIO * np.minimum(before, after)
    return np.asarray(np.where(differ, np.maximum(before, after), pooled), dtype=np.float64)


def noise_of_sides(*, before: Values, after: Values, relative: bool = True) -> NoiseEstimate:
    """The noise that a change from the `before` values to the `after` values is judged on, from the local
    noise of each value (:func:`local_scales` of the series at those commits): the one standard deviation
    that gives the difference of the two sides its variance, so a side in a noisy stretch widens the
    interval even when it holds a single value."""
    left = _finite(before, what="the noise before")
    right = _finite(after, what="the noise after")
    if left.size == 0 or right.size == 0:
        return replace(NO_NOISE, relative=relative)
    variance = (float(np.mean(left**2)) / left.size + float(np.mean(right**2)) / right.size) / (
        1.0 / left.size + 1.0 / right.size
    )
    return NoiseEstimate(
        sigma=math.sqrt(variance),
        # Each side's scale comes from LOCAL_NOISE_POINTS differences, at about half a degree each.
        degrees_of_freedom=float(LOCAL_NOISE_POINTS),
        source="differences",
        relative=relative,
    )


def change_estimate(
    *,
    before: Values,
    after: Values,
    noise: NoiseEstimate | float | None = None,
    confidence: float = 0.95,
    min_relative_change: float = 0.0,
) -> ChangeEstimate:
    """The change from the `before` runs to the `after` runs, its interval, p-value and significance.

    `noise` is the series' run-to-run noise (a :class:`NoiseEstimate`, or a relative standard deviation
    such as 0.02 taken as well known); it is pooled with the spread of the runs themselves, so a single run
    on each side is judged against the series' noise and many runs mostly against their own spread.
    `min_relative_change` is a fraction (0.02 is 2 %).
    """
    if not 0.0 < confidence < 1.0:
        raise StatisticsInvalid(f"confidence must lie between 0 and 1, got {confidence}")
    # A side of a few runs in plain Python (pages judge thousands of changes, and numpy's per-call cost was
    # most of their time), a longer one in numpy.
    before_runs = _finite_side(before, what="the runs before")
    after_runs = _finite_side(after, what="the runs after")
    if len(before_runs) == 0 or len(after_runs) == 0:
        raise StatisticsInvalid("a change needs at least one run before and one after")
    prior = _noise(noise)
    relative = _side_min(before_runs) > 0 and _side_min(after_runs) > 0 and prior.relative
    # Each side's value is the commit value rule's (the median of its runs), the one every page and the
    # detector show.
    before_value, after_value = _side_median(before_runs), _side_median(after_runs)

    if relative:
        left, right = _side_log(before_runs), _side_log(after_runs)
        to_pct: Callable[[float], float] = _log_to_pct
    else:
        left, right = before_runs, after_runs
        to_pct = _linear_to_pct(abs(before_value))
    # Medians, like every value shown: one slow run moves neither the change nor the verdict.
    difference = _side_median(right) - _side_median(left)
    change_pct = to_pct(difference)

    own_squares = _squares(left) + _squares(right)
    own_degrees = float(len(left) + len(right) - 2)
    prior_sigma = prior.sigma if prior.relative == relative else 0.0
    prior_degrees = prior.degrees_of_freedom if prior_sigma > 0.0 else 0.0
    degrees = own_degrees + prior_degrees
    significant_size = abs(change_pct) >= min_relative_change * 100.0
    if degrees <= 0.0 or (own_squares == 0.0 and prior_sigma == 0.0):
        exact = degrees > 0.0  # identical repeats: no noise at all, any difference is real
        return ChangeEstimate(
            before=before_value,
            after=after_value,
            change_pct=change_pct,
            low_pct=change_pct if exact else None,
            high_pct=change_pct if exact else None,
            p_value=(0.0 if difference else 1.0) if exact else None,
            n_before=len(before_runs),
            n_after=len(after_runs),
            confidence=confidence,
            significant=exact and difference != 0.0 and significant_size,
        )
    variance = (own_squares + prior_degrees * prior_sigma**2) / degrees
    standard_error = math.sqrt(
        variance * (_median_variance(len(left)) / len(left) + _median_variance(len(right)) / len(right))
    )
    # Student's t through scipy.special, as stats.t computes it, without that interface's per-call
    # argument checks (degrees is positive here): detection asks for this thousands of times per run.
    quantile = float(special.stdtrit(degrees, 0.5 + confidence / 2.0))
    if standard_error > 0.0:
        p_value = float(2.0 * special.stdtr(degrees, -(abs(difference) / standard_error)))
    else:
        p_value = 0.0 if difference else 1.0
    return ChangeEstimate(
        before=before_value,
        after=after_value,
        change_pct=change_pct,
        low_pct=to_pct(difference - quantile * standard_error),
        high_pct=to_pct(difference + quantile * standard_error),
        p_value=p_value,
        n_before=len(before_runs),
        n_after=len(after_runs),
        confidence=confidence,
        significant=p_value < 1.0 - confidence and significant_size,
    )


def change_could_matter(*, before: Values, after: Values, min_relative_change: float) -> bool:
    """Whether :func:`change_estimate` could call this change significant under some noise: its size, in
    either of the two ways that function measures it, reaches `min_relative_change`. Needs no noise, so a
    page of hundreds of series asks for the noise of only those that pass."""
    # Plain Python: a few runs a side, asked for every series of a page, where numpy's per-call cost rules.
    left, right = [float(value) for value in before], [float(value) for value in after]
    if not left or not right or not all(math.isfinite(value) for value in (*left, *right)):
        return False
    before_value, after_value = statistics.median(left), statistics.median(right)
    sizes = [_linear_to_pct(abs(before_value))(after_value - before_value)]
    if min(left) > 0 and min(right) > 0:
        sizes.append(
            _log_to_pct(
                statistics.median([math.log(value) for value in right])
                - statistics.median([math.log(value) for value in left])
            )
        )
    return any(abs(size) >= min_relative_change * 100.0 for size in sizes)


def _median_variance(count: int) -> float:
    """Variance of the median of `count` normal values over that of their mean."""
    return MEDIAN_VARIANCE.get(count, math.pi / 2.0)


def _noise(noise: NoiseEstimate | float | None) -> NoiseEstimate:
    if noise is None:
        return NO_NOISE
    if isinstance(noise, NoiseEstimate):
        return noise
    if not math.isfinite(noise) or noise < 0.0:
        raise StatisticsInvalid(f"noise must be a finite non-negative fraction, got {noise}")
    return NoiseEstimate(
        sigma=float(noise), degrees_of_freedom=MAX_NOISE_DEGREES, source="none", relative=True
    )


def _log_to_pct(difference: float) -> float:
    return math.expm1(difference) * 100.0


def _linear_to_pct(scale: float) -> Callable[[float], float]:
    def to_pct(difference: float) -> float:
        if scale == 0.0:
            return 0.0 if difference == 0.0 else math.copysign(math.inf, difference)
        return difference / scale * 100.0

    return to_pct


# Up to this many runs a side is judged in plain Python; beyond, numpy's vector work pays for its calls.
PLAIN_SIDE_RUNS = 64

Side = list[float] | npt.NDArray[np.float64]


def _finite_side(values: Values, *, what: str) -> Side:
    """`values` checked like :func:`_finite`: a list of floats when they are few, else an array."""
    if isinstance(values, list | tuple) and len(values) <= PLAIN_SIDE_RUNS:
        try:
            out = [float(value) for value in values]
        except (TypeError, ValueError):
            return _finite(values, what=what)  # not flat numbers: _finite says why
        if not all(math.isfinite(value) for value in out):
            raise StatisticsInvalid(f"{what} must be finite numbers")
        return out
    array = _finite(values, what=what)
    return array.tolist() if array.size <= PLAIN_SIDE_RUNS else array


def _side_min(values: Side) -> float:
    return min(values) if isinstance(values, list) else float(values.min())


def _side_log(values: Side) -> Side:
    return [math.log(value) for value in values] if isinstance(values, list) else np.log(values)


def _side_median(values: Side) -> float:
    """numpy's median, to the bit."""
    return _ordered_median(sorted(values)) if isinstance(values, list) else float(np.median(values))


def _ordered_median(ordered: list[float]) -> float:
    """The median of sorted values, as numpy computes it."""
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _squares(values: Side) -> float:
    """The sum of squared deviations from the mean."""
    if not isinstance(values, list):
        return float(np.sum((values - values.mean()) ** 2))
    mean = sum(values) / len(values)
    return sum((value - mean) ** 2 for value in values)


def _finite(values: Values, *, what: str) -> npt.NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise StatisticsInvalid(f"{what} must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise StatisticsInvalid(f"{what} must be finite numbers")
    return array
