"""Change points in one series of per-commit values (pure numpy/scipy, no Django).

Longer than 500 lines: the whole per-series method in one module, each step below feeding the next (the
scales, the segmentation and its rescans, the autocorrelation correction and the pruning with its tests).

The method is the one that measured best in shared/notes/change-points.md:

1. log space for strictly positive series, so a 5 % step has the same size at any level and
   multiplicative noise becomes additive;
2. a noise scale for every point from the first differences around it (``statistics.local_scales``:
   their median absolute deviation, blind to level shifts; local, so a stretch of doubled noise is
   judged on its own noise and a quiet one on its own), and a Hampel filter that replaces isolated
   outliers (not three or more in a row: an excursion) by a rolling median;
3. seeded binary segmentation (Kovács, Li, Bühlmann & Munk 2020): CUSUM statistics over a deterministic
   set of intervals, narrowest-over-threshold selection (Baranowski, Chen & Fryzlewicz 2019); each point
   weighs by its inverse noise variance, the CUSUM of heteroscedastic data;
4. the noise scale corrected for lag-1 autocorrelation of the residuals (long-run variance), then 3 again;
5. bottom-up pruning: the weakest change point is dropped until every survivor passes a pooled two-sample
   t-test (on the same weights) and the minimum relative change, on its own or as the weak edge of a
   short excursion whose other edge passes (the excursion against the levels around it, stricter).

The input holds only benchmarked points, in commit order and without NaN; the caller maps indices back to
commits. A change at ``index`` i means the culprit lies in the commit range after point i-1 up to and
including point i: when commits between those two points were not benchmarked, that range has several
commits. Which direction is a regression depends on the metric: see :func:`change_point_kind`.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special

from dashboard.benchmarks.direction import kind_for
from dashboard.benchmarks.statistics import LOCAL_NOISE_POINTS, local_scales

FloatArray = npt.NDArray[np.float64]
Positions = npt.NDArray[np.int64] | np.int64

MIN_SEGMENT = 3
HAMPEL_HALF_WINDOW = 3
HAMPEL_SIGMAS = 5.0
THRESHOLD_FACTOR = 1.3
MAX_AUTOCORRELATION = 0.9
RESCAN_REACH = 4 * MIN_SEGMENT
REFINE_REACH = 10 * MIN_SEGMENT
AUTOCORRELATION_ROUNDS = 3
# How much stricter than a boundary's own test the test of an excursion it bounds must pass (see
# `_SegmentTests._excursion_p_values`): at the plain threshold, stretches of doubled noise made false pairs (5
# false changes in 30 histories against 3; excursions found 92 of 160 against 87). At 10 times stricter, a
# reverted change of 3.5 noise scales over three points had both edges found in 18 of 40 histories, at 3 times
# in 23 (and in 60 histories of a doubled-noise stretch, no false change at either); on ten simulated
# fortnights (seeds 1, 2, 3, 5, 7, 11, 13, 23, 31, 47) the loop named 266 of 299 culprits of twice the noise
# exactly against 265, left 19 unfinished against 21, notified 2.5 % false groups against 2.8 %, with a median
# of 10.1 hours from merge to culprit against 11.1.
EXCURSION_STRICTNESS = 3.0
# Layers of seeded intervals up to this width start at every quarter of it rather than every half: a short
# excursion (a change reverted a few commits later) is found only by an interval that holds it with a
# few points on each side, and at half-width starts whether one does depends on where the excursion
# falls (both edges of a 4-point excursion of 3 noise scales, moved over twelve starting points in ten
# histories: 45 of 120 at half-width starts, 71 at quarter-width). The narrow layers cost little; the
# wider ones, at quarter-width starts too, tripled the time of a long history.
DENSE_WIDTH = 8 * MIN_SEGMENT


class SeriesInvalid(ValueError):
    """The values cannot be analysed (not finite, or not one-dimensional)."""


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first position after the change
    before: float  # mean of the segment before (original units)
    after: float  # mean of the segment after
    change_pct: float  # (after-before)/before*100
    p_value: float


def change_points_detect(
    *,
    values: Sequence[float] | npt.NDArray[np.floating],
    min_relative_change: float = 0.02,
    p_threshold: float = 1e-4,
    scales: npt.NDArray[np.float64] | None = None,
) -> list[ChangePoint]:
    """Return the confirmed change points of ``values``, in order of index.

    Each one passed a pooled t-test against its neighbouring segments at ``p_value < p_threshold`` and moved
    the mean by at least ``min_relative_change`` (a fraction: 0.02 is 2 %). ``scales``, when the caller
    has them already, are ``local_scales`` of the values (of their logarithms, for positive values).
    """
    raw = np.asarray(values, dtype=np.float64)
    if raw.ndim != 1:
        raise SeriesInvalid(f"expected one series of values, got shape {raw.shape}")
    if not np.all(np.isfinite(raw)):
        raise SeriesInvalid("values must be finite: leave unbenchmarked commits out instead of passing NaN")
    if raw.size < 2 * MIN_SEGMENT:
        return []

    log_space = bool(np.all(raw > 0))
    signal = np.log(raw) if log_space else raw
    sigma = local_scales(signal) if scales is None else np.array(scales, dtype=np.float64)
    if sigma.shape != signal.shape:
        raise SeriesInvalid(f"expected one scale per value, got {sigma.shape} for {signal.shape}")
    if not np.all(sigma > 0.0):
        # Quantised or noiseless stretches: the whole series' scale stands in where a stretch has none.
        overall = float(np.std(np.diff(signal))) / np.sqrt(2.0)
        if overall == 0.0:
            return []
        sigma = np.where(sigma > 0.0, sigma, overall)
    cleaned = _hampel(signal=signal, sigma=sigma)
    weights = 1.0 / sigma**2
    sums = _Sums.of(values=cleaned, weights=weights)

    threshold = THRESHOLD_FACTOR * np.sqrt(2.0 * np.log(cleaned.size))
    maxima = _layer_maxima(sums=sums)
    boundaries = _boundaries_find(sums=sums, maxima=maxima, inflation=1.0, threshold=threshold)

    autocorrelation = 0.0
    for _ in range(AUTOCORRELATION_ROUNDS):
        # Fitting too many segments hides autocorrelation in the residuals, so the estimate only grows:
        # each round refits with the corrected scale and looks again.
        estimate = _residual_autocorrelation(values=cleaned, sigma=sigma, sums=sums, boundaries=boundaries)
        if estimate <= autocorrelation + 0.01:
            break
        autocorrelation = estimate
        # MAD of differences estimates σ·√(1-ρ) under AR(1) noise; the long-run standard deviation that
        # governs segment means is σ·√((1+ρ)/(1-ρ)) = that estimate · √(1+ρ)/(1-ρ).
        inflation = np.sqrt(1.0 + autocorrelation) / (1.0 - autocorrelation)
        boundaries = _boundaries_find(sums=sums, maxima=maxima, inflation=inflation, threshold=threshold)

    # Centring keeps the running sums of squares in the t-test free of cancellation.
    tests = _SegmentTests(
        values=cleaned - np.median(cleaned),
        weights=weights,
        original=np.exp(cleaned) if log_space else cleaned,
        autocorrelation=autocorrelation,
        min_relative_change=min_relative_change,
        p_threshold=p_threshold,
    )
    return tests.describe(boundaries=tests.prune(boundaries=boundaries))


@dataclass(frozen=True)
class _Sums:
    """Running sums of the weights and of the weighted values: any segment's weighted mean in O(1)."""

    weight: FloatArray
    value: FloatArray

    @classmethod
    def of(cls, *, values: FloatArray, weights: FloatArray) -> _Sums:
        return cls(
            weight=np.concatenate(([0.0], np.cumsum(weights))),
            value=np.concatenate(([0.0], np.cumsum(weights * values))),
        )

    def contrast(self, *, starts: Positions, splits: Positions, ends: Positions) -> FloatArray:
        """|mean after − mean before| of each split in standard errors (the weighted CUSUM statistic)."""
        # The sums at the splits are gathered once: the splits are most of the work (a layer's every split).
        weight_at, value_at = self.weight[splits], self.value[splits]
        left_weight = weight_at - self.weight[starts]
        right_weight = self.weight[ends] - weight_at
        left_mean = (value_at - self.value[starts]) / left_weight
        right_mean = (self.value[ends] - value_at) / right_weight
        return np.asarray(
            np.abs(left_mean - right_mean) / np.sqrt(1.0 / left_weight + 1.0 / right_weight), dtype=np.float64
        )


