"""One threshold rule: compare judges a change by the suite's detection settings, as detection does."""

from __future__ import annotations

from typing import cast

import pytest

from dashboard.benchmarks.comparison import comparison_get
from dashboard.benchmarks.models import Commit, DetectionSetting, Suite
from dashboard.benchmarks.thresholds import threshold_resolve, thresholds_for_suite
from tests.factories import CommitFactory, SuiteFactory, run_with_values

pytestmark = pytest.mark.django_db

THROUGHPUT = "output_throughput_tok_s"


def _ten_percent_faster() -> tuple[Suite, Commit, Commit]:
    suite = cast(Suite, SuiteFactory())
    base, head = cast(Commit, CommitFactory()), cast(Commit, CommitFactory())
    for commit, level in ((base, 1000.0), (head, 1100.0)):
        for offset in (-2.0, 0.0, 2.0):
            run_with_values(commit=commit, suite=suite, values={(16, THROUGHPUT): level + offset})
    return suite, base, head


def _significant(suite: Suite, base: Commit, head: Commit) -> bool:
    comparison = comparison_get(
        base_ref=base.sha, head_ref=head.sha, suite_name=suite.name, hardware_class=None
    )
    (row,) = [row for row in comparison.rows if row.metric == THROUGHPUT]
    assert row.estimate is not None
    return row.estimate.significant


def test_compare_judges_a_change_by_the_suites_detection_setting() -> None:
    suite, base, head = _ten_percent_faster()
    assert _significant(suite, base, head)  # +10 % passes the built-in 2 %

    DetectionSetting.objects.create(suite=suite, metric_prefix="output_throughput", min_relative_change=0.15)

    assert not _significant(suite, base, head)
    rule = threshold_resolve(metric=THROUGHPUT, suite_id=suite.pk, rows=thresholds_for_suite(suite.pk))
    assert rule.min_relative_change == 0.15
