"""Tracking-issue PRs and release tags as markers on the timelines."""

import json
from typing import cast

import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit, Suite
from dashboard.github.models import PullRequest, PullRequestState, Tag, TrackingIssue, TrackingIssueItem
from dashboard.github.selectors import timeline_markers
from dashboard.github.tracking_issues import tracking_issue_add
from tests.factories import CommitFactory, SuiteFactory, run_with_values

pytestmark = pytest.mark.django_db

KIMI = "vllm-project/vllm#50587"


def benchmark(commit: Commit, suite: Suite, throughput: float = 100.0) -> None:
    run_with_values(commit=commit, suite=suite, values={(16, "output_throughput_tok_s"): throughput})


def track(
    issue: TrackingIssue, commit: Commit | None, number: int, *, order: int, title: str = ""
) -> PullRequest:
    pull = PullRequest.objects.create(
        repository=issue.repository,
        number=number,
        title=title or f"[Perf] Change {number}",
        author="WoosukKwon",
        state=PullRequestState.MERGED if commit else PullRequestState.OPEN,
        merge_commit=commit,
        merge_commit_sha=commit.sha if commit else "",
    )
    TrackingIssueItem.objects.create(tracking_issue=issue, pull_request=pull, checked=True, order=order)
    return pull


@pytest.fixture
def history():
    """Ten commits on main; benchmarked at positions 0, 3, 4, 8 and 9."""
    suite = cast(Suite, SuiteFactory())
    commits = [cast(Commit, CommitFactory()) for _ in range(10)]
    for index in (0, 3, 4, 8, 9):
        benchmark(commits[index], suite)
    issue = tracking_issue_add(repo="vllm-project/vllm", number=50587)
    issue.title = "[RFC][Tracking]: Kimi K3 Performance Optimization"
    issue.save()
    return suite, commits, issue


def test_a_pr_merged_between_two_benchmarked_commits_is_drawn_on_the_first_that_contains_it(history):
    suite, commits, issue = history
    track(issue, commits[6], 50912, order=0, title="[Perf] Zero-copy mixed prefill/decode batches")

    (marker,) = timeline_markers(suite=suite, hardware_class="b300")

    assert (marker.kind, marker.label, marker.tracking) == ("pr", "#50912", KIMI)
    assert (marker.commit_sha, marker.drawn_at_sha, marker.exact) == (commits[6].sha, commits[8].sha, False)
    assert (marker.title, marker.author) == ("[Perf] Zero-copy mixed prefill/decode batches", "WoosukKwon")
    assert marker.url == "https://github.com/vllm-project/vllm/pull/50912"


def test_a_pr_whose_merge_commit_was_benchmarked_is_drawn_on_it(history):
    suite, commits, issue = history
    track(issue, commits[4], 50383, order=0)

    (marker,) = timeline_markers(suite=suite, hardware_class="b300")

    assert (marker.drawn_at_sha, marker.exact) == (commits[4].sha, True)


def test_prs_outside_the_drawn_commits_and_unmerged_ones_are_not_drawn(history):
    suite, commits, issue = history
    track(issue, commits[3], 50383, order=0)
    track(issue, None, 52388, order=1)
    later = cast(Commit, CommitFactory())  # merged after the newest benchmarked commit
    track(issue, later, 53396, order=2)

    markers = timeline_markers(
        suite=suite,
        hardware_class="b300",
        benchmarked=[commits[4].position, commits[8].position, commits[9].position],
    )

    assert markers == []


def test_only_the_tracking_issues_asked_for_are_drawn(history):
    suite, commits, issue = history
    other = tracking_issue_add(repo="vllm-project/vllm", number=48000)
    track(issue, commits[3], 50383, order=0)
    PullRequest.objects.create(repository=other.repository, number=47000, merge_commit=commits[8])
    TrackingIssueItem.objects.create(
        tracking_issue=other, pull_request=PullRequest.objects.get(number=47000), order=0
    )

    assert {m.tracking for m in timeline_markers(suite=suite, hardware_class="b300")} == {
        KIMI,
        "vllm-project/vllm#48000",
    }
    assert {m.tracking for m in timeline_markers(suite=suite, hardware_class="b300", tracking={KIMI})} == {
        KIMI
    }
    assert timeline_markers(suite=suite, hardware_class="b300", tracking=set()) == []


