"""A run's lifecycle: claim once, heartbeat, stages, store once, requeue on a lost lease."""

import hashlib
from datetime import timedelta
from typing import cast

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from dashboard import dispatch
from dashboard.benchmarks.models import (
    ACTIVE_RUN_STATUSES,
    Commit,
    Measurement,
    Run,
    RunKind,
    Runner,
    RunStatus,
    Suite,
)
from dashboard.benchmarks.runs import (
    LOG_TAIL_CHARS,
    RunActionRefused,
    RunNotOwned,
    run_cancel,
    run_claim,
    run_enqueue,
    run_fail,
    run_heartbeat,
    run_requeue_after_timeout,
    run_retry,
    run_stage_enter,
    runs_redispatch_stale,
    runs_requeue_expired,
)
from dashboard.benchmarks.scheduling import VersionUnknown, runs_enqueue_versions, runs_schedule
from dashboard.benchmarks.services import RunResult, run_complete
from runners.guidellm_report import report_parse
from runners.stages import PIPELINE_STAGES
from tests.factories import CommitFactory, RunnerFactory, SuiteFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued_run(runner_queue) -> Run:
    """A queued cpu run whose message really went out to the broker (and was taken off it here)."""
    suite = cast(Suite, SuiteFactory(name="tiny-llama-cpu", hardware_class="cpu", concurrencies=[1, 2, 4]))
    run = run_enqueue(commit=cast(Commit, CommitFactory()), suite=suite)
    assert runner_queue.drain() == [(dispatch.RUN_EXECUTE, (run.pk,))]
    return run


def _runner(name: str = "cpu-1") -> Runner:
    return cast(Runner, RunnerFactory(name=name, hardware_class="cpu"))


def _result(raw: bytes) -> RunResult:
    return RunResult(
        raw_report=raw,
        report=report_parse(raw=raw),
        environment={"host": "test"},
        vllm_version="0.32.0+cpu",
        telemetry=[],
        server_metrics={},
        commands={"serve": "vllm serve ..."},
        logs={"server": "x" * 30_000},
    )


def test_a_run_is_claimed_once_even_when_delivered_twice(queued_run) -> None:
    first = run_claim(run_id=queued_run.pk, runner=_runner("cpu-1"))
    second = run_claim(run_id=queued_run.pk, runner=_runner("cpu-2"))
    assert first is not None and first.status == RunStatus.INSTALLING and first.attempt == 1
    assert second is None
    assert Run.objects.get(pk=queued_run.pk).runner == Runner.objects.get(name="cpu-1")


def test_stages_record_their_durations(queued_run) -> None:
    runner = _runner()
    run_claim(run_id=queued_run.pk, runner=runner)
    run_stage_enter(run_id=queued_run.pk, runner=runner, stage=RunStatus.STARTING_SERVER)
    run_stage_enter(run_id=queued_run.pk, runner=runner, stage=RunStatus.BENCHMARKING)
    run = Run.objects.get(pk=queued_run.pk)
    assert run.status == RunStatus.BENCHMARKING
    assert set(run.stage_durations) == {"installing", "starting_server"}


def test_results_are_stored_once_and_detection_is_asked_for(
    queued_run, vllm_cpu_report, control_queue
) -> None:
    runner = _runner()
    run_claim(run_id=queued_run.pk, runner=runner)
    run_complete(run_id=queued_run.pk, runner=runner, result=_result(vllm_cpu_report))
    assert control_queue.drain() == [(dispatch.RUN_DETECT, (queued_run.pk,))]
    with pytest.raises(RunNotOwned):
        run_complete(run_id=queued_run.pk, runner=runner, result=_result(vllm_cpu_report))
    assert control_queue.drain() == []
    run = Run.objects.get(pk=queued_run.pk)
    assert run.status == RunStatus.SUCCEEDED
    assert run.report_sha256 == hashlib.sha256(vllm_cpu_report).hexdigest()
    assert Measurement.objects.filter(run=run).count() == 3 * 21
    assert len(run.logs["server"]) == LOG_TAIL_CHARS


def test_cancelled_run_stops_its_heartbeat_and_discards_results(queued_run, vllm_cpu_report) -> None:
    runner = _runner()
    run_claim(run_id=queued_run.pk, runner=runner)
    run_cancel(run_id=queued_run.pk, user=AnonymousUser())
    with pytest.raises(RunNotOwned):
        run_heartbeat(run_id=queued_run.pk, runner=runner)
    with pytest.raises(RunNotOwned):
        run_complete(run_id=queued_run.pk, runner=runner, result=_result(vllm_cpu_report))
    assert Measurement.objects.count() == 0
    assert Run.objects.get(pk=queued_run.pk).status == RunStatus.CANCELLED