def change_point_kind(*, change: ChangePoint, higher_is_better: bool) -> Literal["regression", "improvement"]:
    """Whether a change made the metric better or worse, given which way is better for it."""
    return kind_for(change_pct=change.change_pct, higher_is_better=higher_is_better)


def _hampel(*, signal: FloatArray, sigma: FloatArray) -> FloatArray:
    """Replace points further than HAMPEL_SIGMAS·σ from their rolling median by that median, unless they
    are MIN_SEGMENT or more in a row on the same side: that is a short excursion (a change reverted a
    few commits later), a level of its own, not outliers."""
    # Reflecting at the ends keeps an outlier at position 0 from filling most of its own window.
    padded = np.pad(signal, HAMPEL_HALF_WINDOW, mode="reflect")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * HAMPEL_HALF_WINDOW + 1)
    # The middle of each sorted odd-sized window is exactly what np.median returns, without its overhead.
    medians = np.sort(windows, axis=1)[:, HAMPEL_HALF_WINDOW]
    deviation = np.abs(signal - medians)
    outliers = deviation > HAMPEL_SIGMAS * sigma
    # An excursion's points are all well off the median on one side, if not every one of them 5 σ.
    side = np.sign(signal - medians) * (deviation > HAMPEL_SIGMAS * sigma / 2.0)
    if outliers.any():
        # Runs of equal sides: where a run starts, and how long it is.
        starts = np.flatnonzero(np.r_[True, side[1:] != side[:-1]])
        lengths = np.diff(np.r_[starts, side.size])
        excursion = np.repeat((lengths >= MIN_SEGMENT) & (side[starts] != 0), lengths)
        outliers &= ~excursion
    return np.where(outliers, medians, signal)


