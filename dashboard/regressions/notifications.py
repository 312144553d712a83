"""One message per new alert group and channel: e-mail, a Slack-compatible webhook, a comment on the PR.

A Notification row per (group, channel) is created once, behind a unique constraint, and only its
creator enqueues the sending; a sender marks the row `sending` with a conditional UPDATE before the
message leaves, so a redelivered task never sends it a second time. Failures are recorded on the row (and
shown on the group's page) before the task retries.
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
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import F, Prefetch, Q, prefetch_related_objects
from django.urls import reverse
from django.utils import timezone

from dashboard import dispatch
from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.models import Commit
from dashboard.github.client import GitHubClient, GitHubError
from dashboard.regressions.models import (
    Alert,
    AlertGroup,
    GroupKind,
    GroupState,
    Notification,
    NotificationChannel,
    NotificationStatus,
    TriageStatus,
)
from dashboard.regressions.selectors import alert_group_rows, group_range_commits
from runners.text import one_line

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


def notification_silence_reason(*, group: AlertGroup) -> str:
    """Why nothing was (or will be) sent about `group`, in a sentence; empty when it is told."""
    if group.kind not in NOTIFIED_KINDS:
        return f"{group.get_kind_display().lower()}s are not announced"
    if group.state == GroupState.SUSPECTED:
        return "it is suspected: nothing is sent before re-runs of its base and head confirm it"
    if group.state == GroupState.DISMISSED:
        return "re-runs dismissed it"
    if group.status not in NOTIFIED_STATUSES:
        return f"it was triaged as {group.get_status_display().lower()} before anything was sent"
    if not channels_configured():
        return (
            "no channel is set up: set PERFWATCH_ALERT_EMAILS, PERFWATCH_SLACK_WEBHOOK_URL or GITHUB_TOKEN "
            "and confirmed groups are sent by e-mail, to Slack or as a comment on the culprit PR"
        )
    return ""


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
    """Create the missing notifications of confirmed groups worth telling about; send each new one after
    commit."""
    channels = channels_configured()
    if not channels:
        return []
    created_ids: list[int] = []
    groups = AlertGroup.objects.filter(
        pk__in=group_ids, state=GroupState.CONFIRMED, kind__in=NOTIFIED_KINDS, status__in=NOTIFIED_STATUSES
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
                dispatch.notification_send(notification_id=notification.pk)
    return created_ids


def _alert_line(alert: Alert) -> str:
    series = alert.series
    p_value = f", p={alert.p_value:.1g}" if alert.p_value is not None else ""
    return (
        f"{series.suite.name} on {series.hardware_class}, concurrency {series.concurrency}: "
        f"{metric_display(metric=series.metric).label} "
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
            f"| {series.suite.name} | {series.hardware_class} | {series.concurrency} | "
            f"{metric_display(metric=series.metric).label} | "
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


def _email_send(*, message: GroupMessage, notification_id: int) -> None:
    # The same Message-ID on every attempt: a mail client that sees a resent copy shows it once.
    domain = urllib.parse.urlsplit(settings.PERFWATCH_BASE_URL).hostname or "perfwatch.invalid"
    email = EmailMessage(
        subject=message.subject,
        body=message.text,
        to=list(settings.PERFWATCH_ALERT_EMAILS),
        headers={"Message-ID": f"<perfwatch-notification-{notification_id}@{domain}>"},
    )
    try:
        email.send()
    except (smtplib.SMTPException, OSError) as error:
        raise NotificationFailed(f"mail server refused or unreachable: {error}") from None


def _slack_send(*, message: GroupMessage) -> None:
    # Slack reads <, > and & as markup in text: escaped, a commit subject stays a subject.
    text = message.text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    _post_json(url=settings.PERFWATCH_SLACK_WEBHOOK_URL, payload={"text": text}, headers={})


def _github_marker(group_id: int) -> str:
    """Hidden in the comment's body: how a later attempt finds the comment an interrupted one posted."""
    return f"<!-- perfwatch:alert-group:{group_id} -->"


def _github_client() -> GitHubClient:
    return GitHubClient(
        token=settings.GITHUB_TOKEN or None,
        base_url=settings.GITHUB_API_URL,
        timeout_s=settings.PERFWATCH_NOTIFY_TIMEOUT_S,
    )


def _github_comment_find(*, notification: Notification) -> str | None:
    """The URL of the group's comment already on the PR, or None; NotificationFailed if GitHub can't say."""
    repo, _, number = notification.target.rpartition("#")
    try:
        return _github_client().issue_comments_find(
            repo=repo, number=int(number), marker=_github_marker(notification.group_id)
        )
    except GitHubError as error:
        raise NotificationFailed(f"cannot list the PR's comments: {error}") from None


def _github_comment(*, message: GroupMessage, notification: Notification) -> None:
    repo, _, number = notification.target.rpartition("#")
    body = f"{message.markdown}\n\n{_github_marker(notification.group_id)}"
    try:
        _github_client().issue_comment_create(repo=repo, number=int(number), body=body)
    except GitHubError as error:
        raise NotificationFailed(str(error)) from None


def _deliver(*, notification: Notification, message: GroupMessage) -> None:
    if notification.channel == NotificationChannel.EMAIL:
        _email_send(message=message, notification_id=notification.pk)
    elif notification.channel == NotificationChannel.SLACK:
        _slack_send(message=message)
    # An earlier attempt may have posted although it failed or died (GitHub answered 502 after storing
    # the comment, or the worker was killed before recording it): look for its marker before posting.
    elif notification.attempts == 0 or _github_comment_find(notification=notification) is None:
        _github_comment(message=message, notification=notification)


