"""Strict scores of one simulated history: what the loop notified and named against the world's true steps.

Pure: no Django. `lab.simulation` reads the outcome from the database into these values.

- **True notified group.** A notified group (confirmed, of any kind: improvements are named too) is
  true only when its culprit (one commit), or while it is still a range its range ``(base, head]``,
  holds a step of one of its suites that moves one of the group's series in the direction of that
  series' alert by at least the series' minimum change (the product's threshold resolution). A gradual
  step spread over ``span`` commits is held whole by a culprit at its first commit (the commit *exact*
  names for it) and otherwise counts with the part of it that lies inside (``factor ** (commits inside /
  span)``): a culprit on a later commit of it, or a range holding only some of it.
- **Exact.** A step is named exactly when a notified group's culprit is the step's commit (a gradual
  change's first commit) and that group is true by this step.
- **Hours.** From the step's merge to the moment its exact culprit was first named by a confirmed group,
  over *all* steps of at least twice the noise; a step not named exactly at the end is infinite in the
  percentiles (``None`` in JSON). It is *unfinished* when no group names a culprit for it, and *named
  wrongly* when a group whose judged range held it has since named another commit.
- **Phases.** Where the hours of a step named exactly went: from its merge to the first run of its suite
  at or after it (*measured*), to the group that named it being suspected (detection) and confirmed
  (verification), and to its culprit (the search); medians over the steps of at least twice the noise
  named exactly.
- **Isolated.** A step eight or more commits from every other step of its suite.
- **Cost.** Every run of the history (new commits, backfill, verification, search) and its GPU-hours,
  divided by the number of steps named exactly.
- **Interval coverage.** Every change the product shows with a 95 % interval on a judged group's page
  (the per-series verdicts in the group's evidence: change, low and high, for the range ``(base, head]``
  their repeats were of, which the evidence records: a group confirmed by another's search, or split
  from one, shows that group's verdicts) is compared with the true change of that series over that
  range: the product of the moves of every step inside it (their parts inside, for gradual ones).
  Coverage is the share of these intervals that hold the true change, ends included; a range without
  any step has a true change of 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

Key = tuple[int, str]  # (concurrency, metric)

ISOLATION_COMMITS = 8
SIGNIFICANT_NOISE_MULTIPLE = 2.0


@dataclass(frozen=True)
class TrueStep:
    suite: str
    commit_index: int
    moves: Mapping[Key, float]
    noise_multiple: float
    merged_at: datetime
    span: int = 1
    label: str = ""

    @property
    def last_index(self) -> int:
        return self.commit_index + self.span - 1


@dataclass(frozen=True)
class GroupSeries:
    """One series of a group, the direction its alert saw (+1 up, -1 down) and its minimum change."""

    suite: str
    concurrency: int
    metric: str
    direction: int
    min_relative_change: float


@dataclass(frozen=True)
class NotifiedGroup:
    group_id: int
    series: tuple[GroupSeries, ...]
    base: int  # positions: the range is (base, head]
    head: int
    judged_base: int  # the range the verdict was made on
    judged_head: int
    culprit_at: datetime | None  # when a confirmed group first named one commit
    suspected_at: datetime | None = None  # when detection (or a search's remainder) opened it
    confirmed_at: datetime | None = None  # when its verdict confirmed it

    @property
    def culprit(self) -> int | None:
        return self.head if self.head - self.base == 1 else None


@dataclass(frozen=True)
class ShownInterval:
    suite: str
    concurrency: int
    metric: str
    base: int
    head: int
    low_pct: float
    high_pct: float
    group_id: int | None = None  # the group whose page shows it


@dataclass(frozen=True)
class MissedInterval:
    """A shown interval that does not hold the true change of its range."""

    interval: ShownInterval
    truth_pct: float

    def line(self) -> str:
        shown = self.interval
        half = (shown.high_pct - shown.low_pct) / 2
        middle = (shown.high_pct + shown.low_pct) / 2
        off = f" ({abs(self.truth_pct - middle) / half:.1f} half-widths from its middle)" if half > 0 else ""
        group = f"group #{shown.group_id} " if shown.group_id is not None else ""
        return (
            f"missed interval: {group}{shown.suite} c={shown.concurrency} {shown.metric} "
            f"({shown.base}, {shown.head}]: [{shown.low_pct:+.2f}, {shown.high_pct:+.2f}] %, "
            f"truth {self.truth_pct:+.2f} %{off}"
        )


@dataclass(frozen=True)
class Outcome:
    steps: tuple[TrueStep, ...]
    notified: tuple[NotifiedGroup, ...]
    intervals: tuple[ShownInterval, ...]
    runs: int
    gpu_hours: float
    # The first run of each step's suite at or after the step's commit ended: (suite, commit index) -> when.
    measured_at: Mapping[tuple[str, int], datetime] = field(default_factory=dict)


PHASES = ("measured", "suspected", "confirmed", "culprit")


@dataclass(frozen=True)
class StepScore:
    step: TrueStep
    exact: bool
    named_wrongly: bool
    hours: float  # math.inf unless exact
    isolated: bool
    holding: tuple[tuple[int, int, int], ...] = ()  # (group, base, head) of notified groups around it
    # Hours from the merge to each of `PHASES` (None where unknown); empty unless exact.
    phases: tuple[float | None, ...] = ()

    def line(self) -> str:
        """One line of the per-step listing."""
        step = self.step
        if self.exact:
            verdict = f"exact after {self.hours:.1f} h"
            if self.phases:
                verdict += (
                    " ("
                    + ", ".join(
                        f"{name} {hours:.1f}"
                        for name, hours in zip(PHASES[:-1], self.phases, strict=False)
                        if hours is not None
                    )
                    + ")"
                )
        elif self.named_wrongly:
            verdict = "named another commit"
        else:
            verdict = "unfinished"
        around = ", ".join(f"#{group} ({base}, {head}]" for group, base, head in self.holding) or "none"
        span = f"-{step.last_index}" if step.span > 1 else ""
        return (
            f"{step.suite} @{step.commit_index}{span} {step.noise_multiple:4.1f}x {step.label or 'step'}: "
            f"{verdict}; notified groups around it: {around}"
        )


@dataclass(frozen=True)
class Scores:
    steps: tuple[StepScore, ...]
    notified: int
    false_notified: int
    false_groups: tuple[NotifiedGroup, ...]
    intervals: int
    intervals_covering: int
    runs: int
    gpu_hours: float
    missed_intervals: tuple[MissedInterval, ...] = ()

    @property
    def significant(self) -> list[StepScore]:
        return [score for score in self.steps if score.step.noise_multiple >= SIGNIFICANT_NOISE_MULTIPLE]

    @property
    def culprits(self) -> int:
        return sum(score.exact for score in self.steps)

    def json(self) -> dict[str, int | float | dict[str, int] | list[float | None] | None]:
        significant = self.significant
        isolated = [score for score in significant if score.isolated]
        hours = sorted(score.hours for score in significant)
        exact = sum(s.exact for s in significant)
        exact_isolated = sum(s.exact for s in isolated)
        unfinished = sum(not s.exact and not s.named_wrongly for s in significant)
        return {
            "steps": len(self.steps),
            "steps_2x": len(significant),
            "exact_pct": _pct(exact, len(significant)),
            "exact_isolated_pct": _pct(exact_isolated, len(isolated)),
            "false_notified_pct": _pct(self.false_notified, self.notified) or 0.0,
            "unfinished_pct": _pct(unfinished, len(significant)),
            "hours_median": _finite(quantile(hours, 0.5)),
            "hours_p90": _finite(quantile(hours, 0.9)),
            "gpu_hours_per_culprit": _finite(self.gpu_hours / self.culprits if self.culprits else math.inf),
            "interval_coverage_pct": _pct(self.intervals_covering, self.intervals),
            **{f"hours_to_{name}_median": hours for name, hours in self.phase_medians().items()},
            # The counts behind the shares, so that several seeds can be pooled (`lab.aims`).
            "counts": {
                "exact": exact,
                "isolated": len(isolated),
                "exact_isolated": exact_isolated,
                "unfinished": unfinished,
                "notified": self.notified,
                "false_notified": self.false_notified,
                "intervals": self.intervals,
                "intervals_covering": self.intervals_covering,
            },
            # Each step's hours from merge to culprit (None: infinite), so that several seeds' quantiles
            # can be taken over all their steps together.
            "step_hours": [_finite(value) for value in hours],
        }

    def phase_medians(self) -> dict[str, float | None]:
        """The median hours from merge to each phase, over the steps of twice the noise named exactly."""
        found = [score for score in self.significant if score.exact and score.phases]
        medians: dict[str, float | None] = {}
        for index, name in enumerate(PHASES):
            hours = sorted(h for score in found if (h := score.phases[index]) is not None)
            medians[name] = _finite(quantile(hours, 0.5)) if hours else None
        return medians


def _pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def _finite(value: float) -> float | None:
    """JSON has no infinity: None stands for it (and for a quantile of nothing)."""
    return round(value, 1) if math.isfinite(value) else None


def quantile(values: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of sorted `values` (infinite ones included); inf when empty."""
    if not values:
        return math.inf
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def moves_inside(step: TrueStep, *, base: int, head: int) -> dict[Key, float]:
    """The part of a step's moves that lies in the commits (base, head]."""
    inside = sum(base < index <= head for index in range(step.commit_index, step.last_index + 1))
    if not inside:
        return {}
    return {key: factor ** (inside / step.span) for key, factor in step.moves.items()}


