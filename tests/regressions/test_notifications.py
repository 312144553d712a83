"""Notifications against real local endpoints: once per group and channel, failures recorded and retried."""

from __future__ import annotations

from typing import cast

import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit
from dashboard.regressions.models import Notification, NotificationStatus
from dashboard.regressions.notifications import notification_send, notifications_schedule
from tests.factories import CommitFactory
from tests.regressions.conftest import suite_create
from tests.regressions.test_pages import group_create

pytestmark = pytest.mark.django_db


def test_a_failing_webhook_is_recorded_then_retried_with_backoff_until_it_is_sent(
    notification_channels, eager_tasks, django_capture_on_commit_callbacks
) -> None:
    notification_channels.slack.statuses = [500, 503]
    group = group_create(suite=suite_create(), change_pct=-6.0)

    with django_capture_on_commit_callbacks(execute=True):
        notifications_schedule(group_ids=[group.pk])

    slack = Notification.objects.get(group=group, channel="slack")
    assert (slack.status, slack.attempts, slack.last_error) == (NotificationStatus.SENT, 3, "")
    assert len(notification_channels.slack.requests) == 3
    assert len(notification_channels.inbox.messages) == 1


def test_a_failure_is_visible_on_the_group_page(notification_channels) -> None:
    notification_channels.slack.statuses = [500]
    group = group_create(suite=suite_create(), change_pct=-6.0)
    notifications_schedule(group_ids=[group.pk])
    slack = Notification.objects.get(group=group, channel="slack")

    with pytest.raises(Exception, match="answered 500"):
        notification_send(notification_id=slack.pk)

    slack.refresh_from_db()
    assert slack.status == NotificationStatus.FAILED and slack.attempts == 1
    page = Client().get(f"/alerts/{group.pk}/").content.decode()
    assert "answered 500" in page


def test_a_sent_notification_is_never_sent_again(notification_channels) -> None:
    group = group_create(suite=suite_create(), change_pct=-6.0)
    notifications_schedule(group_ids=[group.pk])
    email = Notification.objects.get(group=group, channel="email")

    notification_send(notification_id=email.pk)
    notification_send(notification_id=email.pk)
    assert notifications_schedule(group_ids=[group.pk]) == []

    assert len(notification_channels.inbox.messages) == 1
    assert Notification.objects.filter(group=group).count() == 3


def test_no_pr_comment_while_the_range_holds_several_commits(notification_channels) -> None:
    commits = [cast(Commit, CommitFactory()) for _ in range(4)]
    group = group_create(suite=suite_create(), change_pct=-6.0, commits=(commits[0], commits[3]))

    notifications_schedule(group_ids=[group.pk])

    github = Notification.objects.get(group=group, channel="github")
    assert github.status == NotificationStatus.SKIPPED
    assert github.last_error == "the range holds 3 commits: no single culprit PR to comment on yet"


def test_improvements_are_not_announced_and_unconfigured_channels_stay_off(
    settings, notification_channels
) -> None:
    improvement = group_create(suite=suite_create(), change_pct=+8.0)
    assert notifications_schedule(group_ids=[improvement.pk]) == []

    settings.PERFWATCH_ALERT_EMAILS, settings.GITHUB_TOKEN = [], ""
    regression = group_create(suite=suite_create(), change_pct=-6.0)
    notifications_schedule(group_ids=[regression.pk])

    assert list(Notification.objects.values_list("channel", flat=True)) == ["slack"]
