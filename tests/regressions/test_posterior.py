"""The culprit posterior and the choice of the next run, without a database: a culprit whose only run was an
outlier is run again, already-benchmarked ranges still narrow, docs-only commits start low but not at zero,
and a run on its way counts."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np

from dashboard.regressions.sheriff.posterior import (
    CULPRIT_PROBABILITY,
    TWO_CHANGES_FACTOR,
    TWO_CHANGES_MAX_LENGTH,
    Observation,
    information_gain,
    next_commit,
    posterior,
    prior_weights,
    projection_fit,
    two_changes,
    two_changes_next,
)

SCALE = 0.2  # one run's share of the change is known to about a fifth of the change


def _search(*, length: int, culprit: int, shares: dict[int, list[float]], rounds: int = 20) -> list[int]:
    """Run the search against a world where commit i measures `shares[i]` in turn (then its true side):
    returns the commits it ran, in order, until one candidate holds 95 %."""
    prior = prior_weights(docs_only=[False] * length)
    observed: list[tuple[Observation, float]] = [
        (Observation(index=i, share=share), SCALE) for i, values in shares.items() for share in values[:1]
    ]
    served = {i: 1 for i in shares}
    ran: list[int] = []
    for _ in range(rounds):
        probabilities = posterior(prior=prior, observations=observed, length=length)
        if probabilities.max() >= CULPRIT_PROBABILITY:
            break
        runs = {i: sum(1 for o, _ in observed if o.index == i) for i in range(length + 1)}
        choice = next_commit(probabilities=probabilities, scale=SCALE, pending={}, runs=runs)
        assert choice is not None
        ran.append(choice.index)
        again = shares.get(choice.index, [])
        share = again[served.get(choice.index, 0)] if served.get(choice.index, 0) < len(again) else None
        served[choice.index] = served.get(choice.index, 0) + 1
        if share is None:
            share = 1.0 if choice.index >= culprit else 0.0
        observed.append((Observation(index=choice.index, share=share), SCALE))
    probabilities = posterior(prior=prior, observations=observed, length=length)
    assert int(np.argmax(probabilities)) + 1 == culprit
    assert probabilities.max() >= CULPRIT_PROBABILITY
    return ran


def test_the_first_run_of_an_unbenchmarked_range_goes_to_its_middle() -> None:
    probabilities = prior_weights(docs_only=[False] * 8)

    choice = next_commit(probabilities=probabilities, scale=SCALE, pending={}, runs={})

    assert choice is not None and choice.index == 4


def test_a_culprit_whose_only_run_was_an_outlier_is_run_again_and_named() -> None:
    # Commits 1..7 each ran once; the culprit 5's run was a slow outlier far below both levels.
    shares = {i: [1.0 if i >= 5 else 0.0] for i in range(1, 8)}
    shares[5] = [-4.0, 1.0]

    ran = _search(length=8, culprit=5, shares=shares)

    assert ran[0] == 5  # the commit whose only run told nothing is the first one run again


def test_a_range_whose_every_commit_has_one_run_still_narrows_to_its_culprit() -> None:
    # One run per commit, each a little noisy; the posterior holds the culprit only after repeats.
    shares = {i: [(1.0 if i >= 6 else 0.0) + (0.3 if i % 2 else -0.3)] for i in range(1, 10)}

    _search(length=10, culprit=6, shares=shares)


def test_an_outlier_weighs_little_but_still_counts() -> None:
    prior = prior_weights(docs_only=[False] * 4)
    alone = posterior(prior=prior, observations=[], length=4)
    outlier = posterior(prior=prior, observations=[(Observation(index=2, share=-5.0), SCALE)], length=4)
    clean = posterior(prior=prior, observations=[(Observation(index=2, share=0.0), SCALE)], length=4)

    # An old-looking run at commit 2 puts the culprit after it; an outlier there moves the posterior
    # only a little, and the same way as a clean old run rather than not at all.
    assert clean[2:].sum() > 0.99
    assert alone[2:].sum() < outlier[2:].sum() < 0.9


def test_docs_only_commits_start_low_but_never_at_zero() -> None:
    prior = prior_weights(docs_only=[False, True, False])

    assert 0 < prior[1] < prior[0] / 10
    # Its own runs can still make it the culprit.
    observations = [
        (Observation(index=1, share=0.0), SCALE),
        (Observation(index=2, share=1.0), SCALE),
        (Observation(index=2, share=1.0), SCALE),
    ]
    assert int(np.argmax(posterior(prior=prior, observations=observations, length=3))) == 1


def test_a_pending_run_makes_another_one_there_worth_less() -> None:
    probabilities = prior_weights(docs_only=[False] * 8)

    first = information_gain(probabilities=probabilities, index=4, scale=SCALE)
    second = information_gain(probabilities=probabilities, index=4, scale=SCALE, pending=1)
    choice = next_commit(probabilities=probabilities, scale=SCALE, pending={4: 1}, runs={})

    assert 0 < second < first / 10
    assert choice is not None and choice.index != 4


def test_the_share_scale_widens_when_the_metrics_of_a_run_move_together() -> None:
    rng = np.random.default_rng(3)
    sigma = {series: 0.01 for series in range(10)}

    def side(level: float) -> list[list[dict[int, float]]]:
        commits = []
        for _ in range(4):
            shared = rng.normal(0, 0.01)  # one slow or fast run moves every metric alike
            commits.append([{s: level + shared + rng.normal(0, 0.001) for s in sigma}])
        return commits

    projection = projection_fit(old_side=side(0.0), new_side=side(0.05), sigma=sigma)

    assert projection is not None
    independent = 1 / math.sqrt(sum((0.05 / 0.01) ** 2 for _ in sigma))
    assert projection.scale > 2 * independent


def test_one_run_alone_never_names_its_commit() -> None:
    from dashboard.regressions.sheriff.posterior import Observation, culprit_found, posterior, prior_weights

    prior = prior_weights(docs_only=[False] * 4)  # candidates 1..4 of the range 0..4
    scale = 0.15
    # Commit 1 old, commit 2 new on its one run (a slow run looks just like that), commit 3 new.
    one = [(Observation(1, 0.0), scale), (Observation(2, 1.0), scale), (Observation(3, 1.0), scale)]
    probabilities = posterior(prior=prior, observations=one, length=4)
    assert probabilities[1] >= 0.99  # candidate 2 looks certain ...
    runs = {1: 1, 2: 1, 3: 1}
    assert culprit_found(probabilities=probabilities, runs=runs, prior=prior, observations=one) is None
    # ... and is named once second runs at its boundary agree.
    two = [*one, (Observation(2, 1.0), scale), (Observation(1, 0.0), scale)]
    probabilities = posterior(prior=prior, observations=two, length=4)
    runs = {1: 2, 2: 2, 3: 1}
    assert culprit_found(probabilities=probabilities, runs=runs, prior=prior, observations=two) == 1


def test_two_changes_are_read_only_where_the_runs_sit_at_three_levels() -> None:
    rng = random.Random(11)
    prior = prior_weights(docs_only=[False] * 8)

    def runs(level: Callable[[int], float]) -> list[tuple[Observation, float]]:
        return [(Observation(i, level(i) + rng.gauss(0, 0.1)), 0.1) for i in range(1, 8) for _ in range(2)]

    halfway = two_changes(
        prior=prior, observations=runs(lambda i: 0.0 if i < 3 else 0.45 if i < 6 else 1.0), length=8
    )
    assert halfway is not None and halfway.factor > 1e6
    assert (halfway.first, halfway.second, halfway.larger) == (3, 6, 6)
    assert halfway.probability > 0.99
    # One change, with a slow run in the middle of the old level: one change explains it better.
    slow = [*runs(lambda i: float(i >= 5)), (Observation(2, 0.5), 0.1)]
    one = two_changes(prior=prior, observations=slow, length=8)
    assert one is not None and one.factor < 1


def test_a_change_and_its_partial_revert_in_one_range_are_read_as_two_changes() -> None:
    # -16 % at 3, +9 % back at 6: the range's whole change is -8.4 %, and commits 3-5 sit at 1.9 of it,
    # beyond both ends, which no single change explains and no middle between the ends either.
    rng = random.Random(12)
    prior = prior_weights(docs_only=[False] * 8)
    observed = [
        (Observation(i, (0.0 if i < 3 else 1.9 if i < 6 else 1.0) + rng.gauss(0, 0.12)), 0.12)
        for i in range(1, 8)
        for _ in range(2)
    ]

    read = two_changes(prior=prior, observations=observed, length=8)

    assert read is not None and read.factor > 1e6 and read.probability > 0.99
    assert (read.first, read.second) == (3, 6)
    assert 1.7 < read.middle < 2.1
    assert read.larger == 3  # 1.9 of the range's change on the way in, 0.9 on the way back


def test_under_two_changes_the_next_run_goes_beside_the_change_still_in_doubt() -> None:
    # Commits 1..2 old and 3..4 halfway, each run twice; 5 and 6 not run: the first change is at 3, the
    # second at 5, 6 or 7. A run at 3 or 4 tells nothing more; one at 5 or 6 tells where the second is.
    prior = prior_weights(docs_only=[False] * 7)
    shares = {1: 0.0, 2: 0.0, 3: 0.5, 4: 0.5}
    observed = [
        (Observation(i, share + delta), SCALE) for i, share in shares.items() for delta in (-0.05, 0.05)
    ]
    read = two_changes(prior=prior, observations=observed, length=7)
    assert read is not None and read.factor > TWO_CHANGES_FACTOR and read.first == 3
    runs = {i: 2 for i in shares}

    choice = two_changes_next(read=read, scale=SCALE, pending={}, runs=runs, length=7)
    assert choice is not None and choice.index in (5, 6)
    # With a run already on its way there, the other one is next.
    again = two_changes_next(read=read, scale=SCALE, pending={choice.index: 2}, runs=runs, length=7)
    assert again is not None and again.index in (5, 6) and again.index != choice.index


def test_a_range_too_long_to_weigh_every_pair_is_not_read_as_two_changes() -> None:
    length = TWO_CHANGES_MAX_LENGTH + 1
    prior = prior_weights(docs_only=[False] * length)
    halfway = [(Observation(i, 0.0 if i < 3 else 0.5 if i < 6 else 1.0), 0.1) for i in range(1, length)]

    assert two_changes(prior=prior, observations=halfway, length=length) is None
    assert two_changes(prior=prior[:-1] / prior[:-1].sum(), observations=halfway[:-1], length=length - 1)
