"""What PerfWatch knows of GitHub beyond commits: tags, PRs, tracking issues and the sync state."""

from __future__ import annotations

import re
from typing import ClassVar
from urllib.parse import quote

from django.db import models
from django.db.models import QuerySet

from dashboard.benchmarks.models import Commit, Repository

# Release tags as vLLM writes them (v0.27.1); release candidates and other tags are kept but not drawn.
_RELEASE_TAG = re.compile(r"^v\d+\.\d+\.\d+$")


class Tag(models.Model):
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=200)
    sha = models.CharField(max_length=40)
    # Null when the tagged commit is not on the synced first-parent history (release branches).
    commit = models.ForeignKey(Commit, on_delete=models.SET_NULL, null=True, blank=True, related_name="tags")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repository", "name"], name="tag_unique_name")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_release(self) -> bool:
        return bool(_RELEASE_TAG.match(self.name))

    @property
    def html_url(self) -> str:
        return f"{self.repository.html_url}/releases/tag/{quote(self.name, safe='')}"


class CommitRevert(models.Model):
    """A commit on main that reverts an earlier PR (read from its subject or body)."""

    commit = models.OneToOneField(Commit, on_delete=models.CASCADE, related_name="revert")
    reverted_pr_number = models.PositiveIntegerField(db_index=True)

    def __str__(self) -> str:
        return f"{self.commit.short_sha} reverts #{self.reverted_pr_number}"


class PullRequestState(models.TextChoices):
    OPEN = "open"
    CLOSED = "closed", "closed unmerged"
    MERGED = "merged"
    NOT_FOUND = "not_found", "not a PR"
    UNKNOWN = "unknown", "not fetched yet"


class PullRequest(models.Model):
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="pull_requests")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=500, blank=True)
    author = models.CharField(max_length=200, blank=True, help_text="GitHub login, or the commit author")
    state = models.CharField(
        max_length=20, choices=PullRequestState.choices, default=PullRequestState.UNKNOWN
    )
    merged_at = models.DateTimeField(null=True, blank=True)
    merge_commit_sha = models.CharField(max_length=40, blank=True)
    merge_commit = models.ForeignKey(
        Commit, on_delete=models.SET_NULL, null=True, blank=True, related_name="merged_pull_requests"
    )
    html_url = models.URLField(max_length=300, blank=True)
    fetched_at = models.DateTimeField(null=True, blank=True, help_text="Last answer from GitHub's API")
    github_updated_at = models.DateTimeField(
        null=True, blank=True, help_text="GitHub's updated_at of the stored state: anything older is ignored"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "number"], name="pull_request_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.repository.full_name}#{self.number}"

    @property
    def url(self) -> str:
        # Built from repository and number: a stored html_url (from a webhook or the API) is never a link.
        return f"{self.repository.html_url}/pull/{self.number}"


class TrackingIssueQuerySet(QuerySet["TrackingIssue"]):
    def active(self) -> TrackingIssueQuerySet:
        return self.filter(is_active=True)


class TrackingIssue(models.Model):
    """A GitHub issue whose body lists the PRs of one piece of work (e.g. vllm-project/vllm#50587)."""

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="tracking_issues")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=500, blank=True)
    state = models.CharField(max_length=20, blank=True, help_text="open or closed on GitHub")
    html_url = models.URLField(max_length=300, blank=True)
    body = models.TextField(blank=True)
    is_active = models.BooleanField(default=True, help_text="Synced on schedule and drawn on timelines")
    etag = models.CharField(max_length=200, blank=True, help_text="For conditional requests")
    last_synced_at = models.DateTimeField(null=True, blank=True, help_text="Last time the body was read")
    last_checked_at = models.DateTimeField(null=True, blank=True, help_text="Last time GitHub was asked")
    sync_error = models.CharField(max_length=500, blank=True, help_text="Why the last sync failed, if it did")
    rate_limited_until = models.DateTimeField(null=True, blank=True)
    rate_limit_remaining = models.PositiveIntegerField(null=True, blank=True)
    rate_limit_limit = models.PositiveIntegerField(null=True, blank=True)
    rate_limit_reset_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects: ClassVar[TrackingIssueQuerySet] = TrackingIssueQuerySet.as_manager()  # type: ignore[assignment]

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "number"], name="tracking_issue_unique_number")
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """``owner/name#N``: how the issue is named in URLs and toggles."""
        return f"{self.repository.full_name}#{self.number}"

    @property
    def owner(self) -> str:
        return self.repository.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repository.full_name.split("/", 1)[1]

    @property
    def url(self) -> str:
        return f"{self.repository.html_url}/issues/{self.number}"


class TrackingIssueItem(models.Model):
    tracking_issue = models.ForeignKey(TrackingIssue, on_delete=models.CASCADE, related_name="items")
    pull_request = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="tracking_items")
    checked = models.BooleanField(null=True, blank=True, help_text="Task-list state; empty outside a list")
    order = models.PositiveIntegerField(help_text="Place in the issue body, first is 0")

    class Meta:
        ordering = ("order",)
        constraints = [
            models.UniqueConstraint(
                fields=["tracking_issue", "pull_request"], name="tracking_issue_item_unique_pull"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tracking_issue}: {self.pull_request}"


class CommitSyncState(models.Model):
    """Where the last commit sync of a repository's default branch got to."""

    repository = models.OneToOneField(Repository, on_delete=models.CASCADE, related_name="commit_sync")
    tip_sha = models.CharField(max_length=40, blank=True)
    etag = models.CharField(max_length=200, blank=True, help_text="ETag of the REST commit list")
    synced_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    # The scheduled sync backs off while the source is unreachable: failures in a row, and when next.
    failures = models.PositiveIntegerField(default=0)
    failing_since = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.repository}: {self.tip_sha[:8] or 'never synced'}"


class WebhookDelivery(models.Model):
    """A webhook delivery already acted on, by GitHub's X-GitHub-Delivery and by its body's digest: a
    redelivery, or the same body under another delivery id, is answered and ignored."""

    delivery_id = models.CharField(max_length=100, unique=True)
    event = models.CharField(max_length=50)
    # The signed body's digest: a captured delivery re-sent under a new delivery id is a replay.
    body_sha256 = models.CharField(max_length=64, blank=True)
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["body_sha256"], condition=~models.Q(body_sha256=""), name="webhook_body_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.delivery_id}"
