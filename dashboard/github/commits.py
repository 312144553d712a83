"""Writes: main's first-parent history and its release tags, from the git mirror or the REST API."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal, Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from dashboard.benchmarks.models import Commit, Repository
from dashboard.benchmarks.services import repository_default
from dashboard.benchmarks.subjects import change_class_from_paths, subject_pr_number, subject_reverted_pr
from dashboard.github.client import GitHubClient, GitHubError, NotModified
from dashboard.github.gitmirror import (
    GitMirrorError,
    UnknownRevision,
    mirror_commits,
    mirror_fetch,
    mirror_tags,
)
from dashboard.github.models import CommitRevert, CommitSyncState, Tag
from dashboard.github.pulls import pull_requests_link
from dashboard.github.tracking import repository_validate
from runners.text import one_line

logger = logging.getLogger(__name__)

_UPSERT_BATCH = 1000


# An error message is kept to one line of the sync state.
ERROR_CHARS = 500


class CommitSyncFailed(Exception):
    """The commit history could not be read (git or GitHub failed); the message says why."""


@dataclass(frozen=True)
class CommitRecord:
    """One commit as a source describes it; ``change_class`` is None when the source cannot tell."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    committed_at: datetime
    subject: str
    body: str
    change_class: str | None


class _SourceCommit(Protocol):
    """What the mirror's GitCommit and the REST list's ApiCommit both say of a commit."""

    @property
    def sha(self) -> str: ...
    @property
    def parents(self) -> tuple[str, ...]: ...
    @property
    def author_name(self) -> str: ...
    @property
    def author_email(self) -> str: ...
    @property
    def committed_at(self) -> datetime: ...
    @property
    def subject(self) -> str: ...
    @property
    def body(self) -> str: ...


def _record(commit: _SourceCommit, *, change_class: str | None) -> CommitRecord:
    return CommitRecord(
        sha=commit.sha,
        parents=commit.parents,
        author_name=commit.author_name,
        author_email=commit.author_email,
        committed_at=commit.committed_at,
        subject=commit.subject,
        body=commit.body,
        change_class=change_class,
    )


@dataclass(frozen=True)
class CommitSyncOutcome:
    source: Literal["mirror", "api"]
    tip_sha: str
    commits_new: int
    commits_seen: int
    tags: int
    not_modified: bool = False


def github_client() -> GitHubClient:
    """The REST client configured by the settings (anonymous without GITHUB_TOKEN)."""
    return GitHubClient(
        token=settings.GITHUB_TOKEN or None,
        base_url=settings.GITHUB_API_URL,
        timeout_s=settings.PERFWATCH_GITHUB_TIMEOUT_S,
    )


def repository_get_or_create(*, full_name: str) -> Repository:
    """The repository row for ``owner/name``, matched as GitHub does: case-insensitively."""
    repository_validate(repo=full_name)
    existing = Repository.objects.filter(full_name__iexact=full_name).first()
    return existing or Repository.objects.create(full_name=full_name)


def _position_base(*, repository: Repository, chain: Sequence[CommitRecord]) -> int:
    """The first-parent index of ``chain[0]``: from a commit of the chain already placed, else from the
    parent of its oldest commit, else after everything known (a first import starts at 0)."""
    shas = [record.sha for record in chain]
    known = {
        sha: position
        for sha, position in Commit.objects.filter(repository=repository, sha__in=shas).values_list(
            "sha", "position"
        )
        if position is not None
    }
    for index, sha in enumerate(shas):
        if sha in known and known[sha] >= index:
            return known[sha] - index
    if chain and chain[0].parents:
        parent_position = (
            Commit.objects.filter(repository=repository, sha=chain[0].parents[0], position__isnull=False)
            .values_list("position", flat=True)
            .first()
        )
        if parent_position is not None:
            return parent_position + 1
    top = Commit.objects.filter(repository=repository).aggregate(top=Max("position"))["top"]
    return 0 if top is None else top + 1


