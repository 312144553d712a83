"""How well changes are attributed to commits, on generated suite histories with known culprits (no Django).

A history is one suite on one hardware class: output throughput, TTFT, ITL, TPOT and request latency at
three concurrency levels (15 series), one run per commit, with run-to-run noise of 1–4 % per series, a
slow run now and then (every metric of that run worse by 4–15 %), commits that were never benchmarked,
and steps of 2–30 % at known commits. A step moves some of the series: throughput with latency and TPOT
at every level, only TTFT, or only the highest concurrency; some are trade-offs (throughput up, TTFT up),
some come back with a revert, some come in close pairs a few commits apart.

Two attributions are scored against the truth: joint attribution (:mod:`attribution`), and every series on
its own as before (one range per series' change point, merged when they name the same range).
"""

from __future__ import annotations

import statistics as stdlib_statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dashboard.benchmarks.direction import metric_higher_is_better
from dashboard.benchmarks.thresholds import threshold_resolve
from dashboard.regressions.detect.attribution import SeriesHistory, changes_locate
from dashboard.regressions.detect.detector import change_points_detect

CONCURRENCIES = (1, 4, 16)
METRICS = ("output_throughput_tok_s", "ttft_ms_mean", "itl_ms_mean", "tpot_ms_mean", "latency_s_mean")
MIN_STEP, MAX_STEP = 0.02, 0.30
MIN_NOISE, MAX_NOISE = 0.01, 0.04
SLOW_RUN_RATE = 0.02
SLOW_RUN_MIN, SLOW_RUN_MAX = 0.04, 0.15
UNBENCHMARKED_RATE = 0.15
CLOSE_PAIR_RATE = 0.2
REVERT_RATE = 0.15
# A change found this many benchmarked points or fewer from a true step is about that step.
NEAR_POINTS = 3


@dataclass(frozen=True)
class TrueStep:
    commit: int  # the culprit commit
    point: int  # the first benchmarked point at or after it
    size: float  # relative size of the largest move
    noise: float  # largest noise among the series it moved
    series: tuple[str, ...]


@dataclass(frozen=True)
class SuiteHistory:
    series: tuple[SeriesHistory, ...]
    benchmarked_commits: tuple[int, ...]  # commit number of each benchmarked point
    steps: tuple[TrueStep, ...]


@dataclass(frozen=True)
class Found:
    first: int
    last: int


@dataclass(frozen=True)
class AttributionScore:
    steps: int
    steps_large: int  # steps of at least twice the noise of the series they moved
    contained: int  # a found change's range holds the culprit
    narrowest: int  # ... and is the narrowest the benchmarked commits allow (one benchmarked point)
    narrowest_large: int
    exact: int  # ... and is that one commit
    exact_large: int
    wrong: int  # a found change near the step names a range without the culprit
    missed: int
    found: int  # changes found
    false: int  # changes found with no true step near
    per_step: float  # changes found near each found step (1.0: one group per change)
    median_commits: float  # commits in the range of the changes that hold the culprit


