"""The culprit search with real `celery worker` processes on the real Redis broker: a confirmed regression
over eight unbenchmarked commits queues its runs one at a time, a runner worker runs them (the real
pipeline: install, serve, benchmark, store), the control worker places each result and queues the next,
and the range ends at the culprit; a runner killed with SIGKILL in the middle of a search run loses and
duplicates nothing.

No GPU exists here, so the runner's vLLM and guidellm are the fake executables of tests/runners/fixtures:
the fake guidellm answers, for each commit, the report a GPU would give at that commit's performance."""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import cast

import pytest

from dashboard.benchmarks import runs as lifecycle
from dashboard.benchmarks.models import Commit, Measurement, Run, RunKind, RunStatus, Series
from dashboard.benchmarks.services import measurements_store
from dashboard.benchmarks.suites import suite_upsert
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState
from dashboard.regressions.sheriff.search import group_search
from runners.guidellm_report import report_parse
from runners.install import env_python_resolve, guidellm_recipe, vllm_recipe
from runners.suites import InstallMethod, SuiteSpec
from tests.factories import CommitFactory, RunFactory
from tests.regressions.conftest import noisy
from tests.regressions.test_verification_workers import REPORT, _scaled
from tests.runners.conftest import RUNNER_FIXTURES
from tests.runners.test_pipeline import fake_env_install, suite_without_local_model
from tests.workers.conftest import wait_for, worker_group_kill
from workers.celery import app as celery_app

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

COMMITS, BASE, HEAD, STEP_AT = 30, 13, 22, 18  # commits 14-21 were never benchmarked
DROP = 0.85  # output throughput at every level from the culprit on


def _wheel_suite() -> SuiteSpec:
    """The tiny CPU suite installed as main's wheels are (a release suite cannot be searched)."""
    spec = suite_without_local_model()
    install = spec.install.model_copy(
        update={
            "method": InstallMethod.WHEEL_INDEX,
            "package": "vllm",
            "version": None,
            "torch_version": None,
        }
    )
    return spec.model_copy(update={"name": "tiny-llama-cpu-wheels", "install": install})


def _fake_gpu_cache(tmp_path: Path, *, spec: SuiteSpec, commits: list[Commit]) -> Path:
    """A runner cache holding, for every commit, a server environment whose vLLM is the fake executable."""
    cache, python = tmp_path / "cache", env_python_resolve()
    for commit in commits:
        fake_env_install(
            cache_dir=cache,
            recipe=vllm_recipe(install=spec.install, commit_sha=commit.sha, python=python),
            executables={"vllm": RUNNER_FIXTURES / "fake_vllm_server.py"},
        )
    fake_env_install(
        cache_dir=cache,
        recipe=guidellm_recipe(python=python),
        executables={"guidellm": RUNNER_FIXTURES / "fake_guidellm.py"},
    )
    return cache


def _search_states() -> list[str]:
    return list(Run.objects.filter(kind=RunKind.BISECTION).values_list("status", flat=True))


def test_a_confirmed_regression_is_searched_to_its_culprit_and_survives_a_killed_runner(
    start_worker, tmp_path, settings
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    spec = _wheel_suite()
    suite, _ = suite_upsert(spec=spec)
    document = json.loads(REPORT.read_bytes())
    commits = [cast(Commit, CommitFactory()) for _ in range(COMMITS)]
    for index, commit in enumerate(commits):
        level = noisy(DROP if index >= STEP_AT else 1.0, index)
        (reports / f"{commit.sha}.json").write_bytes(_scaled(document, level))
        if BASE < index < HEAD:
            continue
        # The ends hold the repeats that confirmed the change.
        for _ in range(3 if index in (BASE, HEAD) else 1):
            run = cast(Run, RunFactory(commit=commit, suite=suite, hardware_class="cpu"))
            measurements_store(run=run, report=report_parse(raw=_scaled(document, level)))
    group = AlertGroup.objects.create(
        base_commit=commits[BASE],
        head_commit=commits[HEAD],
        kind=GroupKind.REGRESSION,
        state=GroupState.CONFIRMED,
    )
    for series in Series.objects.filter(suite=suite, metric="output_throughput_tok_s"):
        Alert.objects.create(
            group=group,
            series=series,
            kind="regression",
            before_value=1.0,
            after_value=DROP,
            change_pct=-15.0,
        )

    common = {"PERFWATCH_SLACK_WEBHOOK_URL": "", "PERFWATCH_ALERT_EMAILS": "", "GITHUB_TOKEN": ""}
    settings.PERFWATCH_RUN_LEASE_S, settings.PERFWATCH_HEARTBEAT_S = 15, 3
    runner = {
        "PERFWATCH_CACHE_DIR": str(_fake_gpu_cache(tmp_path, spec=spec, commits=commits)),
        "FAKE_GUIDELLM_MODE": "report",
        "FAKE_GUIDELLM_REPORTS_DIR": str(reports),
        "FAKE_VLLM_MODE": "serve",
    }
    start_worker(name="control", queue="default", extra_env=common)
    # The first runner hangs in every benchmark: it is killed during the search's first run.
    doomed = start_worker(
        name="cpu-doomed", queue="runner.cpu", extra_env={**runner, "FAKE_GUIDELLM_DELAY_S": "600"}
    )
    wait_for(lambda: len(celery_app.control.ping(timeout=1.0) or []) == 2, timeout_s=120, what="two workers")

    first = group_search(group_id=group.pk).queued
    assert [commits.index(run.commit) for run in first] == [17]  # the middle of candidates 14-22

    wait_for(lambda: RunStatus.BENCHMARKING in _search_states(), timeout_s=240, what="a search run")
    killed = Run.objects.get(kind=RunKind.BISECTION, status=RunStatus.BENCHMARKING)
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
    # The dead worker may also have taken a message off the queue; the periodic resend covers it.
    settings.PERFWATCH_QUEUED_REDISPATCH_S = 0
    lifecycle.runs_redispatch_stale()

    def found() -> bool:
        group.refresh_from_db()
        return group.head_commit_id == commits[STEP_AT].pk and group.base_commit_id == commits[STEP_AT - 1].pk

    wait_for(found, timeout_s=600, what="the culprit", interval_s=2)

    searched = list(Run.objects.filter(kind=RunKind.BISECTION).order_by("pk"))
    # One run at a time, every one the search queued finished once: nothing was run twice or lost by the
    # kill (repeats of a commit are the search's own choice, each a run of its own).
    assert [run.status for run in searched] == [RunStatus.SUCCEEDED] * len(searched)
    assert 2 <= len(searched) <= 8
    assert Counter(run.attempt for run in searched if run.pk != killed.pk) == {1: len(searched) - 1}
    assert group.evidence["search"]["runs_queued"] == len(searched)
    assert Run.objects.get(pk=killed.pk).attempt == 2
    assert Run.objects.values_list("runner__name", flat=True).get(pk=killed.pk) == "cpu-survivor"
    per_run = {run.pk: Measurement.objects.filter(run=run).count() for run in searched}
    assert set(per_run.values()) == {2 * 21}
    assert group.evidence["search"]["culprit"] == commits[STEP_AT].sha
    assert AlertGroup.objects.count() == 1