def commits_store(*, repository: Repository, chain: Sequence[CommitRecord]) -> tuple[int, int]:
    """Upsert a first-parent chain of commits (oldest first) with their positions, PR numbers and reverts.

    Returns (new, seen). Idempotent: storing the same chain again changes nothing. A change class the
    source could not tell (None) leaves the stored one alone.
    """
    if not chain:
        return 0, 0
    base = _position_base(repository=repository, chain=chain)
    existing = set(
        Commit.objects.filter(repository=repository, sha__in=[r.sha for r in chain]).values_list(
            "sha", flat=True
        )
    )
    rows = [
        Commit(
            repository=repository,
            sha=record.sha,
            parents=list(record.parents),
            author_name=record.author_name[:200],
            author_email=record.author_email[:200],
            committed_at=record.committed_at,
            subject=record.subject[:500],
            pr_number=subject_pr_number(subject=record.subject),
            position=base + index,
            change_class=record.change_class or "",
        )
        for index, record in enumerate(chain)
    ]
    fields = ["parents", "author_name", "author_email", "committed_at", "subject", "pr_number", "position"]
    with transaction.atomic():
        for with_class in (True, False):
            batch = [
                row
                for row, record in zip(rows, chain, strict=True)
                if (record.change_class is not None) is with_class
            ]
            Commit.objects.bulk_create(
                batch,
                batch_size=_UPSERT_BATCH,
                update_conflicts=True,
                unique_fields=["repository", "sha"],
                update_fields=[*fields, "change_class"] if with_class else fields,
            )
        reverts = {
            record.sha: reverted
            for record in chain
            if (reverted := subject_reverted_pr(subject=record.subject, body=record.body)) is not None
        }
        if reverts:
            ids = dict(
                Commit.objects.filter(repository=repository, sha__in=list(reverts)).values_list("sha", "id")
            )
            CommitRevert.objects.bulk_create(
                [
                    CommitRevert(commit_id=ids[sha], reverted_pr_number=number)
                    for sha, number in reverts.items()
                ],
                update_conflicts=True,
                unique_fields=["commit"],
                update_fields=["reverted_pr_number"],
            )
    return len(chain) - len(existing), len(chain)


def tags_store(*, repository: Repository, tags: Iterable[tuple[str, str]]) -> int:
    """Make the repository's tags exactly ``(name, sha)`` pairs, each linked to its commit if synced."""
    pairs = dict(tags)
    commit_ids = dict(
        Commit.objects.filter(repository=repository, sha__in=set(pairs.values())).values_list("sha", "id")
    )
    with transaction.atomic():
        Tag.objects.filter(repository=repository).exclude(name__in=list(pairs)).delete()
        Tag.objects.bulk_create(
            [
                Tag(repository=repository, name=name, sha=sha, commit_id=commit_ids.get(sha))
                for name, sha in pairs.items()
            ],
            batch_size=_UPSERT_BATCH,
            update_conflicts=True,
            unique_fields=["repository", "name"],
            update_fields=["sha", "commit"],
        )
    return len(pairs)


def _sync_state_lock(repository: Repository) -> CommitSyncState | None:
    """The repository's sync state, row-locked for this transaction; None if another sync holds it."""
    CommitSyncState.objects.get_or_create(repository=repository)
    return CommitSyncState.objects.select_for_update(skip_locked=True).filter(repository=repository).first()


def _sync_failed(repository: Repository, error: Exception) -> CommitSyncFailed:
    # Recorded after the sync's transaction rolled back, so that the page can say why.
    message = one_line(error, limit=ERROR_CHARS)
    CommitSyncState.objects.update_or_create(repository=repository, defaults={"error": message})
    return CommitSyncFailed(message)


def _sync_done(state: CommitSyncState, *, tip_sha: str, etag: str | None = None) -> None:
    state.tip_sha, state.synced_at, state.error = tip_sha, timezone.now(), ""
    state.failures, state.failing_since, state.next_attempt_at = 0, None, None
    state.etag = state.etag if etag is None else etag
    state.save(
        update_fields=[
            "tip_sha",
            "etag",
            "synced_at",
            "error",
            "failures",
            "failing_since",
            "next_attempt_at",
        ]
    )


def commits_sync_from_mirror(
    *, repository: Repository, mirror_path: Path, remote_url: str, initial_limit: int, timeout_s: float
) -> CommitSyncOutcome:
    """Fetch the mirror and store main's first-parent commits since the last sync, and all tags.

    A first sync (or one after main was rewritten) imports the newest ``initial_limit`` commits. Raise
    CommitSyncFailed (and record why) when git fails; nothing is stored then.
    """
    branch = repository.default_branch
    try:
        with transaction.atomic():
            state = _sync_state_lock(repository)
            if state is None:
                return CommitSyncOutcome(source="mirror", tip_sha="", commits_new=0, commits_seen=0, tags=0)
            tip = mirror_fetch(path=mirror_path, remote_url=remote_url, branch=branch, timeout_s=timeout_s)
            since = state.tip_sha or None
            try:
                commits = mirror_commits(
                    path=mirror_path, branch=branch, since_sha=since, limit=None if since else initial_limit
                )
            except UnknownRevision:
                since, commits = None, []
            # The last tip must be the first parent of what follows it; if not, main was rewritten.
            if since is None or (commits and commits[0].parents[:1] != (since,)):
                commits = mirror_commits(path=mirror_path, branch=branch, since_sha=None, limit=initial_limit)
            chain = [
                _record(commit, change_class=change_class_from_paths(paths=commit.changed_paths))
                for commit in commits
            ]
            new, seen = commits_store(repository=repository, chain=chain)
            tags = tags_store(
                repository=repository, tags=((tag.name, tag.sha) for tag in mirror_tags(path=mirror_path))
            )
            pull_requests_link(repository=repository)
            _sync_done(state, tip_sha=tip)
    except GitMirrorError as error:
        raise _sync_failed(repository, error) from error
    return CommitSyncOutcome(source="mirror", tip_sha=tip, commits_new=new, commits_seen=seen, tags=tags)


