"""Writes: pull requests, linked to the commits they were merged as."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from dashboard.benchmarks.models import Commit, Repository
from dashboard.benchmarks.subjects import subject_title
from dashboard.github.client import PullInfo
from dashboard.github.models import PullRequest, PullRequestState


def pull_requests_link(*, repository: Repository) -> int:
    """Link the repository's PRs still without a merge commit to it, once it is synced; return how many.

    By the merge commit sha GitHub reported, else by the ``(#N)`` subject of a commit on main (which
    proves the merge even if GitHub was never asked). Two queries when nothing is pending.
    """
    pending = list(
        PullRequest.objects.filter(repository=repository, merge_commit__isnull=True).exclude(
            state=PullRequestState.CLOSED
        )
    )
    if not pending:
        return 0
    commits = Commit.objects.filter(repository=repository).filter(
        Q(sha__in=[pull.merge_commit_sha for pull in pending if pull.merge_commit_sha])
        | Q(pr_number__in=[pull.number for pull in pending])
    )
    by_sha: dict[str, Commit] = {}
    by_number: dict[int, Commit] = {}
    for commit in commits.order_by("position"):
        by_sha[commit.sha] = commit
        # The earliest commit carrying the number is the merge; a later one would be a cherry-pick.
        if commit.pr_number is not None:
            by_number.setdefault(commit.pr_number, commit)
    linked = []
    for pull in pending:
        merge = by_sha.get(pull.merge_commit_sha) or by_number.get(pull.number)
        if merge is None:
            continue
        pull.merge_commit = merge
        pull.merge_commit_sha = merge.sha
        pull.state = PullRequestState.MERGED
        pull.merged_at = pull.merged_at or merge.committed_at
        pull.title = pull.title or subject_title(subject=merge.subject)
        pull.author = pull.author or merge.author_name
        linked.append(pull)
    PullRequest.objects.bulk_update(
        linked, ["merge_commit", "merge_commit_sha", "state", "merged_at", "title", "author"]
    )
    return len(linked)


def pull_request_apply(*, pull: PullRequest, info: PullInfo) -> PullRequest:
    """Store what GitHub says of a PR (title, author, state, merge commit) and link the merge commit.

    An answer older than the stored state (a webhook delivered late or replayed) changes nothing.
    """
    stored = pull.github_updated_at
    if info.updated_at is not None and stored is not None and info.updated_at < stored:
        return pull
    pull.github_updated_at = info.updated_at or pull.github_updated_at
    pull.title = info.title[:500]
    pull.author = info.author[:200]
    pull.html_url = info.html_url
    pull.fetched_at = timezone.now()
    if info.merged:
        pull.state = PullRequestState.MERGED
        pull.merged_at = info.merged_at
        pull.merge_commit_sha = info.merge_commit_sha or ""
        pull.merge_commit = (
            Commit.objects.filter(repository_id=pull.repository_id, sha=pull.merge_commit_sha).first()
            if pull.merge_commit_sha
            else None
        )
    else:
        pull.state = PullRequestState.OPEN if info.state == "open" else PullRequestState.CLOSED
        pull.merged_at, pull.merge_commit_sha, pull.merge_commit = None, "", None
    pull.save()
    return pull


def pull_request_record(*, repo: str, info: PullInfo) -> PullRequest | None:
    """Apply a PR's state from a webhook to the PR if a tracking issue lists it; None if none does."""
    with transaction.atomic():
        # Locked: two deliveries about one PR are compared with the stored state one after the other.
        pull = (
            PullRequest.objects.select_for_update(of=("self",))
            .select_related("repository")
            .filter(repository__full_name__iexact=repo, number=info.number)
            .first()
        )
        if pull is None:
            return None
        pull_request_apply(pull=pull, info=info)
        pull_requests_link(repository=pull.repository)
    return pull
