"""Links to GitHub are built from repository and number; stored URLs never become links."""

import re
from typing import cast

import pytest
from django.test import Client

from dashboard.benchmarks.models import Commit, Suite
from dashboard.github.models import PullRequest, PullRequestState, TrackingIssueItem
from dashboard.github.tracking_issues import tracking_issue_add
from tests.factories import CommitFactory, SuiteFactory, run_with_values

pytestmark = pytest.mark.django_db

HOSTILE = "javascript:fetch('/alerts/1/triage/',{method:'POST'})//"


def _hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]*)"', html)


def test_a_stored_javascript_html_url_never_renders_as_a_link(client: Client) -> None:
    suite = cast(Suite, SuiteFactory())
    commit = cast(Commit, CommitFactory(pr_number=50600))
    run_with_values(commit=commit, suite=suite, values={(1, "output_throughput_tok_s"): 100.0})
    issue = tracking_issue_add(repo="vllm-project/vllm", number=50587)
    PullRequest.objects.filter(repository=issue.repository).delete()
    issue.html_url = HOSTILE
    issue.save()
    pull = PullRequest.objects.create(
        repository=issue.repository,
        number=50600,
        title="A PR",
        state=PullRequestState.MERGED,
        merge_commit=commit,
        merge_commit_sha=commit.sha,
        html_url=HOSTILE,
    )
    TrackingIssueItem.objects.create(tracking_issue=issue, pull_request=pull, checked=True, order=0)

    for page in (
        "/prs/50600/",
        "/tracking/vllm-project/vllm/50587/",
        "/tracking/",
        f"/commits/{commit.sha}/",
    ):
        response = client.get(page)
        assert response.status_code == 200, page
        hrefs = _hrefs(response.content.decode())
        assert not [href for href in hrefs if "javascript" in href.lower()], page
        github = [href for href in hrefs if "github.com" in href]
        assert all(href.startswith("https://github.com/vllm-project/vllm/") for href in github), page
    assert "https://github.com/vllm-project/vllm/pull/50600" in client.get("/prs/50600/").content.decode()


def test_a_repository_name_cannot_leave_github() -> None:
    from dashboard.benchmarks.models import Repository

    assert (
        Repository(full_name="javascript:alert(1)").html_url == "https://github.com/javascript%3Aalert%281%29"
    )
    assert Repository(full_name="vllm-project/vllm").html_url == "https://github.com/vllm-project/vllm"


def test_chart_clicks_only_open_this_sites_pages() -> None:
    from pathlib import Path

    import dashboard

    script = (Path(dashboard.__file__).parent / "web" / "static" / "perfwatch" / "charts.js").read_text()
    assert "/^\\/(?![\\/\\\\])/.test(target)" in script
