import itertools
import socket
import threading
from datetime import UTC, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from dashboard.benchmarks.subjects import subject_pr_number, subject_reverted_pr
from dashboard.github.client import (
    ApiCommit,
    CommitsResponse,
    GitHubClient,
    GitHubError,
    IssueResponse,
    NotFound,
    NotModified,
    PullInfo,
    RateLimited,
    RateLimitStatus,
)
from dashboard.github.tracking import InvalidRepositoryName, tracking_issue_parse
from tests.github.recorded_github import FIXTURES, FakeGitHubRecordedServer

VLLM = "vllm-project/vllm"
ISSUE_ETAG = 'W/"8f2a6c1e9b3d7f05a4c2e8b6d0f1a3c5e7b9d1f3a5c7e9b1d3f5a7c9e1b3d5f7"'
COMMITS_ETAG = 'W/"3e5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3c5e7b9d1f3a5c7e9b1d3f5a"'


def client_for(server: FakeGitHubRecordedServer, token: str | None = "ghp_recordedTestToken") -> GitHubClient:
    return GitHubClient(token=token, base_url=server.base_url, timeout_s=5)


def test_issue_get_returns_the_tracking_issue_and_its_etag():
    with FakeGitHubRecordedServer("recorded-issue-50587.json") as server:
        issue = client_for(server).issue_get(repo=VLLM, number=50587)

    assert isinstance(issue, IssueResponse)
    assert (issue.repo, issue.number, issue.state, issue.author) == (VLLM, 50587, "open", "heheda12345")
    assert issue.title == "[RFC][Tracking]: Kimi K3 Performance Optimization"
    assert issue.html_url == "https://github.com/vllm-project/vllm/issues/50587"
    assert issue.updated_at == datetime(2026, 9, 13, 18, 2, 51, tzinfo=UTC)
    assert issue.etag == ISSUE_ETAG


def test_recorded_issue_body_parses_to_the_kimi_k3_prs():
    with FakeGitHubRecordedServer("recorded-issue-50587.json") as server:
        issue = client_for(server).issue_get(repo=VLLM, number=50587)

    assert isinstance(issue, IssueResponse)
    assert "\r\n" in issue.body
    markdown = (FIXTURES / "kimi-k3-tracking-issue.md").read_text()
    references = tracking_issue_parse(body=issue.body, repo=VLLM)
    assert references == tracking_issue_parse(body=markdown, repo=VLLM)
    assert [ref.number for ref in references][:3] == [49870, 50383, 51146]


def test_requests_carry_the_api_version_user_agent_and_token():
    with FakeGitHubRecordedServer("recorded-issue-50587.json") as server:
        client_for(server).issue_get(repo=VLLM, number=50587)

    (request,) = server.received
    assert request.path == "/repos/vllm-project/vllm/issues/50587"
    assert request.headers["accept"] == "application/vnd.github+json"
    assert request.headers["x-github-api-version"] == "2022-11-28"
    assert request.headers["user-agent"] == "perfwatch"
    assert request.headers["authorization"] == "Bearer ghp_recordedTestToken"
    assert "if-none-match" not in request.headers


def test_anonymous_client_sends_no_authorization():
    with FakeGitHubRecordedServer("recorded-issue-50587.json") as server:
        client_for(server, token=None).issue_get(repo=VLLM, number=50587)

    assert "authorization" not in server.received[0].headers


def test_issue_with_matching_etag_is_not_modified():
    with FakeGitHubRecordedServer(
        "recorded-issue-50587.json", "recorded-issue-50587-not-modified.json"
    ) as server:
        result = client_for(server).issue_get(repo=VLLM, number=50587, etag=ISSUE_ETAG)

    assert result == NotModified(etag=ISSUE_ETAG)
    assert server.received[0].headers["if-none-match"] == ISSUE_ETAG


def test_issue_with_a_stale_etag_is_fetched_again():
    with FakeGitHubRecordedServer(
        "recorded-issue-50587.json", "recorded-issue-50587-not-modified.json"
    ) as server:
        result = client_for(server).issue_get(repo=VLLM, number=50587, etag='W/"stale"')

    assert isinstance(result, IssueResponse)
    assert result.etag == ISSUE_ETAG


def test_client_remembers_the_latest_rate_limit_headers():
    with FakeGitHubRecordedServer("recorded-issue-50587.json") as server:
        client = client_for(server)
        client.issue_get(repo=VLLM, number=50587)

    assert client.rate_limit == RateLimitStatus(
        limit=5000, remaining=4987, reset_at=datetime(2026, 9, 14, 10, 0, tzinfo=UTC), resource="core"
    )


