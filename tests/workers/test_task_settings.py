"""How each task is acknowledged: control tasks come back after a crash, benchmark runs never run twice."""

from __future__ import annotations

from django.conf import settings

from workers.celery import app
from workers.tasks import RETRY_POLICY


def _tasks() -> dict:
    app.loader.import_default_modules()
    return {name: task for name, task in app.tasks.items() if name.startswith("perfwatch.")}


def test_a_benchmark_run_is_acknowledged_on_receipt_and_made_exactly_once_by_its_lease() -> None:
    assert _tasks()["perfwatch.run_execute"].acks_late is False


def test_short_control_tasks_are_acknowledged_late_and_handed_back_when_their_worker_dies() -> None:
    late = {name for name, task in _tasks().items() if task.acks_late}

    assert {
        "perfwatch.run_detect",
        "perfwatch.notification_send",
        "perfwatch.runs_requeue_expired",
        "perfwatch.runs_schedule",
    } <= late
    assert app.conf.task_reject_on_worker_lost is True


def test_the_visibility_timeout_is_minutes_and_outlasts_every_late_acknowledged_task() -> None:
    timeout_s = app.conf.broker_transport_options["visibility_timeout"]

    assert timeout_s == settings.CELERY_VISIBILITY_TIMEOUT_S <= 900
    for name, task in _tasks().items():
        if task.acks_late:
            assert task.time_limit is not None and task.time_limit < timeout_s, name
    # Retry countdowns wait in the worker unacknowledged: they too stay below it.
    assert RETRY_POLICY["retry_backoff_max"] < timeout_s


def test_a_message_of_a_vanished_worker_is_handed_out_again_soon_after_its_visibility_timeout() -> None:
    options = app.conf.broker_transport_options
    # Workers look for expired messages this often: the lateness of a redelivery past the timeout.
    look_every_s = options["unacked_restore_interval"] * options["unacked_restore_throttle"]

    assert look_every_s <= max(1, options["visibility_timeout"] / 10)


def test_retries_outlast_a_database_restart() -> None:
    waits, wait = [], RETRY_POLICY["retry_backoff"]
    for _ in range(RETRY_POLICY["max_retries"]):
        waits.append(min(wait, RETRY_POLICY["retry_backoff_max"]))
        wait *= 2
    assert RETRY_POLICY["retry_jitter"] is False
    assert sum(waits) >= 600  # ten minutes of outage, where three retries used to span three seconds
    assert _tasks()["perfwatch.run_detect"].autoretry_for == RETRY_POLICY["autoretry_for"]
