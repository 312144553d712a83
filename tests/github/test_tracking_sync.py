"""Tracking issues: configured by command or admin, read from GitHub (as recorded) with ETags and rate
limits, their PRs listed in body order and mapped to merge commits on main."""

from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from dashboard.benchmarks.models import Repository
from dashboard.github.client import GitHubClient
from dashboard.github.models import PullRequest, PullRequestState, TrackingIssue, TrackingIssueItem
from dashboard.github.tracking import tracking_issue_parse
from dashboard.github.tracking_issues import (
    tracking_issue_add,
    tracking_issue_items_apply,
    tracking_issue_sync,
)
from tests.factories import CommitFactory
from tests.github.recorded_github import FIXTURES, FakeGitHubRecordedServer

pytestmark = pytest.mark.django_db

VLLM = "vllm-project/vllm"
ISSUE_ETAG = 'W/"8f2a6c1e9b3d7f05a4c2e8b6d0f1a3c5e7b9d1f3a5c7e9b1d3f5a7c9e1b3d5f7"'
ISSUE_50587 = "recorded-issue-50587.json"
PULLS = ("recorded-pull-50383.json", "recorded-pull-50484.json", "recorded-pull-52388.json")


def client_for(server: FakeGitHubRecordedServer) -> GitHubClient:
    return GitHubClient(token="ghp_recordedTestToken", base_url=server.base_url, timeout_s=5)


def item_numbers(issue: TrackingIssue) -> list[tuple[str, int, bool | None]]:
    return [
        (item.pull_request.repository.full_name, item.pull_request.number, item.checked)
        for item in issue.items.select_related("pull_request__repository").order_by("order")
    ]


@pytest.fixture
def issue() -> TrackingIssue:
    return tracking_issue_add(repo=VLLM, number=50587)


def test_sync_lists_the_prs_of_the_body_in_order_with_their_checked_state(issue):
    with FakeGitHubRecordedServer(ISSUE_50587, *PULLS) as server:
        outcome = tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))

    issue.refresh_from_db()
    assert issue.title == "[RFC][Tracking]: Kimi K3 Performance Optimization"
    assert (issue.etag, issue.state, outcome.body_changed, outcome.error) == (ISSUE_ETAG, "open", True, "")
    expected = tracking_issue_parse(body=issue.body, repo=VLLM)
    assert item_numbers(issue) == [(ref.repo, ref.number, ref.checked) for ref in expected]
    assert ("vllm-project/vllm", 50383, True) in item_numbers(issue)
    assert ("vllm-project/vllm", 52388, False) in item_numbers(issue)
    assert 50611 not in [number for _, number, _ in item_numbers(issue)]  # struck out in the body


def test_a_pr_in_another_repository_is_kept_apart_and_never_asked_for(issue):
    with FakeGitHubRecordedServer(ISSUE_50587, *PULLS) as server:
        tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))

    external = PullRequest.objects.get(repository__full_name="flashinfer-ai/flashinfer")
    assert (external.number, external.state, external.merge_commit) == (2087, PullRequestState.UNKNOWN, None)
    assert not any("flashinfer" in request.path for request in server.received)


def test_merged_pr_is_mapped_to_its_merge_commit_as_github_reports_it(issue):
    merge = CommitFactory(sha="7c50debc32cc0c35db4ff72516224142ba9d0dd7", subject="squashed (#50383)")

    with FakeGitHubRecordedServer(ISSUE_50587, *PULLS) as server:
        tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))

    pull = PullRequest.objects.get(number=50383)
    assert (pull.state, pull.merge_commit, pull.author) == (PullRequestState.MERGED, merge, "WoosukKwon")
    assert pull.title == "[Perf] Adaptive scheduler token budget for Kimi K3"
    assert pull.merged_at == datetime(2026, 8, 4, 0, 40, 5, tzinfo=UTC)
    assert pull.html_url == "https://github.com/vllm-project/vllm/pull/50383"


def test_merged_pr_whose_commit_is_not_synced_yet_is_linked_by_the_next_commit_sync(issue):
    with FakeGitHubRecordedServer(ISSUE_50587, *PULLS) as server:
        tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))
    pull = PullRequest.objects.get(number=50484)
    assert (pull.state, pull.merge_commit_sha, pull.merge_commit) == (
        PullRequestState.MERGED,
        "12db81c9e279a2fadffe3b0e6deb9573bfaab077",
        None,
    )

    merge = CommitFactory(sha="12db81c9e279a2fadffe3b0e6deb9573bfaab077")
    tracking_issue_sync(tracking_issue_id=issue.pk, client=None)

    pull.refresh_from_db()
    assert pull.merge_commit == merge


def test_open_pr_has_no_merge_commit(issue):
    CommitFactory(sha="baab8b4001ebf330d8716330f8e014f770393fce")  # GitHub's test merge: not on main

    with FakeGitHubRecordedServer(ISSUE_50587, *PULLS) as server:
        tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))

    pull = PullRequest.objects.get(number=52388)
    assert (pull.state, pull.merge_commit, pull.merge_commit_sha) == (PullRequestState.OPEN, None, "")
    assert pull.author == "heheda12345"


def test_without_an_api_answer_a_pr_is_mapped_by_the_pr_number_of_a_commit_on_main(issue):
    merge = CommitFactory(subject="[Perf] In-prefill KDA prefix checkpoints (#51311)", pr_number=51311)

    with FakeGitHubRecordedServer(ISSUE_50587, *PULLS) as server:
        tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))

    pull = PullRequest.objects.get(number=51311)
    assert (pull.state, pull.merge_commit) == (PullRequestState.MERGED, merge)
    assert pull.title == "[Perf] In-prefill KDA prefix checkpoints"


