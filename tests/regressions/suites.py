"""Suite histories with known steps and slow runs, for the attribution tests with and without a database."""

from __future__ import annotations

import numpy as np

from dashboard.regressions.detect.attribution import SeriesHistory

LENGTH = 120
STEP = 60
# The series of one run: (metric, concurrency) -> (level, whether higher is better)
SUITE = {
    (metric, concurrency): (level * concurrency**scale, higher_is_better)
    for concurrency in (1, 4, 16)
    for metric, level, scale, higher_is_better in (
        ("throughput", 183.0, 0.5, True),
        ("ttft", 376.0, 0.4, False),
        ("itl", 5.3, 0.3, False),
        ("tpot", 5.4, 0.3, False),
        ("latency", 5.3, 0.5, False),
    )
}


def decode(concurrency: int, point: int, change: float) -> dict[tuple[str, int], list[tuple[int, float]]]:
    """A change of decode speed at one concurrency: throughput one way, ITL, TPOT and latency the other."""
    slower = 1.0 / (1.0 + change) - 1.0
    return {
        ("throughput", concurrency): [(point, change)],
        **{(metric, concurrency): [(point, slower)] for metric in ("itl", "tpot", "latency")},
    }


def suite_history(
    *,
    seed: int,
    steps: dict[tuple[str, int], list[tuple[int, float]]],
    slow_runs: dict[int, float] | None = None,
    noise: float = 0.015,
) -> list[SeriesHistory]:
    """Every series of SUITE with multiplicative noise, `steps[key]` = [(point, relative change)], and
    slow runs {point: slowdown} that make every metric of that run worse."""
    rng = np.random.default_rng(seed)
    histories = []
    for key, (level, higher_is_better) in SUITE.items():
        values = np.full(LENGTH, level)
        for point, change in steps.get(key, []):
            values[point:] *= 1.0 + change
        for point, slowdown in (slow_runs or {}).items():
            values[point] *= (1.0 - slowdown) if higher_is_better else (1.0 + slowdown)
        values *= np.exp(noise * rng.normal(size=LENGTH))
        # A slow run reads lower throughput and higher latencies, as `metric_slower_sign` says.
        histories.append(SeriesHistory(key=key, values=values, slower=-1.0 if higher_is_better else 1.0))
    return histories


METRIC_NAMES = {
    "throughput": "output_throughput_tok_s",
    "ttft": "ttft_ms_mean",
    "itl": "itl_ms_mean",
    "tpot": "tpot_ms_mean",
    "latency": "latency_s_mean",
}
