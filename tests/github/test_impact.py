"""What each PR of a tracking issue changed: its page, the tracking issue's page, and their figures."""

import json
from typing import cast

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks.models import Commit, Measurement, Suite
from dashboard.github.models import (
    CommitRevert,
    PullRequest,
    PullRequestState,
    TrackingIssue,
    TrackingIssueItem,
)
from dashboard.github.selectors import tracked_pulls_sort, tracking_issue_detail
from dashboard.github.tracking_issues import tracking_issue_add
from tests.factories import CommitFactory, SuiteFactory, run_with_values

pytestmark = pytest.mark.django_db

TRACKING_PAGE = "/tracking/vllm-project/vllm/50587/"


def measure(commit: Commit, suite: Suite, *, throughput: float, ttft_ms: float) -> None:
    run_with_values(
        commit=commit,
        suite=suite,
        values={
            (level, metric): value * level
            for level in (1, 16)
            for metric, value in (("output_throughput_tok_s", throughput), ("ttft_ms_mean", ttft_ms))
        },
    )


def track(issue: TrackingIssue, commit: Commit, *, order: int) -> PullRequest:
    pull = PullRequest.objects.create(
        repository=issue.repository,
        number=cast(int, commit.pr_number),
        title=commit.subject.rsplit(" (#", 1)[0],
        author="youkaichao",
        state=PullRequestState.MERGED,
        merge_commit=commit,
        merge_commit_sha=commit.sha,
    )
    TrackingIssueItem.objects.create(tracking_issue=issue, pull_request=pull, checked=True, order=order)
    return pull


@pytest.fixture
def changelog():
    """Main: c0 … c7, c1 docs only. Benchmarked at c0, c2, c3, c6, c7. Tracked PRs: c2 (alone but for c1,
    +10 % throughput), c5 (shares the c3 → c6 range with c4 and c6, −20 % TTFT), c7 (alone, −5 %)."""
    suite = cast(Suite, SuiteFactory())
    commits = [
        cast(
            Commit, CommitFactory(subject=f"[Perf] Step {index} (#{51000 + index})", pr_number=51000 + index)
        )
        for index in range(8)
    ]
    Commit.objects.filter(pk=commits[1].pk).update(change_class="docs_tests_ci")
    for index, (throughput, ttft) in {
        0: (100, 1000),
        2: (110, 1000),
        3: (110, 1000),
        6: (110, 800),
        7: (104.5, 800),
    }.items():
        measure(commits[index], suite, throughput=throughput, ttft_ms=ttft)
    issue = tracking_issue_add(repo="vllm-project/vllm", number=50587)
    issue.title = "[RFC][Tracking]: Kimi K3 Performance Optimization"
    issue.save()
    for order, index in enumerate((2, 5, 7)):
        track(issue, commits[index], order=order)
    return suite, commits, issue


def test_a_pr_is_measured_from_the_last_benchmarked_commit_before_it_to_the_first_after(changelog):
    _, commits, issue = changelog

    detail = tracking_issue_detail(issue=issue)

    first = detail.pulls[0]
    (impact,) = first.impacts
    assert (impact.suite, impact.hardware_class) == ("kimi-k3-8k1k", "b300")
    assert (impact.before.sha, impact.after.sha, impact.ambiguous) == (commits[0].sha, commits[2].sha, False)
    at_16 = impact.change(concurrency=16, metric="output_throughput_tok_s")
    assert at_16 is not None
    assert (at_16.before, at_16.after, at_16.change_pct, at_16.improvement_pct) == (1600, 1760, 10.0, 10.0)
    assert [level.concurrency for level in impact.levels] == [1, 16]


def test_a_range_holding_other_prs_is_ambiguous_and_names_them(changelog):
    _, commits, issue = changelog

    second = tracking_issue_detail(issue=issue).pulls[1]

    (impact,) = second.impacts
    assert (impact.before.sha, impact.after.sha) == (commits[3].sha, commits[6].sha)
    assert impact.ambiguous
    assert (impact.other_commits, impact.other_pull_numbers) == (2, (51004, 51006))
    ttft = impact.change(concurrency=1, metric="ttft_ms_mean")
    assert ttft is not None and (ttft.change_pct, ttft.improvement_pct) == (-20.0, 20.0)


def test_docs_only_commits_in_the_range_do_not_make_it_ambiguous(changelog):
    _, commits, issue = changelog
    Commit.objects.filter(pk__in=[commits[4].pk, commits[6].pk]).update(change_class="docs_tests_ci")

    (impact,) = tracking_issue_detail(issue=issue).pulls[1].impacts

    assert not impact.ambiguous


