"""The culprit search's measured aims over several simulated histories, as one table: each seed's scores
and, per aim, whether it is met.

Pure: it reads the JSON line `simulate_attribution --json` prints for each seed (`Scores.json`). The aims
are those the culprit-search issue checks on seeds 1, 11, 23, 31 and 47 (three suites, 14 days):

- exact culprits for at least 90 % of the steps of twice the noise or more, as the median over the seeds,
  and no seed below 80 %;
- at least 95 % of the isolated steps named exactly, on every seed;
- at most 2 % false notified groups, at most 5 % unfinished steps, a median merge -> culprit of at most
  8 hours and a p90 of at most 24 hours over all steps (infinite while any step that counts is
  unfinished), and 95 % intervals holding the truth 93-97 % of the time: on every seed.

A seed whose score is missing (null: nothing to count, or infinite hours) fails an aim that needs it.

Beside the seeds, a *pooled* column counts every seed's steps, groups and intervals together (where the
scores carry their counts) and takes the hours' median and p90 over every seed's steps together. It
judges nothing; it is the figure to compare two versions of the loop by: a change anywhere in the loop
moves what every later run of a history does (which commits are run, when, on which node), so one seed's
share moves by a step or two either way for reasons of its own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from lab.scores import quantile

Scores = Mapping[str, object]

DEFAULT_SEEDS = (1, 11, 23, 31, 47)


@dataclass(frozen=True)
class Aim:
    key: str
    label: str
    goal: str
    met: Callable[[list[float | None]], bool]


def _every(test: Callable[[float], bool]) -> Callable[[list[float | None]], bool]:
    return lambda values: bool(values) and all(value is not None and test(value) for value in values)


def _median_and_floor(median: float, floor: float) -> Callable[[list[float | None]], bool]:
    def met(values: list[float | None]) -> bool:
        present = [value for value in values if value is not None]
        if not values or len(present) < len(values):
            return False
        return statistics.median(present) >= median and min(present) >= floor

    return met


AIMS: tuple[Aim, ...] = (
    Aim("exact_pct", "exact culprit, steps >= 2x (%)", "median >= 90, each >= 80", _median_and_floor(90, 80)),
    Aim("exact_isolated_pct", "exact culprit, isolated (%)", ">= 95", _every(lambda v: v >= 95)),
    Aim("false_notified_pct", "false notified groups (%)", "<= 2", _every(lambda v: v <= 2)),
    Aim("unfinished_pct", "unfinished (%)", "<= 5", _every(lambda v: v <= 5)),
    Aim("hours_median", "merge -> culprit, median (h)", "<= 8", _every(lambda v: v <= 8)),
    Aim("hours_p90", "merge -> culprit, p90 (h)", "<= 24", _every(lambda v: v <= 24)),
    Aim(
        "interval_coverage_pct",
        "95 % intervals holding the truth (%)",
        "93-97",
        _every(lambda v: 93 <= v <= 97),
    ),
)


@dataclass(frozen=True)
class AimResult:
    aim: Aim
    values: list[float | None]
    met: bool


def aims_judge(scores: Mapping[int, Scores]) -> list[AimResult]:
    """Each aim over the seeds' scores, in seed order."""
    seeds = sorted(scores)
    results = []
    for aim in AIMS:
        values = [_number(scores[seed].get(aim.key)) for seed in seeds]
        results.append(AimResult(aim=aim, values=values, met=aim.met(values)))
    return results


