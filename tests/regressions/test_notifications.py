"""Notifications against real local endpoints: once per group and channel, failures recorded and retried."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.benchmarks.models import Commit
from dashboard.regressions.models import Notification, NotificationStatus
from dashboard.regressions.notifications import (
    NotificationFailed,
    NotificationInFlight,
    notification_send,
    notifications_pending_resend,
    notifications_schedule,
)
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


def _single_commit_group():
    """A regression whose range is one commit with a PR: every channel, GitHub included, is notified."""
    group = group_create(suite=suite_create(), change_pct=-6.0)
    notifications_schedule(group_ids=[group.pk])
    github = Notification.objects.get(group=group, channel="github")
    assert github.status == NotificationStatus.PENDING, github.last_error
    return group


def _comments_path(notification: Notification) -> str:
    repo, _, number = notification.target.rpartition("#")
    return f"/repos/{repo}/issues/{number}/comments"


def test_a_github_comment_carries_a_hidden_marker_naming_its_group(notification_channels) -> None:
    group = _single_commit_group()
    github = Notification.objects.get(group=group, channel="github")

    notification_send(notification_id=github.pk)

    [comment] = notification_channels.github.requests
    assert comment.body["body"].endswith(f"<!-- perfwatch:alert-group:{group.pk} -->")
    assert notification_channels.github.listed == 0  # a first attempt posts without looking first


def test_a_comment_github_kept_despite_an_error_answer_is_found_not_posted_again(
    notification_channels,
) -> None:
    group = _single_commit_group()
    github = Notification.objects.get(group=group, channel="github")
    notification_channels.github.statuses = [502]
    with pytest.raises(NotificationFailed, match="502"):
        notification_send(notification_id=github.pk)
    # GitHub stored the comment although it answered 502.
    notification_channels.github.stored[_comments_path(github)] = [
        {"html_url": "https://github.com/x", "body": f"… <!-- perfwatch:alert-group:{group.pk} -->"}
    ]

    notification_send(notification_id=github.pk)

    github.refresh_from_db()
    assert github.status == NotificationStatus.SENT
    assert len(notification_channels.github.requests) == 1
    assert notification_channels.github.listed == 1


def test_a_retry_posts_when_no_comment_of_the_group_is_on_the_pr(notification_channels) -> None:
    group = _single_commit_group()
    github = Notification.objects.get(group=group, channel="github")
    notification_channels.github.statuses = [500]
    with pytest.raises(NotificationFailed):
        notification_send(notification_id=github.pk)
    # Another group's comment on the same PR does not count.
    notification_channels.github.stored[_comments_path(github)] = [
        {"html_url": "https://github.com/x", "body": f"<!-- perfwatch:alert-group:{group.pk + 1000} -->"}
    ]

    notification_send(notification_id=github.pk)

    github.refresh_from_db()
    assert (github.status, github.attempts) == (NotificationStatus.SENT, 2)
    assert len(notification_channels.github.requests) == 2


def _mark_sending(notification: Notification, *, seconds_ago: float) -> None:
    Notification.objects.filter(pk=notification.pk).update(
        status=NotificationStatus.SENDING,
        attempts=1,
        attempted_at=timezone.now() - timedelta(seconds=seconds_ago),
    )


def test_a_notification_another_sender_is_sending_is_left_alone(notification_channels) -> None:
    group = _single_commit_group()
    slack = Notification.objects.get(group=group, channel="slack")
    _mark_sending(slack, seconds_ago=5)

    with pytest.raises(NotificationInFlight):
        notification_send(notification_id=slack.pk)

    assert notification_channels.slack.requests == []
    assert Notification.objects.get(pk=slack.pk).status == NotificationStatus.SENDING


def test_a_slack_message_whose_sender_died_is_marked_interrupted_not_sent_twice(
    settings, notification_channels, staff_user, eager_tasks, django_capture_on_commit_callbacks
) -> None:
    group = _single_commit_group()
    slack = Notification.objects.get(group=group, channel="slack")
    _mark_sending(slack, seconds_ago=settings.PERFWATCH_NOTIFY_SENDING_STALE_S + 1)

    assert notifications_pending_resend() == [slack.pk]
    notification_send(notification_id=slack.pk)  # a redelivered message changes nothing more

    slack.refresh_from_db()
    assert slack.status == NotificationStatus.INTERRUPTED
    assert "may have gone out" in slack.last_error
    assert notification_channels.slack.requests == []
    # A person who knows it never arrived sends it again from the group's page.
    client = Client()
    client.force_login(staff_user)
    page = client.get(f"/alerts/{group.pk}/").content.decode()
    assert "interrupted while sending" in page and "Send again" in page
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/alerts/{group.pk}/notifications/{slack.pk}/resend/")
    assert Notification.objects.get(pk=slack.pk).status == NotificationStatus.SENT
    assert len(notification_channels.slack.requests) == 1


def test_resend_of_an_unknown_or_another_groups_notification_is_404_and_queues_nothing(
    settings, notification_channels, staff_user
) -> None:
    group = _single_commit_group()
    slack = Notification.objects.get(group=group, channel="slack")
    Notification.objects.filter(pk=slack.pk).update(status=NotificationStatus.FAILED)
    client = Client()
    client.force_login(staff_user)
    assert client.post(f"/alerts/{group.pk + 1}/notifications/{slack.pk}/resend/").status_code == 404
    assert client.post(f"/alerts/{group.pk}/notifications/{slack.pk + 1000}/resend/").status_code == 404
    assert Notification.objects.get(pk=slack.pk).status == NotificationStatus.FAILED


@pytest.mark.parametrize("posted_before_the_crash", [True, False])
def test_a_github_comment_whose_sender_died_is_posted_exactly_once(
    settings, notification_channels, posted_before_the_crash
) -> None:
    group = _single_commit_group()
    github = Notification.objects.get(group=group, channel="github")
    _mark_sending(github, seconds_ago=settings.PERFWATCH_NOTIFY_SENDING_STALE_S + 1)
    if posted_before_the_crash:
        notification_channels.github.stored[_comments_path(github)] = [
            {"html_url": "https://github.com/x", "body": f"<!-- perfwatch:alert-group:{group.pk} -->"}
        ]

    notification_send(notification_id=github.pk)
    notification_send(notification_id=github.pk)

    github.refresh_from_db()
    assert github.status == NotificationStatus.SENT
    assert len(notification_channels.github.stored[_comments_path(github)]) == 1
    assert len(notification_channels.github.requests) == (0 if posted_before_the_crash else 1)


def test_an_email_keeps_one_message_id_across_attempts(notification_channels) -> None:
    group = _single_commit_group()
    email = Notification.objects.get(group=group, channel="email")

    notification_send(notification_id=email.pk)

    [message] = notification_channels.inbox.messages
    assert message["Message-ID"] == f"<perfwatch-notification-{email.pk}@127.0.0.1>"