def test_an_inactive_tracking_issue_is_not_drawn(history):
    suite, commits, issue = history
    track(issue, commits[3], 50383, order=0)
    issue.is_active = False
    issue.save()

    assert timeline_markers(suite=suite, hardware_class="b300") == []


def test_release_tags_are_markers_and_other_tags_are_not(history):
    suite, commits, _ = history
    Tag.objects.create(
        repository=commits[2].repository, name="v0.27.1", sha=commits[2].sha, commit=commits[2]
    )
    Tag.objects.create(
        repository=commits[2].repository, name="v0.28.0rc1", sha=commits[5].sha, commit=commits[5]
    )

    (marker,) = timeline_markers(suite=suite, hardware_class="b300")

    assert (marker.kind, marker.label, marker.drawn_at_sha) == ("tag", "v0.27.1", commits[3].sha)
    assert marker.url == "https://github.com/vllm-project/vllm/releases/tag/v0.27.1"


def test_markers_take_three_queries_however_many_prs(history, django_assert_num_queries):
    suite, commits, issue = history
    for order, index in enumerate(range(1, 10)):
        track(issue, commits[index], 50000 + index, order=order)

    # The tracked PRs, the tags, the commits the markers are drawn at; and first the benchmarked
    # commits' positions, unless the caller has them (a timeline has them in its points).
    with django_assert_num_queries(4):
        markers = timeline_markers(suite=suite, hardware_class="b300")
    with django_assert_num_queries(3):
        given = timeline_markers(
            suite=suite,
            hardware_class="b300",
            benchmarked=[commits[index].position for index in (0, 3, 4, 8, 9)],
        )

    assert len(markers) == 9
    assert given == markers


def figure(client: Client, query: str = "") -> dict:
    response = client.get(f"/api/suites/kimi-k3-8k1k/figures/output_throughput_tok_s/?hardware=b300{query}")
    assert response.status_code == 200
    return json.loads(response.content)


def marker_traces(data: dict) -> list[dict]:
    return [trace for trace in data["data"] if (trace.get("meta") or {}).get("kind") == "markers"]


def test_the_timeline_figure_draws_a_line_and_a_hoverable_symbol_per_pr(history, client):
    _, commits, issue = history
    track(issue, commits[6], 50912, order=0, title="[Perf] Zero-copy mixed prefill/decode batches")

    data = figure(client)

    (trace,) = marker_traces(data)
    assert trace["name"] == KIMI
    assert trace["x"] == [commits[8].position]
    assert trace["customdata"] == [["/prs/50912/", "#50912"]]
    hover = trace["hovertext"][0]
    for text in (
        "PR #50912",
        "Zero-copy mixed prefill/decode batches",
        "WoosukKwon",
        "github.com/vllm-project/vllm/pull/50912",
    ):
        assert text in hover
    # The dotted lines of all its PRs are one trace over the overlay axis, not a shape per PR.
    (lines,) = [trace for trace in data["data"] if (trace.get("meta") or {}).get("kind") == "marker-lines"]
    assert (lines["x"], lines["y"], lines["yaxis"]) == (
        [commits[8].position] * 2 + [None],
        [0, 1, None],
        "y2",
    )
    assert "shapes" not in data["layout"]


def test_the_tracking_toggle_in_the_url_hides_an_issues_markers(history, client):
    _, commits, issue = history
    track(issue, commits[6], 50912, order=0)

    assert marker_traces(figure(client, "&tracking=vllm-project/vllm%2350587"))
    assert marker_traces(figure(client, "&tracking=")) == []
    assert all(trace.get("meta") is None for trace in figure(client, "&tracking=")["data"])


def test_the_timeline_page_offers_a_toggle_per_tracking_issue_and_keeps_it_in_the_figure_urls(
    history, client
):
    response = client.get("/suites/kimi-k3-8k1k/", {"tracking": ["", KIMI]})

    page = response.content.decode()
    assert 'name="tracking" value="vllm-project/vllm#50587" checked' in page
    assert "tracking=vllm-project%2Fvllm%2350587" in page  # carried to every chart's figure URL
    unticked = client.get("/suites/kimi-k3-8k1k/", {"tracking": ""}).content.decode()
    assert 'value="vllm-project/vllm#50587" checked' not in unticked
    default = client.get("/suites/kimi-k3-8k1k/").content.decode()
    assert 'value="vllm-project/vllm#50587" checked' in default
