"""A small client for the parts of GitHub's REST API that PerfWatch reads. Pure: no Django, stdlib only.

Conditional requests (ETag / If-None-Match) make re-syncing an unchanged tracking issue free: GitHub
answers 304 and, for authenticated requests, does not count it against the rate limit. Rate limits are
raised as RateLimited with the moment they lift, so callers can wait and say so on the page.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.client import HTTPMessage
from typing import Any

from dashboard.benchmarks.subjects import message_split
from dashboard.github.tracking import repository_validate

API_VERSION = "2022-11-28"
USER_AGENT = "perfwatch"
# GitHub asks clients hit by a secondary rate limit without retry-after to wait at least a minute.
SECONDARY_RATE_LIMIT_WAIT = timedelta(minutes=1)
_LINK_NEXT = re.compile(r'<(?P<url>[^>]+)>\s*;\s*rel="?next"?')


class GitHubError(Exception):
    """GitHub answered with an error or could not be reached; the message says which and why."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(GitHubError):
    """The repository, issue or PR does not exist or the token may not see it."""


class RateLimited(GitHubError):
    """GitHub refuses requests until ``reset_at`` (timezone-aware UTC)."""

    def __init__(self, message: str, *, status: int, reset_at: datetime) -> None:
        super().__init__(message, status=status)
        self.reset_at = reset_at


@dataclass(frozen=True)
class NotModified:
    """The resource is unchanged since the response that carried ``etag``."""

    etag: str


@dataclass(frozen=True)
class IssueResponse:
    """A tracking issue as GitHub returned it; ``etag`` is what to send next time."""

    repo: str
    number: int
    title: str
    body: str
    state: str
    author: str
    html_url: str
    updated_at: datetime
    etag: str | None


@dataclass(frozen=True)
class PullInfo:
    """A PR. ``merge_commit_sha`` and ``merged_at`` are None unless it was merged.

    (Before a merge GitHub fills ``merge_commit_sha`` with a throw-away test merge; it names no commit on
    main, so it is not kept.)
    """

    number: int
    title: str
    author: str
    state: str
    merged: bool
    merge_commit_sha: str | None
    merged_at: datetime | None
    html_url: str
    updated_at: datetime | None = None  # orders two answers about the same PR