def test_spent_primary_rate_limit_raises_with_the_reset_time():
    with FakeGitHubRecordedServer("recorded-issue-50587-rate-limited.json") as server:
        client = client_for(server, token=None)
        with pytest.raises(RateLimited) as raised:
            client.issue_get(repo=VLLM, number=50587)

    assert raised.value.status == 403
    assert raised.value.reset_at == datetime(2026, 9, 14, 10, 41, 7, tzinfo=UTC)
    assert "API rate limit exceeded" in str(raised.value)
    assert "rate limited until 2026-09-14 10:41:07 UTC" in str(raised.value)
    assert client.rate_limit is not None and client.rate_limit.remaining == 0


@pytest.mark.parametrize(
    ("recording", "status", "wait_s"),
    [
        ("recorded-issue-50587-secondary-rate-limit.json", 403, 60),
        ("recorded-pull-50383-too-many-requests.json", 429, 30),
    ],
)
def test_secondary_rate_limit_raises_with_retry_after(recording: str, status: int, wait_s: int):
    with FakeGitHubRecordedServer(recording) as server:
        client = client_for(server)
        before = datetime.now(tz=UTC)
        with pytest.raises(RateLimited) as raised:
            if status == 403:
                client.issue_get(repo=VLLM, number=50587)
            else:
                client.pull_get(repo=VLLM, number=50383)
        after = datetime.now(tz=UTC)

    assert raised.value.status == status
    assert before + timedelta(seconds=wait_s) <= raised.value.reset_at <= after + timedelta(seconds=wait_s)
    assert "secondary rate limit" in str(raised.value)


def test_missing_issue_is_not_found():
    with (
        FakeGitHubRecordedServer("recorded-issue-99999999-not-found.json") as server,
        pytest.raises(NotFound, match=r"GitHub answered 404 for .*/issues/99999999: Not Found"),
    ):
        client_for(server).issue_get(repo=VLLM, number=99999999)


def test_bad_credentials_is_a_github_error_not_a_rate_limit():
    with (
        FakeGitHubRecordedServer("recorded-issue-50587-bad-credentials.json") as server,
        pytest.raises(GitHubError, match=r"GitHub answered 401 .*: Bad credentials") as raised,
    ):
        client_for(server, token="ghp_revoked").issue_get(repo=VLLM, number=50587)

    assert not isinstance(raised.value, RateLimited)
    assert raised.value.status == 401


def test_server_error_with_an_html_page_is_a_github_error():
    with (
        FakeGitHubRecordedServer("recorded-pull-50383-server-error.json") as server,
        pytest.raises(GitHubError, match=r"GitHub answered 502 for .*/pulls/50383: HTTP 502"),
    ):
        client_for(server).pull_get(repo=VLLM, number=50383)


def test_merged_pull_has_its_merge_commit():
    with FakeGitHubRecordedServer("recorded-pull-50383.json") as server:
        pull = client_for(server).pull_get(repo=VLLM, number=50383)

    assert pull == PullInfo(
        number=50383,
        title="[Perf] Adaptive scheduler token budget for Kimi K3",
        author="WoosukKwon",
        state="closed",
        merged=True,
        merge_commit_sha="7c50debc32cc0c35db4ff72516224142ba9d0dd7",
        merged_at=datetime(2026, 8, 4, 0, 40, 5, tzinfo=UTC),
        html_url="https://github.com/vllm-project/vllm/pull/50383",
        updated_at=datetime(2026, 8, 4, 0, 40, 9, tzinfo=UTC),
    )


def test_open_pull_has_no_merge_commit_though_github_names_a_test_merge():
    with FakeGitHubRecordedServer("recorded-pull-52388.json") as server:
        pull = client_for(server).pull_get(repo=VLLM, number=52388)

    assert server.recordings[0]["response"]["body"]["merge_commit_sha"]
    assert (pull.state, pull.merged, pull.merge_commit_sha, pull.merged_at) == ("open", False, None, None)
    assert pull.author == "heheda12345"


def test_commits_list_follows_the_link_header_and_returns_oldest_first():
    with FakeGitHubRecordedServer(
        "recorded-commits-main-page-1.json", "recorded-commits-main-page-2.json"
    ) as server:
        result = client_for(server).commits_list(
            repo=VLLM, sha="main", since=datetime(2026, 8, 1, tzinfo=UTC), per_page=3
        )

    assert isinstance(result, CommitsResponse)
    assert [subject_pr_number(subject=c.subject) for c in result.commits] == [
        50383,
        50484,
        50512,
        50601,
        52789,
    ]
    assert all(commit.parents == (previous.sha,) for previous, commit in itertools.pairwise(result.commits))
    assert result.etag == COMMITS_ETAG
    assert [request.path for request in server.received] == [
        "/repos/vllm-project/vllm/commits",
        "/repositories/599547518/commits",
    ]
    assert server.received[0].query == {"sha": "main", "since": "2026-08-01T00:00:00Z", "per_page": "3"}
    assert server.received[1].headers["authorization"] == "Bearer ghp_recordedTestToken"