def test_expired_lease_requeues_then_gives_up_after_max_attempts(queued_run) -> None:
    runner = _runner()
    for attempt in range(1, 4):
        assert run_claim(run_id=queued_run.pk, runner=runner) is not None
        Run.objects.filter(pk=queued_run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        requeued = runs_requeue_expired()
        run = Run.objects.get(pk=queued_run.pk)
        if attempt < 3:
            assert requeued == [queued_run.pk]
            assert run.status == RunStatus.QUEUED
            assert run.started_at is None  # waiting again: no start shown before its new queue time
            assert "stopped answering" in run.failure_reason
    assert run.status == RunStatus.FAILED
    assert run.failure_reason.endswith("gave up after 3 attempts")
    assert [(a["attempt"], a["outcome"].split(";")[-1].strip()) for a in run.attempts] == [
        (1, "queued again"),
        (2, "queued again"),
        (3, "no attempt left"),
    ]


def test_a_requeued_runs_page_lists_its_lost_attempt(queued_run, client, vllm_cpu_report) -> None:
    lost, survivor = _runner(), _runner("cpu-survivor")
    run_claim(run_id=queued_run.pk, runner=lost)
    Run.objects.filter(pk=queued_run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    runs_requeue_expired()
    run_claim(run_id=queued_run.pk, runner=survivor)
    run_complete(run_id=queued_run.pk, runner=survivor, result=_result(vllm_cpu_report))

    page = client.get(f"/runs/{queued_run.pk}/").content.decode()

    assert "Attempts" in page
    assert f"lost: runner {lost.name} stopped answering during installing; queued again" in page
    assert "cpu-survivor" in page and ">succeeded<" in page


def test_live_lease_is_not_requeued(queued_run) -> None:
    runner = _runner()
    run_claim(run_id=queued_run.pk, runner=runner)
    run_heartbeat(run_id=queued_run.pk, runner=runner)
    assert runs_requeue_expired() == []


def test_failed_run_keeps_a_one_line_reason_and_can_be_retried(queued_run) -> None:
    runner = _runner()
    run_claim(run_id=queued_run.pk, runner=runner)
    run_fail(
        run_id=queued_run.pk,
        runner=runner,
        reason="starting_server: exited\nwith code 1",
        logs={"server": "boom"},
    )
    run = Run.objects.get(pk=queued_run.pk)
    assert (run.status, run.failure_reason, run.logs) == (
        RunStatus.FAILED,
        "starting_server: exited with code 1",
        {"server": "boom"},
    )
    retried = run_retry(run_id=run.pk, user=AnonymousUser())
    assert (retried.status, retried.attempt) == (RunStatus.QUEUED, 0)
    with pytest.raises(RunActionRefused):
        run_retry(run_id=run.pk, user=AnonymousUser())


def test_scheduler_takes_newest_commits_first_skips_docs_only_and_never_repeats(runner_queue) -> None:
    suite = cast(
        Suite,
        SuiteFactory(name="kimi-k3-8k1k", hardware_class="cpu", install_settings={"method": "wheel_index"}),
    )
    commits = [cast(Commit, CommitFactory(position=i, change_class="python")) for i in range(6)]
    Commit.objects.filter(pk=commits[5].pk).update(change_class="docs_tests_ci")

    first = runs_schedule(suite=suite, queue_depth=2)
    assert [run.commit.position for run in first] == [4, 3]
    assert runner_queue.drain() == [(dispatch.RUN_EXECUTE, (run.pk,)) for run in first]
    assert runs_schedule(suite=suite, queue_depth=2) == []  # the queue is full

    Run.objects.filter(pk__in=[run.pk for run in first]).update(status=RunStatus.SUCCEEDED)
    # Nothing new: the older commits are backfilled one at a time, each once nothing else waits.
    second = runs_schedule(suite=suite, queue_depth=2)
    assert [(run.commit.position, run.kind) for run in second] == [(2, "backfill")]
    assert runs_schedule(suite=suite, queue_depth=2) == []
    Run.objects.filter(pk=second[0].pk).update(status=RunStatus.SUCCEEDED)
    assert [run.commit.position for run in runs_schedule(suite=suite, queue_depth=2)] == [1]


def test_new_commits_go_before_backfill_and_repeats_do_not_hold_them_up(runner_queue) -> None:
    suite = cast(
        Suite,
        SuiteFactory(name="kimi-k3-8k1k", hardware_class="cpu", install_settings={"method": "wheel_index"}),
    )
    commits = [cast(Commit, CommitFactory(position=i, change_class="python")) for i in range(4)]
    run_enqueue(commit=commits[1], suite=suite, kind=RunKind.VERIFICATION)
    Run.objects.update(status=RunStatus.SUCCEEDED)
    run_enqueue(commit=commits[1], suite=suite, kind=RunKind.VERIFICATION)

    queued = runs_schedule(suite=suite)

    assert [(run.commit.position, run.kind) for run in queued] == [(3, "routine")]
    assert runs_schedule(suite=suite) == []  # one new commit waits: enough
    # a runner takes the repeat first, then the new commit
    assert [run.kind for run in Run.objects.in_dispatch_order()] == ["verification", "routine"]


def test_scheduler_respects_the_oldest_supported_commit(runner_queue) -> None:
    commits = [cast(Commit, CommitFactory(position=i, change_class="python")) for i in range(5)]
    suite = cast(
        Suite,
        SuiteFactory(
            name="kimi-k3-8k1k",
            hardware_class="cpu",
            install_settings={"method": "wheel_index"},
            oldest_supported_commit=commits[3].sha[:12],
        ),
    )
    runs = runs_schedule(suite=suite, queue_depth=10)
    assert sorted(run.commit.position or 0 for run in runs) == [3, 4]


def test_release_runs_attach_to_their_tag_or_a_given_commit(runner_queue) -> None:
    from dashboard.benchmarks.services import repository_default
    from dashboard.github.models import Tag

    suite = cast(
        Suite,
        SuiteFactory(
            name="tiny-llama-cpu", hardware_class="cpu", install_settings={"method": "pypi_release"}
        ),
    )
    tagged = cast(Commit, CommitFactory())
    Tag.objects.create(repository=repository_default(), name="v0.31.0", sha=tagged.sha, commit=tagged)

    runs = runs_enqueue_versions(
        suite=suite, versions=["0.31.0", "0.32.0"], release_commits={"0.32.0": "ab" * 20}
    )
    assert [(run.vllm_version_requested, run.commit.sha, run.forced) for run in runs] == [
        ("0.31.0", tagged.sha, True),
        ("0.32.0", "ab" * 20, True),
    ]
    with pytest.raises(VersionUnknown, match=r"no commit known for v0\.30\.0"):
        runs_enqueue_versions(suite=suite, versions=["0.30.0"], release_commits={})
    with pytest.raises(VersionUnknown, match="not a release version"):
        runs_enqueue_versions(suite=suite, versions=["latest"], release_commits={})


def test_a_timed_out_step_is_retried_within_the_attempt_budget(queued_run) -> None:
    runner = _runner()
    for attempt in range(1, 3):
        run_claim(run_id=queued_run.pk, runner=runner)
        assert run_requeue_after_timeout(run_id=queued_run.pk, runner=runner, reason="benchmarking: x")
        run = Run.objects.get(pk=queued_run.pk)
        assert (run.status, run.attempt, run.started_at) == (RunStatus.QUEUED, attempt, None)
        assert run.failure_reason == f"attempt {attempt} failed on the bench, retrying: benchmarking: x"
    run_claim(run_id=queued_run.pk, runner=runner)
    assert not run_requeue_after_timeout(run_id=queued_run.pk, runner=runner, reason="benchmarking: x")
    assert Run.objects.get(pk=queued_run.pk).status == RunStatus.INSTALLING  # the caller now fails it


def test_a_run_queued_long_ago_gets_its_message_again(runner_queue, settings) -> None:
    settings.PERFWATCH_QUEUED_REDISPATCH_S = 3600
    suite = cast(Suite, SuiteFactory(name="tiny-llama-cpu", hardware_class="cpu"))
    old, recent = (
        Run.objects.create(commit=cast(Commit, CommitFactory()), suite=suite, hardware_class="cpu")
        for _ in range(2)
    )
    Run.objects.filter(pk=old.pk).update(dispatched_at=timezone.now() - timedelta(hours=2))
    Run.objects.filter(pk=recent.pk).update(dispatched_at=timezone.now() - timedelta(minutes=5))

    assert runs_redispatch_stale() == [old.pk]
    assert runner_queue.drain() == [(dispatch.RUN_EXECUTE, (old.pk,))]
    dispatched_at = Run.objects.get(pk=old.pk).dispatched_at
    assert dispatched_at is not None and dispatched_at > timezone.now() - timedelta(minutes=1)
    assert runs_redispatch_stale() == []  # not again until it is stale again


def test_every_pipeline_stage_is_an_active_run_status() -> None:
    assert set(PIPELINE_STAGES) <= set(ACTIVE_RUN_STATUSES)


def test_no_run_is_queued_for_a_hardware_class_no_node_serves_and_the_suites_page_says_so(
    runner_queue, client
) -> None:
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from dashboard.benchmarks.models import Runner
    from dashboard.benchmarks.scheduling import runs_schedule_all

    call_command("load_suites", verbosity=0)
    CommitFactory.create_batch(3)

    assert runs_schedule_all() == []  # the Kimi suites' b300 class has no node
    page = client.get("/suites/").content.decode()
    assert "waiting for a b300 node since" in page

    seen = timezone.now() - timedelta(days=3)
    Runner.objects.create(name="b300-node-1", hardware_class="b300", last_heartbeat_at=seen)
    assert runs_schedule_all() == []  # gone for days: still not served
    assert f"waiting for a b300 node since {seen:%Y-%m-%d %H:%M} UTC (the last one seen)" in (
        client.get("/suites/").content.decode()
    )

    Runner.objects.filter(name="b300-node-1").update(last_heartbeat_at=timezone.now())
    queued = runs_schedule_all()
    assert queued and {run.hardware_class for run in queued} == {"b300"}
    assert "waiting for a b300 node" not in client.get("/suites/").content.decode()
