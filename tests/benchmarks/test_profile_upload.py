"""A profile run through the runner API: the claim says to profile, the node hands over trace and summary."""

import base64
import gzip
from typing import cast

import pytest
from django.core.files.storage import default_storage

from dashboard.benchmarks import runs as run_lifecycle
from dashboard.benchmarks.models import Commit, Run, RunKind, RunProfile, RunStatus, Suite
from runners.profiles import ProfileSummary, trace_summarise
from tests.factories import CommitFactory
from tests.regressions.profile_world import PROFILES

pytestmark = pytest.mark.django_db
TRACE = (PROFILES / "gpu_head_trace.json.gz").read_bytes()


@pytest.fixture
def profile_run(dispatched) -> Run:
    from django.core.management import call_command

    call_command("load_suites")
    suite = Suite.objects.get(name="tiny-llama-cpu")
    return run_lifecycle.run_enqueue(
        commit=cast(Commit, CommitFactory()), suite=suite, version="0.32.0", kind=RunKind.PROFILE
    )


def _upload(trace: bytes = TRACE) -> dict:
    return {
        "trace": base64.b64encode(trace).decode(),
        "trace_name": "cpu-worker.1.pt.trace.json.gz",
        "summary": trace_summarise(raw=TRACE).to_json(),
        "server_metrics": {"prompt_tokens": 512.0, "generation_tokens": 128.0},
        "settings": {"requests": 4, "concurrency": 2},
    }


def test_a_profile_run_is_claimed_as_one_profiled_and_its_profile_is_stored(profile_run, node) -> None:
    post = node()
    claimed = post(profile_run.pk, "claim").json()
    assert claimed["profile"] is True and claimed["suite"]["benchmark"]["profiling"]["requests"] == 2
    assert post(profile_run.pk, "stage", {"stage": "profiling"}).status_code == 200

    first, second = post(profile_run.pk, "profile", _upload()), post(profile_run.pk, "profile", _upload())

    assert first.status_code == 200 and second.status_code == 200
    profile = RunProfile.objects.get(run=profile_run)
    with default_storage.open(profile.trace_key, "rb") as stored:
        assert stored.read() == TRACE
    assert profile.trace_bytes == len(TRACE) and profile.server_metrics["prompt_tokens"] == 512.0
    assert ProfileSummary.from_json(profile.summary).to_json() == trace_summarise(raw=TRACE).to_json()
    profile_run.refresh_from_db()
    assert profile_run.status == RunStatus.PROFILING


def test_an_ordinary_run_is_not_profiled_and_a_bad_trace_or_foreign_run_is_refused(profile_run, node) -> None:
    post = node()
    post(profile_run.pk, "claim")

    not_gzip = post(profile_run.pk, "profile", _upload(trace=gzip.decompress(TRACE)))
    bad_summary = post(profile_run.pk, "profile", {**_upload(), "summary": {"ops": [{"name": "x"}]}})
    foreign = node("cpu-node-2")(profile_run.pk, "profile", _upload())

    assert not_gzip.status_code == 400 and "gzip" in not_gzip.json()["error"]
    assert bad_summary.status_code == 400 and "summary" in bad_summary.json()["error"]
    assert foreign.status_code == 409
    assert not RunProfile.objects.exists()
    routine = run_lifecycle.run_enqueue(commit=profile_run.commit, suite=profile_run.suite, version="0.32.0")
    assert post(routine.pk, "claim").json()["profile"] is False
