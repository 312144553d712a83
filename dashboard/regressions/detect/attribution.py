"""Joint attribution: where the changes of one suite on one hardware class lie (pure numpy, no Django).

Every series of a suite and hardware class (each concurrency level and metric) is measured by the same
runs, so they are evidence about the same change locations. This module turns them into changes, each
located once, at one range of benchmarked points, with every series that moved there:

1. **Outlier runs.** A point that fits neither the points just before it nor those just after it is an
   outlier in its series (beyond 5 σ); a run whose points are beyond 3 σ in at least half of the series
   it measured is a slow (or fast) run as a whole, and so is a run slower than both sides by 2 σ on
   average over the series that speed moves (throughput down, latencies up; a node's slow mode moves
   them all at once, each by too little to stand out alone). Either way the point says nothing about
   which side of a change its commit lies on, so it is left out of detection and location, and the
   noise scales are taken again without the slow runs. Replacing it by a rolling median instead would
   give it the level of the side that holds more of the window, which is how a slow run just before a
   regression used to take the blame.
2. **Candidates.** Each series' own change points (:func:`detection.change_points_detect`, the detector
   measured best in notes/change-points.md) over the points that are left.
   A commit measured three or more times is never an outlier (the median of its runs already discounts
   a slow one); when its median fits neither side, it is a level of its own: a change before it and one
   after it are both candidates, which is how a step reverted one commit later, or two steps one commit
   apart, are told from one step once the culprit search has repeated that commit.
3. **Clusters.** Each candidate first gets its own range in its own series (step 4 on that series alone,
   between its neighbouring candidates). Candidates of different series whose ranges overlap are one
   change; candidates whose ranges do not overlap, and two candidates of one series, never are.
4. **Location.** For each change, the profile log-likelihood of a single step at every point between its
   neighbouring changes, summed over the series that saw it (each weighted by its points' run counts and
   scaled by its own noise). The step lies at the maximum; every point whose likelihood is within
   ln(2/α) of it stays possible (α = 2 %: under a random-walk approximation the true location is outside
   that set about α of the time, whatever the step size). The change's range spans that set: a clear step
   gets one point, an ambiguous or outlier-flanked one a wider range that says why.
5. **Size.** Every series is tested at the located range with :func:`statistics.change_estimate` on the
   points before and after it (the points inside the range are left out) and gets an alert when it passes
   its p-value threshold and minimum relative change.

Indices are positions in the list of benchmarked points. A change with range ``first``..``last`` means the
culprit lies after point ``first - 1`` up to and including point ``last``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dashboard.benchmarks.statistics import (
    NoiseEstimate,
    change_estimate,
    local_scales_both,
    noise_from_values,
    noise_of_sides,
)
from dashboard.regressions.detect.detector import change_points_detect

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NEIGHBOURS = 3
POINT_OUTLIER_SIGMAS = 5.0
RUN_OUTLIER_SIGMAS = 3.0
# A commit with this many runs is a level of its own, never an outlier: its median discounts a slow run.
REPEATED_RUNS = 3
# How far, in standard errors of its median, a repeated commit must lie from both sides to be a level.
LEVEL_SIGMAS = 5.0
LOCATION_ALPHA = 0.02
LOCATION_SLACK = math.log(2.0 / LOCATION_ALPHA)
# How many points on each side locate a change and measure its size.
CONTEXT_POINTS = 30
# A run slower than both sides by this many noise scales, averaged over the series that speed moves, is a
# slow run as a whole (its series are clipped to SLOW_CLIP scales each, so one wild value cannot decide
# alone). On suites drawn from the simulation's world (slow mode on 5 % of runs, 4-10 %), 2 σ took 58 %
# of the slow runs and 1 % other runs; both edges of a 5-point excursion of 2.5 noise scales were found in
# 112 of 150 histories against 85, and 126 with every slow run known.
SLOW_RUN_SIGMAS = 2.0
SLOW_CLIP = (-5.0, 8.0)
# Fewer series that speed moves than this, and a run is never judged slow as a whole.
SLOW_MIN_SERIES = 3


class HistoryInvalid(ValueError):
    """Series of different lengths, or values that are neither finite nor NaN."""


@dataclass(frozen=True)
class SeriesHistory:
    """One series over the suite's benchmarked points: NaN where it has no value."""

    key: Hashable
    values: Sequence[float] | npt.NDArray[np.floating]
    runs: Sequence[int] | None = None  # runs behind each point (weights); one each when None
    min_relative_change: float = 0.02
    p_threshold: float = 1e-4
    noise: NoiseEstimate | None = None  # run-to-run noise measured from repeats, when there are any
    slower: float = 0.0  # +1 when a slow run reads higher (a latency), -1 lower (a throughput), 0 neither


