"""Two real `celery worker` processes on the real Redis broker, fed by concurrent real ingests that touch
the same series: detection runs in both at once and still never duplicates an alert, a verification run
or a message."""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter
from typing import Any, cast

import pytest
import redis
from django.conf import settings
from django.db import connection

from dashboard.benchmarks.models import Commit, Run, RunKind, RunStatus
from dashboard.benchmarks.services import report_ingest
from dashboard.regressions.models import Alert, AlertGroup, GroupKind, GroupState, Notification
from dashboard.regressions.selectors import group_range_commits
from tests.factories import CommitFactory
from tests.regressions.conftest import noisy
from tests.workers.conftest import wait_for, workers_quiet
from workers.celery import app as celery_app
from workers.tasks import run_detect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

SUITE, HARDWARE = "kimi-k3-8k1k", "b300"
BASELINE, AFTER_STEP = 36, 14
STEP = 0.92  # output throughput falls by 8 % at every level
CONTROL_NAMES = ("control-1", "control-2")
CONTROL_WORKERS = [f"{name}@{socket.gethostname()}" for name in CONTROL_NAMES]


def _report(document: dict[str, Any], *, factor: float) -> bytes:
    levels = document["benchmarks"]
    originals = [level["metrics"]["output_tokens_per_second"]["total"]["mean"] for level in levels]
    for level, original in zip(levels, originals, strict=True):
        level["metrics"]["output_tokens_per_second"]["total"]["mean"] = original * factor
    try:
        return json.dumps(document).encode()
    finally:
        for level, original in zip(levels, originals, strict=True):
            level["metrics"]["output_tokens_per_second"]["total"]["mean"] = original


def _ingest(raw: bytes, commit: Commit) -> int:
    try:
        return report_ingest(raw=raw, commit_sha=commit.sha, suite_name=SUITE, hardware_class=HARDWARE).run.pk
    finally:
        connection.close()  # this thread's own connection


def test_concurrent_ingests_on_two_real_workers_never_duplicate_alerts(
    start_worker, slack_webhook, seed_scaled_report: bytes
) -> None:
    worker_env = {
        "PERFWATCH_SLACK_WEBHOOK_URL": f"{slack_webhook.url}/hook",
        "PERFWATCH_ALERT_EMAILS": "",
        "GITHUB_TOKEN": "",
    }
    for name in CONTROL_NAMES:
        start_worker(name=name, queue="default", extra_env=worker_env)
    wait_for(lambda: len(celery_app.control.ping(timeout=1.0) or []) == 2, timeout_s=90, what="two workers")
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=5)
    document = json.loads(seed_scaled_report)
    commits = [cast(Commit, CommitFactory()) for _ in range(BASELINE + AFTER_STEP)]
    reports = [
        _report(document, factor=noisy(1.0 if index < BASELINE else STEP, index))
        for index in range(len(commits))
    ]
    for index in range(BASELINE):
        _ingest(reports[index], commits[index])

    # The commits after the step arrive at once from six threads, out of order, and every run's detection
    # is delivered twice, so both workers analyse the same series at the same time.
    pending = list(range(BASELINE, len(commits)))
    run_ids: list[int] = []

    def ingest_some() -> None:
        while pending:
            try:
                index = pending.pop()
            except IndexError:
                return
            run_ids.append(_ingest(reports[index], commits[index]))

    threads = [threading.Thread(target=ingest_some) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for run_id in run_ids:
        run_detect.delay(run_id)
    wait_for(
        lambda: workers_quiet(broker, names=CONTROL_WORKERS),
        timeout_s=300,
        what="the workers to finish",
        interval_s=2,
    )

    # One run per report; detection may also queue a bisection run in a range whose reports were arriving.
    assert Run.objects.filter(source=Run.Source.INGEST).count() == BASELINE + AFTER_STEP
    alerts = list(Alert.objects.values_list("series__metric", "series__concurrency"))
    assert sorted(alerts) == [("output_throughput_tok_s", level) for level in (1, 4, 16)]
    group = AlertGroup.objects.get()
    assert group.kind == GroupKind.REGRESSION
    assert commits[BASELINE] in group_range_commits(group=group)
    # Suspected until its ends are run again (no runner serves b300 here): verification queued, told
    # nobody yet.
    assert group.state == GroupState.SUSPECTED
    # (a range that narrowed as reports arrived may have had its old head queued too, but never twice)
    verification = Counter(
        Run.objects.filter(kind=RunKind.VERIFICATION, status=RunStatus.QUEUED).values_list(
            "commit_id", flat=True
        )
    )
    assert verification[group.base_commit_id] == verification[group.head_commit_id] == 2
    assert set(verification.values()) == {2}
    assert not Notification.objects.exists()
    assert slack_webhook.requests == []
