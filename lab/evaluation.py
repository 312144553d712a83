"""A labelled benchmark for change-point detectors over generated per-commit series (no Django).

The generated series look like benchmark timelines: multiplicative steps of 2–50 % under 1–10 % noise,
isolated one-sided slow outliers, about 2 % of commits left unbenchmarked (which shifts indices but not
values), 50 to 5,000 points; plus step-free series with iid or AR(1) noise to count false alarms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dashboard.regressions.detect.detector import change_points_detect

FloatArray = npt.NDArray[np.float64]
Detect = Callable[[FloatArray], list[int]]

MARGIN = 2
MIN_LENGTH, MAX_LENGTH = 50, 5000
MIN_STEP, MAX_STEP = 0.02, 0.50
MIN_NOISE, MAX_NOISE = 0.01, 0.10
OUTLIER_RATE = 0.01
GAP_RATE = 0.02
# Steps closer than this to each other or to the ends would be unfair to any detector with a minimum
# segment length; real regressions are rarely that dense either.
MIN_STEP_SPACING = 20
DELAY_STEP, DELAY_NOISE = 0.05, 0.02
DELAY_HISTORY, DELAY_HORIZON = 100, 30


@dataclass(frozen=True)
class LabelledSeries:
    values: FloatArray
    change_indices: tuple[int, ...]  # first benchmarked point after each true step
    step_fractions: tuple[float, ...]  # relative size of each step, e.g. -0.06
    noise_fraction: float
    kind: str  # "steps", "iid" (step-free) or "ar1" (step-free, autocorrelated noise)


@dataclass(frozen=True)
class Score:
    precision: float
    recall: float
    f1: float
    true_positives: int
    detections: int
    truths: int


@dataclass(frozen=True)
class EvaluationReport:
    series_count: int
    points: int
    overall: Score
    large_steps: Score  # series whose steps are all at least twice the noise, and step-free series
    false_alarms_per_1000_iid: float
    false_alarms_per_1000_ar1: float
    delay_median: float  # commits after a 5 % step at 2 % noise until it is flagged
    delay_p90: float
    delay_found_fraction: float
    ms_per_series_mean: float
    ms_per_series_p90: float
    ms_for_10000_points: float


def labelled_series_generate(*, count: int, seed: int) -> list[LabelledSeries]:
    """``count`` series: 60 % with steps, 20 % step-free iid, 20 % step-free AR(1)."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(["steps", "iid", "ar1"], size=count, p=[0.6, 0.2, 0.2])
    return [_series_generate(rng=rng, kind=str(kind)) for kind in kinds]


