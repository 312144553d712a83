"""One message per new alert group and channel: e-mail, a Slack-compatible webhook, a comment on the PR.

A Notification row per (group, channel) is created once, behind a unique constraint, and only its
creator enqueues the sending; the sender holds the row's lock while it sends, so a redelivered task finds
it sent. Failures are recorded on the row (and shown on the group's page) before the task retries.
"""

from __future__ import annotations

import json
import logging
import smtplib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Prefetch, prefetch_related_objects
from django.urls import reverse
from django.utils import timezone

from dashboard.benchmarks.models import Commit
from dashboard.regressions.models import (
    Alert,
    AlertGroup,
    GroupKind,
    Notification,
    NotificationChannel,
    NotificationStatus,
    TriageStatus,
)
from dashboard.regressions.selectors import alert_group_rows, group_range_commits

logger = logging.getLogger(__name__)

# Improvements are good news for the timeline, not a reason to page anyone.
NOTIFIED_KINDS: tuple[str, ...] = (GroupKind.REGRESSION, GroupKind.TRADE_OFF)
NOTIFIED_STATUSES: tuple[str, ...] = (TriageStatus.UNTRIAGED, TriageStatus.INVESTIGATING)
MESSAGE_ALERTS = 12
MESSAGE_COMMITS = 10
ERROR_CHARS = 500


class NotificationFailed(Exception):
    """A channel refused or could not be reached; the reason is recorded on the Notification row."""


@dataclass(frozen=True)
class GroupMessage:
    subject: str
    text: str  # plain text: e-mail and Slack
    markdown: str  # GitHub comment
    url: str


def channels_configured() -> list[str]:
    channels: list[str] = []
    if settings.PERFWATCH_ALERT_EMAILS:
        channels.append(NotificationChannel.EMAIL)
    if settings.PERFWATCH_SLACK_WEBHOOK_URL:
        channels.append(NotificationChannel.SLACK)
    if settings.GITHUB_TOKEN:
        channels.append(NotificationChannel.GITHUB)
    return channels


def _culprit(commits: Sequence[Commit]) -> Commit | None:
    """The one commit of a single-commit range; a longer range names no culprit until bisected."""
    return commits[0] if len(commits) == 1 else None


def _target(*, channel: str, group: AlertGroup) -> tuple[str, str]:
    """(target, why it is skipped or "")."""
    if channel == NotificationChannel.EMAIL:
        return ", ".join(settings.PERFWATCH_ALERT_EMAILS)[:500], ""
    if channel == NotificationChannel.SLACK:
        return urllib.parse.urlsplit(settings.PERFWATCH_SLACK_WEBHOOK_URL).netloc, ""
    commits = group_range_commits(group=group)
    culprit = _culprit(commits)
    if culprit is None:
        return "", f"the range holds {len(commits)} commits: no single culprit PR to comment on yet"
    if culprit.pr_number is None:
        return "", f"culprit commit {culprit.short_sha} names no PR"
    return f"{culprit.repository.full_name}#{culprit.pr_number}", ""


def notifications_schedule(*, group_ids: Sequence[int]) -> list[int]:
    """Create the missing notifications of groups worth telling about; send each new one after commit."""
    channels = channels_configured()
    if not channels:
        return []
    created_ids: list[int] = []
    groups = AlertGroup.objects.filter(
        pk__in=group_ids, kind__in=NOTIFIED_KINDS, status__in=NOTIFIED_STATUSES
    ).select_related("head_commit__repository", "base_commit")
    for group in groups:
        for channel in channels:
            target, skipped = _target(channel=channel, group=group)
            notification, created = Notification.objects.get_or_create(
                group=group,
                channel=channel,
                defaults={
                    "target": target,
                    "status": NotificationStatus.SKIPPED if skipped else NotificationStatus.PENDING,
                    "last_error": skipped,
                },
            )
            if created and not skipped:
                created_ids.append(notification.pk)
                transaction.on_commit(partial(_send_enqueue, notification.pk))
    return created_ids


def _send_enqueue(notification_id: int) -> None:
    from workers.tasks import notification_send as task

    try:
        task.apply_async(args=(notification_id,), retry=True, retry_policy={"max_retries": 2})
    except Exception:
        # The row stays pending; the periodic sweep sends pending notifications the broker never carried.
        logger.warning("could not enqueue notification %s", notification_id, exc_info=True)


def _alert_line(alert: Alert) -> str:
    series = alert.series
    p_value = f", p={alert.p_value:.1g}" if alert.p_value is not None else ""
    return (
        f"{series.suite.name} on {series.hardware_class}, concurrency {series.concurrency}: {series.metric} "
        f"{alert.before_value:,.4g} → {alert.after_value:,.4g} ({alert.change_pct:+.1f} %{p_value}, "
        f"{alert.kind})"
    )


