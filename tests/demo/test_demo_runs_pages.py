"""The demo's runs and runner as `make demo` loads them: each run timed stage by stage, in the order things
happened, with the vLLM its server answered and the GPUs' telemetry; the suite as its YAML describes it."""

import re

import pytest
from django.db.models import Max

from dashboard.benchmarks.models import Run, RunKind, Runner, RunStatus, Suite
from dashboard.demo.history import DEMO_SUITE, demo_vllm_version
from dashboard.regressions.models import AlertGroup
from dashboard.web.run_pages import STAGES
from runners.suites import suite_get

pytestmark = pytest.mark.django_db

DATE_CELL = r"<td>(\d{4}-\d\d-\d\d \d\d:\d\d|–)</td>"


def test_every_demo_run_is_timed_in_order_and_its_pages_say_so(client, demo_settings) -> None:
    # Besides the history: one failed, one benchmarking and one queued run, as a live node shows them.
    pending = Run.objects.exclude(status__in=(RunStatus.SUCCEEDED, RunStatus.CANCELLED))
    assert sorted(pending.values_list("status", flat=True)) == sorted(
        [RunStatus.FAILED, RunStatus.BENCHMARKING, RunStatus.QUEUED]
    )
    # The profile runs a found culprit asks for are cancelled, saying why: the node records no traces.
    cancelled = Run.objects.filter(status=RunStatus.CANCELLED)
    assert set(cancelled.values_list("kind", flat=True)) <= {RunKind.PROFILE}
    assert all(
        "records no profile traces" in reason for reason in cancelled.values_list("failure_reason", flat=True)
    )
    runs = list(Run.objects.filter(status=RunStatus.SUCCEEDED).select_related("commit"))
    # The node ran what the sheriff asked for: the repeats of every suspected group, and the culprit
    # search of a group whose range held more than one commit.
    assert {run.kind for run in runs} == {RunKind.ROUTINE, RunKind.VERIFICATION, RunKind.BISECTION}
    for run in runs:
        assert run.started_at and run.finished_at
        assert run.queued_at <= run.started_at <= run.finished_at, run.pk
        assert run.commit.committed_at and run.commit.committed_at <= run.queued_at, run.pk
        # Only a profile run has a profiling stage; these are routine and verification runs.
        assert set(run.stage_durations) == set(STAGES) - {RunStatus.PROFILING}, run.pk
        stage_seconds = sum(run.stage_durations.values())
        assert stage_seconds == pytest.approx((run.finished_at - run.started_at).total_seconds(), abs=0.01)
        assert run.vllm_version == demo_vllm_version(commit=run.commit) != ""
        assert run.environment["gpu_count"] == (8 if run.hardware_class == "b300" else 0)
    # Each re-run was queued after the group that asked for it was found, and that after its head landed.
    groups = list(AlertGroup.objects.select_related("base_commit", "head_commit"))
    for group in groups:
        assert group.head_commit.committed_at and group.head_commit.committed_at <= group.created_at
    for run in runs:
        if run.kind in (RunKind.VERIFICATION, RunKind.BISECTION):
            # The group that asked: the first whose head is at or after the run's commit.
            asking = min(
                (
                    group
                    for group in groups
                    if (group.head_commit.position or 0) >= (run.commit.position or 0)
                ),
                key=lambda group: group.head_commit.position or 0,
            )
            assert asking.created_at <= run.queued_at, (run.pk, asking.pk)
    on_gpus = [run for run in runs if run.hardware_class == "b300"]
    assert Run.objects.filter(pk__in=[run.pk for run in on_gpus]).exclude(telemetry=[]).count() == len(
        on_gpus
    )
    first = Run.objects.order_by("pk").first()
    assert first is not None and first.vllm_version == "0.27.1"
    assert {sample["gpu_index"] for sample in first.telemetry} == set(range(8))

    # The B300 node is benchmarking now: its last heartbeat is after every run it finished.
    runner = Runner.objects.get(name="b300-node-1")
    finished = Run.objects.filter(runner=runner).aggregate(last=Max("finished_at"))["last"]
    assert runner.last_heartbeat_at is not None and runner.last_heartbeat_at >= finished

    suite = Suite.objects.get(name=DEMO_SUITE)
    spec = suite_get(name=DEMO_SUITE).model_dump(mode="json")
    assert (suite.serve_settings, suite.benchmark_settings, suite.install_settings) == (
        spec["serve"],
        spec["benchmark"],
        spec["install"],
    )

    # The pages of the newest run, its commit, the runs list, the runners and the suite's timeline.
    run = (
        Run.objects.filter(status=RunStatus.SUCCEEDED, hardware_class="b300")
        .select_related("commit")
        .latest("finished_at")
    )

    response = client.get(f"/runs/{run.pk}/")
    html = response.content.decode()
    assert [bar.state for bar in response.context["stages"]] == ["done"] * 4
    assert all(bar.duration != "–" for bar in response.context["stages"])
    assert "not reached" not in html and "No GPU telemetry" not in html
    assert f'data-figure-url="/api/runs/{run.pk}/figures/telemetry/"' in html
    assert f'<dd class="mono">{run.vllm_version}</dd>' in html
    shown = re.search(
        r"<dt>Queued</dt><dd [^>]*>([^<]+)</dd></div>\s*<div><dt>Started</dt><dd [^>]*>([^<]+)</dd>", html
    )
    assert shown is not None
    assert shown.groups() == (f"{run.queued_at:%Y-%m-%d %H:%M}", f"{run.started_at:%Y-%m-%d %H:%M}")

    # The commit page lists each of its runs queued, then started.
    commit_html = client.get(f"/commits/{run.commit.sha}/").content.decode()
    times = re.findall(DATE_CELL + r"\s*" + DATE_CELL, commit_html)
    assert times and all(queued <= started for queued, started in times), times

    # Every succeeded run in the list names its vLLM.
    listed = client.get("/runs/?status=succeeded").content.decode()
    versions = re.findall(r'<td class="mono">([^<]*)</td>\s*<td>Runner</td>', listed)
    assert len(versions) == 50 and "–" not in versions
    assert run.vllm_version in versions

    runners_html = client.get("/runners/").content.decode()
    assert "never" not in runners_html
    assert re.search(r'class="beat beat-stale" title="[^"]+">[^<]+ ago</span>', runners_html)

    timeline = client.get(f"/suites/{DEMO_SUITE}/").content.decode()
    definition = timeline[timeline.index("Suite definition") :]
    assert "model: moonshotai/Kimi-K3" in definition and "- --tensor-parallel-size" in definition
    assert "concurrencies:\n- 1\n- 4\n- 16" in definition
    assert "<pre>{}</pre>" not in definition
