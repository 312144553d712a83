"""The overview's sparkline points read series by series through their index are the points of the one
windowed statement the ORM writes: the same runs, the same recency, unplaced commits and failed runs alike."""

from __future__ import annotations

import math
from typing import cast

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks import overview_selectors
from dashboard.benchmarks.models import Commit, Measurement, Run, RunStatus, Suite
from dashboard.benchmarks.overview_selectors import _sparkline_points, suites_sparklines
from tests.factories import CommitFactory, SuiteFactory, run_with_values

METRIC = "output_throughput_tok_s"


@pytest.mark.django_db
def test_the_indexed_read_equals_the_orm_statement() -> None:
    suites = [cast(Suite, SuiteFactory(name=name)) for name in ("dense", "short")]
    commits = [cast(Commit, CommitFactory()) for _ in range(30)]
    Commit.objects.filter(pk=commits[-1].pk).update(position=None)  # synced, not yet placed on main
    for index, commit in enumerate(commits):
        for repeat in range(1 + (index % 4 == 0)):
            run_with_values(commit=commit, suite=suites[0], values={(16, METRIC): 100.0 + index + repeat})
        if index % 3 == 0:
            run = run_with_values(commit=commit, suite=suites[1], values={(16, METRIC): 50.0 + index})
            if index == 9:
                Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
            if index == 12:
                Measurement.objects.filter(run=run).update(value=math.inf)
    series_ids = sorted(Measurement.objects.values_list("series_id", flat=True).distinct())
    for last in (5, 12, 100):
        indexed = sorted(_sparkline_points(series_ids=series_ids, last=last))
        assert indexed == sorted(_sparkline_points(series_ids=series_ids, last=last, portable=True))
        assert indexed and max(recency for _, recency, _ in indexed) == min(last, 30)
    lines = suites_sparklines(last=5)
    # Oldest first; the unplaced commit counts as the newest, a commit's two runs as their median.
    assert lines[(suites[0].pk, "b300")].values == (125.0, 126.0, 127.0, 128.5, 129.0)


@pytest.mark.django_db
def test_a_long_history_is_read_from_its_recent_commits_for_the_same_sparkline(monkeypatch) -> None:
    dense, sparse = (cast(Suite, SuiteFactory(name=name)) for name in ("dense", "sparse"))
    commits = [cast(Commit, CommitFactory()) for _ in range(60)]
    for index, commit in enumerate(commits):
        for repeat in range(1 + (index % 4 == 0)):
            run_with_values(commit=commit, suite=dense, values={(16, METRIC): 100.0 + index + repeat})
        if index % 9 == 0:  # too sparse for its recent commits to hold a sparkline
            run_with_values(commit=commit, suite=sparse, values={(16, METRIC): 50.0 + index})
    whole = suites_sparklines(last=5)
    # From the 20 commits before each pair's newest: the dense pair's five newest are among them.
    monkeypatch.setattr(overview_selectors, "SPARKLINE_SPAN", 4)
    with CaptureQueriesContext(connection) as captured:
        recent = suites_sparklines(last=5, pairs=overview_selectors.overview_pairs())

    assert recent == whole
    assert recent[(dense.pk, "b300")].values == (155.0, 156.5, 157.0, 158.0, 159.0)  # 56: two runs
    assert recent[(sparse.pk, "b300")].values == (68.0, 77.0, 86.0, 95.0, 104.0)
    reads = [query["sql"] for query in captured if Measurement._meta.db_table in query["sql"]]
    assert len(reads) == 2 and "wanted.since" in reads[0]