@dataclass(frozen=True)
class ApiCommit:
    """A commit from the REST commit list; the list does not say which files a commit touched."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    author_login: str | None
    authored_at: datetime
    committed_at: datetime
    subject: str
    body: str
    html_url: str


@dataclass(frozen=True)
class CommitsResponse:
    """Commits oldest to newest, and the ETag of the first page to send next time."""

    commits: tuple[ApiCommit, ...]
    etag: str | None


@dataclass(frozen=True)
class RateLimitStatus:
    """The rate-limit headers of the latest response."""

    limit: int
    remaining: int
    reset_at: datetime
    resource: str


@dataclass(frozen=True)
class _Response:
    status: int
    headers: HTTPMessage
    payload: Any


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow GitHub's redirects for renamed repositories, but never carry the token to another host."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if _origin(newurl) != _origin(req.full_url):
            raise GitHubError(f"GitHub redirected {req.full_url} to another host: {newurl}", status=code)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class GitHubClient:
    """GitHub's REST API at ``base_url``; anonymous when ``token`` is None (60 requests an hour)."""

    def __init__(
        self, *, token: str | None, base_url: str = "https://api.github.com", timeout_s: float = 10
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.rate_limit: RateLimitStatus | None = None
        self._token = token
        self._opener = urllib.request.build_opener(_SameOriginRedirects())

    def issue_get(self, *, repo: str, number: int, etag: str | None = None) -> IssueResponse | NotModified:
        """The issue's title and body, or NotModified when ``etag`` still matches."""
        response = self._get(f"/repos/{repository_validate(repo=repo)}/issues/{number}", etag=etag)
        if response.status == 304:
            return NotModified(etag=response.headers.get("ETag") or etag or "")
        issue = response.payload
        return IssueResponse(
            repo=repo,
            number=issue["number"],
            title=issue["title"],
            # GitHub stores what the web editor sends, CRLF line ends included; the parser reads both.
            body=issue.get("body") or "",
            state=issue["state"],
            author=_login(issue.get("user")),
            html_url=issue["html_url"],
            updated_at=_timestamp(issue["updated_at"]),
            etag=response.headers.get("ETag"),
        )

    def pull_get(self, *, repo: str, number: int) -> PullInfo:
        """One PR, with its merge commit if it was merged."""
        pull = self._get(f"/repos/{repository_validate(repo=repo)}/pulls/{number}", etag=None).payload
        merged = bool(pull.get("merged")) or pull.get("merged_at") is not None
        return PullInfo(
            number=pull["number"],
            title=pull["title"],
            author=_login(pull.get("user")),
            state=pull["state"],
            merged=merged,
            merge_commit_sha=pull.get("merge_commit_sha") if merged else None,
            merged_at=_timestamp(pull["merged_at"]) if merged and pull.get("merged_at") else None,
            html_url=pull["html_url"],
            updated_at=_timestamp(pull["updated_at"]) if pull.get("updated_at") else None,
        )

    def commits_list(
        self,
        *,
        repo: str,
        sha: str = "main",
        since: datetime | None = None,
        etag: str | None = None,
        per_page: int = 100,
        max_pages: int = 20,
    ) -> CommitsResponse | NotModified:
        """Commits reachable from ``sha`` (committed after ``since`` if given), following ``Link: next``.

        ``etag`` applies to the first page: if it still matches, nothing new was committed. Stops with a
        GitHubError after ``max_pages`` rather than walking a whole history by accident.
        """
        query = {"sha": sha, "per_page": str(per_page)}
        if since is not None:
            query["since"] = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        url = f"/repos/{repository_validate(repo=repo)}/commits?{urllib.parse.urlencode(query)}"
        first = self._get(url, etag=etag)
        if first.status == 304:
            return NotModified(etag=first.headers.get("ETag") or etag or "")
        newest_first = [_api_commit(item) for item in first.payload]
        next_url = self._next_page(first.headers)
        pages = 1
        while next_url is not None:
            if pages == max_pages:
                raise GitHubError(
                    f"{repo} has more than {max_pages} pages of commits on {sha}; narrow it with since"
                )
            response = self._get(next_url, etag=None)
            newest_first.extend(_api_commit(item) for item in response.payload)
            next_url = self._next_page(response.headers)
            pages += 1
        # GitHub lists newest first; the mirror and the timelines go oldest first.
        return CommitsResponse(commits=tuple(reversed(newest_first)), etag=first.headers.get("ETag"))

    def issue_comments_find(self, *, repo: str, number: int, marker: str, max_pages: int = 20) -> str | None:
        """The URL of the first comment on issue or PR ``number`` whose body holds ``marker``, or None."""
        url: str | None = f"/repos/{repository_validate(repo=repo)}/issues/{number}/comments?per_page=100"
        for _ in range(max_pages):
            if url is None:
                return None
            response = self._get(url, etag=None)
            for comment in response.payload:
                if marker in (comment.get("body") or ""):
                    return str(comment.get("html_url") or "")
            url = self._next_page(response.headers)
        raise GitHubError(f"{repo}#{number} has more than {max_pages} pages of comments")

    def issue_comment_create(self, *, repo: str, number: int, body: str) -> str:
        """Comment on issue or PR ``number``; return the new comment's URL."""
        path = f"/repos/{repository_validate(repo=repo)}/issues/{number}/comments"
        return str(self._request("POST", path, body={"body": body}).payload.get("html_url") or "")

    def _next_page(self, headers: HTTPMessage) -> str | None:
        match = _LINK_NEXT.search(headers.get("Link") or "")
        if match is None:
            return None
        url = match.group("url")
        if _origin(url) != _origin(self.base_url):
            raise GitHubError(f"GitHub's next page is on another host: {url}")
        return url

    def _get(self, path_or_url: str, *, etag: str | None) -> _Response:
        return self._request("GET", path_or_url, etag=etag)

    def _request(
        self, method: str, path_or_url: str, *, etag: str | None = None, body: dict[str, Any] | None = None
    ) -> _Response:
        url = path_or_url if "://" in path_or_url else self.base_url + path_or_url
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": USER_AGENT,
        }
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        if etag:
            headers["If-None-Match"] = etag
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                status, response_headers, raw = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            status, response_headers = error.code, error.headers
            try:
                raw = error.read()
            except OSError:
                raw = b""
            finally:
                error.close()
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise GitHubError(f"GitHub could not be reached at {url}: {reason}") from error
        self._rate_limit_note(response_headers)
        if status == 304:
            return _Response(status=status, headers=response_headers, payload=None)
        if status >= 400:
            raise self._error(status=status, headers=response_headers, raw=raw, url=url)
        try:
            payload = json.loads(raw)
        except ValueError as error:
            raise GitHubError(f"GitHub sent {status} with a body that is not JSON from {url}") from error
        return _Response(status=status, headers=response_headers, payload=payload)

    def _rate_limit_note(self, headers: HTTPMessage) -> None:
        try:
            self.rate_limit = RateLimitStatus(
                limit=int(headers["X-RateLimit-Limit"]),
                remaining=int(headers["X-RateLimit-Remaining"]),
                reset_at=datetime.fromtimestamp(int(headers["X-RateLimit-Reset"]), tz=UTC),
                resource=headers.get("X-RateLimit-Resource") or "core",
            )
        except (TypeError, ValueError):
            # Not every answer carries the headers (a proxy's error page); keep what was known.
            return

    def _error(self, *, status: int, headers: HTTPMessage, raw: bytes, url: str) -> GitHubError:
        message = _error_message(raw) or f"HTTP {status}"
        described = f"GitHub answered {status} for {url}: {message}"
        if status in (403, 429):
            reset_at = _rate_limit_reset(headers=headers, message=message)
            if reset_at is not None:
                lifts = reset_at.strftime("%Y-%m-%d %H:%M:%S UTC")
                return RateLimited(
                    f"{described} (rate limited until {lifts})", status=status, reset_at=reset_at
                )
        if status == 404:
            return NotFound(described, status=status)
        return GitHubError(described, status=status)