@dataclass(frozen=True)
class _Intervals:
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]  # exclusive


@functools.lru_cache(maxsize=64)
def _seeded_intervals(*, length: int) -> tuple[_Intervals, ...]:
    """The whole series, then layers of widths 6, 12, 24, … starting at every half width (every quarter
    width up to `DENSE_WIDTH`).

    Kovács et al. spread each layer evenly over the series; anchoring the layers at the first point
    instead (as accurate on the evaluation set) means that appending points changes only the intervals
    that touch the end, so change points found earlier stay where they were.
    """
    layers = [_Intervals(starts=np.array([0], dtype=np.int64), ends=np.array([length], dtype=np.int64))]
    width = 2 * MIN_SEGMENT
    while width < length:
        stride = width // 4 if width <= DENSE_WIDTH else width // 2
        starts = np.arange(0, length - width + 1, max(1, stride), dtype=np.int64)
        if starts[-1] != length - width:
            starts = np.append(starts, length - width)  # the newest points get an interval of each width
        layers.append(_Intervals(starts=starts, ends=starts + width))
        width *= 2
    for layer in layers:  # shared by every series of this length: read-only
        layer.starts.flags.writeable = False
        layer.ends.flags.writeable = False
    return tuple(layers)


@dataclass(frozen=True)
class _LayerGeometry:
    """Where the CUSUM of one layer of intervals may split: the same for every series of a length, so it
    is computed once per length."""

    splits: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int64]
    last_offset: int


@functools.lru_cache(maxsize=64)
def _geometry_for(*, length: int) -> tuple[_LayerGeometry, ...]:
    geometry = []
    for layer in _seeded_intervals(length=length):
        width = int(layer.ends[0] - layer.starts[0])
        offsets = np.arange(MIN_SEGMENT, width - MIN_SEGMENT + 1)
        geometry.append(
            _LayerGeometry(
                splits=layer.starts[:, None] + offsets[None, :],
                rows=np.arange(layer.starts.size),
                last_offset=offsets.size - 1,
            )
        )
    return tuple(geometry)


@dataclass(frozen=True)
class _LayerMaxima:
    """Each interval of a layer with its best split and that split's contrast before inflation: which
    split is best does not depend on the inflation, so the rounds of `change_points_detect` share them."""

    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    splits: npt.NDArray[np.int64]
    contrasts: FloatArray
    cut_short: npt.NDArray[np.bool_]


