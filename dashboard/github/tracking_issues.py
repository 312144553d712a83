"""Writes: tracking issues and the PRs they list, re-read from GitHub."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from dashboard.github.client import GitHubClient, GitHubError, NotFound, NotModified, RateLimited
from dashboard.github.commits import ERROR_CHARS, repository_get_or_create
from dashboard.github.models import PullRequest, PullRequestState, TrackingIssue, TrackingIssueItem
from dashboard.github.pulls import pull_request_apply, pull_requests_link
from dashboard.github.tracking import PullReference, repository_validate, tracking_issue_parse
from runners.text import one_line

_TRACKING_LABEL = re.compile(r"^(?P<repo>[^#\s]+)#(?P<number>\d+)$")


class TrackingLabelInvalid(ValueError):
    """A tracking issue was not named as ``OWNER/NAME#N``."""


@dataclass(frozen=True)
class TrackingSyncOutcome:
    tracking_issue_id: int
    body_changed: bool
    pulls: int
    pulls_merged: int
    pulls_fetched: int
    rate_limited_until: datetime | None
    error: str


def _pull_needs_fetch(pull: PullRequest, *, body_changed: bool) -> bool:
    # A merged PR never changes its merge commit; a closed or missing one is asked again when the issue
    # changed, in case it was reopened or the reference was corrected.
    if pull.state == PullRequestState.MERGED:
        return not pull.fetched_at and not pull.title
    if pull.state in (PullRequestState.CLOSED, PullRequestState.NOT_FOUND):
        return body_changed
    return True


def tracking_label_parse(*, label: str) -> tuple[str, int]:
    """``owner/name#N`` → (``owner/name``, N); raise TrackingLabelInvalid otherwise."""
    match = _TRACKING_LABEL.match(label.strip())
    if match is None:
        raise TrackingLabelInvalid(f"a tracking issue is named OWNER/NAME#NUMBER, not {label!r}")
    try:
        repo = repository_validate(repo=match["repo"])
    except ValueError as error:
        raise TrackingLabelInvalid(str(error)) from None
    return repo, int(match["number"])


def tracking_issue_add(*, repo: str, number: int) -> TrackingIssue:
    """Configure a tracking issue (idempotent; a deactivated one is activated again)."""
    if number < 1:
        raise TrackingLabelInvalid(f"issue numbers start at 1, not {number}")
    repository = repository_get_or_create(full_name=repo)
    issue, created = TrackingIssue.objects.get_or_create(repository=repository, number=number)
    if not created and not issue.is_active:
        issue.is_active = True
        issue.save(update_fields=["is_active"])
    return issue


def tracking_issue_items_apply(
    *, tracking_issue: TrackingIssue, references: Sequence[PullReference]
) -> list[TrackingIssueItem]:
    """Make the issue's items exactly ``references`` (order and checked state), creating PR rows."""
    repositories = {
        reference.repo.casefold(): repository_get_or_create(full_name=reference.repo)
        for reference in references
    }
    wanted = {(repositories[r.repo.casefold()].pk, r.number) for r in references}
    existing_pulls = {
        (pull.repository_id, pull.number): pull
        for pull in PullRequest.objects.filter(
            repository_id__in={repository.pk for repository in repositories.values()},
            number__in={r.number for r in references},
        )
    }
    missing = [
        PullRequest(repository_id=repository_id, number=number)
        for repository_id, number in wanted
        if (repository_id, number) not in existing_pulls
    ]
    PullRequest.objects.bulk_create(missing, ignore_conflicts=True)
    if missing:
        existing_pulls = {
            (pull.repository_id, pull.number): pull
            for pull in PullRequest.objects.filter(
                repository_id__in={repository.pk for repository in repositories.values()},
                number__in={r.number for r in references},
            )
        }
    items = [
        TrackingIssueItem(
            tracking_issue=tracking_issue,
            pull_request=existing_pulls[(repositories[reference.repo.casefold()].pk, reference.number)],
            checked=reference.checked,
            order=order,
        )
        for order, reference in enumerate(references)
    ]
    with transaction.atomic():
        tracking_issue.items.exclude(pull_request__in=[item.pull_request for item in items]).delete()
        TrackingIssueItem.objects.bulk_create(
            items,
            update_conflicts=True,
            unique_fields=["tracking_issue", "pull_request"],
            update_fields=["checked", "order"],
        )
    return items