def aims_table(scores: Mapping[int, Scores], *, failed: Sequence[str] = ()) -> str:
    """The seeds' scores as a text table, one row per aim with its goal and verdict, then the seeds that
    gave no scores (`failed`, each with its reason)."""
    seeds = sorted(scores)
    results = aims_judge(scores)
    header = ["aim", *(f"seed {seed}" for seed in seeds), "pooled", "goal", "verdict"]
    rows = [
        [
            result.aim.label,
            *(_cell(value) for value in result.values),
            _pooled_cell(result.aim.key, [scores[seed] for seed in seeds]),
            result.aim.goal,
            "met" if result.met else "NOT MET",
        ]
        for result in results
    ]
    steps = [_steps(scores[seed]) for seed in seeds]
    rows.append(["steps >= 2x (all steps)", *steps, _steps_sum(scores), "", ""])
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    met = sum(result.met for result in results)
    lines.append(f"{met} of {len(results)} aims met over {len(seeds)} seed(s)")
    lines.extend(f"no scores: {reason}" for reason in failed)
    return "\n".join(lines)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _cell(value: float | None) -> str:
    return "inf/none" if value is None else f"{value:.1f}"


# The aims that are shares of counts, pooled over the seeds: (part, whole), read from a seed's "counts"
# (or, for the steps, its own key).
POOLED: dict[str, tuple[str, str]] = {
    "exact_pct": ("exact", "steps_2x"),
    "exact_isolated_pct": ("exact_isolated", "isolated"),
    "false_notified_pct": ("false_notified", "notified"),
    "unfinished_pct": ("unfinished", "steps_2x"),
    "interval_coverage_pct": ("intervals_covering", "intervals"),
}


# The aims that are quantiles of the steps' hours, pooled over the seeds' "step_hours".
POOLED_QUANTILES: dict[str, float] = {"hours_median": 0.5, "hours_p90": 0.9}


def pooled(key: str, seeds: Sequence[Scores]) -> float | None:
    """The aim `key` over every seed's counts (or steps' hours) together; None for an aim that is neither
    a share of counts nor a quantile of hours, when a seed lacks what it needs, when there is nothing to
    count, or for infinite hours."""
    if key in POOLED_QUANTILES:
        value = _pooled_hours(POOLED_QUANTILES[key], seeds)
        return value if value is not None and math.isfinite(value) else None
    if key not in POOLED or not seeds:
        return None
    part = whole = 0
    for scores in seeds:
        counts = scores.get("counts")
        if not isinstance(counts, Mapping):
            return None
        numbers = [counts.get(name, scores.get(name)) for name in POOLED[key]]
        if not all(isinstance(number, int) and not isinstance(number, bool) for number in numbers):
            return None
        part += cast(int, numbers[0])
        whole += cast(int, numbers[1])
    return round(100 * part / whole, 1) if whole else None


def _pooled_hours(q: float, seeds: Sequence[Scores]) -> float | None:
    """The nearest-rank quantile `q` of every seed's steps' hours together (a None in a seed's list is
    infinite), as `lab.scores` takes one seed's: inf when unfinished steps reach it; None when a seed lacks
    its hours or there are none."""
    hours: list[float] = []
    for scores in seeds:
        steps = scores.get("step_hours")
        if not isinstance(steps, list):
            return None
        for value in steps:
            number = _number(value)
            hours.append(math.inf if number is None else number)
    return quantile(sorted(hours), q) if hours else None


def _pooled_cell(key: str, seeds: Sequence[Scores]) -> str:
    value = _pooled_hours(POOLED_QUANTILES[key], seeds) if key in POOLED_QUANTILES else pooled(key, seeds)
    if value is None:
        return ""
    return f"{value:.1f}" if math.isfinite(value) else "inf"  # inf: unfinished steps reach the quantile


def _steps_sum(scores: Mapping[int, Scores]) -> str:
    """The steps row's pooled cell: every seed's steps of twice the noise (all steps), summed."""
    significant = [scores[seed].get("steps_2x") for seed in scores]
    steps = [scores[seed].get("steps") for seed in scores]
    if not all(isinstance(value, int) for value in [*significant, *steps]):
        return ""
    return f"{sum(cast(list[int], significant))} ({sum(cast(list[int], steps))})"


def _steps(scores: Scores) -> str:
    return f"{scores.get('steps_2x')} ({scores.get('steps')})"
