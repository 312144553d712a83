"""Writes: commit history of main, release tags, tracking issues and their PRs, webhook routing."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from dashboard import dispatch
from dashboard.benchmarks.models import Commit, Repository
from dashboard.benchmarks.services import repository_default
from dashboard.github.client import (
    GitHubClient,
    GitHubError,
    NotFound,
    NotModified,
    PullInfo,
    RateLimited,
)
from dashboard.github.gitmirror import (
    GitMirrorError,
    UnknownRevision,
    mirror_commits,
    mirror_fetch,
    mirror_tags,
)
from dashboard.github.models import (
    CommitRevert,
    CommitSyncState,
    PullRequest,
    PullRequestState,
    Tag,
    TrackingIssue,
    TrackingIssueItem,
    WebhookDelivery,
)
from dashboard.github.subjects import change_class_from_paths, subject_pr_number, subject_reverted_pr
from dashboard.github.tracking import PullReference, repository_validate, tracking_issue_parse
from runners.text import one_line

_TRACKING_LABEL = re.compile(r"^(?P<repo>[^#\s]+)#(?P<number>\d+)$")
_SUBJECT_PR_SUFFIX = re.compile(r"\s*\(#\d+\)\s*$")
_UPSERT_BATCH = 1000
# An error message is kept to one line of the sync state.
_ERROR_CHARS = 500


class CommitSyncFailed(Exception):
    """The commit history could not be read (git or GitHub failed); the message says why."""


class TrackingLabelInvalid(ValueError):
    """A tracking issue was not named as ``OWNER/NAME#N``."""


class WebhookPayloadInvalid(ValueError):
    """A signed webhook delivery whose JSON lacks what its event must carry."""


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


@dataclass(frozen=True)
class TrackingSyncOutcome:
    tracking_issue_id: int
    body_changed: bool
    pulls: int
    pulls_merged: int
    pulls_fetched: int
    rate_limited_until: datetime | None
    error: str


WEBHOOK_EVENTS = frozenset({"push", "issues", "pull_request"})


@dataclass(frozen=True)
class WebhookOutcome:
    """The names of the tasks a delivery queued (none when it needed nothing, or it was a redelivery)."""

    queued: tuple[str, ...] = ()
    duplicate: bool = False


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


# --- Commit history -------------------------------------------------------------------------------------


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
    message = one_line(error, limit=_ERROR_CHARS)
    CommitSyncState.objects.update_or_create(repository=repository, defaults={"error": message})
    return CommitSyncFailed(message)


def _sync_done(state: CommitSyncState, *, tip_sha: str, etag: str | None = None) -> None:
    state.tip_sha, state.synced_at, state.error = tip_sha, timezone.now(), ""
    state.etag = state.etag if etag is None else etag
    state.save(update_fields=["tip_sha", "etag", "synced_at", "error"])


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


# --- Pull requests --------------------------------------------------------------------------------------


def _title_from_subject(subject: str) -> str:
    return _SUBJECT_PR_SUFFIX.sub("", subject)


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
        pull.title = pull.title or _title_from_subject(merge.subject)
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


def _pull_needs_fetch(pull: PullRequest, *, body_changed: bool) -> bool:
    # A merged PR never changes its merge commit; a closed or missing one is asked again when the issue
    # changed, in case it was reopened or the reference was corrected.
    if pull.state == PullRequestState.MERGED:
        return not pull.fetched_at and not pull.title
    if pull.state in (PullRequestState.CLOSED, PullRequestState.NOT_FOUND):
        return body_changed
    return True


# --- Tracking issues ------------------------------------------------------------------------------------


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
                one_line(limited, limit=_ERROR_CHARS),
                False,
            )
        except GitHubError as failure:
            error, use_api = one_line(failure, limit=_ERROR_CHARS), False
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
                issue.rate_limited_until, error = limited.reset_at, one_line(limited, limit=_ERROR_CHARS)
                break
            except GitHubError as failure:
                error = one_line(failure, limit=_ERROR_CHARS)
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


# --- Webhook --------------------------------------------------------------------------------------------