def _rate_limit_note(issue: TrackingIssue, client: GitHubClient) -> None:
    if client.rate_limit is not None:
        issue.rate_limit_limit = client.rate_limit.limit
        issue.rate_limit_remaining = client.rate_limit.remaining
        issue.rate_limit_reset_at = client.rate_limit.reset_at


def tracking_issue_sync(*, tracking_issue_id: int, client: GitHubClient | None) -> TrackingSyncOutcome:
    """Read the issue body (conditionally), parse its PRs, ask GitHub for the PRs whose state may have
    changed and link them to their merge commits on main.

    Without a client, or while GitHub's rate limit holds, the stored body is parsed again and PRs are
    linked from the synced commits alone. Failures are recorded on the issue, not raised: the page says
    what happened and the next sync tries again.
    """
    issue = TrackingIssue.objects.select_related("repository").get(pk=tracking_issue_id)
    now = timezone.now()
    if issue.rate_limited_until and issue.rate_limited_until <= now:
        issue.rate_limited_until = None
    use_api = client is not None and issue.rate_limited_until is None
    body_changed, error, fetched = False, "", 0
    if client is not None and use_api:
        issue.last_checked_at = now
        try:
            response = client.issue_get(
                repo=issue.repository.full_name, number=issue.number, etag=issue.etag or None
            )
        except RateLimited as limited:
            issue.rate_limited_until, error, use_api = (
                limited.reset_at,
                one_line(limited, limit=ERROR_CHARS),
                False,
            )
        except GitHubError as failure:
            error, use_api = one_line(failure, limit=ERROR_CHARS), False
        else:
            if not isinstance(response, NotModified):
                body_changed = response.body != issue.body or not issue.last_synced_at
                issue.title, issue.body, issue.state = response.title[:500], response.body, response.state
                issue.html_url, issue.etag = response.html_url, response.etag or ""
            issue.last_synced_at = now
        _rate_limit_note(issue, client)
    items = tracking_issue_items_apply(
        tracking_issue=issue,
        references=tracking_issue_parse(body=issue.body, repo=issue.repository.full_name),
    )
    # PRs of other repositories are listed but not asked for: they are not commits of this main.
    own_pulls = [
        item.pull_request for item in items if item.pull_request.repository_id == issue.repository_id
    ]
    if client is not None and use_api:
        for pull in own_pulls:
            if not _pull_needs_fetch(pull, body_changed=body_changed):
                continue
            try:
                info = client.pull_get(repo=issue.repository.full_name, number=pull.number)
            except NotFound:
                pull.state, pull.fetched_at = PullRequestState.NOT_FOUND, timezone.now()
                pull.save(update_fields=["state", "fetched_at"])
                continue
            except RateLimited as limited:
                issue.rate_limited_until, error = limited.reset_at, one_line(limited, limit=ERROR_CHARS)
                break
            except GitHubError as failure:
                error = one_line(failure, limit=ERROR_CHARS)
                break
            pull_request_apply(pull=pull, info=info)
            fetched += 1
        _rate_limit_note(issue, client)
    pull_requests_link(repository=issue.repository)
    issue.sync_error = error
    issue.save()
    merged = PullRequest.objects.filter(
        tracking_items__tracking_issue=issue, merge_commit__isnull=False
    ).count()
    return TrackingSyncOutcome(
        tracking_issue_id=issue.pk,
        body_changed=body_changed,
        pulls=len(items),
        pulls_merged=merged,
        pulls_fetched=fetched,
        rate_limited_until=issue.rate_limited_until,
        error=error,
    )


def tracking_issues_sync(*, client: GitHubClient | None) -> list[TrackingSyncOutcome]:
    """Sync every active tracking issue with one client, so they share its rate-limit view."""
    return [
        tracking_issue_sync(tracking_issue_id=issue_id, client=client)
        for issue_id in TrackingIssue.objects.active().order_by("pk").values_list("pk", flat=True)
    ]