class NotificationInFlight(Exception):
    """Another sender marked the row `sending` moments ago; look again after ``retry_in_s``."""

    def __init__(self, *, retry_in_s: float) -> None:
        super().__init__(f"being sent; look again in {retry_in_s:.0f} s")
        self.retry_in_s = retry_in_s


def _claim(
    *, notification_id: int, statuses: Sequence[str], attempted_at: datetime | None = None
) -> datetime | None:
    """Mark the row `sending` if it is still in one of ``statuses`` (and, when given, still carries
    ``attempted_at``): one committed conditional UPDATE, so exactly one sender wins. Return the mark."""
    now = timezone.now()
    rows = Notification.objects.filter(pk=notification_id, status__in=statuses)
    if attempted_at is not None:
        rows = rows.filter(attempted_at=attempted_at)
    claimed = rows.update(status=NotificationStatus.SENDING, attempts=F("attempts") + 1, attempted_at=now)
    return now if claimed else None


def _settle(*, notification_id: int, attempted_at: datetime | None, status: str, error: str = "") -> None:
    """Record how the attempt marked at ``attempted_at`` ended (unless another one took the row over)."""
    fields: dict[str, object] = {"status": status, "last_error": one_line(error, limit=ERROR_CHARS)}
    if status == NotificationStatus.SENT:
        fields["sent_at"] = timezone.now()
    Notification.objects.filter(
        pk=notification_id, status=NotificationStatus.SENDING, attempted_at=attempted_at
    ).update(**fields)


def notification_send(*, notification_id: int) -> Notification | None:
    """Send one pending (or previously failed) notification; raise NotificationFailed after recording why.

    The row is marked `sending` and committed before the message leaves, and nothing holds a lock or a
    transaction open while it travels. A row found `sending` for longer than a send can take belongs to a
    sender that died: a GitHub comment is looked up by its hidden marker and posted only if missing; an
    e-mail or Slack message, which cannot be looked up, is marked interrupted for a person to resend.
    """
    notification = (
        Notification.objects.select_related("group__base_commit", "group__head_commit__repository")
        .filter(pk=notification_id)
        .first()
    )
    if notification is None or notification.status in (
        NotificationStatus.SENT,
        NotificationStatus.SKIPPED,
        NotificationStatus.INTERRUPTED,
    ):
        return notification
    message = group_message(group=notification.group)  # built first: the window below is the send alone
    if notification.status == NotificationStatus.SENDING:
        started = notification.attempted_at or timezone.now()
        age_s = (timezone.now() - started).total_seconds()
        if age_s < settings.PERFWATCH_NOTIFY_SENDING_STALE_S:
            raise NotificationInFlight(retry_in_s=settings.PERFWATCH_NOTIFY_SENDING_STALE_S - age_s)
        if notification.channel != NotificationChannel.GITHUB:
            _settle(
                notification_id=notification_id,
                attempted_at=notification.attempted_at,
                status=NotificationStatus.INTERRUPTED,
                error=f"interrupted while sending at {started:%Y-%m-%d %H:%M:%S} UTC: it may have gone out, "
                "so it is not sent again automatically; send it again here if it did not arrive",
            )
            notification.refresh_from_db()
            return notification
        claimed_at = _claim(
            notification_id=notification_id,
            statuses=[NotificationStatus.SENDING],
            attempted_at=notification.attempted_at,
        )
    else:
        claimed_at = _claim(
            notification_id=notification_id, statuses=[NotificationStatus.PENDING, NotificationStatus.FAILED]
        )
    if claimed_at is not None:
        try:
            _deliver(notification=notification, message=message)
        except NotificationFailed as error:
            _settle(
                notification_id=notification_id,
                attempted_at=claimed_at,
                status=NotificationStatus.FAILED,
                error=str(error),
            )
            raise
        _settle(notification_id=notification_id, attempted_at=claimed_at, status=NotificationStatus.SENT)
    notification.refresh_from_db()
    return notification


def notification_retry(*, notification_id: int, group_id: int) -> Notification | None:
    """Queue a failed or interrupted notification of that group again (staff action); a sent one stays
    sent. None, and nothing queued, when the group has no such notification."""
    with transaction.atomic():
        notification = (
            Notification.objects.select_for_update().filter(pk=notification_id, group_id=group_id).first()
        )
        if notification is None:
            return None
        if notification.status in (NotificationStatus.FAILED, NotificationStatus.INTERRUPTED):
            notification.status = NotificationStatus.PENDING
            notification.save(update_fields=["status"])
            dispatch.notification_send(notification_id=notification_id)
    return notification


def notifications_pending_resend(*, older_than_s: int = 600) -> list[int]:
    """Enqueue pending notifications whose message the broker never delivered, and those whose sender
    died while sending (beat sweep)."""
    now = timezone.now()
    never_attempted = Q(
        status=NotificationStatus.PENDING,
        created_at__lt=now - timedelta(seconds=older_than_s),
        attempted_at__isnull=True,
    )
    sender_died = Q(
        status=NotificationStatus.SENDING,
        attempted_at__lt=now - timedelta(seconds=settings.PERFWATCH_NOTIFY_SENDING_STALE_S),
    )
    pending = list(Notification.objects.filter(never_attempted | sender_died).values_list("pk", flat=True))
    for notification_id in pending:
        dispatch.notification_send(notification_id=notification_id)
    return pending
