"""Reads: timeline markers, tracking issues with their PRs, one PR's page, tags and sync state."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from django.conf import settings
from django.db.models import Prefetch

from dashboard.benchmarks.models import Commit, Repository, RunStatus, Suite
from dashboard.benchmarks.selectors import repository_default_find
from dashboard.benchmarks.subjects import subject_title
from dashboard.github.impact import PullImpact, pull_impacts_stored, pull_key
from dashboard.github.models import (
    CommitRevert,
    CommitSyncState,
    PullRequest,
    PullRequestState,
    Tag,
    TrackingIssue,
    TrackingIssueItem,
)


@dataclass(frozen=True)
class Marker:
    """A vertical marker on a timeline, drawn on ``drawn_at_sha``: the first benchmarked commit that
    contains ``commit_sha`` (the PR's merge commit or the tagged commit; ``exact`` if they are one)."""

    kind: Literal["pr", "tag"]
    drawn_at_sha: str
    commit_sha: str
    label: str
    title: str
    author: str
    url: str
    pr_number: int | None
    tracking: str
    exact: bool


def _benchmarked_positions(*, suite: Suite, hardware_class: str) -> list[int]:
    """Positions on main of the commits with a succeeded run of `suite` on `hardware_class`, ascending."""
    found = (
        Commit.objects.filter(
            position__isnull=False,
            runs__suite=suite,
            runs__hardware_class=hardware_class,
            runs__status=RunStatus.SUCCEEDED,
        )
        .values_list("position", flat=True)
        .distinct()
        .order_by()
    )
    return sorted(position for position in found if position is not None)


def _first_at_or_after(benchmarked: Sequence[int], position: int) -> int | None:
    index = bisect.bisect_left(benchmarked, position)
    return benchmarked[index] if index < len(benchmarked) else None


def timeline_markers(
    *,
    suite: Suite,
    hardware_class: str,
    tracking: Collection[str] | None = None,
    benchmarked: Sequence[int] | None = None,
) -> list[Marker]:
    """PR markers of the active tracking issues (only those labelled in ``tracking``, when given) and
    release-tag markers, each drawn at the first benchmarked commit of ``suite`` on ``hardware_class``
    that contains it. ``benchmarked``: the positions on main of those commits, ascending, where the
    caller has read them already (a timeline has them in its points); read here otherwise. Merges
    before the first of them or after the last are not drawn. Three queries (four without
    ``benchmarked``): the tracked PRs, the tags, the commits the markers are drawn at."""
    if benchmarked is None:
        benchmarked = _benchmarked_positions(suite=suite, hardware_class=hardware_class)
    if not benchmarked:
        return []
    first, last = benchmarked[0], benchmarked[-1]
    found: list[tuple[int, Marker]] = []  # (position drawn at, the marker without its sha)
    items = (
        TrackingIssueItem.objects.filter(
            tracking_issue__is_active=True,
            pull_request__merge_commit__position__gte=first,
            pull_request__merge_commit__position__lte=last,
        )
        .select_related(
            "tracking_issue__repository", "pull_request__merge_commit", "pull_request__repository"
        )
        .order_by("tracking_issue_id", "order")
    )
    for item in items:
        issue, pull = item.tracking_issue, item.pull_request
        if tracking is not None and issue.label not in tracking:
            continue
        merge = pull.merge_commit
        assert merge is not None and merge.position is not None  # filtered above
        drawn_at = _first_at_or_after(benchmarked, merge.position)
        if drawn_at is None:
            continue
        marker = Marker(
            kind="pr",
            drawn_at_sha="",
            commit_sha=merge.sha,
            label=f"#{pull.number}",
            title=pull.title,
            author=pull.author,
            url=pull.url,
            pr_number=pull.number,
            tracking=issue.label,
            exact=drawn_at == merge.position,
        )
        found.append((drawn_at, marker))
    tags = Tag.objects.filter(commit__position__gte=first, commit__position__lte=last).select_related(
        "commit", "repository"
    )
    for tag in tags:
        if not tag.is_release or tag.commit is None or tag.commit.position is None:
            continue
        drawn_at = _first_at_or_after(benchmarked, tag.commit.position)
        if drawn_at is None:
            continue
        marker = Marker(
            kind="tag",
            drawn_at_sha="",
            commit_sha=tag.commit.sha,
            label=tag.name,
            title=f"release {tag.name}",
            author="",
            url=tag.html_url,
            pr_number=None,
            tracking="",
            exact=drawn_at == tag.commit.position,
        )
        found.append((drawn_at, marker))
    if not found:
        return []
    # The commits drawn at, by position: among the benchmarked ones (another repository's commits may
    # hold the same positions).
    shas = dict(
        Commit.objects.filter(
            position__in={position for position, _ in found},
            runs__suite=suite,
            runs__hardware_class=hardware_class,
            runs__status=RunStatus.SUCCEEDED,
        )
        .values_list("position", "sha")
        .distinct()
    )
    return [replace(marker, drawn_at_sha=shas[position]) for position, marker in found if position in shas]


def tracking_issues_active() -> list[TrackingIssue]:
    return list(
        TrackingIssue.objects.active()
        .select_related("repository")
        .order_by("repository__full_name", "number")
    )


@dataclass(frozen=True)
class TrackedPull:
    order: int
    checked: bool | None
    pull: PullRequest
    is_external: bool  # in another repository: listed, never a commit of this main
    reverted_by: Commit | None
    impacts: tuple[PullImpact, ...]

    def improvement(self, *, suite: str, hardware_class: str, concurrency: int, metric: str) -> float | None:
        impact = next(
            (i for i in self.impacts if (i.suite, i.hardware_class) == (suite, hardware_class)), None
        )
        change = impact.change(concurrency=concurrency, metric=metric) if impact else None
        return change.improvement_pct if change else None


@dataclass(frozen=True)
class TrackingIssueDetail:
    issue: TrackingIssue
    pulls: tuple[TrackedPull, ...]
    # (suite, hardware class, concurrency levels) that at least one PR has figures for.
    scopes: tuple[tuple[str, str, tuple[int, ...]], ...]


def _reverts_of(
    *, repository_ids: Collection[int], numbers: Collection[int]
) -> dict[tuple[int, int], Commit]:
    reverts: dict[tuple[int, int], Commit] = {}
    for revert in (
        CommitRevert.objects.filter(commit__repository_id__in=repository_ids, reverted_pr_number__in=numbers)
        .select_related("commit__repository")
        .order_by("commit__position")
    ):
        reverts.setdefault((revert.commit.repository_id, revert.reverted_pr_number), revert.commit)
    return reverts


def _scopes(pulls: Iterable[TrackedPull]) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    levels: dict[tuple[str, str], set[int]] = defaultdict(set)
    for tracked in pulls:
        for impact in tracked.impacts:
            levels[(impact.suite, impact.hardware_class)].update(level.concurrency for level in impact.levels)
    return tuple(
        (suite, hardware, tuple(sorted(found))) for (suite, hardware), found in sorted(levels.items())
    )


def tracking_issue_get(*, repo: str, number: int) -> TrackingIssue | None:
    return (
        TrackingIssue.objects.select_related("repository")
        .filter(repository__full_name__iexact=repo, number=number)
        .first()
    )


def tracking_issue_detail(*, issue: TrackingIssue) -> TrackingIssueDetail:
    """The issue's PRs in the order the body lists them, each with its merge commit, revert and impact.
    A fixed number of queries whatever the number of PRs."""
    items = list(
        issue.items.select_related(
            "pull_request__repository", "pull_request__merge_commit__repository"
        ).order_by("order")
    )
    pulls = [item.pull_request for item in items]
    impacts = pull_impacts_stored(pulls=pulls)
    reverts = _reverts_of(
        repository_ids={issue.repository_id},
        numbers=[p.number for p in pulls if p.repository_id == issue.repository_id],
    )
    tracked = tuple(
        TrackedPull(
            order=item.order,
            checked=item.checked,
            pull=item.pull_request,
            is_external=item.pull_request.repository_id != issue.repository_id,
            reverted_by=reverts.get((item.pull_request.repository_id, item.pull_request.number)),
            impacts=impacts.get(pull_key(item.pull_request), ()),
        )
        for item in items
    )
    return TrackingIssueDetail(issue=issue, pulls=tracked, scopes=_scopes(tracked))


def tracked_pulls_sort(
    *, pulls: Sequence[TrackedPull], suite: str, hardware_class: str, concurrency: int, metric: str
) -> list[TrackedPull]:
    """Biggest improvement of ``metric`` at ``concurrency`` first, regressions last, PRs without figures
    after them in issue order."""

    def key(tracked: TrackedPull) -> tuple[bool, float, int]:
        improvement = tracked.improvement(
            suite=suite, hardware_class=hardware_class, concurrency=concurrency, metric=metric
        )
        return (improvement is None, -(improvement or 0.0), tracked.order)

    return sorted(pulls, key=key)


def tracking_issues_list() -> list[tuple[TrackingIssue, int, int]]:
    """Every configured tracking issue with how many PRs it lists and how many are on main. Two queries."""
    issues = list(
        TrackingIssue.objects.select_related("repository")
        .prefetch_related(
            Prefetch("items", queryset=TrackingIssueItem.objects.select_related("pull_request"))
        )
        .order_by("-is_active", "repository__full_name", "number")
    )
    return [
        (
            issue,
            len(issue.items.all()),
            sum(1 for item in issue.items.all() if item.pull_request.merge_commit_id is not None),
        )
        for issue in issues
    ]


@dataclass(frozen=True)
class PullDetail:
    pull: PullRequest
    tracking_issues: tuple[TrackingIssue, ...]
    reverted_by: Commit | None
    reverts_pr_number: int | None  # the PR this one reverts, if it is a revert
    impacts: tuple[PullImpact, ...]


def pull_request_detail(*, number: int, repository: Repository | None = None) -> PullDetail | None:
    """A PR of the default repository as known from tracking issues or, failing that, from the ``(#N)``
    commit on main; None if neither knows it."""
    repository = repository or repository_default_find()
    if repository is None:
        return None  # nothing synced yet: no PR is known
    pull = (
        PullRequest.objects.select_related("repository", "merge_commit__repository")
        .filter(repository=repository, number=number)
        .first()
    )
    if pull is None or pull.merge_commit is None:
        commit = (
            Commit.objects.select_related("repository")
            .filter(repository=repository, pr_number=number)
            .order_by("position")
            .first()
        )
        if commit is None and pull is None:
            return None
        if commit is not None and pull is None:
            pull = PullRequest(
                repository=repository,
                number=number,
                title=subject_title(subject=commit.subject),
                author=commit.author_name,
                state=PullRequestState.MERGED,
                merged_at=commit.committed_at,
                merge_commit_sha=commit.sha,
                merge_commit=commit,
            )
    assert pull is not None
    issues = tuple(
        TrackingIssue.objects.filter(items__pull_request__pk=pull.pk)
        .select_related("repository")
        .order_by("repository__full_name", "number")
        if pull.pk
        else ()
    )
    revert = (
        CommitRevert.objects.filter(commit=pull.merge_commit)
        .values_list("reverted_pr_number", flat=True)
        .first()
        if pull.merge_commit
        else None
    )
    return PullDetail(
        pull=pull,
        tracking_issues=issues,
        reverted_by=_reverts_of(repository_ids={repository.pk}, numbers=[number]).get(
            (repository.pk, number)
        ),
        reverts_pr_number=revert,
        impacts=pull_impacts_stored(pulls=[pull]).get(pull_key(pull), ()),
    )


def release_tags() -> list[Tag]:
    """Release tags on main, newest first: the usual bases of a comparison."""
    tags = (
        Tag.objects.filter(commit__isnull=False)
        .select_related("commit")
        .order_by("-commit__position", "-name")
    )
    return [tag for tag in tags if tag.is_release]


def commit_sync_state(*, repository: Repository | None = None) -> CommitSyncState | None:
    repository = repository or repository_default_find()
    return CommitSyncState.objects.filter(repository=repository).first() if repository else None


def commit_sync_failing() -> CommitSyncState | None:
    """The configured repository's sync state while its last sync failed; None when it is fine. One query,
    no write (a read of a page never creates the repository row)."""
    return (
        CommitSyncState.objects.filter(repository__full_name=settings.PERFWATCH_GITHUB_REPOSITORY)
        .exclude(error="")
        .first()
    )
