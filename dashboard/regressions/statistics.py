"""The statistics of changes for regressions code: the pure module lives in the lowest layer,
:mod:`dashboard.benchmarks.statistics`, so that every app reads a commit's value and a change's
uncertainty by the same rule."""

from dashboard.benchmarks.statistics import (
    NO_NOISE,
    ChangeEstimate,
    CommitValue,
    NoiseEstimate,
    StatisticsInvalid,
    change_estimate,
    commit_value,
    noise_estimate,
    noise_from_values,
)

__all__ = [
    "NO_NOISE",
    "ChangeEstimate",
    "CommitValue",
    "NoiseEstimate",
    "StatisticsInvalid",
    "change_estimate",
    "commit_value",
    "noise_estimate",
    "noise_from_values",
]
