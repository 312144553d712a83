"""A commit's value is the median of its runs, read the same by every reader (a property test)."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.benchmarks.columns import commit_values as column_values
from dashboard.benchmarks.compare import compare_rows
from dashboard.benchmarks.models import Commit, Suite
from dashboard.benchmarks.selectors import commit_value_of, timeline_point
from dashboard.benchmarks.statistics import change_estimate, commit_value
from dashboard.regressions.detect.windows import WindowCommit, commit_values, series_points, window_values
from tests.factories import CommitFactory, SuiteFactory, run_with_values

METRIC = "output_throughput_tok_s"
runs = st.lists(
    st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=9
)


@given(values=runs)
def test_every_pure_reader_gives_the_median_of_the_runs(values: list[float]) -> None:
    expected = commit_value(values).value
    assert expected == float(np.median(values))
    assert commit_value_of(values) == expected
    _, medians, counts, lowest, highest = column_values(
        np.zeros(len(values), dtype=np.int64), np.asarray(values)
    )
    assert (float(medians[0]), int(counts[0]), float(lowest[0]), float(highest[0])) == (
        expected,
        len(values),
        min(values),
        max(values),
    )
    (row,) = compare_rows(base={(1, METRIC): values}, head={(1, METRIC): values}, metrics=[METRIC])
    assert row.base == row.head == expected
    estimate = change_estimate(before=values, after=values)
    assert estimate.before == estimate.after == expected
    point = timeline_point(
        sha="0" * 40, subject="", pr_number=None, committed_at=None, position=None, samples=values
    )
    assert point.value == expected


@pytest.mark.django_db
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=runs)
def test_every_stored_reader_gives_the_median_of_the_runs(values: list[float]) -> None:
    suite = cast(Suite, SuiteFactory())
    commit = cast(Commit, CommitFactory())
    for value in values:
        run = run_with_values(commit=commit, suite=suite, values={(16, METRIC): value})
    series_id = run.measurements.get().series_id
    expected = commit_value(values).value

    assert window_values(series_ids=[series_id], commit_ids=[commit.pk])[series_id].values == [expected]
    assert commit_values(series_ids=[series_id], commit_ids=[commit.pk])[series_id][
        commit.pk
    ] == commit_value(values)
    (point,) = series_points(
        series_id=series_id, commits=[WindowCommit(commit_id=commit.pk, position=commit.position)]
    )
    assert (point.value, point.runs) == (expected, len(values))