def test_sorting_by_impact_puts_the_biggest_improvement_first_and_regressions_last(changelog):
    _, _, issue = changelog
    pulls = tracking_issue_detail(issue=issue).pulls

    by_throughput = tracked_pulls_sort(
        pulls=pulls,
        suite="kimi-k3-8k1k",
        hardware_class="b300",
        concurrency=16,
        metric="output_throughput_tok_s",
    )
    by_ttft = tracked_pulls_sort(
        pulls=pulls, suite="kimi-k3-8k1k", hardware_class="b300", concurrency=16, metric="ttft_ms_mean"
    )

    assert [t.pull.number for t in by_throughput] == [51002, 51005, 51007]
    assert [t.pull.number for t in by_ttft] == [51005, 51002, 51007]


def test_an_unmerged_pr_and_one_with_no_benchmark_after_it_have_no_figures(changelog):
    _, _, issue = changelog
    open_pull = PullRequest.objects.create(
        repository=issue.repository, number=53512, state=PullRequestState.OPEN
    )
    TrackingIssueItem.objects.create(tracking_issue=issue, pull_request=open_pull, checked=False, order=3)
    newest = cast(Commit, CommitFactory(subject="[Perf] Not benchmarked yet (#53600)", pr_number=53600))
    track(issue, newest, order=4)

    pulls = tracking_issue_detail(issue=issue).pulls

    assert [(t.pull.number, t.impacts) for t in pulls[3:]] == [(53512, ()), (53600, ())]


def test_the_tracking_page_lists_each_pr_with_its_change_per_concurrency(changelog, client: Client):
    _, commits, _ = changelog
    CommitRevert.objects.create(commit=commits[6], reverted_pr_number=51005)

    response = client.get(TRACKING_PAGE)

    assert response.status_code == 200
    page = response.content.decode()
    for text in (
        "Kimi K3 Performance Optimization",
        'href="/prs/51002/"',
        "[Perf] Step 2",
        "youkaichao",
        commits[2].short_sha,
        "+10.0 %",
        "−20.0 %",
        "ambiguous · 2 other",
        "this PR alone",
        "reverted in #51006",
    ):
        assert text in page, text


def test_the_tracking_page_sorts_by_impact_on_request(changelog, client: Client):
    response = client.get(
        TRACKING_PAGE,
        {"sort": "impact", "metric": "ttft_ms_mean", "concurrency": "16", "scope": "kimi-k3-8k1k/b300"},
    )

    page = response.content.decode()
    assert page.index('data-pr="51005"') < page.index('data-pr="51002"') < page.index('data-pr="51007"')


def test_the_tracking_page_says_when_githubs_rate_limit_bites(changelog, client: Client):
    _, _, issue = changelog
    issue.rate_limited_until = "2099-01-01T10:00:00Z"
    issue.rate_limit_remaining, issue.rate_limit_limit = 0, 60
    issue.save()

    page = client.get(TRACKING_PAGE).content.decode()

    assert "GitHub's rate limit was hit" in page and "2099-01-01 10:00 UTC" in page
    assert "API quota 0/60 left" in page


def test_the_tracking_page_takes_a_fixed_number_of_queries(
    changelog, client: Client, django_assert_num_queries
):
    _, _, issue = changelog
    for index in range(6):
        track(issue, cast(Commit, CommitFactory(pr_number=52000 + index)), order=10 + index)

    # issue, items, reverts, commit sync state, the three counts the impacts are kept under; then, the
    # first time, the benchmarked commits around each merge and those commits, the headline series and
    # their measurements, commits in ranges, the suites, and the series' noise (the floor of main's
    # recent window, then the latest commits of every suite and hardware class with their measurements,
    # in one statement), and the suites' detection settings, which judge a change on this page as
    # detection does
    with django_assert_num_queries(16):
        assert client.get(TRACKING_PAGE).status_code == 200
    with django_assert_num_queries(7):
        assert client.get(TRACKING_PAGE).status_code == 200


def test_pr_impacts_are_read_as_stored_until_a_new_run_changes_them(changelog, client: Client):
    suite, commits, _ = changelog
    assert "+10.0 %" in client.get(TRACKING_PAGE).content.decode()
    assert "+10.0 %" in client.get("/prs/51002/").content.decode()

    with CaptureQueriesContext(connection) as again:
        tracking = client.get(TRACKING_PAGE).content.decode()
        pull = client.get("/prs/51002/").content.decode()

    assert "+10.0 %" in tracking and "+10.0 %" in pull
    # Neither page computes an impact again: no measurement is read.
    assert not [query for query in again.captured_queries if Measurement._meta.db_table in query["sql"]]

    # A second run at the PR's merge commit, slower: the median after the PR is now 105, +5 %.
    measure(commits[2], suite, throughput=100, ttft_ms=1000)

    assert "+5.0 %" in client.get(TRACKING_PAGE).content.decode()
    assert "+5.0 %" in client.get("/prs/51002/").content.decode()


def test_an_unknown_tracking_issue_is_a_404(client: Client):
    assert client.get("/tracking/vllm-project/vllm/1/").status_code == 404


