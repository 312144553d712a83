"""The demo tells its truth: what `demo_truth` says the generator did is what the pages show, each step
named by a group at its commit with the size its compare link gives, and the PR pages' 95 % intervals
holding the generator's true change in at least 90 % of their cells."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from dashboard.benchmarks.comparison import comparison_get
from dashboard.benchmarks.models import HEADLINE_METRICS, Commit, Measurement, Run, RunKind
from dashboard.benchmarks.subjects import ChangeClass
from dashboard.demo.history import demo_truth
from dashboard.demo.model import MAIN_SUITE, REGRESSION_PR, SUITES, TRACKING_PRS, demo_model
from dashboard.github.impact import pull_impacts
from dashboard.github.models import PullRequest
from dashboard.regressions.models import AlertGroup
from dashboard.regressions.selectors import group_range_commits

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(600)]


@pytest.fixture
def demo(demo_settings, db) -> list[dict]:
    out = StringIO()
    call_command("demo_truth", stdout=out)
    return json.loads(out.getvalue())


def _check_demo_truth_prints_every_step_of_the_generator_as_json(demo) -> None:
    assert demo == demo_truth()
    assert set(demo[0]) == {"sha", "pr", "suite", "hardware", "concurrency", "metric", "change_pct"}
    regression = [step for step in demo if step["pr"] == REGRESSION_PR]
    # The regression touches concurrency 16 only: -6 % output throughput.
    assert {step["concurrency"] for step in regression} == {16}
    assert next(s for s in regression if s["metric"] == "output_throughput_tok_s")["change_pct"] == -6.0
    shas = set(Commit.objects.values_list("sha", flat=True))
    assert {step["sha"] for step in demo} <= shas
    assert {step["suite"] for step in demo} == {suite.name for suite in SUITES}


def _check_verification_re_runs_are_fresh_draws_not_copies_of_the_first_run() -> None:
    run = Run.objects.filter(kind=RunKind.VERIFICATION).order_by("pk").first()
    assert run is not None
    first = Run.objects.filter(commit=run.commit, suite=run.suite, kind=RunKind.ROUTINE).get()

    def values(of: Run) -> dict[tuple[int, str], float]:
        return {
            (concurrency, metric): value
            for concurrency, metric, value in Measurement.objects.filter(
                run=of, series__metric__in=HEADLINE_METRICS
            ).values_list("series__concurrency", "series__metric", "value")
        }

    ratios = {key: value / values(first)[key] for key, value in values(run).items()}
    # One factor times the first run would make every ratio of a direction the same.
    assert len({round(ratio, 6) for ratio in ratios.values()}) == len(ratios)


def _suites_of(group: AlertGroup) -> set[str]:
    return set(group.alerts.values_list("series__suite__name", flat=True))


def test_every_truth_step_is_named_at_its_exact_commit_with_its_compare_links_size(demo) -> None:
    """Verification and the culprit search, played on the demo's node, leave every step of the generator
    in a group whose range is that one commit; the group's sizes agree with its compare link: each
    alert's change lies in the 95 % interval of the compare of its two commits (but for the few that
    such intervals miss). An alert is sized by detection over the segments on both sides of its change,
    the compare link by the runs at the two commits, so the two are close, never equal."""
    groups = list(AlertGroup.objects.select_related("base_commit", "head_commit"))
    alerts = consistent = 0
    for sha, suite in sorted({(step["sha"], step["suite"]) for step in demo}):
        naming = [
            group
            for group in groups
            if suite in _suites_of(group) and [c.sha for c in group_range_commits(group=group)] == [sha]
        ]
        assert naming, f"no group names {sha[:8]} of {suite} exactly"
        group = naming[0]
        headline = group.alerts.filter(series__suite__name=suite, series__metric__in=HEADLINE_METRICS)
        if not headline.exists():
            continue  # a sweep suite's alerts are of its capacity, which the compare page does not show
        comparison = comparison_get(
            base_ref=group.base_commit.sha,
            head_ref=group.head_commit.sha,
            suite_name=suite,
            hardware_class=None,
        )
        rows = {(row.concurrency, row.metric): row for row in comparison.rows}
        for alert in headline.select_related("series"):
            estimate = rows[(alert.series.concurrency, alert.series.metric)].estimate
            assert estimate is not None and estimate.low_pct is not None and estimate.high_pct is not None
            alerts += 1
            consistent += estimate.low_pct <= alert.change_pct <= estimate.high_pct
    assert alerts >= 13 * 3
    assert consistent / alerts >= 0.90, f"{consistent} of {alerts} alerts lie in their compare's interval"


def _check_every_truth_step_is_named_by_a_group_whose_range_it_alone_can_explain(demo) -> None:
    """Each step is in one group's range, and every other commit of that range touches only docs, tests
    or CI."""
    groups = list(AlertGroup.objects.select_related("base_commit", "head_commit"))
    for sha, suite in sorted({(step["sha"], step["suite"]) for step in demo}):
        naming = []
        for group in groups:
            commits = group_range_commits(group=group)
            capable = [c.sha for c in commits if c.change_class != ChangeClass.DOCS_TESTS_CI]
            if suite in _suites_of(group) and capable == [sha]:
                naming.append(group)
        assert naming, f"no group names {sha[:8]} of {suite}"


def _check_the_pr_pages_intervals_hold_the_generators_truth_in_90_percent_of_cells() -> None:
    model = demo_model()
    pulls = list(
        PullRequest.objects.filter(number__in=[number for number, _ in TRACKING_PRS]).select_related(
            "merge_commit"
        )
    )
    cells = held = 0
    for impacts in pull_impacts(pulls=pulls).values():
        for impact in impacts:
            if impact.suite not in (MAIN_SUITE, "kimi-k3-dcp-120k"):
                continue
            for level in impact.levels:
                before = model.truth(
                    suite=impact.suite, position=impact.before.position, concurrency=level.concurrency
                )
                after = model.truth(
                    suite=impact.suite, position=impact.after.position, concurrency=level.concurrency
                )
                for change in level.changes:
                    if change is None or change.estimate is None or change.estimate.low_pct is None:
                        continue
                    truth = (after[change.metric] / before[change.metric] - 1.0) * 100.0
                    cells += 1
                    held += change.estimate.low_pct <= truth <= (change.estimate.high_pct or 0.0)
    assert cells >= 13 * 3 * len(HEADLINE_METRICS)
    assert held / cells >= 0.90, f"{held} of {cells} intervals hold the truth"


def test_the_demo_tells_its_truth(demo) -> None:
    """One demo load (a minute) for the checks of the generator, its re-runs, its groups and its PR pages."""
    _check_demo_truth_prints_every_step_of_the_generator_as_json(demo)
    _check_verification_re_runs_are_fresh_draws_not_copies_of_the_first_run()
    _check_every_truth_step_is_named_by_a_group_whose_range_it_alone_can_explain(demo)
    _check_the_pr_pages_intervals_hold_the_generators_truth_in_90_percent_of_cells()
