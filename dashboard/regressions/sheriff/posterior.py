"""Where in a range a change happened: a posterior over its culprit commit, and where the next run tells
most (noisy binary search, Horstein's probabilistic bisection). Pure: no Django, tested without a database.

A range's commits are numbered 0 (base) to n (head). The change is after commit c - 1 and at commit c,
for one c in 1..n; a run at commit i then measures the old level when i < c and the new one when i >= c.

Each run is first reduced to one number, its *share of the change*: 0 at the old level, 1 at the new
one. The series of a run are projected on the change they show between the two sides (weighted by their
change over their noise, so the series that moved most count most), and the scale of that share is taken
from the runs at both sides themselves, so noise shared by the metrics of one run is not counted as
independent evidence. A run's likelihood is a mixture: mostly normal around its side's level, with a
broad component for slow or broken runs, which therefore weigh little but still count.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

# The prior weight of a commit that touches only docs, tests or CI, against 1 for any other: such a
# commit rarely changes performance (a CI image bump can), so it is searched last, never ruled out.
DOCS_PRIOR_WEIGHT = 0.05
# Share of runs that are slow or broken, and how broad (in shares of the change) their spread is.
OUTLIER_SHARE = 0.05
OUTLIER_SPREAD = 3.0
# The search stops once one commit holds this much of the posterior. Not 95 %: the share's scale is itself
# estimated from a few runs beside the range, so the posterior runs a little overconfident, and naming
# the wrong commit costs a person far more than the one or two runs more it takes to be sure.
CULPRIT_PROBABILITY = 0.99
# Fewer residuals than this at the sides, and the share's scale comes from the series' noise alone.
MIN_RESIDUALS = 5

_GRID = np.linspace(-8.0, 9.0, 1701)
_GRID_STEP = float(_GRID[1] - _GRID[0])


@dataclass(frozen=True)
class Observation:
    """One finished run at commit `index` of the range (0 = base, n = head): its share of the change."""

    index: int
    share: float


@dataclass(frozen=True)
class Projection:
    """How runs of one suite and hardware class become shares: the side levels and noise of each series."""

    old: Mapping[int, float]  # series id -> log level before the change
    new: Mapping[int, float]  # series id -> log level after it
    sigma: Mapping[int, float]  # series id -> run-to-run noise (log scale)
    scale: float  # the noise of one run's share

    def share(self, logs: Mapping[int, float]) -> float | None:
        """A run's share of the change from its log values by series; None if none of them carries it."""
        top = bottom = 0.0
        for series_id, value in logs.items():
            if series_id not in self.old:
                continue
            step = self.new[series_id] - self.old[series_id]
            weight = step / self.sigma[series_id] ** 2
            top += weight * (value - self.old[series_id])
            bottom += weight * step
        return top / bottom if bottom > 0 else None


def _location(values: Sequence[float]) -> float:
    return statistics.median(values)


Run = Mapping[int, float]  # one run's log values by series id


def _commit_spread(commits: Sequence[Sequence[Run]], series_id: int, level: float) -> list[float]:
    """Each side commit's median off its side's level: the spread from commit to commit, which repeats of
    one commit (run back to back, on one node) can understate."""
    spread = []
    for runs in commits:
        values = [run[series_id] for run in runs if series_id in run]
        if values:
            spread.append(statistics.median(values) - level)
    return spread


def projection_fit(
    *,
    old_side: Sequence[Sequence[Run]],
    new_side: Sequence[Sequence[Run]],
    sigma: Mapping[int, float],
) -> Projection | None:
    """The projection from the runs at and before the base (`old_side`) and at and after the head
    (`new_side`), each a commit's runs, and each series' noise (widened to the spread of the side commits
    where they are enough to tell); None when no series has runs on both sides."""
    old: dict[int, float] = {}
    new: dict[int, float] = {}
    kept: dict[int, float] = {}
    old_runs = [run for runs in old_side for run in runs]
    new_runs = [run for runs in new_side for run in runs]
    for series_id, noise in sigma.items():
        before = [run[series_id] for run in old_runs if series_id in run]
        after = [run[series_id] for run in new_runs if series_id in run]
        if not before or not after or noise <= 0:
            continue
        old[series_id], new[series_id] = _location(before), _location(after)
        spread = _commit_spread(old_side, series_id, old[series_id])
        spread += _commit_spread(new_side, series_id, new[series_id])
        kept[series_id] = noise
        if len(spread) >= MIN_RESIDUALS:
            kept[series_id] = max(noise, statistics.median(abs(v) for v in spread) * 1.4826)
    separation = sum((new[s] - old[s]) ** 2 / kept[s] ** 2 for s in old)
    if separation <= 0:
        return None
    independent = 1.0 / math.sqrt(separation)
    draft = Projection(old=old, new=new, sigma=kept, scale=independent)
    residuals = [share for run in old_runs if (share := draft.share(run)) is not None]
    residuals += [share - 1.0 for run in new_runs if (share := draft.share(run)) is not None]
    # The side levels are estimates too (medians of a few runs): their error moves every share alike.
    level_error = math.sqrt(1 + math.pi / 2 * (1 / max(len(old_runs), 1) + 1 / max(len(new_runs), 1)))
    independent *= level_error
    scale = independent
    if len(residuals) >= MIN_RESIDUALS:
        # Noise shared by the metrics of one run shows as a wider spread of the shares than independence
        # predicts; the side levels were fitted to these runs, hence the correction for their count.
        centre = statistics.median(residuals)
        mad = statistics.median(abs(r - centre) for r in residuals) * 1.4826
        scale = max(independent, mad * math.sqrt(len(residuals) / max(len(residuals) - 2, 1)))
    return Projection(old=old, new=new, sigma=kept, scale=scale)