def _layer_maxima(*, sums: _Sums) -> tuple[_LayerMaxima, ...]:
    length = sums.weight.size - 1
    maxima = []
    for layer, geometry in zip(_seeded_intervals(length=length), _geometry_for(length=length), strict=True):
        splits = geometry.splits
        cusum = sums.contrast(starts=layer.starts[:, None], splits=splits, ends=layer.ends[:, None])
        best = np.argmax(cusum, axis=1)
        rows = geometry.rows
        # A maximum on the last allowed split inside the series means the change may lie just outside
        # this interval, where the minimum segment forbids it: a wider interval places it correctly.
        cut_short = ((best == 0) & (layer.starts > 0)) | (
            (best == geometry.last_offset) & (layer.ends < length)
        )
        maxima.append(
            _LayerMaxima(
                starts=layer.starts,
                ends=layer.ends,
                splits=splits[rows, best],
                contrasts=cusum[rows, best],
                cut_short=cut_short,
            )
        )
    return tuple(maxima)


def _narrowest_over_threshold(
    *, maxima: Sequence[_LayerMaxima], inflation: float, threshold: float
) -> list[int]:
    """Boundaries picked by narrowest-over-threshold among the seeded intervals, sorted."""
    candidate_starts: list[npt.NDArray[np.int64]] = []
    candidate_ends: list[npt.NDArray[np.int64]] = []
    candidate_splits: list[npt.NDArray[np.int64]] = []
    candidate_scores: list[FloatArray] = []
    for layer in maxima:
        scores = layer.contrasts / inflation
        over = (scores > threshold) & ~layer.cut_short
        candidate_starts.append(layer.starts[over])
        candidate_ends.append(layer.ends[over])
        candidate_splits.append(layer.splits[over])
        candidate_scores.append(scores[over])
    if not candidate_starts:
        return []
    starts_all = np.concatenate(candidate_starts)
    ends_all = np.concatenate(candidate_ends)
    splits_all = np.concatenate(candidate_splits)
    scores_all = np.concatenate(candidate_scores)
    # Narrowest first; among equally narrow intervals the strongest contrast wins.
    order = np.lexsort((-scores_all, ends_all - starts_all))
    chosen: list[int] = []
    for start, end, split in zip(
        starts_all[order].tolist(), ends_all[order].tolist(), splits_all[order].tolist(), strict=True
    ):
        position = bisect.bisect_right(chosen, start)
        if position < len(chosen) and chosen[position] < end:
            continue  # this interval straddles a boundary already chosen
        bisect.insort(chosen, split)
    return chosen


def _boundaries_find(
    *, sums: _Sums, maxima: Sequence[_LayerMaxima], inflation: float, threshold: float
) -> list[int]:
    chosen = _narrowest_over_threshold(maxima=maxima, inflation=inflation, threshold=threshold)
    rescanned = _segments_rescan(sums=sums, boundaries=chosen, inflation=inflation, threshold=threshold)
    return _boundaries_refine(sums=sums, boundaries=rescanned)


def _boundaries_refine(*, sums: _Sums, boundaries: list[int]) -> list[int]:
    """Move each boundary to the best split near it, between its neighbours.

    The interval that found a boundary depends on which intervals passed the threshold, and that moves
    as points are appended (the threshold grows with the length); the best split among the points near
    it depends only on those points.
    """
    length = sums.weight.size - 1
    refined = list(boundaries)
    for position, boundary in enumerate(refined):
        # Only the points near it: far ones, still arriving at the end, would move it as they come.
        start = max(refined[position - 1] if position else 0, boundary - REFINE_REACH)
        end = min(refined[position + 1] if position + 1 < len(refined) else length, boundary + REFINE_REACH)
        splits = np.arange(start + MIN_SEGMENT, end - MIN_SEGMENT + 1)
        # Within reach of where it was found: a far split would be another change between the two.
        splits = splits[np.abs(splits - boundary) <= MIN_SEGMENT]
        if splits.size:
            contrast = sums.contrast(starts=np.int64(start), splits=splits, ends=np.int64(end))
            refined[position] = int(splits[int(np.argmax(contrast))])
    return refined


