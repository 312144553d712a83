from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import InlineModelAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from dashboard.github.commits import github_client
from dashboard.github.models import (
    CommitRevert,
    CommitSyncState,
    PullRequest,
    Tag,
    TrackingIssue,
    TrackingIssueItem,
)
from dashboard.github.tracking_issues import tracking_issue_sync


class TrackingIssueItemInline(admin.TabularInline):
    model = TrackingIssueItem
    fields = ("order", "pull_request", "checked")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("order",)

    def has_add_permission(self, request: HttpRequest, obj: TrackingIssue | None = None) -> bool:
        # Items come from the issue body; editing them here would be undone by the next sync.
        return False


@admin.register(TrackingIssue)
class TrackingIssueAdmin(admin.ModelAdmin):
    list_display = ("__str__", "title", "is_active", "last_synced_at", "sync_error", "rate_limited_until")
    list_filter = ("is_active", "repository")
    fields = (
        "repository",
        "number",
        "is_active",
        "title",
        "state",
        "html_url",
        "last_synced_at",
        "last_checked_at",
        "sync_error",
        "rate_limited_until",
        "rate_limit_remaining",
        "rate_limit_limit",
        "rate_limit_reset_at",
        "body",
    )
    readonly_fields = fields[3:]
    actions = ("sync_now",)

    def get_inlines(
        self, request: HttpRequest, obj: TrackingIssue | None
    ) -> list[type[InlineModelAdmin[Any, Any]]]:
        # A new issue has no items until its first sync reads them from the body.
        return [] if obj is None else [TrackingIssueItemInline]

    @admin.action(description="Sync the selected tracking issues from GitHub now")
    def sync_now(self, request: HttpRequest, queryset: QuerySet[TrackingIssue]) -> None:
        client = github_client()
        for issue in queryset:
            outcome = tracking_issue_sync(tracking_issue_id=issue.pk, client=client)
            level = messages.WARNING if outcome.error else messages.SUCCESS
            note = f": {outcome.error}" if outcome.error else ""
            self.message_user(
                request, f"{issue}: {outcome.pulls} PRs, {outcome.pulls_merged} on main{note}", level
            )


@admin.register(PullRequest)
class PullRequestAdmin(admin.ModelAdmin):
    list_display = ("__str__", "title", "author", "state", "merged_at", "merge_commit")
    list_filter = ("state", "repository")
    search_fields = ("=number", "title", "author")
    list_select_related = ("repository", "merge_commit")
    raw_id_fields = ("merge_commit",)


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ("name", "repository", "sha", "commit")
    search_fields = ("name", "sha")
    list_select_related = ("repository", "commit")
    raw_id_fields = ("commit",)


@admin.register(CommitRevert)
class CommitRevertAdmin(admin.ModelAdmin):
    list_display = ("commit", "reverted_pr_number")
    search_fields = ("=reverted_pr_number", "commit__sha")
    raw_id_fields = ("commit",)


@admin.register(CommitSyncState)
class CommitSyncStateAdmin(admin.ModelAdmin):
    list_display = ("repository", "tip_sha", "synced_at", "error")
    readonly_fields = ("tip_sha", "etag", "synced_at", "error")
