"""Noise is local: detection judges every stretch of a series on its own noise.

Rates over many histories, not single draws: a local scale is an estimate from a few dozen differences,
so a rule can only be held to how often it errs. One scale for the whole window, the rule these replace,
errs far more often on the same histories (numbers in the assertions).
"""

from __future__ import annotations

import numpy as np

from dashboard.regressions.detect.attribution import LocatedChange, SeriesHistory, changes_locate
from tests.regressions.suites import SUITE

Steps = dict[tuple[str, int], list[tuple[int, float]]]
HISTORIES = 30


def history(*, seed: int, noise: np.ndarray, steps: Steps | None = None) -> list[SeriesHistory]:
    """Every series of SUITE with multiplicative noise of `noise[i]` (a fraction) at point i."""
    rng = np.random.default_rng(seed)
    histories = []
    for key, (level, _) in SUITE.items():
        values = np.full(noise.size, level)
        for point, change in (steps or {}).get(key, []):
            values[point:] *= 1.0 + change
        values *= np.exp(noise * rng.normal(size=noise.size))
        histories.append(SeriesHistory(key=key, values=values))
    return histories


def located_over_seeds(*, noise: np.ndarray, steps: Steps | None = None) -> list[list[LocatedChange]]:
    return [changes_locate(series=history(seed=seed, noise=noise, steps=steps)) for seed in range(HISTORIES)]


def test_a_stretch_of_doubled_noise_without_a_step_raises_almost_no_change() -> None:
    noise = np.full(120, 0.015)
    noise[50:90] *= 2.0

    false = sum(len(located) for located in located_over_seeds(noise=noise))

    # One noise scale per window: 25 false changes in these 30 histories.
    assert false <= 3


def test_steady_noise_raises_no_change() -> None:
    assert sum(len(located) for located in located_over_seeds(noise=np.full(120, 0.015))) == 0


def test_a_small_step_in_a_quiet_stretch_is_found_and_the_noisy_stretch_raises_little() -> None:
    # 4 % noise for 90 points, then 0.5 %: a 2.5 % step at 125 is five times the quiet noise, and
    # less than the noisy stretch's.
    noise = np.where(np.arange(160) < 90, 0.04, 0.005)
    steps: Steps = {("throughput", 16): [(125, -0.025)]}

    histories = located_over_seeds(noise=noise, steps=steps)

    found = sum(any(change.first <= 125 <= change.last for change in located) for located in histories)
    elsewhere = sum(not change.first <= 125 <= change.last for located in histories for change in located)
    assert found >= HISTORIES - 1
    assert elsewhere <= 3