def test_a_second_sync_sends_the_etag_and_304_asks_nothing_more(issue):
    with FakeGitHubRecordedServer(ISSUE_50587, "recorded-issue-50587-not-modified.json", *PULLS) as server:
        client = client_for(server)
        tracking_issue_sync(tracking_issue_id=issue.pk, client=client)
        items_before = list(TrackingIssueItem.objects.values_list("pull_request__number", "checked", "order"))
        requests_before = len(server.received)

        outcome = tracking_issue_sync(tracking_issue_id=issue.pk, client=client)

    assert server.received[requests_before].headers["if-none-match"] == ISSUE_ETAG
    assert not outcome.body_changed
    # Merged PRs are final and were not asked again; the open one and unanswered ones were.
    asked_again = {request.path for request in server.received[requests_before + 1 :]}
    assert "/repos/vllm-project/vllm/pulls/50383" not in asked_again
    assert "/repos/vllm-project/vllm/pulls/52388" in asked_again
    assert (
        list(TrackingIssueItem.objects.values_list("pull_request__number", "checked", "order"))
        == items_before
    )


def test_the_rate_limit_is_recorded_with_the_moment_it_lifts(issue):
    with FakeGitHubRecordedServer("recorded-issue-50587-rate-limited.json") as server:
        outcome = tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))

    issue.refresh_from_db()
    assert outcome.rate_limited_until == datetime.fromtimestamp(1789382467, tz=UTC)
    assert issue.rate_limited_until == outcome.rate_limited_until
    assert "API rate limit exceeded" in issue.sync_error
    assert issue.rate_limit_remaining == 0


def test_no_request_is_made_while_a_rate_limit_holds(issue):
    with FakeGitHubRecordedServer("recorded-issue-50587-secondary-rate-limit.json") as server:
        tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))
        requests_before = len(server.received)

        outcome = tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))

    assert len(server.received) == requests_before == 1
    assert outcome.rate_limited_until is not None and outcome.rate_limited_until > timezone.now()


def test_the_quota_left_is_kept_for_the_page(issue):
    with FakeGitHubRecordedServer(ISSUE_50587, *PULLS) as server:
        tracking_issue_sync(tracking_issue_id=issue.pk, client=client_for(server))

    issue.refresh_from_db()
    assert issue.rate_limit_limit == 5000
    assert issue.rate_limit_remaining is not None and issue.rate_limit_remaining < 4987
    assert issue.rate_limit_reset_at == datetime.fromtimestamp(1789380000, tz=UTC)


def test_an_issue_that_does_not_exist_is_an_error_on_the_issue_not_a_crash():
    missing = tracking_issue_add(repo=VLLM, number=99999999)

    with FakeGitHubRecordedServer("recorded-issue-99999999-not-found.json") as server:
        outcome = tracking_issue_sync(tracking_issue_id=missing.pk, client=client_for(server))

    missing.refresh_from_db()
    assert "404" in outcome.error and missing.sync_error == outcome.error
    assert missing.items.count() == 0


def test_a_struck_out_pr_is_dropped_and_the_rest_keep_their_order(issue):
    tracking_issue_items_apply(
        tracking_issue=issue,
        references=tracking_issue_parse(body="- [x] #101\n- [ ] #102\n- [ ] #103", repo=VLLM),
    )

    tracking_issue_items_apply(
        tracking_issue=issue,
        references=tracking_issue_parse(body="- [x] #101\n- [ ] ~~#102~~\n- [x] #103", repo=VLLM),
    )

    assert item_numbers(issue) == [(VLLM, 101, True), (VLLM, 103, True)]
    assert PullRequest.objects.filter(number=102).exists()  # the PR row stays; only the listing goes


def test_add_tracking_issue_command_configures_it_once(capsys):
    call_command("add_tracking_issue", "vllm-project/vllm#50587")
    call_command("add_tracking_issue", "vllm-project/vllm#50587")

    assert TrackingIssue.objects.get().label == "vllm-project/vllm#50587"
    assert "tracking vllm-project/vllm#50587" in capsys.readouterr().out
    with pytest.raises(CommandError, match="OWNER/NAME#NUMBER"):
        call_command("add_tracking_issue", "vllm-project/vllm")


def test_sync_tracking_issue_command_reads_github_and_reports(issue, settings, capsys):
    with FakeGitHubRecordedServer(ISSUE_50587, *PULLS) as server:
        settings.GITHUB_API_URL = server.base_url
        call_command("sync_tracking_issue", "vllm-project/vllm#50587")

    out = capsys.readouterr().out
    assert out.startswith("vllm-project/vllm#50587: ")
    assert "body changed" in out


def test_sync_tracking_issue_command_fails_when_github_refuses(issue, settings):
    with FakeGitHubRecordedServer("recorded-issue-50587-secondary-rate-limit.json") as server:
        settings.GITHUB_API_URL = server.base_url
        with pytest.raises(CommandError, match="GitHub could not be read for vllm-project/vllm#50587"):
            call_command("sync_tracking_issue")

    issue.refresh_from_db()
    assert issue.rate_limited_until is not None and "secondary rate limit" in issue.sync_error


def test_repository_names_match_case_insensitively_as_on_github():
    Repository.objects.create(full_name="vllm-project/vllm")

    issue = tracking_issue_add(repo="VLLM-Project/vLLM", number=50587)

    assert issue.repository.full_name == "vllm-project/vllm"
    assert FIXTURES.is_dir()