def true_by(group: NotifiedGroup, step: TrueStep) -> bool:
    """Whether `step` makes `group` true: inside its culprit (or range), moving one of its series its way
    by at least that series' minimum change."""
    culprit = group.culprit
    if culprit is not None and culprit == step.commit_index:
        # A step's commit holds it whole: for a gradual change that is its first commit, as exact has it.
        moves = dict(step.moves)
    else:
        base, head = (culprit - 1, culprit) if culprit is not None else (group.base, group.head)
        moves = moves_inside(step, base=base, head=head)
    for series in group.series:
        if series.suite != step.suite:
            continue
        factor = moves.get((series.concurrency, series.metric))
        if factor is None:
            continue
        change = factor - 1
        if change * series.direction > 0 and abs(change) >= series.min_relative_change:
            return True
    return False


def _distance(a: TrueStep, b: TrueStep) -> int:
    return max(b.commit_index - a.last_index, a.commit_index - b.last_index)


def scores_compute(outcome: Outcome) -> Scores:
    """Score one outcome strictly (see the module docstring)."""
    scored = []
    for step in outcome.steps:
        naming = [
            group
            for group in outcome.notified
            if group.culprit == step.commit_index and group.culprit_at is not None and true_by(group, step)
        ]
        exact = bool(naming)
        hours = math.inf
        phases: tuple[float | None, ...] = ()
        if exact:
            # The group that named it first: its culprit's hours, and where they went.
            first = min(naming, key=lambda group: group.culprit_at or step.merged_at)
            moments = (
                outcome.measured_at.get((step.suite, step.commit_index)),
                first.suspected_at,
                first.confirmed_at,
                first.culprit_at,
            )
            phases = tuple(
                None if moment is None else (moment - step.merged_at).total_seconds() / 3600
                for moment in moments
            )
            hours = cast(float, phases[-1])
        wrongly = not exact and any(
            group.culprit is not None
            and group.judged_base < step.commit_index <= group.judged_head
            and any(series.suite == step.suite for series in group.series)
            for group in outcome.notified
        )
        isolated = all(
            _distance(step, other) >= ISOLATION_COMMITS
            for other in outcome.steps
            if other is not step and other.suite == step.suite
        )
        holding = tuple(
            (group.group_id, group.base, group.head)
            for group in outcome.notified
            if group.base < step.last_index
            and step.commit_index <= group.head
            and any(series.suite == step.suite for series in group.series)
        )
        scored.append(
            StepScore(
                step=step,
                exact=exact,
                named_wrongly=wrongly,
                hours=hours,
                isolated=isolated,
                holding=holding,
                phases=phases,
            )
        )
    false_groups = tuple(
        group for group in outcome.notified if not any(true_by(group, step) for step in outcome.steps)
    )
    missed = []
    for interval in outcome.intervals:
        factor = 1.0
        for step in outcome.steps:
            if step.suite == interval.suite:
                factor *= moves_inside(step, base=interval.base, head=interval.head).get(
                    (interval.concurrency, interval.metric), 1.0
                )
        truth_pct = (factor - 1) * 100
        if not interval.low_pct <= truth_pct <= interval.high_pct:
            missed.append(MissedInterval(interval=interval, truth_pct=truth_pct))
    return Scores(
        steps=tuple(scored),
        notified=len(outcome.notified),
        false_notified=len(false_groups),
        false_groups=false_groups,
        intervals=len(outcome.intervals),
        intervals_covering=len(outcome.intervals) - len(missed),
        runs=outcome.runs,
        gpu_hours=outcome.gpu_hours,
        missed_intervals=tuple(missed),
    )
