"""A tracking issue's impacts read around each merge, not the history: the merges' neighbours through the
commits' position index, and the points at the range ends through the series' (series, commit) index."""

from typing import cast

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks.models import HEADLINE_METRICS, Commit, Measurement, Suite
from dashboard.github.impact import NEIGHBOUR_COMMITS, pull_impacts
from dashboard.github.tracking_issues import tracking_issue_add
from tests.factories import SuiteFactory, bulk_history
from tests.github.test_impact import track
from tests.plans import executed_plan, plan_rows_read

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's query plans"),
]

HISTORY = 3_000


def test_three_prs_in_a_long_history_read_their_neighbours_and_their_ends_only() -> None:
    suite = cast(Suite, SuiteFactory())
    commits = bulk_history(
        suite=suite,
        values={(16, metric): [100.0 + index % 9 for index in range(HISTORY)] for metric in HEADLINE_METRICS},
    )
    issue = tracking_issue_add(repo="vllm-project/vllm", number=50587)
    pulls = [track(issue, commits[index], order=order) for order, index in enumerate((500, 1500, 2500))]

    with CaptureQueriesContext(connection) as captured:
        found = pull_impacts(pulls=pulls)

    assert set(found) == {pull.pk for pull in pulls}
    neighbours = next(query["sql"] for query in captured if "WITH merges" in query["sql"])
    ends = next(query["sql"] for query in captured if "wanted_commit" in query["sql"])
    # As the planner reads them for a history of 10,000 commits and a hundred PRs, where it hashes
    # rather than looks up (a nested loop refused, the lookups stay: they are written as such).
    hashed = ("seqscan", "nestloop")
    # Each merge's commits either side: not every commit tested against every merge.
    assert plan_rows_read(executed_plan(neighbours, None, refused=hashed), Commit._meta.db_table) <= (
        3 * 2 * NEIGHBOUR_COMMITS
    )
    # A point per headline series at each end of each range: not every point of those series.
    points = len(HEADLINE_METRICS) * 3 * 2
    assert plan_rows_read(executed_plan(ends, None, refused=hashed), Measurement._meta.db_table) <= points