def _field(payload: Mapping[str, Any], *path: str) -> Any:
    value: Any = payload
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            raise WebhookPayloadInvalid(f"the payload has no {'.'.join(path)}")
        value = value[key]
    return value


def pull_info_from_payload(*, pull: Mapping[str, Any]) -> PullInfo:
    """A webhook's ``pull_request`` object (the REST shape) as the client's PullInfo."""
    merged = bool(pull.get("merged")) or pull.get("merged_at") is not None
    merged_at = pull.get("merged_at")
    return PullInfo(
        number=int(_field(pull, "number")),
        title=str(_field(pull, "title")),
        author=str((pull.get("user") or {}).get("login") or "ghost"),
        state=str(_field(pull, "state")),
        merged=merged,
        merge_commit_sha=pull.get("merge_commit_sha") if merged else None,
        merged_at=datetime.fromisoformat(merged_at.replace("Z", "+00:00")) if merged and merged_at else None,
        html_url=str(pull.get("html_url") or ""),
        updated_at=_payload_time(pull.get("updated_at")),
    )


def _payload_time(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise WebhookPayloadInvalid("a timestamp is not a string")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise WebhookPayloadInvalid(f"the timestamp {value!r} has no time zone")
    return parsed


def webhook_delivery_handle(*, delivery_id: str, event: str, payload: Mapping[str, Any]) -> WebhookOutcome:
    """Act on a verified delivery once: a delivery id already recorded is a redelivery and needs nothing.

    The id is recorded in the transaction that queues the work, so a delivery that failed is not
    remembered and GitHub's retry of it is acted on.
    """
    with transaction.atomic():
        _, created = WebhookDelivery.objects.get_or_create(delivery_id=delivery_id, defaults={"event": event})
        if not created:
            return WebhookOutcome(duplicate=True)
        return webhook_event_handle(event=event, payload=payload)


def webhook_event_handle(*, event: str, payload: Mapping[str, Any]) -> WebhookOutcome:
    """Decide what a verified delivery asks for and queue it once the transaction commits.

    push to the default branch of the configured repository → commit sync; issues on a configured
    tracking issue → its sync; pull_request closed on a listed PR → its new state. Anything else of
    those events is known but needs nothing.
    """
    if event == "push":
        repository = repository_default()
        full_name = str(_field(payload, "repository", "full_name"))
        ref = str(_field(payload, "ref"))
        if full_name.casefold() != repository.full_name.casefold():
            return WebhookOutcome()
        if ref != f"refs/heads/{repository.default_branch}":
            return WebhookOutcome()
        return WebhookOutcome(queued=(dispatch.commits_sync(),))
    if event == "issues":
        full_name = str(_field(payload, "repository", "full_name"))
        number = int(_field(payload, "issue", "number"))
        issue = (
            TrackingIssue.objects.active()
            .filter(repository__full_name__iexact=full_name, number=number)
            .values_list("pk", flat=True)
            .first()
        )
        if issue is None or _field(payload, "action") not in ("edited", "opened", "reopened", "closed"):
            return WebhookOutcome()
        return WebhookOutcome(queued=(dispatch.tracking_issue_sync(tracking_issue_id=issue),))
    if event == "pull_request":
        if _field(payload, "action") != "closed":
            return WebhookOutcome()
        full_name = str(_field(payload, "repository", "full_name"))
        pull = _field(payload, "pull_request")
        info = pull_info_from_payload(pull=pull)
        if not PullRequest.objects.filter(
            repository__full_name__iexact=full_name, number=info.number
        ).exists():
            return WebhookOutcome()
        fields = {
            key: pull.get(key)
            for key in (
                "number",
                "title",
                "state",
                "merged",
                "merge_commit_sha",
                "merged_at",
                "html_url",
                "updated_at",
            )
        }
        fields["user"] = {"login": info.author}
        return WebhookOutcome(queued=(dispatch.pull_request_record(repo=full_name, pull=fields),))
    raise WebhookPayloadInvalid(f"not an event PerfWatch listens to: {event!r}")