def _mixture_log_density(value: float | np.ndarray, level: float | np.ndarray, scale: float) -> np.ndarray:
    broad = max(OUTLIER_SPREAD, 10 * scale)
    normal = np.exp(-0.5 * ((value - level) / scale) ** 2) / (math.sqrt(2 * math.pi) * scale)
    wide = np.exp(-0.5 * ((value - level) / broad) ** 2) / (math.sqrt(2 * math.pi) * broad)
    return np.log((1 - OUTLIER_SHARE) * normal + OUTLIER_SHARE * wide + 1e-300)


def prior_weights(*, docs_only: Sequence[bool]) -> np.ndarray:
    """The prior over candidates 1..n (docs_only[k] for candidate k + 1), normalised."""
    weights = np.array([DOCS_PRIOR_WEIGHT if docs else 1.0 for docs in docs_only], dtype=float)
    return weights / weights.sum()


def posterior(
    *, prior: np.ndarray, observations: Sequence[tuple[Observation, float]], length: int
) -> np.ndarray:
    """The posterior over candidates 1..length, from runs (observation, its share's scale) at any commit
    of the range; runs at the ends say nothing about where inside it the change is, so they are skipped."""
    old_loglik = np.zeros(length + 1)  # by commit index: the log-likelihood of its runs at the old level
    new_loglik = np.zeros(length + 1)
    for observation, scale in observations:
        if 0 < observation.index < length:
            old_loglik[observation.index] += float(_mixture_log_density(observation.share, 0.0, scale))
            new_loglik[observation.index] += float(_mixture_log_density(observation.share, 1.0, scale))
    # Candidate c: commits 1..c-1 old, c..n-1 new.
    old_before = np.concatenate([[0.0], np.cumsum(old_loglik[1:length])])  # commits 1..c-1, c = 1..n
    new_total = float(new_loglik[1:length].sum())
    new_from = new_total - np.concatenate([[0.0], np.cumsum(new_loglik[1:length])])
    loglik = old_before + new_from
    log_post = np.log(prior) + loglik
    log_post -= log_post.max()
    result = np.exp(log_post)
    return result / result.sum()


def _binary_information(new_probability: float, scale: float) -> float:
    """Mutual information (nats) between the side of a commit (new with `new_probability`) and one run's
    share measured there with noise `scale`."""
    q = min(max(new_probability, 0.0), 1.0)
    return _levels_information(np.array([0.0, 1.0]), np.array([1 - q, q]), scale)


def _with_pending(information: Callable[[float], float], *, scale: float, pending: int) -> float:
    """What one more run tells given `pending` runs already on their way to the same commit: what k + 1
    runs tell over what k runs tell, with k runs counted as one of noise scale / sqrt(k)."""
    after = information(scale / math.sqrt(pending + 1))
    before = information(scale / math.sqrt(pending)) if pending else 0.0
    return max(0.0, after - before)


def information_gain(*, probabilities: np.ndarray, index: int, scale: float, pending: int = 0) -> float:
    """Expected information (nats) of one more run at commit `index` (0 < index < n) about the culprit,
    given `pending` runs already on their way there: what k + 1 runs tell over what k runs tell, with
    k runs counted as one of noise scale / sqrt(k)."""
    new_probability = float(probabilities[:index].sum())  # candidates 1..index make commit `index` new
    return _with_pending(partial(_binary_information, new_probability), scale=scale, pending=pending)


@dataclass(frozen=True)
class Choice:
    index: int
    gain: float