def _segments_rescan(*, sums: _Sums, boundaries: list[int], inflation: float, threshold: float) -> list[int]:
    """Add the best split of every segment between chosen boundaries while one passes the threshold.

    The seeded intervals start at multiples of half their width, so a step a few points after a larger
    one often has no interval that holds it without the larger step: it would be folded into its
    neighbour. Scanning each segment between boundaries (whose ends are change points, not interval
    edges) finds it, as plain binary segmentation would.
    """
    length = sums.weight.size - 1
    chosen = sorted(boundaries)
    pending = list(zip([0, *chosen], [*chosen, length], strict=True))
    while pending:
        start, end = pending.pop()
        if end - start < 2 * MIN_SEGMENT:
            continue
        splits = np.arange(start + MIN_SEGMENT, end - MIN_SEGMENT + 1)
        # Only a step shadowed by a neighbouring boundary is missed; farther ones had their intervals.
        near = (splits - start <= RESCAN_REACH) | (end - splits <= RESCAN_REACH)
        splits = splits[near]
        cusum = sums.contrast(starts=np.int64(start), splits=splits, ends=np.int64(end)) / inflation
        best = int(np.argmax(cusum))
        if cusum[best] <= threshold:
            continue
        split = int(splits[best])
        bisect.insort(chosen, split)
        pending.extend([(start, split), (split, end)])
    return chosen


def _segment_means(*, prefix: FloatArray, edges: npt.NDArray[np.int64]) -> FloatArray:
    return np.asarray((prefix[edges[1:]] - prefix[edges[:-1]]) / np.diff(edges), dtype=np.float64)


def _residual_autocorrelation(
    *, values: FloatArray, sigma: FloatArray, sums: _Sums, boundaries: list[int]
) -> float:
    edges = np.array([0, *boundaries, values.size], dtype=np.int64)
    means = np.diff(sums.value[edges]) / np.diff(sums.weight[edges])
    # Residuals in units of their own noise, so a noisy stretch does not outweigh the rest.
    residuals = (values - np.repeat(means, np.diff(edges))) / sigma
    energy = float(np.dot(residuals, residuals))
    rounding = values.size * (1e-12 * float(np.max(np.abs(values / sigma)))) ** 2
    if energy <= rounding:
        return 0.0  # noiseless segments: what is left is rounding error, not autocorrelation
    rho = float(np.dot(residuals[:-1], residuals[1:])) / energy
    return float(np.clip(rho, 0.0, MAX_AUTOCORRELATION))


class _SegmentTests:
    """Significance and size of each boundary against its neighbouring segments."""

    def __init__(
        self,
        *,
        values: FloatArray,
        weights: FloatArray,
        original: FloatArray,
        autocorrelation: float,
        min_relative_change: float,
        p_threshold: float,
    ) -> None:
        self.size = values.size
        self.weights = np.concatenate(([0.0], np.cumsum(weights)))
        self.prefix = np.concatenate(([0.0], np.cumsum(weights * values)))
        self.squares = np.concatenate(([0.0], np.cumsum(weights * values * values)))
        self.original_prefix = np.concatenate(([0.0], np.cumsum(original)))
        # Autocorrelated noise makes segment means vary more than iid noise would: deflate t accordingly.
        self.variance_inflation = (1.0 + autocorrelation) / (1.0 - autocorrelation)
        self.min_relative_change = min_relative_change
        self.p_threshold = p_threshold

    def _measure(self, *, boundaries: list[int]) -> tuple[FloatArray, FloatArray, FloatArray]:
        edges = np.array([0, *boundaries, self.size], dtype=np.int64)
        p_values = _adjacent_p_values(
            weights=self.weights,
            prefix=self.prefix,
            squares=self.squares,
            edges=edges,
            variance_inflation=self.variance_inflation,
        )
        means = _segment_means(prefix=self.original_prefix, edges=edges)
        return p_values, means, _relative_change(before=means[:-1], after=means[1:])

    def _excursion_p_values(
        self, *, boundaries: list[int], relative: FloatArray, p_values: FloatArray
    ) -> FloatArray:
        """For each boundary, the p-value of the short level it bounds with a neighbouring boundary that
        is significant on its own (a change reverted a few points later): that level against the two
        levels around it together, where both changes are large enough and of opposite signs; 1 where
        there is none. Two weak boundaries never hold each other up: in stretches of doubled noise
        that made false pairs out of noise.

        Tested one boundary at a time, the way out of an excursion compares its few points with the
        few after it and fails, and the way in, its excursion then merged with what follows, fails
        too: an excursion of 3 noise scales over 6 points, 4 points before the end, had both its edges
        found in 6 of 30 histories (16 with this test; `tests/regressions/test_excursions.py`)."""
        edges = np.array([0, *boundaries, self.size], dtype=np.int64)
        counts = np.diff(edges).astype(np.float64)
        weight = np.diff(self.weights[edges])
        sums = np.diff(self.prefix[edges])
        squares = np.diff(self.squares[edges])
        result = np.ones(len(boundaries))
        large = np.abs(relative) >= self.min_relative_change
        for first in range(len(boundaries) - 1):
            if not (large[first] and large[first + 1]) or relative[first] * relative[first + 1] >= 0:
                continue
            middle = first + 1  # the segment between the two boundaries
            outer = [first, first + 2]
            outer_weight = weight[outer].sum()
            outer_sum = sums[outer].sum()
            outer_mean = outer_sum / outer_weight
            middle_mean = sums[middle] / weight[middle]
            # The outer levels' own difference counts as noise here: a step, not a revert, fails.
            deviations = max(squares[outer].sum() - outer_sum * outer_mean, 0.0) + max(
                squares[middle] - sums[middle] * middle_mean, 0.0
            )
            degrees = counts[outer].sum() + counts[middle] - 2.0
            pooled = deviations / degrees
            error = math.sqrt(pooled * (1.0 / outer_weight + 1.0 / weight[middle]) * self.variance_inflation)
            if error <= 0.0:
                continue
            t = abs(middle_mean - outer_mean) / error
            p_value = float(2.0 * special.stdtr(min(degrees, float(LOCAL_NOISE_POINTS)), -t))
            for weak, strong in ((first, first + 1), (first + 1, first)):
                if p_values[strong] < self.p_threshold:
                    result[weak] = min(result[weak], p_value * EXCURSION_STRICTNESS)
        return result

    def prune(self, *, boundaries: list[int]) -> list[int]:
        """Drop the weakest boundary until every survivor is significant and large enough, on its own or
        as one edge of a short excursion with its neighbour."""
        kept = list(boundaries)
        while kept:
            p_values, _, relative = self._measure(boundaries=kept)
            p_values = np.minimum(
                p_values, self._excursion_p_values(boundaries=kept, relative=relative, p_values=p_values)
            )
            # Too-small changes rank as weakest whatever their p-value.
            weakness = np.where(np.abs(relative) < self.min_relative_change, np.inf, p_values)
            weakest = int(np.argmax(weakness))
            if weakness[weakest] < self.p_threshold:
                break
            del kept[weakest]
        return kept

    def describe(self, *, boundaries: list[int]) -> list[ChangePoint]:
        p_values, means, relative = self._measure(boundaries=boundaries)
        return [
            ChangePoint(
                index=boundary,
                before=float(means[position]),
                after=float(means[position + 1]),
                change_pct=float(relative[position] * 100.0),
                p_value=float(p_values[position]),
            )
            for position, boundary in enumerate(boundaries)
        ]


