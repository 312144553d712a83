"""The demo's GitHub side: tracking issue #50587 over the demo history, its PRs measured one by one."""

import io
import json
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from dashboard.demo.history import HEAD_SHA_PREFIX, TRACKING_PRS
from dashboard.github.models import PullRequest, PullRequestState, TrackingIssue
from dashboard.github.selectors import tracking_issue_detail
from tests.conftest import loaded_once

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker) -> Iterator[TrackingIssue]:
    """The demo and its GitHub side, loaded once for the module (a dozen seconds a load)."""
    with loaded_once(django_db_blocker):
        call_command("load_demo", stdout=io.StringIO())
        out = io.StringIO()
        call_command("load_demo_github", stdout=out)
        assert "demo tracking issue loaded: 14 PRs listed, 13 merged on main" in out.getvalue()
        yield TrackingIssue.objects.get(number=50587)


# First: the module's demo is loaded for the tests after it and rolled back only when they are done.
def test_the_demo_github_side_needs_the_demo_history():
    with pytest.raises(CommandError, match="run load_demo first"):
        call_command("load_demo_github")


def test_the_demo_issue_lists_the_tracking_prs_mapped_to_their_merge_commits(demo):
    pulls = {pull.number: pull for pull in PullRequest.objects.select_related("merge_commit")}

    for number, title in TRACKING_PRS:
        pull = pulls[number]
        assert (pull.state, pull.title) == (PullRequestState.MERGED, title)
        assert pull.merge_commit is not None and pull.merge_commit.subject == f"{title} (#{number})"
    assert pulls[53611].state == PullRequestState.OPEN and pulls[53611].merge_commit is None


def test_every_merged_demo_pr_has_a_measured_impact(demo):
    detail = tracking_issue_detail(issue=demo)

    measured = [tracked.pull.number for tracked in detail.pulls if tracked.impacts]
    assert measured == [number for number, _ in TRACKING_PRS]
    # The reference suite, and the long-context one from the DCP merge on.
    assert ("kimi-k3-8k1k", "b300", (1, 4, 16)) in detail.scopes
    assert ("kimi-k3-dcp-120k", "b300", (1, 2)) in detail.scopes


def test_loading_the_demo_github_side_twice_changes_nothing(demo):
    before = list(PullRequest.objects.order_by("number").values_list("number", "state", "merge_commit_id"))

    call_command("load_demo_github")

    assert (
        list(PullRequest.objects.order_by("number").values_list("number", "state", "merge_commit_id"))
        == before
    )
    assert demo.items.count() == 14


def test_the_demo_pages_show_the_changelog_and_the_reverted_regression(demo, client: Client):
    assert client.get("/tracking/vllm-project/vllm/50587/").status_code == 200
    regression = client.get("/prs/51830/").content.decode()
    assert "Move sampler metadata preparation onto the scheduler thread" in regression
    assert "reverted in #52034" in regression


def test_the_demo_compares_v0_27_1_with_82a85dc1_as_design_md_does(demo, capsys):
    call_command("compare", "v0.27.1", HEAD_SHA_PREFIX, "--suite", "kimi-k3-8k1k", "--format", "json")

    rows = {
        (row["concurrency"], row["metric"]): row["change_pct"]
        for row in json.loads(capsys.readouterr().out)["rows"]
    }
    assert (rows[(1, "output_throughput_tok_s")], rows[(1, "latency_s_mean")], rows[(1, "ttft_ms_mean")]) == (
        120.0,
        -57.2,
        -83.4,
    )
    assert rows[(16, "output_throughput_tok_s")] == 180.7