@dataclass(frozen=True)
class SeriesChange:
    key: Hashable
    before: float  # median of the points before the range
    after: float  # median of the points after it
    change_pct: float
    low_pct: float | None
    high_pct: float | None
    p_value: float
    n_before: int
    n_after: int


@dataclass(frozen=True)
class LocatedChange:
    first: int  # the earliest point that may be the first one after the change
    last: int  # the latest such point: the culprit is after point first-1, up to point last
    estimate: int  # the most likely first point after the change
    changes: tuple[SeriesChange, ...]
    outliers: tuple[int, ...] = field(default=())  # points in the range whose runs were left out
    ambiguous: bool = False  # points in the range fit both sides

    @property
    def widened(self) -> bool:
        return self.last > self.first


def changes_locate(*, series: Sequence[SeriesHistory]) -> list[LocatedChange]:
    """The changes of a suite on a hardware class, each located once over all its series, in order."""
    return changes_and_outliers_locate(series=series)[0]


def changes_and_outliers_locate(*, series: Sequence[SeriesHistory]) -> tuple[list[LocatedChange], list[int]]:
    """The changes (as `changes_locate`) and the points left out as outliers in any series: a point
    measured fewer than REPEATED_RUNS times that fits neither side. Such a point is a slow run, or a
    change too short for a segment of its own (a regression reverted a commit or two later); more runs
    of its commit tell which, since a commit measured that often is a level of its own."""
    if not series:
        return [], []
    prepared = [_Prepared.of(history) for history in series]
    length = prepared[0].values.size
    if any(item.values.size != length for item in prepared):
        raise HistoryInvalid("every series must have one value (or NaN) per benchmarked point")
    slow = _slow_runs(prepared)
    if slow.any():
        # The noise of every series without them: their differences are the largest in any window.
        prepared = [_Prepared.of(history, left_out=slow) for history in series]
    _outliers_mark(prepared)
    left_out = np.zeros(length, dtype=bool)
    for item in prepared:
        left_out |= ~item.usable & ~np.isnan(item.values)
    outliers = [int(index) for index in np.flatnonzero(left_out)]

    candidates: set[tuple[int, int]] = set()  # (first point after the change, series number)
    for number, item in enumerate(prepared):
        used = np.flatnonzero(item.usable)
        if used.size == 0 or item.sigma == 0.0:
            continue
        # With no point left out, the detector's values are the present ones: their scales are known.
        known = item.local if item.local is not None and item.local.size == used.size else None
        for change in change_points_detect(
            values=item.values[used],
            min_relative_change=item.history.min_relative_change,
            p_threshold=item.history.p_threshold,
            scales=known,
        ):
            candidates.add((int(used[change.index]), number))
        candidates.update((point, number) for point in _level_edges(item=item))
    clusters = _clusters(prepared=prepared, candidates=sorted(candidates))

    located: list[LocatedChange] = []
    floor = 0
    for position, cluster in enumerate(clusters):
        ceiling = (
            min(length, min(index for index, _ in clusters[position + 1]))
            if position + 1 < len(clusters)
            else length
        )
        found = _locate(prepared=prepared, cluster=cluster, floor=floor, ceiling=ceiling)
        if found is None:
            continue
        located.append(found)
        floor = found.last
    return located, outliers


