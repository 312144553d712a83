"""The Celery app: control tasks on `default`, benchmark runs on `runner.<hardware_class>`.

The database is the source of truth for a run; the broker only carries "please look at run N".
"""

import os

from celery import Celery
from django.conf import settings
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("perfwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_default_queue = "default"
app.conf.task_queues = (Queue("default"),)
# Control tasks are idempotent, so they are acknowledged when done: a worker killed mid-task (kill -9,
# OOM) hands its message back at once, and one that vanished with its host is redelivered after the
# visibility timeout (CELERY_VISIBILITY_TIMEOUT_S, minutes). Benchmark runs opt out: they last hours,
# ack on receipt, and are made exactly-once by the run's database lease (see benchmark_run).
app.conf.task_acks_late = True
app.conf.task_reject_on_worker_lost = True
# On a lost broker connection a late-acked task could not be acknowledged anyway: stop it and let the
# redelivered message run it again, rather than run it twice side by side.
app.conf.worker_cancel_long_running_tasks_on_connection_loss = True
app.conf.worker_prefetch_multiplier = 1
app.conf.broker_connection_retry_on_startup = True
app.conf.broker_transport_options = {"visibility_timeout": settings.CELERY_VISIBILITY_TIMEOUT_S}
app.autodiscover_tasks(["workers"], related_name="tasks")
app.autodiscover_tasks(["workers"], related_name="presence")
app.conf.beat_schedule = {
    "requeue-expired-runs": {"task": "perfwatch.runs_requeue_expired", "schedule": 60.0},
    "schedule-new-commits": {"task": "perfwatch.runs_schedule", "schedule": 300.0},
}
app.conf.beat_schedule |= {
    # Webhooks make both prompt; the schedule catches what a missed delivery would lose.
    "sync-commits": {"task": "perfwatch.github_commits_sync", "schedule": 600.0},
    "sync-tracking-issues": {"task": "perfwatch.github_tracking_issues_sync", "schedule": 900.0},
}
app.conf.beat_schedule |= {
    # Ingests and completed runs enqueue detection themselves; these catch what a lost message would miss.
    "detect-recent-runs": {"task": "perfwatch.detect_recent", "schedule": 900.0},
    "resend-pending-notifications": {"task": "perfwatch.notifications_resend", "schedule": 600.0},
}