def group_message(*, group: AlertGroup) -> GroupMessage:
    """What every channel says about a group: the range, its likely culprit and the changes."""
    prefetch_related_objects(
        [group], Prefetch("alerts", queryset=Alert.objects.select_related("series__suite"))
    )
    row = alert_group_rows(groups=[group])[0]
    alerts = row.alerts
    commits = group_range_commits(group=group)
    culprit = _culprit(commits)
    url = settings.PERFWATCH_BASE_URL.rstrip("/") + reverse("regressions:alert-group", args=[group.pk])
    base, head = group.base_commit, group.head_commit
    subject = f"[PerfWatch] {row.title}"
    if culprit:
        where = f"in commit {culprit.short_sha}: {culprit.subject}"
    else:
        where = f"in {len(commits)} commits after {base.short_sha} up to {head.short_sha}"
    lines = [f"PerfWatch found a {group.get_kind_display()} {where}.", ""]
    md = [f"**PerfWatch found a {group.get_kind_display()}** {where}.", ""]
    if culprit and culprit.pr_url:
        lines.append(f"Suspected PR: {culprit.pr_url}")
    elif commits:
        lines.append("Commits in the range:")
        for commit in commits[:MESSAGE_COMMITS]:
            pr = f" {commit.pr_url}" if commit.pr_url else ""
            lines.append(f"  {commit.short_sha} {commit.subject}{pr}")
        if len(commits) > MESSAGE_COMMITS:
            lines.append(f"  … and {len(commits) - MESSAGE_COMMITS} more")
    lines += ["", "Changes:"]
    md += [
        "| suite | hardware | concurrency | metric | before | after | change |",
        "|---|---|---|---|---|---|---|",
    ]
    for alert in alerts[:MESSAGE_ALERTS]:
        lines.append(f"  {_alert_line(alert)}")
        series = alert.series
        md.append(
            f"| {series.suite.name} | {series.hardware_class} | {series.concurrency} | `{series.metric}` | "
            f"{alert.before_value:,.4g} | {alert.after_value:,.4g} | {alert.change_pct:+.1f} % |"
        )
    if len(alerts) > MESSAGE_ALERTS:
        lines.append(f"  … and {len(alerts) - MESSAGE_ALERTS} more")
        md.append(f"\n… and {len(alerts) - MESSAGE_ALERTS} more series.")
    lines += ["", f"Charts and triage: {url}"]
    md += ["", f"Charts, the commits in the range and triage: {url}"]
    return GroupMessage(subject=subject, text="\n".join(lines), markdown="\n".join(md), url=url)


def _post_json(*, url: str, payload: dict[str, object], headers: dict[str, str]) -> None:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "perfwatch", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.PERFWATCH_NOTIFY_TIMEOUT_S) as response:
            response.read()
    except urllib.error.HTTPError as error:
        body = error.read(300).decode("utf-8", "replace")
        raise NotificationFailed(
            f"{urllib.parse.urlsplit(url).netloc} answered {error.code}: {body}"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise NotificationFailed(f"cannot reach {urllib.parse.urlsplit(url).netloc}: {reason}") from None


def _email_send(*, message: GroupMessage) -> None:
    email = EmailMessage(subject=message.subject, body=message.text, to=list(settings.PERFWATCH_ALERT_EMAILS))
    try:
        email.send()
    except (smtplib.SMTPException, OSError) as error:
        raise NotificationFailed(f"mail server refused or unreachable: {error}") from None


def _slack_send(*, message: GroupMessage) -> None:
    # Slack reads <, > and & as markup in text: escaped, a commit subject stays a subject.
    text = message.text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    _post_json(url=settings.PERFWATCH_SLACK_WEBHOOK_URL, payload={"text": text}, headers={})


def _github_comment(*, message: GroupMessage, target: str) -> None:
    repo, _, number = target.rpartition("#")
    _post_json(
        url=f"{settings.GITHUB_API_URL.rstrip('/')}/repos/{repo}/issues/{number}/comments",
        payload={"body": message.markdown},
        headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {settings.GITHUB_TOKEN}",
            "X-GitHub-Api-Version": "2022-11-28",
        },
    )


def notification_send(*, notification_id: int) -> Notification | None:
    """Send one pending (or previously failed) notification; raise NotificationFailed after recording why."""
    failure: NotificationFailed | None = None
    with transaction.atomic():
        notification = (
            # Lock the notification alone: locking the joined group and commits too would queue this
            # behind a detection or bisection that holds them, and a stale re-check can then miss the row.
            Notification.objects.select_for_update(of=("self",))
            .select_related("group__base_commit", "group__head_commit__repository")
            .filter(pk=notification_id)
            .first()
        )
        if notification is None or notification.status in (
            NotificationStatus.SENT,
            NotificationStatus.SKIPPED,
        ):
            return notification
        message = group_message(group=notification.group)
        notification.attempts += 1
        notification.attempted_at = timezone.now()
        try:
            if notification.channel == NotificationChannel.EMAIL:
                _email_send(message=message)
            elif notification.channel == NotificationChannel.SLACK:
                _slack_send(message=message)
            else:
                _github_comment(message=message, target=notification.target)
        except NotificationFailed as error:
            failure = error
            notification.status = NotificationStatus.FAILED
            notification.last_error = " ".join(str(error).split())[:ERROR_CHARS]
        else:
            notification.status = NotificationStatus.SENT
            notification.sent_at = notification.attempted_at
            notification.last_error = ""
        notification.save()
    if failure is not None:
        raise failure
    return notification


def notification_retry(*, notification_id: int) -> Notification:
    """Queue a failed notification again (staff action); a sent one stays sent."""
    with transaction.atomic():
        notification = Notification.objects.select_for_update().get(pk=notification_id)
        if notification.status == NotificationStatus.FAILED:
            notification.status = NotificationStatus.PENDING
            notification.save(update_fields=["status"])
            transaction.on_commit(lambda: _send_enqueue(notification_id))
    return notification


def notifications_pending_resend(*, older_than_s: int = 600) -> list[int]:
    """Enqueue pending notifications whose message the broker never delivered (beat sweep)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    pending = list(
        Notification.objects.filter(status=NotificationStatus.PENDING, created_at__lt=cutoff)
        .filter(attempted_at__isnull=True)
        .values_list("pk", flat=True)
    )
    for notification_id in pending:
        _send_enqueue(notification_id)
    return pending
