"""Several runs of one commit combine the same way everywhere: the median of its runs (the overview, the
timeline, the commit page and compare all show the same number)."""

from typing import cast

import pytest
from django.test import Client

from dashboard.benchmarks.comparison import comparison_get
from dashboard.benchmarks.models import Commit, Suite
from tests.factories import CommitFactory, SuiteFactory, run_with_values

pytestmark = pytest.mark.django_db

METRIC = "output_throughput_tok_s"


def test_three_runs_of_the_latest_commit_show_their_median_on_every_page(client: Client) -> None:
    suite = cast(Suite, SuiteFactory(name="kimi-k3-8k1k", hardware_class="b300"))
    base, head = cast(Commit, CommitFactory(position=1)), cast(Commit, CommitFactory(position=2))
    run_with_values(commit=base, suite=suite, values={(1, METRIC): 80.0})
    for value in (100.0, 104.0, 130.0):  # the mean would be 111.3, the latest run 130.0
        run_with_values(commit=head, suite=suite, values={(1, METRIC): value})

    overview = client.get("/").content.decode()
    series = client.get("/api/suites/kimi-k3-8k1k/series/", {"hardware": "b300", "metric": METRIC}).json()
    commit_page = client.get(f"/commits/{head.sha}/").content.decode()
    comparison = comparison_get(
        base_ref=base.sha, head_ref=head.sha, suite_name=suite.name, hardware_class=None
    )

    cells = [
        cell.text for card in client.get("/").context["cards"] for row in card.rows for cell in row.cells
    ]
    assert cells[0] == "104.0" and "104.0" in overview
    points = series["series"][0]["points"]
    assert [point["value"] for point in points] == [80.0, 104.0]
    assert 'title="median of 3 runs (100.0 to 130.0): 100.0, 104.0, 130.0">104.0*<' in commit_page
    row = next(row for row in comparison.rows if row.metric == METRIC)
    assert (row.base, row.head) == (80.0, 104.0)
