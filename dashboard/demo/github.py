"""The GitHub side of the demo: tracking issue vllm-project/vllm#50587 listing the PRs that moved the demo
history, mapped to their merge commits, the revert in that history, and the v0.27.1 tag at its start."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from dashboard.benchmarks.models import Commit
from dashboard.benchmarks.services import repository_default
from dashboard.benchmarks.subjects import subject_reverted_pr
from dashboard.demo.history import OPEN_TRACKING_PR, TRACKING_PRS
from dashboard.github.models import CommitRevert, PullRequest, PullRequestState, Tag
from dashboard.github.tracking import tracking_issue_parse
from dashboard.github.tracking_issues import tracking_issue_add, tracking_issue_items_apply

DEMO_ISSUE_NUMBER = 50587
DEMO_ISSUE_TITLE = "[RFC][Tracking]: Kimi K3 Performance Optimization"
DEMO_BASE_TAG = "v0.27.1"
# Listed in the issue but not merged yet: the page shows it open, without figures.
DEMO_OPEN_PR = (OPEN_TRACKING_PR, "[Spec Decode] DCP for the DSpark speculator")


class DemoCommitsMissing(Exception):
    """The demo history is not loaded, so there are no merge commits to map the PRs to."""


@dataclass(frozen=True)
class DemoGithubOutcome:
    pulls: int
    merged: int


def _demo_body() -> str:
    lines = [
        "### Motivation.",
        "",
        "Kimi K3 on one B300 node is far from what the hardware can do: at concurrency 16 with 8K-token",
        "prompts and 1K output tokens, v0.27.1 serves 258 output tok/s with a mean TTFT of 7.6 s.",
        "",
        "### Proposed Change.",
        "",
    ]
    lines += [f"- [x] {title} #{number}" for number, title in TRACKING_PRS]
    lines += [f"- [ ] {DEMO_OPEN_PR[1]} #{DEMO_OPEN_PR[0]}", "", "### Feedback Period.", "", "Ongoing."]
    return "\n".join(lines) + "\n"


def demo_github_load() -> DemoGithubOutcome:
    """Create (or refresh) the demo tracking issue from the demo commits; raise DemoCommitsMissing when
    the demo history is not there. Idempotent."""
    repository = repository_default()
    # By the exact subject: a filler commit of the demo history may carry the same (#N) by chance.
    merges = {
        number: Commit.objects.filter(repository=repository, subject=f"{title} (#{number})").first()
        for number, title in TRACKING_PRS
    }
    first = Commit.objects.filter(repository=repository, position=0).first()
    if first is None or None in merges.values():
        raise DemoCommitsMissing("the demo history is not loaded: run load_demo first")
    body = _demo_body()
    with transaction.atomic():
        issue = tracking_issue_add(repo=repository.full_name, number=DEMO_ISSUE_NUMBER)
        issue.title, issue.body, issue.state = DEMO_ISSUE_TITLE, body, "open"
        issue.html_url = f"{repository.html_url}/issues/{DEMO_ISSUE_NUMBER}"
        issue.last_synced_at = timezone.now()
        issue.save()
        items = tracking_issue_items_apply(
            tracking_issue=issue, references=tracking_issue_parse(body=body, repo=repository.full_name)
        )
        for number, title in TRACKING_PRS:
            merge = merges[number]
            assert merge is not None
            PullRequest.objects.filter(repository=repository, number=number).update(
                title=title,
                author=merge.author_name,
                state=PullRequestState.MERGED,
                merged_at=merge.committed_at,
                merge_commit=merge,
                merge_commit_sha=merge.sha,
            )
        PullRequest.objects.filter(repository=repository, number=DEMO_OPEN_PR[0]).update(
            title=DEMO_OPEN_PR[1], author="heheda12345", state=PullRequestState.OPEN
        )
        for commit in Commit.objects.filter(repository=repository, subject__istartswith="revert"):
            reverted = subject_reverted_pr(subject=commit.subject, body="")
            if reverted is not None:
                CommitRevert.objects.update_or_create(
                    commit=commit, defaults={"reverted_pr_number": reverted}
                )
        Tag.objects.update_or_create(
            repository=repository, name=DEMO_BASE_TAG, defaults={"sha": first.sha, "commit": first}
        )
    return DemoGithubOutcome(pulls=len(items), merged=len(merges))
