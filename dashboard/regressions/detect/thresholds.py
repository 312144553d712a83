"""The thresholds detection judges changes by: the one rule of `benchmarks.thresholds`, which compare and
the PR and commit tables use too."""

from dashboard.benchmarks.thresholds import (
    DEFAULT_P_THRESHOLD,
    DEFAULT_THRESHOLDS,
    Threshold,
    threshold_resolve,
    thresholds_for_suite,
    thresholds_for_suites,
)

__all__ = [
    "DEFAULT_P_THRESHOLD",
    "DEFAULT_THRESHOLDS",
    "Threshold",
    "threshold_resolve",
    "thresholds_for_suite",
    "thresholds_for_suites",
]
