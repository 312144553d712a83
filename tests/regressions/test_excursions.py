"""A change reverted a few commits later is found with both its edges: the way out of it is weak on its
own (its few points against the few after it), and the way in, once the excursion is merged with what
follows, is diluted; tested as one short level against the levels around it, the pair holds.

Rates over many histories, as in `test_local_noise`: one history says little about a rule of detection.
"""

from __future__ import annotations

import numpy as np

from dashboard.regressions.detect.detector import change_points_detect

HISTORIES = 30
NOISE = 0.015


def _edges_found(*, depth: float, length: int, after: int, histories: int = HISTORIES) -> tuple[int, int]:
    """(histories with both edges found, with at least one) of an excursion `depth` noise scales down
    over `length` points from point 50, with `after` points after it."""
    both = either = 0
    for seed in range(histories):
        rng = np.random.default_rng(seed)
        logs = rng.normal(0.0, NOISE, 50 + length + after)
        logs[50 : 50 + length] -= depth * NOISE
        found = [
            change.index
            for change in change_points_detect(
                values=1000.0 * np.exp(logs), min_relative_change=0.02, p_threshold=1e-4
            )
        ]
        into = any(abs(index - 50) <= 1 for index in found)
        out = any(abs(index - 50 - length) <= 1 for index in found)
        both += into and out
        either += into or out
    return both, either


def test_an_excursion_of_three_noise_scales_over_six_points_is_found_with_both_edges() -> None:
    both, either = _edges_found(depth=3.0, length=6, after=4)

    # Each boundary judged alone: both edges in 6 of these 30 histories.
    assert both >= 13
    assert either >= both


def test_a_step_that_is_not_reverted_gains_no_second_edge() -> None:
    # A plain step (no way back) is one change: the excursion rule needs two changes of opposite signs.
    false_pairs = 0
    for seed in range(HISTORIES):
        rng = np.random.default_rng(100 + seed)
        logs = rng.normal(0.0, NOISE, 70)
        logs[50:] -= 4.0 * NOISE
        found = change_points_detect(values=1000.0 * np.exp(logs), min_relative_change=0.02, p_threshold=1e-4)
        false_pairs += sum(abs(change.index - 50) > 1 for change in found)
    assert false_pairs <= 1


def test_a_short_excursion_is_found_wherever_it_falls_among_the_seeded_intervals() -> None:
    """The same noise, with the excursion moved over twelve starting points (every alignment with the
    narrow intervals): with those intervals starting at every half width, both edges were found in 45 of
    these 120 histories, depending on where the excursion fell."""
    both = 0
    for seed in range(10):
        noise = np.random.default_rng(seed).normal(0.0, NOISE, 120)
        for start in range(50, 62):
            logs = noise.copy()
            logs[start : start + 4] -= 3.0 * NOISE
            found = [
                change.index
                for change in change_points_detect(
                    values=1000.0 * np.exp(logs), min_relative_change=0.02, p_threshold=1e-4
                )
            ]
            both += any(abs(index - start) <= 1 for index in found) and any(
                abs(index - start - 4) <= 1 for index in found
            )

    assert both >= 62


def test_a_short_steep_excursion_with_few_points_after_it_is_found_with_both_edges() -> None:
    """Three points 3.5 noise scales down and five after: the excursion's test, stricter than a boundary's
    own by `EXCURSION_STRICTNESS`, must not be so strict that it loses what each edge alone cannot show."""
    both, either = _edges_found(depth=3.5, length=3, after=5, histories=40)

    # Ten times stricter than a boundary's own test found both edges in 18 of these 40 histories.
    assert both >= 22
    assert either >= both