def _adjacent_p_values(
    *,
    weights: FloatArray,
    prefix: FloatArray,
    squares: FloatArray,
    edges: npt.NDArray[np.int64],
    variance_inflation: float,
) -> FloatArray:
    """Two-sided pooled t-test p-values between each pair of neighbouring segments, each point weighted
    by its inverse noise variance (with equal weights, Student's pooled test exactly)."""
    counts = np.diff(edges).astype(np.float64)
    weight = np.diff(weights[edges])
    sums = np.diff(prefix[edges])
    sum_squares = np.diff(squares[edges])
    means = sums / weight
    deviations = np.maximum(sum_squares - sums * means, 0.0)
    left_n, right_n = counts[:-1], counts[1:]
    degrees = left_n + right_n - 2.0
    # The pooled variance of a unit-weight point: 1 when the local scales are right.
    pooled = (deviations[:-1] + deviations[1:]) / degrees
    standard_error = np.sqrt(pooled * (1.0 / weight[:-1] + 1.0 / weight[1:]) * variance_inflation)
    difference = np.abs(means[1:] - means[:-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(standard_error > 0.0, difference / standard_error, np.where(difference > 0, np.inf, 0.0))
    # The weights are estimates from LOCAL_NOISE_POINTS differences each: the test can be no surer of
    # them than that many degrees of freedom allow, however long the segments.
    degrees = np.minimum(degrees, float(LOCAL_NOISE_POINTS))
    # special.stdtr(ν, -t) is what stats.t.sf(t, ν) computes, without its per-call argument checks
    # (ν is at least 2·MIN_SEGMENT - 2 here, and t is never negative).
    return np.asarray(2.0 * special.stdtr(degrees, -t), dtype=np.float64)


def _relative_change(*, before: FloatArray, after: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            before != 0.0, (after - before) / np.abs(before), np.where(after == before, 0.0, np.inf)
        )