def next_commit(
    *, probabilities: np.ndarray, scale: float, pending: Mapping[int, int], runs: Mapping[int, int]
) -> Choice | None:
    """The commit of the range (0 < index < n) whose next run is expected to tell most about the culprit,
    repeats included; on a tie, the one with fewer runs so far. None when the range has no inside."""
    return _most_telling(
        length=len(probabilities),
        runs=runs,
        gain=lambda index: information_gain(
            probabilities=probabilities, index=index, scale=scale, pending=pending.get(index, 0)
        ),
    )


def _most_telling(*, length: int, runs: Mapping[int, int], gain: Callable[[int], float]) -> Choice | None:
    """The commit inside the range (0 < index < length) of the largest `gain`; on a tie, the one with fewer
    runs so far. None when the range has no inside."""
    best: Choice | None = None
    best_key: tuple[float, int] | None = None
    for index in range(1, length):
        told = gain(index)
        key = (round(told, 9), -runs.get(index, 0))
        if best_key is None or key > best_key:
            best, best_key = Choice(index=index, gain=told), key
    return best


def culprit_found(
    *,
    probabilities: np.ndarray,
    runs: Mapping[int, int],
    prior: np.ndarray,
    observations: Sequence[tuple[Observation, float]],
) -> int | None:
    """The index of the culprit's parent (0 = base) when one candidate holds `CULPRIT_PROBABILITY` of
    `probabilities` (the posterior of `observations`), both commits at its boundary were measured (`runs`:
    range index -> finished runs), and it still does without any one run at that boundary. The prior alone
    never names a culprit, so a docs-only commit beside the likeliest one is run before it is ruled out;
    and one slow run, which looks like a regression, never names its commit alone."""
    best = int(np.argmax(probabilities))
    length = len(probabilities)
    if probabilities[best] < CULPRIT_PROBABILITY:
        return None
    parent_seen = best == 0 or runs.get(best, 0) > 0
    culprit_seen = best + 1 == length or runs.get(best + 1, 0) > 0
    if not (parent_seen and culprit_seen):
        return None
    for left_out, (observation, _) in enumerate(observations):
        if observation.index not in (best, best + 1):
            continue
        rest = [item for k, item in enumerate(observations) if k != left_out]
        if posterior(prior=prior, observations=rest, length=length)[best] < CULPRIT_PROBABILITY:
            return None
    return best


def overlap(first: np.ndarray, second: np.ndarray) -> float:
    """How much two posteriors over the same candidates agree (Bhattacharyya coefficient): 1 when they
    are the same, 0 when no candidate is likely under both."""
    return float(np.sqrt(np.clip(first, 0, None) * np.clip(second, 0, None)).sum())


# The levels a middle stretch between two changes may sit at, in shares of the whole change: between the
# ends (two changes the same way), or beyond either (a change and a partial revert, or a change the other
# way after it: a regression reverted a few commits later inside one searched range, whose middle sat
# at 1.9 shares of the range's change and fitted no single change, so the search spent its cap). A level
# nearer either end than 0.15 is one change, which the one-change posterior already weighs.
_BETWEEN = np.linspace(0.15, 0.85, 15)
_BEYOND = np.concatenate([np.linspace(-4.0, -0.15, 12), np.linspace(1.15, 5.0, 12)])
_MIDDLE_LEVELS = np.concatenate([_BETWEEN, _BEYOND])
# Half the middle's prior between the ends, half beyond them.
_MIDDLE_LOG_PRIOR = np.concatenate(
    [
        np.full(_BETWEEN.size, math.log(0.5 / _BETWEEN.size)),
        np.full(_BEYOND.size, math.log(0.5 / _BEYOND.size)),
    ]
)
# How much better two changes must explain the runs than one (a Bayes factor) before they are believed.
TWO_CHANGES_FACTOR = 20.0
# Longer ranges are not read as two changes: every pair of candidates at every middle level is weighed at
# once (about 1.3 M numbers at this length, growing with its square: 140 ms on a loaded core, 32 ms at
# half the length); a range this long narrows under the one-change search first.
TWO_CHANGES_MAX_LENGTH = 256


