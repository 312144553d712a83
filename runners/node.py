"""One run on this node, from the message "please look at run N" to its results, through the runner API.

The node claims the run (a message delivered twice finds it taken), renews its lease with the latest log
tails while it works, reports its stages, and hands over the report and evidence, or the failure with
whatever evidence exists. It never touches the database: the server holds the truth and decides.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from runners.api_client import ApiRefused, ApiUnreachable, RunnerApi, RunNotHeld
from runners.delivery import INGEST_COMMAND, complete_body, report_deliver, report_keep
from runners.errors import RunFailed
from runners.fingerprint import environment_fingerprint
from runners.pipeline import BenchmarkOutcome, benchmark_execute
from runners.run_control import Heartbeat
from runners.stages import LOG_NAMES, STAGE_STORING, log_path
from runners.suites import SuiteSpec

logger = logging.getLogger(__name__)

LOG_TAIL_CHARS = 20_000


def log_tails(work_dir: Path) -> dict[str, str]:
    """The end of each step's log file in a run's work directory, as far as it is written."""
    tails = {}
    for name in LOG_NAMES:
        path = log_path(work_dir=work_dir, name=name)
        if path.exists():
            with path.open("rb") as handle:
                handle.seek(max(0, path.stat().st_size - LOG_TAIL_CHARS))
                tails[name] = handle.read().decode("utf-8", "replace")
    return tails


def _commands_text(commands: dict[str, tuple[str, ...]]) -> dict[str, str]:
    return {name: "\n".join(lines) for name, lines in commands.items() if lines}


def _evidence(outcome: BenchmarkOutcome, work_dir: Path) -> dict[str, Any]:
    return {
        "environment": {**outcome.fingerprint, "warnings": list(outcome.warnings)},
        "vllm_version": outcome.vllm_version,
        "telemetry": [asdict(sample) for sample in outcome.telemetry],
        "server_metrics": {
            "before": dict(outcome.metrics_before),
            "after": dict(outcome.metrics_after),
            "delta": outcome.metrics_delta,
        },
        "commands": _commands_text(dict(outcome.commands)),
        "logs": log_tails(work_dir),
        "accuracy": asdict(outcome.accuracy) if outcome.accuracy is not None else None,
    }


def node_run_execute(*, api: RunnerApi, run_id: int, runner_name: str, work_root: Path) -> str | None:
    """Claim run `run_id`, benchmark it, hand over the outcome; the run's new status, or None when the run
    was not (or stopped being) this node's."""
    node_environment = environment_fingerprint()
    try:
        claimed = api.claim(run_id=run_id, environment=node_environment)
    except RunNotHeld as refusal:
        logger.info("run %s is not ours to run: %s", run_id, refusal.reason)
        return None
    suite = SuiteSpec.model_validate(claimed.suite)
    work_dir = work_root / f"run-{run_id}-attempt-{claimed.attempt}"

    def heartbeat() -> None:
        # Runs in the pipeline's heartbeat thread. RunNotHeld stops the benchmark (cancelled or
        # requeued); an unreachable API does not: the lease outlasts a short outage, and the server
        # requeues the run if it does not.
        try:
            api.heartbeat(run_id=run_id, logs=log_tails(work_dir))
        except (ApiUnreachable, ApiRefused) as error:
            if isinstance(error, ApiRefused) and error.status < 500:
                raise
            logger.warning("heartbeat of run %s not delivered: %s", run_id, error)

    try:
        outcome = benchmark_execute(
            suite=suite,
            commit_sha=claimed.commit_sha,
            runner_name=runner_name,
            work_dir=work_dir,
            on_stage=lambda stage: api.stage(run_id=run_id, stage=stage),
            heartbeat=heartbeat,
            version=claimed.version or None,
            heartbeat_interval_s=claimed.heartbeat_s,
            profile=claimed.profile,
        )
    except RunNotHeld:
        logger.info("run %s was cancelled or requeued: stopped", run_id)
        return None
    except RunFailed as error:
        logger.warning(
            "run %s failed at %s (%s): %s",
            run_id,
            error.stage,
            "waiting" if error.waiting else "retryable" if error.retryable else "final",
            error.reason,
        )
        return api.fail(
            run_id=run_id,
            reason=f"{error.stage}: {error.reason}",
            retryable=error.retryable,
            waiting=error.waiting,
            retries_max=error.retries_max,
            evidence={
                "environment": node_environment,
                "commands": _commands_text(dict(error.commands)),
                "logs": log_tails(work_dir) or ({error.stage: error.log_tail} if error.log_tail else {}),
            },
            raw_report=error.raw_report,
        )
    if outcome.profile is not None:
        api.profile(
            run_id=run_id,
            trace_gzip=outcome.profile.trace_gzip,
            trace_name=outcome.profile.trace_name,
            summary=outcome.profile.summary.to_json(),
            server_metrics=dict(outcome.profile.metrics_delta),
            settings=dict(outcome.profile.settings),
        )
    return outcome_hand_over(
        api=api,
        run_id=run_id,
        attempt=claimed.attempt,
        runner_name=runner_name,
        work_root=work_root,
        body=complete_body(raw_report=outcome.raw_report, evidence=_evidence(outcome, work_dir)),
        heartbeat=heartbeat,
        heartbeat_interval_s=claimed.heartbeat_s,
    )


def outcome_hand_over(
    *,
    api: RunnerApi,
    run_id: int,
    attempt: int,
    runner_name: str,
    work_root: Path,
    body: Mapping[str, Any],
    heartbeat: Callable[[], None],
    heartbeat_interval_s: float,
) -> str | None:
    """Keep the finished report on disk, say the node holds it, and upload it while the lease is renewed.

    "succeeded" once stored; "kept" when the dashboard could not be reached (the node re-sends it each
    time it says it is alive); None when the dashboard refused it (set aside on disk, for an operator).
    """
    kept = report_keep(work_root=work_root, run_id=run_id, attempt=attempt, runner=runner_name, body=body)
    with Heartbeat(heartbeat=heartbeat, interval_s=heartbeat_interval_s, cancel=threading.Event()):
        try:
            # From here on the dashboard does not queue the run again: this node holds its result. If it
            # was requeued meanwhile, the upload says whether the dashboard still takes this attempt.
            with contextlib.suppress(RunNotHeld):
                api.stage(run_id=run_id, stage=STAGE_STORING)
            stored = report_deliver(api=api, kept=kept)
        except (ApiUnreachable, ApiRefused) as error:
            if isinstance(error, ApiRefused) and error.status < 500:
                raise
            logger.warning(
                "run %s finished but its report could not be delivered (%s): kept at %s, re-sent when the "
                "dashboard answers (or on the dashboard: %s FILE)",
                run_id,
                error,
                kept.path,
                INGEST_COMMAND,
            )
            return "kept"
    return "succeeded" if stored else None
