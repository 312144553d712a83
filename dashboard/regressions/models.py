"""Alerts on series, grouped by suspected culprit range, with their triage and notifications."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models import QuerySet
from django.utils import timezone

from dashboard.benchmarks.models import Commit, DetectionSetting, Series

__all__ = ["DetectionSetting"]  # moved to benchmarks: compare judges changes by it as detection does


class TriageStatus(models.TextChoices):
    UNTRIAGED = "untriaged"
    INVESTIGATING = "investigating"
    ACKNOWLEDGED = "acknowledged"
    FIXED = "fixed"
    WONT_FIX = "wont_fix", "won't fix"
    INVALID = "invalid"
    EXPECTED = "expected"
    INFRASTRUCTURE = "infrastructure"
    # Its culprit search named the commit another group already holds: its alerts joined that group.
    MERGED = "merged", "merged into another group"


# A label is a verdict on the detector only once someone has decided; `invalid` is a false positive.
DECIDED_STATUSES: tuple[str, ...] = (
    TriageStatus.ACKNOWLEDGED,
    TriageStatus.FIXED,
    TriageStatus.WONT_FIX,
    TriageStatus.INVALID,
    TriageStatus.EXPECTED,
    TriageStatus.INFRASTRUCTURE,
)


class AlertKind(models.TextChoices):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"


class GroupKind(models.TextChoices):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    TRADE_OFF = "trade_off", "trade-off"


class GroupState(models.TextChoices):
    """What re-runs of the range's ends said: nobody is told about a change before it is confirmed."""

    SUSPECTED = "suspected"
    CONFIRMED = "confirmed"
    DISMISSED = "dismissed"


class AlertGroupQuerySet(QuerySet["AlertGroup"]):
    def for_suite(self, suite_name: str) -> AlertGroupQuerySet:
        return self.filter(pk__in=Alert.objects.filter(series__suite__name=suite_name).values("group_id"))

    def for_hardware(self, hardware_class: str) -> AlertGroupQuerySet:
        return self.filter(
            pk__in=Alert.objects.filter(series__hardware_class=hardware_class).values("group_id")
        )


class AlertGroup(models.Model):
    """Every alert whose change lies in the same commit range: one card per suspected culprit range.

    The range is (base_commit, head_commit]: base is the last benchmarked commit before the change, head
    the first one after it; the commits between them were not benchmarked, so any of them may be the
    culprit, head included.
    """

    # No single-column index: the unique (base_commit, head_commit) leads with it.
    base_commit = models.ForeignKey(Commit, on_delete=models.PROTECT, related_name="+", db_index=False)
    head_commit = models.ForeignKey(Commit, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=20, choices=GroupKind.choices)
    state = models.CharField(
        max_length=20, choices=GroupState.choices, default=GroupState.SUSPECTED, db_index=True
    )
    state_changed_at = models.DateTimeField(null=True, blank=True)
    # Per (suite, hardware class) and alert: the repeats at both ends and what the test made of them.
    evidence = models.JSONField(default=dict, blank=True)
    range_reason = models.TextField(
        blank=True, help_text="Why the range holds more than one commit, when it does"
    )
    magnitude_pct = models.FloatField(default=0.0, help_text="Largest |change| among its alerts, in %")
    # A dismissed group is closed: a change found next to it later opens this group, which names it.
    follows = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="followed_by",
        help_text="The dismissed group next to this one when it was opened",
    )
    status = models.CharField(
        max_length=20, choices=TriageStatus.choices, default=TriageStatus.UNTRIAGED, db_index=True
    )
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects: ClassVar[AlertGroupQuerySet] = AlertGroupQuerySet.as_manager()  # type: ignore[assignment]

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["base_commit", "head_commit"], name="alert_group_unique_range")
        ]
        indexes = [models.Index(fields=["kind", "status"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} in {self.base_commit.short_sha}..{self.head_commit.short_sha}"


class Alert(models.Model):
    """One confirmed change on one series; `before`/`after` are the segment means around it."""

    class Source(models.TextChoices):
        DETECTOR = "detector"
        # Marked by hand on a series where the detector said nothing: a miss, counted on the precision page.
        MANUAL = "manual", "marked by hand"

    group = models.ForeignKey(AlertGroup, on_delete=models.CASCADE, related_name="alerts")
    # No single-column index: the unique (series, group) leads with it.
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="alerts", db_index=False)
    kind = models.CharField(max_length=20, choices=AlertKind.choices)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.DETECTOR)
    before_value = models.FloatField()
    after_value = models.FloatField()
    change_pct = models.FloatField(help_text="(after - before) / before, in %")
    p_value = models.FloatField(null=True, blank=True)
    status = models.CharField(
        max_length=20, choices=TriageStatus.choices, default=TriageStatus.UNTRIAGED, db_index=True
    )
    status_set_individually = models.BooleanField(
        default=False,
        help_text="Its status was set on the alert itself: the group's status no longer moves it",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series", "group"], name="alert_unique_series_range")]

    def __str__(self) -> str:
        return f"{self.series}: {self.change_pct:+.1f} % ({self.kind})"

    @property
    def magnitude_pct(self) -> float:
        return abs(self.change_pct)


class TriageEvent(models.Model):
    """Who changed what on a group or one of its alerts, and when: the triage history."""

    group = models.ForeignKey(AlertGroup, on_delete=models.CASCADE, related_name="events")
    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, null=True, blank=True, related_name="events")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    field = models.CharField(max_length=20, help_text="status, assignee or notes")
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user or 'system'} set {self.field} of group {self.group_id} to {self.new_value!r}"


class Comment(models.Model):
    """One message in a group's discussion: added, never edited, read oldest first."""

    group = models.ForeignKey(AlertGroup, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    text = models.TextField()
    # Not auto_now_add: notes kept from before comments existed keep the time they were written.
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.author or 'PerfWatch'} on group {self.group_id}: {self.text[:40]}"


class NotificationChannel(models.TextChoices):
    EMAIL = "email"
    SLACK = "slack"
    GITHUB = "github", "GitHub comment"


class NotificationStatus(models.TextChoices):
    PENDING = "pending"
    # Marked (and committed) before the message leaves: a crash can no longer make it look unsent.
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"
    # The sender died while an e-mail or Slack message was leaving: it may have gone out, so it is not
    # sent again without a person deciding (a GitHub comment is settled by its marker instead).
    INTERRUPTED = "interrupted"
    SKIPPED = "skipped"


class Notification(models.Model):
    """The one message of a group on a channel: the unique row is what makes it never go out twice."""

    group = models.ForeignKey(AlertGroup, on_delete=models.CASCADE, related_name="notifications")
    channel = models.CharField(max_length=20, choices=NotificationChannel.choices)
    status = models.CharField(
        max_length=20, choices=NotificationStatus.choices, default=NotificationStatus.PENDING
    )
    target = models.CharField(max_length=500, blank=True, help_text="Addresses, webhook host or PR")
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    attempted_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "channel"], name="notification_unique_group_channel")
        ]

    def __str__(self) -> str:
        return f"{self.channel} for group {self.group_id}: {self.status}"