def _series_generate(*, rng: np.random.Generator, kind: str) -> LabelledSeries:
    commits = int(np.exp(rng.uniform(np.log(MIN_LENGTH), np.log(MAX_LENGTH))))
    noise = float(rng.uniform(MIN_NOISE, MAX_NOISE))
    level = np.full(commits, float(np.exp(rng.uniform(np.log(1.0), np.log(5000.0)))))
    step_commits: list[int] = []
    fractions: list[float] = []
    if kind == "steps":
        wanted = int(rng.integers(1, min(6, 1 + commits // 300) + 1))
        step_commits = _spaced_positions(rng=rng, commits=commits, wanted=wanted)
        for position in step_commits:
            magnitude = float(np.exp(rng.uniform(np.log(MIN_STEP), np.log(MAX_STEP))))
            fraction = magnitude if rng.random() < 0.5 else -magnitude
            level[position:] *= 1.0 + fraction
            fractions.append(fraction)
    if kind == "ar1":
        rho = float(rng.uniform(0.3, 0.7))
        innovations = rng.normal(0.0, np.sqrt(1.0 - rho * rho), commits)
        shocks = np.empty(commits)
        shocks[0] = rng.normal()
        for position in range(1, commits):
            shocks[position] = rho * shocks[position - 1] + innovations[position]
    else:
        shocks = rng.normal(size=commits)
    values = level * np.maximum(1.0 + noise * shocks, 0.05)
    outliers = np.flatnonzero(rng.random(commits) < OUTLIER_RATE)
    outliers = outliers[np.diff(outliers, prepend=-2) > 1]  # isolated: never two in a row
    values[outliers] *= 1.0 - rng.uniform(0.1, 0.4, outliers.size)
    benchmarked = rng.random(commits) >= GAP_RATE
    benchmarked[0] = benchmarked[-1] = True
    kept_before = np.concatenate(([0], np.cumsum(benchmarked)))
    return LabelledSeries(
        values=values[benchmarked],
        change_indices=tuple(int(kept_before[position]) for position in step_commits),
        step_fractions=tuple(fractions),
        noise_fraction=noise,
        kind=kind,
    )


def _spaced_positions(*, rng: np.random.Generator, commits: int, wanted: int) -> list[int]:
    positions: list[int] = []
    for _ in range(50 * wanted):
        if len(positions) == wanted:
            break
        candidate = int(rng.integers(MIN_STEP_SPACING, commits - MIN_STEP_SPACING))
        if all(abs(candidate - other) >= MIN_STEP_SPACING for other in positions):
            positions.append(candidate)
    return sorted(positions)


def detections_match(
    *, truths: tuple[int, ...], detections: list[int], margin: int = MARGIN
) -> dict[int, int]:
    """One-to-one matching of true to detected indices within ``margin``, closest pairs first."""
    pairs = sorted(
        (abs(found - truth), truth_position, found_position)
        for truth_position, truth in enumerate(truths)
        for found_position, found in enumerate(detections)
        if abs(found - truth) <= margin
    )
    matched: dict[int, int] = {}
    used: set[int] = set()
    for _, truth_position, found_position in pairs:
        if truth_position not in matched and found_position not in used:
            matched[truth_position] = found_position
            used.add(found_position)
    return matched


@dataclass
class _Tally:
    hits: int = 0
    detections: int = 0
    truths: int = 0

    def add(self, *, hits: int, detections: int, truths: int) -> None:
        self.hits += hits
        self.detections += detections
        self.truths += truths

    def score(self) -> Score:
        precision = self.hits / self.detections if self.detections else 1.0
        recall = self.hits / self.truths if self.truths else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return Score(precision, recall, f1, self.hits, self.detections, self.truths)


def detector_indices(values: FloatArray) -> list[int]:
    """The project's detector with its default thresholds, as a :data:`Detect`."""
    return [change.index for change in change_points_detect(values=values)]


def detector_evaluate(*, series: list[LabelledSeries], detect: Detect = detector_indices) -> EvaluationReport:
    """Score ``detect`` on ``series``, then measure its delay and its speed."""
    overall = _Tally()
    large = _Tally()
    alarms = {"iid": 0, "ar1": 0}
    points = {"iid": 0, "ar1": 0}
    durations_ms: list[float] = []
    for labelled in series:
        started = time.perf_counter()
        detections = detect(labelled.values)
        durations_ms.append((time.perf_counter() - started) * 1000.0)
        matched = detections_match(truths=labelled.change_indices, detections=detections)
        overall.add(hits=len(matched), detections=len(detections), truths=len(labelled.change_indices))
        # Noise is relative to the level, so the step is compared on the same scale. A series with any
        # smaller step is left out whole: its detections could not be judged fairly.
        if all(abs(fraction) >= 2.0 * labelled.noise_fraction for fraction in labelled.step_fractions):
            large.add(hits=len(matched), detections=len(detections), truths=len(labelled.change_indices))
        if labelled.kind in alarms:
            alarms[labelled.kind] += len(detections)
            points[labelled.kind] += labelled.values.size
    delays, found = _delays_measure(detect=detect, seed=len(series))
    return EvaluationReport(
        series_count=len(series),
        points=sum(labelled.values.size for labelled in series),
        overall=overall.score(),
        large_steps=large.score(),
        false_alarms_per_1000_iid=1000.0 * alarms["iid"] / max(points["iid"], 1),
        false_alarms_per_1000_ar1=1000.0 * alarms["ar1"] / max(points["ar1"], 1),
        delay_median=float(np.median(delays)) if delays else float("nan"),
        delay_p90=float(np.percentile(delays, 90)) if delays else float("nan"),
        delay_found_fraction=found,
        ms_per_series_mean=float(np.mean(durations_ms)),
        ms_per_series_p90=float(np.percentile(durations_ms, 90)),
        ms_for_10000_points=_time_for_length(detect=detect, length=10_000),
    )


def _delays_measure(*, detect: Detect, seed: int, trials: int = 100) -> tuple[list[int], float]:
    """Commits after a 5 % step at 2 % noise until the detector flags it, feeding one commit at a time."""
    rng = np.random.default_rng(seed)
    delays: list[int] = []
    for _ in range(trials):
        sign = 1.0 if rng.random() < 0.5 else -1.0
        level = np.where(
            np.arange(DELAY_HISTORY + DELAY_HORIZON) < DELAY_HISTORY, 1.0, 1.0 + sign * DELAY_STEP
        )
        values = 100.0 * level * (1.0 + DELAY_NOISE * rng.normal(size=level.size))
        for seen_after in range(1, DELAY_HORIZON + 1):
            detections = detect(values[: DELAY_HISTORY + seen_after])
            if detections_match(truths=(DELAY_HISTORY,), detections=detections):
                delays.append(seen_after)
                break
    return delays, len(delays) / trials


def _time_for_length(*, detect: Detect, length: int, repeats: int = 5) -> float:
    rng = np.random.default_rng(length)
    level = np.ones(length)
    for position in rng.integers(MIN_STEP_SPACING, length - MIN_STEP_SPACING, 8):
        level[position:] *= 1.0 + rng.choice([-1.0, 1.0]) * rng.uniform(MIN_STEP, MAX_STEP)
    values = 100.0 * level * (1.0 + 0.03 * rng.normal(size=length))
    detect(values)  # warm-up: first calls pay for imports and allocator growth
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        detect(values)
        timings.append((time.perf_counter() - started) * 1000.0)
    return float(np.median(timings))


def report_format(*, report: EvaluationReport) -> str:
    """The report as aligned text lines, the same for every detector compared."""

    def score_line(name: str, score: Score) -> str:
        return (
            f"{name:<29} precision {score.precision:.3f}  recall {score.recall:.3f}  F1 {score.f1:.3f}"
            f"  ({score.true_positives} hits, {score.detections} detections, {score.truths} true steps)"
        )

    return "\n".join(
        [
            f"series: {report.series_count} ({report.points} points), margin ±{MARGIN} commits",
            score_line("all steps", report.overall),
            # Step-free series stay in: a false alarm there is as wrong as one beside a large step.
            score_line("steps >= 2x noise, no steps", report.large_steps),
            f"false alarms / 1000 points on step-free series: iid {report.false_alarms_per_1000_iid:.2f}"
            f"  AR(1) {report.false_alarms_per_1000_ar1:.2f}",
            f"5 % step at 2 % noise, commits until flagged: median {report.delay_median:.0f}"
            f"  p90 {report.delay_p90:.1f}  found {report.delay_found_fraction:.0%}",
            f"time per series: mean {report.ms_per_series_mean:.2f} ms"
            f"  p90 {report.ms_per_series_p90:.2f} ms",
            f"time for 10,000 points: {report.ms_for_10000_points:.1f} ms",
        ]
    )
