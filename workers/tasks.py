"""Thin tasks: ids in, call a service, nothing else."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

logger = logging.getLogger(__name__)


@shared_task(name="perfwatch.benchmark_run", acks_late=False, ignore_result=True)
def benchmark_run(run_id: int) -> str | None:
    """Benchmark one run on this node. Acknowledged on receipt: a redelivery finds the run claimed."""
    from dashboard.benchmarks.lifecycle import run_execute

    status = run_execute(
        run_id=run_id,
        runner_name=settings.PERFWATCH_RUNNER_NAME or _hostname(),
        hardware_class=settings.PERFWATCH_RUNNER_HARDWARE_CLASS,
    )
    return str(status) if status else None


@shared_task(
    name="perfwatch.runs_requeue_expired",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=60,
    time_limit=90,
    autoretry_for=(ConnectionError,),
    retry_backoff=True,
    max_retries=3,
)
def runs_requeue_expired() -> list[int]:
    from dashboard.benchmarks.lifecycle import runs_requeue_expired as requeue

    return requeue()


def _hostname() -> str:
    import socket

    return socket.gethostname().split(".")[0].lower()


@shared_task(
    name="perfwatch.runs_schedule",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=120,
    time_limit=150,
    autoretry_for=(ConnectionError,),
    retry_backoff=True,
    max_retries=3,
)
def runs_schedule() -> list[int]:
    from dashboard.benchmarks.lifecycle import runs_schedule_all

    return [run.pk for run in runs_schedule_all()]