def test_tracking_issue_list_links_each_issue(changelog, client: Client):
    page = client.get("/tracking/").content.decode()

    assert f'href="{TRACKING_PAGE}"' in page and "vllm-project/vllm#50587" in page


def test_the_pr_page_shows_its_change_and_charts_zoomed_around_its_merge(changelog, client: Client):
    response = client.get("/prs/51005/")

    page = response.content.decode()
    assert response.status_code == 200
    assert "[Perf] Step 5" in page and "−20.0 %" in page and "Kimi K3 Performance Optimization" in page
    assert (
        'data-figure-url="/api/prs/51005/figures/kimi-k3-8k1k/output_throughput_tok_s/?hardware=b300"' in page
    )


def test_a_pr_in_no_tracking_issue_has_a_page_from_its_commit_on_main(changelog, client: Client):
    page = client.get("/prs/51003/").content.decode()

    assert "[Perf] Step 3" in page and "+0.0 %" not in page  # c2 → c3 changed nothing
    assert client.get("/prs/99999/").status_code == 404


def test_the_pr_figure_is_zoomed_on_its_merge_and_highlights_it(changelog, client: Client):
    _, commits, _ = changelog

    data = json.loads(client.get("/api/prs/51005/figures/kimi-k3-8k1k/ttft_ms_mean/?hardware=b300").content)

    x0, x1 = data["layout"]["xaxis"]["range"]
    assert x0 <= commits[3].position < commits[6].position <= x1
    own = [
        t for t in data["data"] if (t.get("meta") or {}).get("kind") == "markers" and t["name"] == "PR #51005"
    ]
    assert (
        own and own[0]["x"] == [commits[6].position] and own[0]["customdata"] == [["/prs/51005/", "#51005"]]
    )
    others = [t for t in data["data"] if t.get("name") == "vllm-project/vllm#50587"]
    assert others and "#51005" not in others[0]["text"]


def test_single_run_noise_is_printed_with_its_interval_but_not_coloured_and_a_real_change_is(
    client: Client,
):
    """/prs/ pages used to colour any single-run difference over 1 %: now only what beats the noise."""
    suite = cast(Suite, SuiteFactory())
    commits = [
        cast(
            Commit,
            CommitFactory(subject=f"[Perf] Change {index} (#{52100 + index})", pr_number=52100 + index),
        )
        for index in range(40)
    ]
    wobble = [0.0, 2.4, -1.9, 1.2, -2.6, 0.7, 2.1, -0.4, -2.2, 1.6]  # % around the level: ~2 % noise
    for index, commit in enumerate(commits):
        level = 100.0 * (1.15 if index >= 30 else 1.0)  # the PR at c30 is 15 % faster
        value = level * (1.0 + wobble[index % len(wobble)] / 100.0)
        if index == 20:
            value = 100.0 * 1.03  # +3.4 % over c19's single run: noise
        measure(commit, suite, throughput=value, ttft_ms=1000.0)
    issue = tracking_issue_add(repo="vllm-project/vllm", number=50587)
    noise_pull = track(issue, commits[20], order=0)
    real_pull = track(issue, commits[30], order=1)

    noise_page = client.get(f"/prs/{noise_pull.number}/")
    real_page = client.get(f"/prs/{real_pull.number}/")

    def throughput_cell(page):
        row = next(row for row in page.context["rows"] if row.concurrency == 16)
        return row.cells[0]

    noise_cell, real_cell = throughput_cell(noise_page), throughput_cell(real_page)
    assert noise_cell.text.startswith("+") and noise_cell.css == "muted"
    assert "1 → 1 run" in noise_page.content.decode() and noise_cell.interval.startswith("−")
    assert real_cell.css == "good" and real_cell.interval.startswith("+")


def test_a_pr_is_measured_only_between_benchmarked_commits_near_its_merge(changelog, client: Client):
    """The benchmarked commits around a merge are looked for NEIGHBOUR_COMMITS either side: one just
    inside still gives figures, one just beyond gives none and the page says why."""
    from dashboard.github.impact import NEIGHBOUR_COMMITS, pull_impacts

    suite, _, issue = changelog
    far = [cast(Commit, CommitFactory(pr_number=900_000 + index)) for index in range(2 * NEIGHBOUR_COMMITS)]
    measure(far[0], suite, throughput=100, ttft_ms=1000)
    measure(far[-1], suite, throughput=120, ttft_ms=1000)
    inside = track(issue, far[NEIGHBOUR_COMMITS], order=10)  # far[0] is exactly NEIGHBOUR_COMMITS before
    beyond = track(issue, far[NEIGHBOUR_COMMITS + 1], order=11)  # far[0] is one commit too far
    found = pull_impacts(pulls=[inside, beyond])
    assert [impact.before.sha for impact in found[inside.pk]] == [far[0].sha]
    assert beyond.pk not in found
    page = client.get(f"/prs/{beyond.number}/").content.decode()
    assert f"within {NEIGHBOUR_COMMITS} commits" in page
