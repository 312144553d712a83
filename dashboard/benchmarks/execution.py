"""The runner node's side of a run: claim it, benchmark it through runners/, store the outcome."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection

from dashboard.benchmarks.models import Run, RunStatus
from dashboard.benchmarks.runs import (
    LOG_TAIL_CHARS,
    RunNotOwned,
    RunResult,
    logger,
    run_claim,
    run_complete,
    run_fail,
    run_heartbeat,
    run_requeue_after_timeout,
    run_stage_enter,
    runner_register,
)
from dashboard.benchmarks.suites import suite_spec


def run_execute(*, run_id: int, runner_name: str, hardware_class: str) -> RunStatus | None:
    """Claim run `run_id` for this node, benchmark it, and store the outcome; None if not ours to run."""
    from dataclasses import asdict

    from runners.errors import RunFailed
    from runners.fingerprint import environment_fingerprint
    from runners.pipeline import benchmark_execute

    if not hardware_class:
        hardware_class = (
            Run.objects.filter(pk=run_id).values_list("hardware_class", flat=True).first() or "unknown"
        )
    node_environment = environment_fingerprint()
    runner = runner_register(name=runner_name, hardware_class=hardware_class, environment=node_environment)
    run = run_claim(run_id=run_id, runner=runner)
    if run is None:
        logger.info("run %s is not queued any more: nothing to do", run_id)
        return None

    def heartbeat() -> None:
        # Runs in the pipeline's heartbeat thread, on that thread's own database connection.
        # RunNotOwned raised here stops the benchmark: the run was cancelled or requeued.
        try:
            run_heartbeat(run_id=run_id, runner=runner)
        finally:
            connection.close()

    def on_stage(stage: str) -> None:
        run_stage_enter(run_id=run_id, runner=runner, stage=stage)

    work_dir = Path(settings.PERFWATCH_WORK_DIR) / f"run-{run_id}-attempt-{run.attempt}"
    try:
        outcome = benchmark_execute(
            suite=suite_spec(suite=run.suite),
            commit_sha=run.commit.sha,
            runner_name=runner.name,
            work_dir=work_dir,
            on_stage=on_stage,
            heartbeat=heartbeat,
            version=run.vllm_version_requested or None,
            heartbeat_interval_s=settings.PERFWATCH_HEARTBEAT_S,
        )
    except RunNotOwned:
        logger.info("run %s was cancelled or requeued: stopped", run_id)
        return None
    except RunFailed as error:
        close_old_connections()
        if error.retryable and run_requeue_after_timeout(
            run_id=run_id, runner=runner, reason=f"{error.stage}: {error.reason}"
        ):
            return RunStatus.QUEUED
        run_fail(
            run_id=run_id,
            runner=runner,
            reason=f"{error.stage}: {error.reason}",
            logs=_log_tails(work_dir) or ({error.stage: error.log_tail} if error.log_tail else {}),
            environment=node_environment,
        )
        return RunStatus.FAILED
    close_old_connections()
    run_stage_enter(run_id=run_id, runner=runner, stage=RunStatus.STORING)
    run_complete(
        run_id=run_id,
        runner=runner,
        result=RunResult(
            raw_report=outcome.raw_report,
            report=outcome.report,
            environment={**outcome.fingerprint, "warnings": list(outcome.warnings)},
            vllm_version=outcome.vllm_version,
            telemetry=[asdict(sample) for sample in outcome.telemetry],
            server_metrics={
                "before": dict(outcome.metrics_before),
                "after": dict(outcome.metrics_after),
                "delta": outcome.metrics_delta,
            },
            commands={name: "\n".join(lines) for name, lines in outcome.commands.items() if lines},
            logs=_log_tails(work_dir),
            accuracy=outcome.accuracy,
        ),
    )
    return RunStatus.SUCCEEDED


def _log_tails(work_dir: Path) -> dict[str, str]:
    """The end of each step's log file in a run's work directory."""
    tails = {}
    for name in ("install", "server", "guidellm", "accuracy"):
        path = work_dir / f"{name}.log"
        if path.exists():
            with path.open("rb") as handle:
                handle.seek(max(0, path.stat().st_size - LOG_TAIL_CHARS))
                tails[name] = handle.read().decode("utf-8", "replace")
    return tails