def _rate_limit_reset(*, headers: HTTPMessage, message: str) -> datetime | None:
    """When a 403/429 is a rate limit, the moment it lifts; None when it is an ordinary refusal."""
    now = datetime.now(tz=UTC)
    retry_after = headers.get("Retry-After")
    if retry_after is not None and retry_after.strip().isdigit():
        return now + timedelta(seconds=int(retry_after))
    if headers.get("X-RateLimit-Remaining") == "0":
        reset = headers.get("X-RateLimit-Reset")
        if reset is not None and reset.strip().isdigit():
            return datetime.fromtimestamp(int(reset), tz=UTC)
        return now + SECONDARY_RATE_LIMIT_WAIT
    if "rate limit" in message.lower():
        return now + SECONDARY_RATE_LIMIT_WAIT
    return None


def _error_message(raw: bytes) -> str:
    try:
        payload = json.loads(raw)
    except ValueError:
        return ""
    return str(payload.get("message", "")) if isinstance(payload, dict) else ""


def _api_commit(item: dict[str, Any]) -> ApiCommit:
    commit = item["commit"]
    subject, body = message_split(message=commit["message"])
    return ApiCommit(
        sha=item["sha"],
        parents=tuple(parent["sha"] for parent in item.get("parents", [])),
        author_name=commit["author"]["name"],
        author_email=commit["author"]["email"],
        author_login=(item.get("author") or {}).get("login"),
        authored_at=_timestamp(commit["author"]["date"]),
        committed_at=_timestamp(commit["committer"]["date"]),
        subject=subject,
        body=body,
        html_url=item["html_url"],
    )


def _login(user: dict[str, Any] | None) -> str:
    # GitHub shows a deleted account as "ghost".
    return str(user["login"]) if user else "ghost"


def _timestamp(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc
