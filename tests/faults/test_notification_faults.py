"""Faults while a notification is leaving, against a real worker, its own redis-server, the test database,
a Slack-compatible receiver and the recorded-GitHub double: a Redis restart is survived and the message
goes out once; a kill -9 mid-send never sends it twice, and a GitHub comment is never posted twice."""

from __future__ import annotations

import signal
import time
from typing import cast

import pytest
from django.db import transaction

from dashboard.benchmarks.models import Commit
from dashboard.regressions.models import AlertGroup, Notification, NotificationChannel, NotificationStatus
from tests.faults.conftest import RedisServer, send_task
from tests.regressions.conftest import HttpReceiver, suite_create
from tests.regressions.test_pages import group_create
from tests.workers.conftest import _database_url, wait_for, worker_group_kill

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def _status(notification: Notification) -> str:
    return Notification.objects.values_list("status", flat=True).get(pk=notification.pk)


def _notification(*, channel: str) -> Notification:
    with transaction.atomic():  # as detection creates it
        group: AlertGroup = group_create(suite=suite_create(), change_pct=-6.0)
    head = cast(Commit, group.head_commit)
    target = f"{head.repository.full_name}#{head.pr_number}" if channel == NotificationChannel.GITHUB else "x"
    return Notification.objects.create(group=group, channel=channel, target=target)


def _worker_env(redis_server: RedisServer, slack: HttpReceiver, github: HttpReceiver) -> dict[str, str]:
    return {
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": redis_server.url,
        "PERFWATCH_ALERT_EMAILS": "",
        "PERFWATCH_SLACK_WEBHOOK_URL": f"{slack.url}/services/T000/B000/XXXX",
        "GITHUB_TOKEN": "ghp_test_token",
        "GITHUB_API_URL": github.url,
        "PERFWATCH_NOTIFY_TIMEOUT_S": "60",  # the receivers below hold requests on purpose
        # A message held by a killed worker comes back in seconds here, minutes in production.
        "CELERY_VISIBILITY_TIMEOUT_S": "8",
        "PERFWATCH_NOTIFY_SENDING_STALE_S": "4",
    }


def test_a_worker_holding_a_task_survives_a_redis_restart_and_finishes_it(
    own_redis, start_own_worker, slack_webhook, recorded_github_api
) -> None:
    first, second = _notification(channel="slack"), _notification(channel="slack")
    worker = start_own_worker(  # as compose runs the control worker
        name="survivor", env=_worker_env(own_redis, slack_webhook, recorded_github_api), concurrency=2
    )
    slack_webhook.hold_s = 6
    send_task(own_redis.url, "perfwatch.notification_send", first.pk)
    wait_for(lambda: len(slack_webhook.requests) == 1, timeout_s=60, what="the message to leave")

    own_redis.stop()  # while the worker holds the task, for as long as a restart takes
    time.sleep(3)
    own_redis.start()
    slack_webhook.hold_s = 0

    wait_for(lambda: _status(first) == NotificationStatus.SENT, timeout_s=60, what="the held task to finish")
    assert worker.poll() is None, "the worker exited on the broker restart"
    # It consumes again: a message published after the restart is sent too.
    send_task(own_redis.url, "perfwatch.notification_send", second.pk)
    wait_for(
        lambda: _status(second) == NotificationStatus.SENT, timeout_s=60, what="a task after the restart"
    )
    assert worker.poll() is None
    assert len(slack_webhook.requests) == 2  # one per notification, none twice


@pytest.mark.parametrize("channel", [NotificationChannel.SLACK, NotificationChannel.GITHUB])
def test_a_worker_killed_while_sending_never_sends_twice(
    own_redis, start_own_worker, slack_webhook, recorded_github_api, channel
) -> None:
    receiver = slack_webhook if channel == NotificationChannel.SLACK else recorded_github_api
    notification = _notification(channel=channel)
    env = _worker_env(own_redis, slack_webhook, recorded_github_api)
    doomed = start_own_worker(name="doomed", env=env)
    receiver.hold_s = 60
    send_task(own_redis.url, "perfwatch.notification_send", notification.pk)
    wait_for(lambda: len(receiver.requests) == 1, timeout_s=60, what="the message to leave")

    worker_group_kill(doomed, signal.SIGKILL)  # received by the far end, never recorded as sent
    receiver.hold_s = 0
    assert _status(notification) == NotificationStatus.SENDING
    start_own_worker(name="successor", env=env)

    # The unacknowledged message comes back after the visibility timeout and settles the row.
    settled = (NotificationStatus.SENT, NotificationStatus.INTERRUPTED, NotificationStatus.FAILED)
    wait_for(lambda: _status(notification) in settled, timeout_s=120, what="the row to be settled")
    notification.refresh_from_db()
    assert len(receiver.requests) == 1  # nothing sent a second time
    if channel == NotificationChannel.GITHUB:
        # The comment the dead worker posted is found by its marker: sent, and on the PR once.
        assert notification.status == NotificationStatus.SENT
        assert [len(comments) for comments in recorded_github_api.stored.values()] == [1]
        assert recorded_github_api.listed >= 1
    else:
        assert notification.status == NotificationStatus.INTERRUPTED
        assert "may have gone out" in notification.last_error