def _first_parent_chain(records: Sequence[CommitRecord]) -> list[CommitRecord]:
    """The first-parent line through ``records`` (oldest to newest, the newest being the tip)."""
    if not records:
        return []
    by_sha = {record.sha: record for record in records}
    chain = [records[-1]]
    while chain[-1].parents and chain[-1].parents[0] in by_sha:
        chain.append(by_sha[chain[-1].parents[0]])
    return chain[::-1]


def commits_sync_from_api(
    *,
    repository: Repository,
    client: GitHubClient,
    since: datetime | None = None,
    initial_days: int = 14,
    per_page: int = 100,
) -> CommitSyncOutcome:
    """Store main's commits from the REST commit list, committed after ``since``: by default a day before
    the newest synced commit, or the last ``initial_days`` days on a first sync. Change classes stay
    as they were (the list does not say which files a commit touched). Raise CommitSyncFailed (and
    record why) when GitHub fails.
    """
    try:
        with transaction.atomic():
            state = _sync_state_lock(repository)
            if state is None:
                return CommitSyncOutcome(source="api", tip_sha="", commits_new=0, commits_seen=0, tags=0)
            if since is None:
                newest = Commit.objects.filter(repository=repository, position__isnull=False).aggregate(
                    newest=Max("committed_at")
                )["newest"]
                # A day of overlap: commit dates are not merge order; a late merge can carry an older date.
                since = (
                    newest - timedelta(days=1) if newest else timezone.now() - timedelta(days=initial_days)
                )
            response = client.commits_list(
                repo=repository.full_name,
                sha=repository.default_branch,
                since=since,
                etag=state.etag or None,
                per_page=per_page,
            )
            if isinstance(response, NotModified):
                _sync_done(state, tip_sha=state.tip_sha)
                return CommitSyncOutcome(
                    source="api",
                    tip_sha=state.tip_sha,
                    commits_new=0,
                    commits_seen=0,
                    tags=0,
                    not_modified=True,
                )
            chain = _first_parent_chain([_record(commit, change_class=None) for commit in response.commits])
            new, seen = commits_store(repository=repository, chain=chain)
            pull_requests_link(repository=repository)
            _sync_done(state, tip_sha=chain[-1].sha if chain else state.tip_sha, etag=response.etag or "")
    except GitHubError as error:
        raise _sync_failed(repository, error) from error
    return CommitSyncOutcome(source="api", tip_sha=state.tip_sha, commits_new=new, commits_seen=seen, tags=0)


def commits_sync(*, source: str | None = None) -> CommitSyncOutcome:
    """Sync the configured repository's main from the source the settings name (mirror or api)."""
    source = source or settings.PERFWATCH_COMMIT_SOURCE
    repository = repository_default()
    if source == "api":
        return commits_sync_from_api(
            repository=repository,
            client=github_client(),
            initial_days=settings.PERFWATCH_COMMIT_SYNC_INITIAL_DAYS,
        )
    if source != "mirror":
        raise CommitSyncFailed(f"unknown commit source {source!r}: use 'mirror' or 'api'")
    return commits_sync_from_mirror(
        repository=repository,
        mirror_path=Path(settings.PERFWATCH_GIT_MIRROR_DIR),
        remote_url=settings.PERFWATCH_GIT_REMOTE,
        initial_limit=settings.PERFWATCH_COMMIT_SYNC_INITIAL_LIMIT,
        timeout_s=settings.PERFWATCH_GIT_FETCH_TIMEOUT_S,
    )


SYNC_BACKOFF_BASE = timedelta(minutes=10)
SYNC_BACKOFF_MAX = timedelta(hours=6)


def commits_sync_scheduled() -> CommitSyncOutcome | None:
    """The periodic sync: off when PERFWATCH_COMMIT_SYNC is false; while the source is unreachable it backs
    off (10 min, 20 min … 6 h between attempts) and logs one line per attempt, no traceback. The failure is
    kept on the sync state for the pages to say; None when nothing was synced."""
    if not settings.PERFWATCH_COMMIT_SYNC:
        return None
    repository = repository_default()
    state, _ = CommitSyncState.objects.get_or_create(repository=repository)
    now = timezone.now()
    if state.next_attempt_at is not None and state.next_attempt_at > now:
        return None
    try:
        return commits_sync()
    except CommitSyncFailed as error:
        failures = state.failures + 1
        delay = min(SYNC_BACKOFF_MAX, SYNC_BACKOFF_BASE * 2 ** (failures - 1))
        CommitSyncState.objects.filter(pk=state.pk).update(
            failures=failures, failing_since=state.failing_since or now, next_attempt_at=now + delay
        )
        logger.warning(
            "commit sync failed (%d in a row), next attempt in %d min: %s",
            failures,
            delay.seconds // 60,
            error,
        )
        return None