def history_generate(*, seed: int, commits: int = 600) -> SuiteHistory:
    """One suite history of `commits` commits with known steps (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    keys = [f"{metric}@c{level}" for level in CONCURRENCIES for metric in METRICS]
    noise = {key: float(rng.uniform(MIN_NOISE, MAX_NOISE)) for key in keys}
    levels = {key: np.full(commits, float(np.exp(rng.uniform(0.0, 7.0)))) for key in keys}
    steps: list[tuple[int, float, tuple[str, ...]]] = []
    commit = int(rng.integers(20, 40))
    while commit < commits - 20:
        size = float(np.exp(rng.uniform(np.log(MIN_STEP), np.log(MAX_STEP))))
        pattern = rng.choice(["throughput", "ttft", "top", "trade"])
        worse = bool(rng.random() < 0.5)
        moved = _moves(pattern=str(pattern), size=size, worse=worse)
        steps.append((commit, size, tuple(moved)))
        _apply(levels=levels, commit=commit, moves=moved)
        if rng.random() < REVERT_RATE:
            back = commit + int(rng.integers(8, 30))
            if back < commits - 20:
                undo = {key: 1.0 / factor for key, factor in moved.items()}
                steps.append((back, size, tuple(undo)))
                _apply(levels=levels, commit=back, moves=undo)
                commit = back
        if rng.random() < CLOSE_PAIR_RATE:
            near = commit + int(rng.integers(4, 7))
            second = float(np.exp(rng.uniform(np.log(0.05), np.log(MAX_STEP))))
            moves = _moves(pattern=str(pattern), size=second, worse=not worse)
            steps.append((near, second, tuple(moves)))
            _apply(levels=levels, commit=near, moves=moves)
            commit = near
        commit += int(rng.integers(25, 60))

    benchmarked = np.flatnonzero(rng.random(commits) >= UNBENCHMARKED_RATE)
    # The culprit's own commit is often unbenchmarked, but the one after a step always exists somewhere.
    slow = rng.random(commits) < SLOW_RUN_RATE
    slow_size = rng.uniform(SLOW_RUN_MIN, SLOW_RUN_MAX, size=commits)
    histories = []
    for key in keys:
        higher_is_better = metric_higher_is_better(key.split("@")[0])
        slowdown = np.where(slow, 1.0 - slow_size if higher_is_better else 1.0 + slow_size, 1.0)
        values = levels[key] * slowdown * np.exp(noise[key] * rng.normal(size=commits))
        metric = key.split("@")[0]
        histories.append(
            SeriesHistory(
                key=key,
                values=values[benchmarked],
                min_relative_change=threshold_resolve(metric=metric, suite_id=0, rows=()).min_relative_change,
            )
        )
    true_steps = []
    for commit, size, moved_keys in steps:
        point = int(np.searchsorted(benchmarked, commit))
        if point >= benchmarked.size:
            continue
        true_steps.append(
            TrueStep(
                commit=commit,
                point=point,
                size=size,
                noise=max(noise[key] for key in moved_keys),
                series=moved_keys,
            )
        )
    return SuiteHistory(
        series=tuple(histories),
        benchmarked_commits=tuple(int(commit) for commit in benchmarked),
        steps=tuple(true_steps),
    )


def _moves(*, pattern: str, size: float, worse: bool) -> dict[str, float]:
    """Multiplicative factor per series key for one step."""
    faster = 1.0 + size if not worse else 1.0 / (1.0 + size)
    slower = 1.0 / faster
    if pattern == "throughput":
        return {
            f"{metric}@c{level}": faster if metric_higher_is_better(metric) else slower
            for level in CONCURRENCIES
            for metric in ("output_throughput_tok_s", "tpot_ms_mean", "latency_s_mean", "itl_ms_mean")
        }
    if pattern == "ttft":
        return {f"ttft_ms_mean@c{level}": slower for level in CONCURRENCIES}
    if pattern == "top":
        return {
            "output_throughput_tok_s@c16": faster,
            "latency_s_mean@c16": slower,
            "tpot_ms_mean@c16": slower,
        }
    # A trade-off: more throughput at the top concurrency for a worse first token everywhere.
    return {
        "output_throughput_tok_s@c16": faster,
        **{f"ttft_ms_mean@c{level}": faster for level in CONCURRENCIES},
    }


def _apply(*, levels: dict[str, np.ndarray], commit: int, moves: dict[str, float]) -> None:
    for key, factor in moves.items():
        levels[key][commit:] *= factor


Attribute = Callable[[SuiteHistory], list[Found]]


def joint_attribute(history: SuiteHistory) -> list[Found]:
    return [Found(first=change.first, last=change.last) for change in changes_locate(series=history.series)]


def per_series_attribute(history: SuiteHistory) -> list[Found]:
    """Each series alone, one range per change point, ranges named by several series counted once."""
    found: set[int] = set()
    for series in history.series:
        values = np.asarray(series.values, dtype=np.float64)
        for change in change_points_detect(values=values, min_relative_change=series.min_relative_change):
            found.add(change.index)
    return [Found(first=index, last=index) for index in sorted(found)]


def attribution_score(*, histories: list[SuiteHistory], attribute: Attribute) -> AttributionScore:
    """Score an attribution over histories: found, exact, wrong, missed and false changes."""
    totals = dict.fromkeys(
        (
            "steps",
            "large",
            "contained",
            "narrowest",
            "narrowest_large",
            "exact",
            "exact_large",
            "wrong",
            "missed",
            "found",
            "false",
        ),
        0,
    )
    near_counts: list[int] = []
    widths: list[int] = []
    for history in histories:
        found = attribute(history)
        commits = history.benchmarked_commits
        totals["found"] += len(found)
        for change in found:
            if not any(
                change.first - NEAR_POINTS <= step.point <= change.last + NEAR_POINTS
                for step in history.steps
            ):
                totals["false"] += 1
        for step in history.steps:
            large = step.size >= 2 * step.noise
            totals["steps"] += 1
            totals["large"] += large
            # A change that holds another true step is about that one: this step was missed, not misplaced.
            near = [
                change
                for change in found
                if change.first - NEAR_POINTS <= step.point <= change.last + NEAR_POINTS
                and (
                    change.first <= step.point <= change.last
                    or not any(
                        change.first <= other.point <= change.last
                        for other in history.steps
                        if other.point != step.point
                    )
                )
            ]
            holding = [change for change in near if change.first <= step.point <= change.last]
            if holding:
                totals["contained"] += 1
                change = holding[0]
                # Commits that may be the culprit: after the point before `first`, up to point `last`.
                start = commits[change.first - 1] + 1 if change.first > 0 else 0
                width = commits[change.last] - start + 1
                widths.append(width)
                narrowest = change.first == change.last == step.point
                totals["narrowest"] += narrowest
                totals["narrowest_large"] += narrowest and large
                exact = width == 1 and commits[change.last] == step.commit
                totals["exact"] += exact
                totals["exact_large"] += exact and large
            elif near:
                totals["wrong"] += 1
            else:
                totals["missed"] += 1
            if near:
                near_counts.append(len(near))
    return AttributionScore(
        steps=totals["steps"],
        steps_large=totals["large"],
        contained=totals["contained"],
        narrowest=totals["narrowest"],
        narrowest_large=totals["narrowest_large"],
        exact=totals["exact"],
        exact_large=totals["exact_large"],
        wrong=totals["wrong"],
        missed=totals["missed"],
        found=totals["found"],
        false=totals["false"],
        per_step=float(np.mean(near_counts)) if near_counts else 0.0,
        median_commits=float(stdlib_statistics.median(widths)) if widths else 0.0,
    )


def score_format(*, name: str, score: AttributionScore) -> str:
    def share(part: int, whole: int) -> str:
        return f"{part / whole:6.1%}" if whole else "   n/a"

    return (
        f"{name}: {score.steps} true steps ({score.steps_large} of at least twice the noise)\n"
        f"  culprit inside the range     {share(score.contained, score.steps)}\n"
        f"  narrowest possible range     {share(score.narrowest, score.steps)}"
        f"  (steps >= 2x noise: {share(score.narrowest_large, score.steps_large)})\n"
        f"  exactly the culprit commit   {share(score.exact, score.steps)}"
        f"  (steps >= 2x noise: {share(score.exact_large, score.steps_large)})\n"
        f"  confident wrong range        {share(score.wrong, score.steps)}\n"
        f"  missed                       {share(score.missed, score.steps)}\n"
        f"  changes found {score.found}, false {score.false}, changes per found step {score.per_step:.2f}, "
        f"median commits in a range {score.median_commits:g}"
    )