def test_listed_commit_carries_author_times_and_message():
    since_in_berlin = datetime(2026, 8, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    with FakeGitHubRecordedServer(
        "recorded-commits-main-page-1.json", "recorded-commits-main-page-2.json"
    ) as server:
        result = client_for(server).commits_list(repo=VLLM, sha="main", since=since_in_berlin, per_page=3)

    assert isinstance(result, CommitsResponse)
    revert = result.commits[3]
    assert isinstance(revert, ApiCommit)
    assert revert.subject == 'Revert "[Perf] Zero-copy mixed prefill/decode batches (#50484)" (#50601)'
    assert subject_reverted_pr(subject=revert.subject, body=revert.body) == 50484
    assert revert.body.startswith("This reverts commit ")
    assert (revert.author_name, revert.author_email, revert.author_login) == (
        "Kaichao You",
        "youkaichao@example.com",
        "youkaichao",
    )
    assert revert.authored_at == revert.committed_at == datetime(2026, 8, 6, 8, 0, tzinfo=UTC)
    assert revert.html_url == f"https://github.com/vllm-project/vllm/commit/{revert.sha}"


def test_commits_list_with_matching_etag_is_not_modified_and_fetches_one_page():
    with FakeGitHubRecordedServer(
        "recorded-commits-main-page-1.json",
        "recorded-commits-main-page-2.json",
        "recorded-commits-main-not-modified.json",
    ) as server:
        result = client_for(server).commits_list(
            repo=VLLM, sha="main", since=datetime(2026, 8, 1, tzinfo=UTC), etag=COMMITS_ETAG, per_page=3
        )

    assert result == NotModified(etag=COMMITS_ETAG)
    assert len(server.received) == 1


def test_commits_list_stops_at_max_pages():
    with (
        FakeGitHubRecordedServer(
            "recorded-commits-main-page-1.json", "recorded-commits-main-page-2.json"
        ) as server,
        pytest.raises(GitHubError, match=r"more than 1 pages of commits on main"),
    ):
        client_for(server).commits_list(
            repo=VLLM, sha="main", since=datetime(2026, 8, 1, tzinfo=UTC), per_page=3, max_pages=1
        )


def test_repository_that_is_not_owner_slash_name_is_refused_before_any_request():
    with (
        FakeGitHubRecordedServer("recorded-issue-50587.json") as server,
        pytest.raises(InvalidRepositoryName),
    ):
        client_for(server).issue_get(repo="../../user", number=1)

    assert server.received == []


def test_renamed_repository_redirect_is_followed_with_the_token():
    with FakeGitHubRecordedServer(
        "recorded-issue-50587-renamed-repository.json", "recorded-repository-599547518-issue-50587.json"
    ) as server:
        issue = client_for(server).issue_get(repo="WoosukKwon/cacheflow", number=50587)

    assert isinstance(issue, IssueResponse)
    assert issue.title == "[RFC][Tracking]: Kimi K3 Performance Optimization"
    assert [request.path for request in server.received] == [
        "/repos/WoosukKwon/cacheflow/issues/50587",
        "/repositories/599547518/issues/50587",
    ]
    assert server.received[1].headers["authorization"] == "Bearer ghp_recordedTestToken"


class RedirectToAnotherHostHandler(BaseHTTPRequestHandler):
    """Not GitHub: a server that redirects off its own host, to check the token does not follow."""

    received_on_other_host: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        if self.headers["Host"].startswith("localhost"):
            self.received_on_other_host.append(self.headers.get("Authorization", ""))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")
            return
        self.send_response(301)
        port = self.headers["Host"].rsplit(":", 1)[1]
        self.send_header("Location", f"http://localhost:{port}{self.path}")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


def test_redirect_to_another_host_is_refused_and_the_token_stays_home():
    server = ThreadingHTTPServer(("127.0.0.1", 0), RedirectToAnotherHostHandler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    client = GitHubClient(token="ghp_secret", base_url=f"http://127.0.0.1:{server.server_address[1]}")
    try:
        with pytest.raises(GitHubError, match=r"redirected .* to another host: http://localhost:"):
            client.issue_get(repo=VLLM, number=50587)
    finally:
        server.shutdown()
        server.server_close()

    assert RedirectToAnotherHostHandler.received_on_other_host == []


def test_unreachable_github_is_a_github_error():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    client = GitHubClient(token=None, base_url=f"http://127.0.0.1:{port}", timeout_s=5)

    with pytest.raises(GitHubError, match=r"GitHub could not be reached at http://127.0.0.1:"):
        client.issue_get(repo=VLLM, number=50587)


def test_github_that_does_not_answer_times_out(silent_server_port: int):
    client = GitHubClient(token=None, base_url=f"http://127.0.0.1:{silent_server_port}", timeout_s=0.5)
    started = datetime.now(tz=UTC)

    with pytest.raises(GitHubError, match=r"GitHub could not be reached.*timed out"):
        client.issue_get(repo=VLLM, number=50587)

    assert datetime.now(tz=UTC) - started < timedelta(seconds=5)