@dataclass
class _Prepared:
    history: SeriesHistory
    values: FloatArray  # original units, NaN where absent
    signal: FloatArray  # log values for positive series
    weights: FloatArray
    sigma: float
    scales: FloatArray  # the noise of the stretch around each point (NaN where absent)
    interval_scales: FloatArray  # the same, unbiased: what a change's interval is judged on
    relative: bool  # scales are fractions of the value (log space)
    noise: NoiseEstimate | None  # measured from repeats, when given: then the one scale of every point
    local: FloatArray | None  # `local_scales` of the present points, as the detector takes them (no noise)
    usable: BoolArray  # present and not an outlier
    scores: FloatArray  # distance to the nearer side, in σ (NaN where absent)
    sides: tuple[npt.NDArray[np.int64], FloatArray, FloatArray]  # `_side_medians` of `signal`

    @classmethod
    def of(cls, history: SeriesHistory, *, left_out: BoolArray | None = None) -> _Prepared:
        """`left_out`: points of slow runs, unusable and kept out of the noise scales (a commit measured
        `REPEATED_RUNS` times or more is never one: its median discounts a slow run)."""
        values = np.asarray(history.values, dtype=np.float64)
        if values.ndim != 1 or np.any(np.isinf(values)):
            raise HistoryInvalid(f"series {history.key!r}: values must be one-dimensional, finite or NaN")
        weights = np.ones(values.size) if history.runs is None else np.asarray(history.runs, dtype=np.float64)
        present = ~np.isnan(values)
        if weights.shape != values.shape or np.any(weights[present] < 1):
            raise HistoryInvalid(f"series {history.key!r}: one run count of at least 1 per value")
        counted = present.copy()  # the points the noise scales are taken from
        if left_out is not None:
            counted &= ~(left_out & (weights < REPEATED_RUNS))
        relative = bool(np.all(values[present] > 0))
        signal = np.full(values.size, np.nan)
        signal[counted] = np.log(values[counted]) if relative else values[counted]
        noise = history.noise
        local = None
        scales = np.full(values.size, np.nan)
        interval_scales = np.full(values.size, np.nan)
        if noise is not None and noise.relative == relative and noise.sigma > 0.0:
            scales[counted] = interval_scales[counted] = noise.sigma
        else:
            noise = None
            # Local: a stretch of doubled noise is judged on its own noise, a quiet one on its own.
            local, unbiased = local_scales_both(signal[counted])
            # The whole series' noise where a stretch has none, read only then: a rescan prepares every
            # series of every window.
            stands_in = counted.any() and not (np.all(local > 0.0) and np.all(unbiased > 0.0))
            overall = noise_from_values(values[counted]).sigma if stands_in else 0.0
            scales[counted] = np.where(local > 0.0, local, overall)
            interval_scales[counted] = np.where(unbiased > 0.0, unbiased, overall)
        # The median of the counted scales, as np.nanmedian gives it without its masked-array path.
        sigma = float(np.median(scales[counted])) if counted.any() else 0.0
        sides = _side_medians(signal)
        return cls(
            history=history,
            values=values,
            signal=signal,
            weights=weights,
            sigma=sigma if np.isfinite(sigma) else 0.0,
            scales=scales,
            interval_scales=interval_scales,
            relative=relative,
            noise=noise,
            local=local,
            usable=counted,
            scores=_side_distances(signal=signal, scales=scales, sides=sides),
            sides=sides,
        )


