"""Reads: what the header's search box finds. A PR number, a sha prefix, a suite's name or words of a
PR title or commit subject; an exact hit is one step away, anything else a short list."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import reduce
from operator import and_

from django.db.models import Q

from dashboard.benchmarks.models import Commit, Suite
from dashboard.github.models import PullRequest

MAX_HITS = 20
MAX_QUERY_CHARS = 200
_PR_NUMBER = re.compile(r"^(?:pr\s*)?#?(\d{1,7})$", re.IGNORECASE)
_SHA_PREFIX = re.compile(r"^[0-9a-f]{4,40}$", re.IGNORECASE)


@dataclass(frozen=True)
class SearchResults:
    query: str
    pulls: tuple[PullRequest, ...]
    commits: tuple[Commit, ...]
    suites: tuple[Suite, ...]
    # Where the query leads on its own: a PR by number, a commit by a unique prefix, a suite by name.
    exact_path: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.pulls or self.commits or self.suites)


def search(*, query: str) -> SearchResults:
    """Everything `query` names: PRs (by number or title words), commits (sha prefix or subject words)
    and suites (name). Five queries at most."""
    query = " ".join(query.replace("\x00", "").split())[:MAX_QUERY_CHARS]
    if not query:
        return SearchResults(query="", pulls=(), commits=(), suites=())
    words = query.split()
    exact_path = None
    pulls: list[PullRequest] = []
    commits: list[Commit] = []

    number = _PR_NUMBER.match(query)
    if number:
        pr_number = int(number.group(1))
        pulls = list(PullRequest.objects.filter(number=pr_number)[:1])
        if pulls or Commit.objects.filter(pr_number=pr_number).exists():
            exact_path = f"/prs/{pr_number}/"
    if _SHA_PREFIX.match(query):
        by_sha = list(Commit.objects.filter(sha__startswith=query.lower()).order_by("-position")[:MAX_HITS])
        commits += by_sha
        if len(by_sha) == 1 and exact_path is None:
            exact_path = f"/commits/{by_sha[0].sha}/"
    suites = list(
        Suite.objects.filter(reduce(and_, (Q(name__icontains=word) for word in words))).order_by("name")
    )
    exact_suite = next((suite for suite in suites if suite.name == query.lower()), None)
    if exact_suite is not None and exact_path is None:
        exact_path = f"/suites/{exact_suite.name}/"
    if not number:
        pulls += list(
            PullRequest.objects.filter(reduce(and_, (Q(title__icontains=word) for word in words)))
            .select_related("merge_commit")
            .order_by("-number")[:MAX_HITS]
        )
        seen = {commit.pk for commit in commits}
        commits += [
            commit
            for commit in Commit.objects.filter(
                reduce(and_, (Q(subject__icontains=word) for word in words))
            ).order_by("-position")[:MAX_HITS]
            if commit.pk not in seen
        ]
    return SearchResults(
        query=query,
        pulls=tuple(pulls),
        commits=tuple(commits[:MAX_HITS]),
        suites=tuple(suites),
        exact_path=exact_path,
    )
