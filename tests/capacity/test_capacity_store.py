"""Capacity stored per run from its load curve, re-derived when the suite's objectives change."""

from typing import cast

import pytest

from dashboard.benchmarks.capacity import suite_capacity_recompute
from dashboard.benchmarks.models import WHOLE_RUN, Commit, LoadLevel, Measurement, Run
from dashboard.benchmarks.services import report_ingest
from dashboard.benchmarks.suites import suite_upsert
from dashboard.regressions.detect.alerts import suite_detect_history
from dashboard.regressions.models import AlertGroup, GroupKind
from runners.capacity import CurvePoint, capacity_derive
from runners.guidellm_report import report_parse
from runners.suites import suite_get
from tests.capacity.conftest import SWEEP_REPORT, spec_with_objectives
from tests.factories import CommitFactory, run_with_values

pytestmark = pytest.mark.django_db

SHA = "ab" * 20


def _capacity_values(run: Run) -> dict[str, float]:
    return dict(
        Measurement.objects.filter(run=run, series__concurrency=WHOLE_RUN).values_list(
            "series__metric", "value"
        )
    )


def _expected_capacity(objectives):
    report = report_parse(raw=SWEEP_REPORT.read_bytes(), max_error_rate=0.25)
    points = [CurvePoint(label=level.label, metrics=level.metrics) for level in report.curve]
    return capacity_derive(curve=points, objectives=objectives)


def test_a_sweep_report_stores_every_level_and_the_capacity_under_the_suite_objectives(sweep_run_ingest):
    run = sweep_run_ingest(sha=SHA)

    levels = list(LoadLevel.objects.filter(run=run).order_by("index"))
    assert [level.strategy for level in levels][:2] == ["synchronous", "throughput"]
    assert len(levels) == 4
    expected = _expected_capacity(suite_get(name="tiny-llama-cpu-sweep").benchmark.objectives)
    assert expected is not None and expected.bounded
    values = _capacity_values(run)
    assert values["capacity_req_s"] == pytest.approx(expected.capacity_req_s)
    assert values["capacity_output_tok_s"] == pytest.approx(expected.capacity_output_tok_s)
    assert values["goodput_at_capacity_req_s"] == pytest.approx(cast(float, expected.goodput_req_s))
    # The synchronous level is concurrency 1: its percentiles are a per-level series like any other.
    assert Measurement.objects.filter(run=run, series__concurrency=1, series__metric="ttft_ms_p99").exists()


def test_a_changed_objective_changes_capacity_without_running_again(sweep_suite, sweep_run_ingest):
    run = sweep_run_ingest(sha=SHA)
    before = _capacity_values(run)["capacity_req_s"]
    levels_before = list(LoadLevel.objects.values_list("id", "metrics"))
    loose = [{"metric": "ttft_ms_p99", "max": 1_000_000.0}]

    suite_upsert(spec=spec_with_objectives(suite_get(name="tiny-llama-cpu-sweep"), loose))

    after = _capacity_values(run)["capacity_req_s"]
    assert list(LoadLevel.objects.values_list("id", "metrics")) == levels_before
    assert Run.objects.count() == 1
    assert after > before
    assert after == pytest.approx(
        max(level.metrics["request_throughput_req_s"] for level in LoadLevel.objects.all())
    )


def test_removing_the_objectives_removes_capacity(sweep_suite, sweep_run_ingest):
    run = sweep_run_ingest(sha=SHA)
    sweep_suite.benchmark_settings = {**sweep_suite.benchmark_settings, "objectives": []}
    sweep_suite.save()

    assert suite_capacity_recompute(suite=sweep_suite) == 1

    assert _capacity_values(run) == {}
    assert LoadLevel.objects.filter(run=run).count() == 4


def test_a_report_without_objectives_stores_its_curve_but_no_capacity(vllm_cpu_report):
    run = report_ingest(
        raw=vllm_cpu_report, commit_sha=SHA, suite_name="tiny-llama-cpu", hardware_class="cpu"
    ).run

    assert LoadLevel.objects.filter(run=run).count() == 3
    assert _capacity_values(run) == {}


def test_a_capacity_drop_is_a_regression_like_a_slowdown(sweep_suite):
    commits = [cast(Commit, CommitFactory()) for _ in range(60)]
    for index, commit in enumerate(commits):
        level = 3.0 if index < 30 else 2.6  # a 13 % lower capacity from commit 30 on
        value = level * (1 + 0.01 * (((index * 7919) % 101 - 50) / 50.0))
        run_with_values(commit=commit, suite=sweep_suite, values={(WHOLE_RUN, "capacity_req_s"): value})

    suite_detect_history(suite_name=sweep_suite.name)

    group = AlertGroup.objects.get()
    assert group.kind == GroupKind.REGRESSION
    assert (group.base_commit, group.head_commit) == (commits[29], commits[30])