@dataclass(frozen=True, eq=False)
class TwoChanges:
    """The range read as two changes: their likeliest candidates (c1 < c2), how likely that pair is, where
    the commits between them sit (the middle level's posterior mean, in shares of the whole change), and
    how many times better two changes explain the runs than one; and every pair's candidates, posterior
    and middle level, which say where the next run tells most."""

    first: int
    second: int
    probability: float
    middle: float
    factor: float
    candidates: np.ndarray  # (pairs, 2): c1, c2
    weights: np.ndarray  # (pairs,): each pair's posterior, summing to 1
    middles: np.ndarray  # (pairs,): each pair's middle level

    @property
    def larger(self) -> int:
        """The candidate of the larger of the two changes: the first moves the level to the middle, the
        second from there to 1 (either may overshoot the range's whole change)."""
        return self.second if abs(1.0 - self.middle) > abs(self.middle) else self.first

    def levels_at(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """The levels a run at commit `index` may show under this reading, and how likely each is."""
        first, second = self.candidates[:, 0], self.candidates[:, 1]
        level = np.where(index < first, 0.0, np.where(index < second, self.middles, 1.0))
        # Middles are rounded to a twentieth of the change: close levels tell a run apart no better.
        rounded = np.round(level * 20) / 20
        values, inverse = np.unique(rounded, return_inverse=True)
        return values, np.bincount(inverse, weights=self.weights, minlength=len(values))


def two_changes(
    *, prior: np.ndarray, observations: Sequence[tuple[Observation, float]], length: int
) -> TwoChanges | None:
    """The range as two changes, at candidates c1 < c2 with the commits between them at one middle level
    (commits before c1 at 0, from c2 on at 1): the runs of a range that holds two changes of about one
    size sit at three levels, and the one-change posterior, split between them, names neither; the middle
    may lie beyond either end (a change and its partial revert). None for
    a range of fewer than three commits or more than `TWO_CHANGES_MAX_LENGTH` candidates."""
    if length < 2 or length > TWO_CHANGES_MAX_LENGTH:
        return None
    levels = np.concatenate([[0.0, 1.0], _MIDDLE_LEVELS])
    loglik = np.zeros((length + 1, len(levels)))  # by commit index and level
    for observation, scale in observations:
        if 0 < observation.index < length:
            loglik[observation.index] += _mixture_log_density(observation.share, levels, scale)
    # cumulative[k]: commits 1..k at each level; commits first..last-1 are cumulative[last-1] - [first-1].
    cumulative = np.vstack([np.zeros(len(levels)), np.cumsum(loglik[1:length], axis=0)])
    log_prior = np.log(prior)
    c = np.arange(1, length + 1)
    one = float(
        np.logaddexp.reduce(
            log_prior[c - 1] + cumulative[c - 1, 0] + cumulative[length - 1, 1] - cumulative[c - 1, 1]
        )
    )
    first, second = np.triu_indices(length, k=1)
    first, second = first + 1, second + 1  # every pair 1 <= c1 < c2 <= length
    pair_log_prior = log_prior[first - 1] + log_prior[second - 1]
    pair_log_prior -= np.logaddexp.reduce(pair_log_prior)
    middle = cumulative[second - 1, 2:] - cumulative[first - 1, 2:]  # (pairs, middle levels)
    sides = cumulative[first - 1, 0] + cumulative[length - 1, 1] - cumulative[second - 1, 1]
    by_level = middle + _MIDDLE_LOG_PRIOR[None, :] + (pair_log_prior + sides)[:, None]
    by_pair = np.logaddexp.reduce(by_level, axis=1)
    two = float(np.logaddexp.reduce(by_pair))
    weights = np.exp(by_pair - two)
    middles = (np.exp(by_level - by_pair[:, None]) * _MIDDLE_LEVELS).sum(axis=1)
    best = int(np.argmax(by_pair))
    return TwoChanges(
        first=int(first[best]),
        second=int(second[best]),
        probability=float(weights[best]),
        middle=float(middles[best]),
        factor=math.exp(min(two - one, 700.0)),
        candidates=np.stack([first, second], axis=1),
        weights=weights,
        middles=middles,
    )


def _levels_information(values: np.ndarray, weights: np.ndarray, scale: float) -> float:
    """Mutual information (nats) between which of `values` a commit's level is (each with its weight)
    and one run's share measured there with noise `scale`."""
    keep = weights > 1e-12
    values, weights = values[keep], weights[keep] / weights[keep].sum()
    if len(values) < 2:
        return 0.0
    densities = np.exp(_mixture_log_density(_GRID[None, :], values[:, None], scale))
    mixed = (weights[:, None] * densities).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(densities > 0, densities / mixed, 1.0)
        terms = weights[:, None] * densities * np.log(ratio)
    return float(np.nansum(terms) * _GRID_STEP)


def two_changes_next(
    *, read: TwoChanges, scale: float, pending: Mapping[int, int], runs: Mapping[int, int], length: int
) -> Choice | None:
    """Under the two-change reading: the commit of the range (0 < index < length) whose next run is
    expected to tell most about which pair of commits changed, repeats included (as `information_gain`
    counts runs on their way); on a tie, the one with fewer runs so far."""

    def gain(index: int) -> float:
        values, weights = read.levels_at(index)
        information = partial(_levels_information, values, weights)
        return _with_pending(information, scale=scale, pending=pending.get(index, 0))

    return _most_telling(length=length, runs=runs, gain=gain)