def _side_medians(signal: FloatArray) -> tuple[npt.NDArray[np.int64], FloatArray, FloatArray]:
    """The present points, and the medians of the few present points just before and just after each
    (NaN at the ends, where a side has none)."""
    present = np.flatnonzero(~np.isnan(signal))
    compact = signal[present]
    padded = np.concatenate((np.full(NEIGHBOURS, np.nan), compact, np.full(NEIGHBOURS, np.nan)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, NEIGHBOURS)
    # A point's side after is the window that starts NEIGHBOURS + 1 later: one pass gives both sides.
    medians = _window_nanmedians(windows)
    before = medians[: compact.size]
    after = medians[NEIGHBOURS + 1 : NEIGHBOURS + 1 + compact.size]
    return present, before, after


def _side_distances(
    *, signal: FloatArray, scales: FloatArray, sides: tuple[npt.NDArray[np.int64], FloatArray, FloatArray]
) -> FloatArray:
    """For each present point, its distance in its local σ to the nearer of the medians of the few points
    just before and just after it (0 where there is no context)."""
    scores = np.full(signal.size, np.nan)
    present, before, after = sides
    if present.size == 0 or not np.all(scales[present] > 0.0):
        return np.where(np.isnan(signal), np.nan, 0.0)
    compact = signal[present]
    with np.errstate(invalid="ignore"):  # all-NaN sides at the ends
        distance = np.fmin(np.abs(compact - before), np.abs(compact - after)) / scales[present]
    scores[present] = np.nan_to_num(distance, nan=0.0)
    return scores


def _slow_runs(prepared: list[_Prepared]) -> BoolArray:
    """Points whose run is slower than both sides, on average over the series that speed moves, by
    `SLOW_RUN_SIGMAS` of their noise: a node's slow mode, a few percent on every such series."""
    slowness = []
    for item in prepared:
        present, before, after = item.sides  # read once per series, by `_Prepared.of`
        if not item.history.slower or present.size == 0 or not np.all(item.scales[present] > 0.0):
            continue
        compact = item.signal[present]
        with np.errstate(invalid="ignore"):  # all-NaN sides at the ends
            # Slower than the nearer side in the slow direction: a step's first point is as slow as the
            # side after it, so it scores about 0.
            off = np.fmin((compact - before) * item.history.slower, (compact - after) * item.history.slower)
        row = np.full(item.signal.size, np.nan)
        row[present] = np.clip(off / item.scales[present], *SLOW_CLIP)
        slowness.append(row)
    if len(slowness) < SLOW_MIN_SERIES:
        return np.zeros(prepared[0].values.size, dtype=bool)
    rows = np.vstack(slowness)
    counted = np.count_nonzero(~np.isnan(rows), axis=0)
    with np.errstate(invalid="ignore"):
        mean = np.nansum(rows, axis=0) / np.maximum(counted, 1)
    return (counted >= SLOW_MIN_SERIES) & (mean > SLOW_RUN_SIGMAS)


def _window_nanmedians(windows: FloatArray) -> FloatArray:
    """np.nanmedian along each row, to the bit, in a few array operations: numpy's own loops over rows
    this short in Python, which was a third of detection's time. NaN where a row has no value."""
    ordered = np.sort(windows, axis=1)  # NaN sorts last
    counts = np.count_nonzero(~np.isnan(windows), axis=1)
    rows = np.arange(ordered.shape[0])
    upper = ordered[rows, counts // 2]
    lower = ordered[rows, np.maximum((counts - 1) // 2, 0)]
    # An odd count has one middle value; an even count the mean of two, which numpy computes as a sum
    # halved.
    with np.errstate(invalid="ignore"):
        medians = np.where(counts % 2 == 1, upper, (lower + upper) / 2.0)
    return np.where(counts > 0, medians, np.nan)


def _outliers_mark(prepared: list[_Prepared]) -> None:
    """Leave out points that fit neither side: alone beyond 5 σ, or as a run beyond 3 σ in most series."""
    scores = np.vstack([item.scores for item in prepared])
    present = ~np.isnan(scores)
    far = np.where(present, scores, 0.0) > RUN_OUTLIER_SIGMAS
    measured = present.sum(axis=0)
    outlying_runs = (far.sum(axis=0) >= np.maximum(2, np.ceil(measured / 2.0))) & (measured >= 2)
    for item in prepared:
        point_outliers = np.nan_to_num(item.scores, nan=0.0) > POINT_OUTLIER_SIGMAS
        item.usable &= ~((point_outliers | outlying_runs) & (item.weights < REPEATED_RUNS))


def _level_edges(*, item: _Prepared) -> list[int]:
    """The points just before and just after each repeated commit whose median fits neither side: a
    commit measured that often is a level of its own, however short."""
    repeated = (item.weights >= REPEATED_RUNS) & item.usable
    # The standard error of a median of n runs is about σ·√(1.35/n) for the few runs of a commit.
    precision = np.sqrt(item.weights / 1.352)
    far = np.nan_to_num(item.scores, nan=0.0) * precision > LEVEL_SIGMAS
    edges: list[int] = []
    for point in np.flatnonzero(repeated & far).tolist():
        edges.append(point)
        if point + 1 < item.values.size:
            edges.append(point + 1)
    return edges


def _candidate_range(*, item: _Prepared, index: int, low: int, high: int) -> tuple[int, int]:
    """The points that may be the first after a candidate's change, from its own series alone."""
    low, high = max(low, index - CONTEXT_POINTS), min(high, index + CONTEXT_POINTS)
    if high - low < 2:
        return index, index
    likelihood = _step_likelihood(item=item, low=low, high=high)
    possible = np.flatnonzero(likelihood >= likelihood.max() - LOCATION_SLACK)
    return low + 1 + int(possible.min()), low + 1 + int(possible.max())


def _clusters(*, prepared: list[_Prepared], candidates: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Candidates of different series whose own ranges overlap, as one change each, in order.

    Ranges, not distances: two changes two points apart whose series each place them exactly are two
    changes, and one change that a noisy series places loosely is still one.
    """
    by_series: dict[int, list[int]] = {}
    for index, number in candidates:
        by_series.setdefault(number, []).append(index)
    ranged: list[tuple[int, int, int, int]] = []  # (first, last, index, series number)
    for number, indices in by_series.items():
        for position, index in enumerate(indices):
            low = indices[position - 1] if position else 0
            high = indices[position + 1] if position + 1 < len(indices) else prepared[number].values.size
            first, last = _candidate_range(item=prepared[number], index=index, low=low, high=high)
            ranged.append((first, last, index, number))
    ranged.sort()
    clusters: list[list[tuple[int, int]]] = []
    reach = -1
    for first, last, index, number in ranged:
        current = clusters[-1] if clusters else None
        if current is not None and first <= reach and all(member != number for _, member in current):
            current.append((index, number))
            reach = max(reach, last)
        else:
            clusters.append([(index, number)])
            reach = last
    for cluster in clusters:
        cluster.sort()
    return clusters


def _locate(
    *, prepared: list[_Prepared], cluster: list[tuple[int, int]], floor: int, ceiling: int
) -> LocatedChange | None:
    low = max(floor, cluster[0][0] - CONTEXT_POINTS)
    high = min(ceiling, cluster[-1][0] + CONTEXT_POINTS)
    if high - low < 2:
        return None
    involved = sorted({number for _, number in cluster})
    likelihood = np.zeros(high - low - 1)  # a step before point k, for k in low+1 .. high-1
    for number in involved:
        likelihood += _step_likelihood(item=prepared[number], low=low, high=high)
    best = int(np.argmax(likelihood))
    possible = np.flatnonzero(likelihood >= likelihood[best] - LOCATION_SLACK)
    first, last = low + 1 + int(possible.min()), low + 1 + int(possible.max())

    changes = tuple(
        change
        for item in prepared
        if (change := _series_change(item=item, first=first, last=last, low=low, high=high)) is not None
    )
    if not changes:
        return None
    inside = range(first, last)
    left_out = tuple(
        point for point in inside if any(not prepared[number].usable[point] for number in involved)
    )
    return LocatedChange(
        first=first,
        last=last,
        estimate=low + 1 + best,
        changes=changes,
        outliers=left_out,
        ambiguous=any(point not in left_out for point in inside),
    )


def _step_likelihood(*, item: _Prepared, low: int, high: int) -> FloatArray:
    """Log-likelihood gain of one step before each point in low+1..high-1 over no step, in [low, high)."""
    usable = item.usable[low:high]
    # Each point weighs by its runs over its local noise variance: a noisy stretch says less.
    scales = np.nan_to_num(item.scales[low:high], nan=1.0)
    weights = np.where(usable, item.weights[low:high] / scales**2, 0.0)
    signal = np.where(usable, np.nan_to_num(item.signal[low:high]), 0.0)
    weight_sums = np.cumsum(weights)
    value_sums = np.cumsum(weights * signal)
    total_weight, total_value = weight_sums[-1], value_sums[-1]
    left_weight, left_value = weight_sums[:-1], value_sums[:-1]
    right_weight, right_value = total_weight - left_weight, total_value - left_value
    with np.errstate(divide="ignore", invalid="ignore"):
        explained = (
            np.where(left_weight > 0, left_value**2 / left_weight, 0.0)
            + np.where(right_weight > 0, right_value**2 / right_weight, 0.0)
            - (total_value**2 / total_weight if total_weight > 0 else 0.0)
        )
    return np.asarray(explained / 2.0, dtype=np.float64)


def _series_change(*, item: _Prepared, first: int, last: int, low: int, high: int) -> SeriesChange | None:
    before_points = np.flatnonzero(item.usable[low:first]) + low
    after_points = np.flatnonzero(item.usable[last:high]) + last
    if before_points.size == 0 or after_points.size == 0 or item.sigma == 0.0:
        return None
    # One value per commit (the median of its runs): repeats narrow a commit's value, they do not add
    # independent commits, so counting them as points would overstate the evidence.
    estimate = change_estimate(
        before=item.values[before_points],
        after=item.values[after_points],
        # The local noise of the points compared, not one number for the window: honest where it changes.
        noise=item.noise
        or noise_of_sides(
            before=item.interval_scales[before_points],
            after=item.interval_scales[after_points],
            relative=item.relative,
        ),
        min_relative_change=item.history.min_relative_change,
    )
    if (
        estimate.p_value is None
        or estimate.p_value >= item.history.p_threshold
        or abs(estimate.change_pct) < item.history.min_relative_change * 100.0
    ):
        return None
    return SeriesChange(
        key=item.history.key,
        before=estimate.before,
        after=estimate.after,
        change_pct=estimate.change_pct,
        low_pct=estimate.low_pct,
        high_pct=estimate.high_pct,
        p_value=estimate.p_value,
        n_before=estimate.n_before,
        n_after=estimate.n_after,
    )
