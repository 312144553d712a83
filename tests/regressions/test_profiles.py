"""Profile runs of a group's culprit and parent, and GET /api/alerts/<group>/profile/ over their diff."""

from __future__ import annotations

import gzip

import pytest
from django.test import Client

from dashboard.benchmarks.models import Run, RunKind, RunStatus
from dashboard.regressions.sheriff.profiles import group_profile_comparison, profiles_request
from tests.regressions.profile_world import PROFILES, profiled_group_create

pytestmark = pytest.mark.django_db

GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
OP_KEYS = {"name", "device", "base_ms", "head_ms", "delta_ms", "delta_pct"}


def test_the_profile_api_answers_parent_culprit_and_ops_by_size_of_change() -> None:
    world = profiled_group_create()

    answer = Client().get(f"/api/alerts/{world.group.pk}/profile/")

    assert answer.status_code == 200
    body = answer.json()
    assert (body["base"], body["head"]) == (world.parent.sha, world.culprit.sha)
    assert body["server_metrics"] == {"base": {"prompt_tokens": 512.0}, "head": {"prompt_tokens": 512.0}}
    ops = body["ops"]
    assert ops and all(set(op) >= OP_KEYS for op in ops)
    sizes = [abs(op["delta_ms"]) for op in ops]
    assert sizes == sorted(sizes, reverse=True)
    gemm = next(op for op in ops if op["name"] == GEMM)
    assert gemm["device"] == "gpu" and gemm["head_ms"] > 5 * gemm["base_ms"] > 0
    assert gemm["delta_ms"] == pytest.approx(gemm["head_ms"] - gemm["base_ms"], abs=1e-3)
    assert gemm["delta_pct"] == pytest.approx(100 * gemm["delta_ms"] / gemm["base_ms"], rel=1e-3)
    assert gemm is next(op for op in ops if op["device"] == "gpu")  # the largest change on the GPU


def test_the_profile_api_is_a_json_404_until_both_profiles_exist() -> None:
    unprofiled = profiled_group_create(profiled=False)

    answer = Client().get(f"/api/alerts/{unprofiled.group.pk}/profile/")
    missing = Client().get("/api/alerts/987654/profile/")

    assert answer.status_code == 404 and "no profiles" in answer.json()["error"]
    assert missing.status_code == 404 and missing.json()["error"]


def test_both_traces_download_as_stored_for_perfetto() -> None:
    world = profiled_group_create()
    comparison = group_profile_comparison(group_id=world.group.pk)
    assert comparison is not None

    for profile, tag in ((comparison.comparison.base, "gpu_base"), (comparison.comparison.head, "gpu_head")):
        download = Client().get(f"/api/runs/{profile.run_id}/profile/trace/")
        assert download.status_code == 200 and download["Content-Type"] == "application/gzip"
        assert f"run-{profile.run_id}-" in download["Content-Disposition"]
        assert download.content == (PROFILES / f"{tag}_trace.json.gz").read_bytes()
        assert b"traceEvents" in gzip.decompress(download.content)
    assert Client().get("/api/runs/987654/profile/trace/").status_code == 404


@pytest.fixture
def no_dispatch(dispatched) -> None:
    """Runs are queued for a node that is not here."""


def test_a_found_culprit_queues_profile_runs_of_it_and_its_parent_once(no_dispatch) -> None:
    world = profiled_group_create(profiled=False)

    queued = profiles_request(group_id=world.group.pk)
    again = profiles_request(group_id=world.group.pk)

    assert {(run.commit_id, run.kind, run.hardware_class, run.status) for run in queued} == {
        (world.culprit.pk, RunKind.PROFILE, "b300", RunStatus.QUEUED),
        (world.parent.pk, RunKind.PROFILE, "b300", RunStatus.QUEUED),
    }
    assert again == []
    assert Run.objects.filter(kind=RunKind.PROFILE).count() == 2


def test_a_culprit_named_inside_the_range_is_profiled_with_its_own_parent(no_dispatch) -> None:
    world = profiled_group_create(profiled=False)

    queued = profiles_request(group_id=world.group.pk, culprit_sha=world.parent.sha[:12])

    assert {run.commit_id for run in queued} == {world.parent.pk, world.base.pk}


def test_no_profile_runs_beyond_the_suites_budget_or_for_a_suite_without_profiling(
    no_dispatch, settings
) -> None:
    world = profiled_group_create(profiled=False)
    settings.PERFWATCH_SUITE_DAILY_GPU_HOURS = 0
    assert profiles_request(group_id=world.group.pk) == []

    settings.PERFWATCH_SUITE_DAILY_GPU_HOURS = 1000
    world.suite.benchmark_settings = {
        key: value for key, value in world.suite.benchmark_settings.items() if key != "profiling"
    }
    world.suite.save(update_fields=["benchmark_settings"])
    assert profiles_request(group_id=world.group.pk) == []
    assert not Run.objects.filter(kind=RunKind.PROFILE).exists()


def test_a_profile_runs_page_times_its_profiling_stage_and_other_runs_do_not_show_one() -> None:
    world = profiled_group_create()
    profile_run = Run.objects.filter(kind=RunKind.PROFILE, commit=world.culprit).get()
    profile_run.stage_durations = {
        "installing": 5,
        "starting_server": 60,
        "benchmarking": 300,
        "profiling": 20,
    }
    profile_run.save(update_fields=["stage_durations"])
    routine = Run.objects.create(
        commit=world.culprit,
        suite=world.suite,
        hardware_class="b300",
        status=RunStatus.SUCCEEDED,
        stage_durations={"installing": 5, "starting_server": 60, "benchmarking": 300, "storing": 2},
    )

    profiled = {bar.stage: bar.state for bar in Client().get(f"/runs/{profile_run.pk}/").context["stages"]}
    ordinary = {bar.stage: bar.state for bar in Client().get(f"/runs/{routine.pk}/").context["stages"]}

    assert profiled["profiling"] == "done" and list(profiled)[-2:] == ["profiling", "storing"]
    assert "profiling" not in ordinary
