"""Syncing main's history into the database: from a real local git repository through the mirror, and
from GitHub's REST commit list as recorded."""

from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from dashboard.benchmarks.models import Commit, Repository
from dashboard.benchmarks.services import commit_ensure
from dashboard.github.client import GitHubClient
from dashboard.github.commits import commits_sync_from_api, commits_sync_from_mirror
from dashboard.github.models import CommitRevert, CommitSyncState, PullRequest, PullRequestState, Tag
from tests.github.recorded_github import FakeGitHubRecordedServer
from tests.github.test_gitmirror import LocalVllmLikeRepository

pytestmark = pytest.mark.django_db

VLLM = "vllm-project/vllm"


# Main as vLLM writes it: (subject, files, commit time, body, tag placed after it).
HISTORY: tuple[tuple[str, dict[str, str], str, str, str], ...] = (
    (
        "[Model] Kimi K3 day-0 support (#49870)",
        {"vllm/model_executor/models/kimi_k3.py": "class KimiK3: ...\n"},
        "2026-07-28T09:12:00+08:00",
        "",
        "v0.27.0",
    ),
    (
        "[Perf] Adaptive scheduler token budget for Kimi K3 (#50383)",
        {"vllm/v1/core/sched/scheduler.py": "TOKEN_BUDGET = 'adaptive'\n"},
        "2026-08-03T17:40:05-07:00",
        "Signed-off-by: Woosuk Kwon <woosuk@example.com>",
        "",
    ),
    (
        "[Perf] Zero-copy mixed prefill/decode batches (#50484)",
        {"vllm/v1/worker/gpu_model_runner.py": "ZERO_COPY = True\n"},
        "2026-08-05T10:00:00+00:00",
        "",
        "",
    ),
    (
        "[Doc] Kimi K3 serving recipe (#50512)",
        {"docs/recipes/kimi_k3.md": "vllm serve moonshotai/Kimi-K3\n"},
        "2026-08-05T12:30:00+02:00",
        "",
        "",
    ),
    (
        'Revert "[Perf] Zero-copy mixed prefill/decode batches (#50484)" (#50601)',
        {"vllm/v1/worker/gpu_model_runner.py": "ZERO_COPY = False\n"},
        "2026-08-06T08:00:00+00:00",
        "Reverts vllm-project/vllm#50484",
        "v0.27.1",
    ),
    (
        "[Kernel] Deferred MXFP4 weight finalization (#52789)",
        {"csrc/moe/mxfp4_finalize.cu": "__global__ void finalize() {}\n"},
        "2026-08-20T21:15:00-04:00",
        "",
        "",
    ),
)


@pytest.fixture
def remote(tmp_path: Path) -> LocalVllmLikeRepository:
    """A real git repository with HISTORY on main: squash merges, docs-only, a revert, a kernel, tags."""
    repository = LocalVllmLikeRepository(tmp_path / "vllm")
    for subject, files, when, body, tag in HISTORY:
        repository.commit(subject, files=files, when=when, body=body)
        if tag:
            repository.git("tag", "--annotate", "--message", f"vLLM {tag}", tag)
    return repository


def sync(remote: LocalVllmLikeRepository, tmp_path: Path, initial_limit: int = 1000):
    repository, _ = Repository.objects.get_or_create(full_name=VLLM)
    return commits_sync_from_mirror(
        repository=repository,
        mirror_path=tmp_path / "mirror.git",
        remote_url=str(remote.path),
        initial_limit=initial_limit,
        timeout_s=30,
    )


def snapshot() -> list[tuple]:
    return list(
        Commit.objects.order_by("sha").values_list(
            "sha",
            "position",
            "parents",
            "subject",
            "pr_number",
            "change_class",
            "committed_at",
            "author_name",
        )
    )


def test_first_sync_stores_main_in_first_parent_order_with_what_each_commit_is(remote, tmp_path):
    outcome = sync(remote, tmp_path)

    assert (outcome.source, outcome.commits_new, outcome.commits_seen, outcome.tags) == ("mirror", 6, 6, 2)
    assert outcome.tip_sha == remote.git("rev-parse", "main")
    commits = list(Commit.objects.in_main_order())
    assert [(c.position, c.pr_number, c.change_class) for c in commits] == [
        (0, 49870, "python"),
        (1, 50383, "python"),
        (2, 50484, "python"),
        (3, 50512, "docs_tests_ci"),
        (4, 50601, "python"),
        (5, 52789, "native"),
    ]
    scheduler = commits[1]
    assert scheduler.sha == remote.git("rev-parse", "main~4")
    assert scheduler.parents == [commits[0].sha]
    assert (scheduler.author_name, scheduler.author_email) == ("Kaichao You", "youkaichao@example.com")
    assert scheduler.committed_at == datetime(2026, 8, 4, 0, 40, 5, tzinfo=UTC)
    assert scheduler.subject == "[Perf] Adaptive scheduler token budget for Kimi K3 (#50383)"


def test_a_revert_is_recognised_as_the_revert_of_its_pr(remote, tmp_path):
    sync(remote, tmp_path)

    revert = CommitRevert.objects.select_related("commit").get()
    assert (revert.commit.pr_number, revert.reverted_pr_number) == (50601, 50484)


def test_release_tags_point_at_their_commits_on_main(remote, tmp_path):
    sync(remote, tmp_path)

    tags = {tag.name: tag for tag in Tag.objects.select_related("commit")}
    assert {name: tag.commit and tag.commit.pr_number for name, tag in tags.items()} == {
        "v0.27.0": 49870,
        "v0.27.1": 50601,
    }
    assert tags["v0.27.1"].sha == remote.git("rev-parse", "main~1")
    assert tags["v0.27.1"].is_release


def test_syncing_again_without_new_commits_changes_nothing(remote, tmp_path):
    sync(remote, tmp_path)
    before = snapshot()

    outcome = sync(remote, tmp_path)

    assert (outcome.commits_new, outcome.commits_seen) == (0, 0)
    assert snapshot() == before
    assert CommitRevert.objects.count() == 1 and Tag.objects.count() == 2


def test_new_commits_continue_the_positions_of_main(remote, tmp_path):
    sync(remote, tmp_path)
    build = remote.commit(
        "[Build] Bump the FlashInfer pin (#53152)",
        files={"requirements/cuda.txt": "flashinfer-python==0.6.2\n"},
        when="2026-09-01T08:00:00+00:00",
    )

    outcome = sync(remote, tmp_path)

    assert (outcome.commits_new, outcome.commits_seen, outcome.tip_sha) == (1, 1, build)
    commit = Commit.objects.get(sha=build)
    assert (commit.position, commit.pr_number, commit.change_class) == (6, 53152, "native")
    assert CommitSyncState.objects.get().tip_sha == build


def test_a_first_sync_keeps_only_the_newest_commits_of_a_long_history(remote, tmp_path):
    sync(remote, tmp_path, initial_limit=2)

    assert list(Commit.objects.in_main_order().values_list("position", "pr_number")) == [
        (0, 50601),
        (1, 52789),
    ]
    # The older tags are kept, but their commits are not on the synced history.
    assert Tag.objects.get(name="v0.27.0").commit is None


def test_a_commit_known_only_by_its_sha_is_completed_by_the_sync(remote, tmp_path):
    ingested = commit_ensure(sha=remote.git("rev-parse", "main~4"))
    assert ingested.subject == "" and ingested.position is None

    sync(remote, tmp_path)

    ingested.refresh_from_db()
    assert (ingested.position, ingested.pr_number) == (1, 50383)
    assert Commit.objects.count() == 6


def test_a_listed_pr_is_linked_to_its_merge_commit_once_main_has_it(remote, tmp_path):
    repository = Repository.objects.create(full_name=VLLM)
    waiting = PullRequest.objects.create(repository=repository, number=50383)

    sync(remote, tmp_path)

    waiting.refresh_from_db()
    assert waiting.state == PullRequestState.MERGED
    assert waiting.merge_commit is not None and waiting.merge_commit.sha == remote.git("rev-parse", "main~4")
    assert waiting.title == "[Perf] Adaptive scheduler token budget for Kimi K3"
    assert waiting.author == "Kaichao You"
    assert waiting.merged_at == datetime(2026, 8, 4, 0, 40, 5, tzinfo=UTC)


def test_a_rewritten_main_is_imported_again_from_its_new_history(remote, tmp_path):
    sync(remote, tmp_path)
    remote.git("reset", "--hard", "--quiet", "main~1")
    replacement = remote.commit(
        "[Bugfix] Fix KDA state under speculative decoding (#50640)",
        files={"vllm/v1/worker/gpu_model_runner.py": "ZERO_COPY = 'fixed'\n"},
        when="2026-08-06T09:00:00+00:00",
    )

    sync(remote, tmp_path)

    assert Commit.objects.get(sha=replacement).position == 5
    assert CommitSyncState.objects.get().tip_sha == replacement


def test_a_mirror_that_cannot_be_fetched_is_an_error_recorded_for_the_page(tmp_path, settings):
    settings.PERFWATCH_GIT_REMOTE = str(tmp_path / "no-such-repository")
    settings.PERFWATCH_GIT_MIRROR_DIR = str(tmp_path / "mirror.git")

    with pytest.raises(CommandError, match="commit sync failed: git fetch failed"):
        call_command("sync_commits", "--source", "mirror")

    assert CommitSyncState.objects.get().error.startswith("git fetch failed")
    assert Commit.objects.count() == 0


def test_sync_commits_command_reports_what_it_stored(remote, tmp_path, settings, capsys):
    settings.PERFWATCH_GIT_REMOTE = str(remote.path)
    settings.PERFWATCH_GIT_MIRROR_DIR = str(tmp_path / "mirror.git")

    call_command("sync_commits")

    assert "mirror: main at " in capsys.readouterr().out
    assert Commit.objects.count() == 6


# The REST alternative, as GitHub answered: five commits over two pages, then 304 for the same query.
RECORDED_SINCE = datetime(2026, 8, 1, tzinfo=UTC)


def test_rest_sync_stores_the_first_parent_chain_across_pages():
    repository = Repository.objects.create(full_name=VLLM)
    with FakeGitHubRecordedServer(
        "recorded-commits-main-page-1.json", "recorded-commits-main-page-2.json"
    ) as server:
        client = GitHubClient(token=None, base_url=server.base_url, timeout_s=5)
        outcome = commits_sync_from_api(
            repository=repository, client=client, since=RECORDED_SINCE, per_page=3
        )

    assert (outcome.source, outcome.commits_new) == ("api", 5)
    assert list(Commit.objects.in_main_order().values_list("position", "pr_number", "change_class")) == [
        (0, 50383, ""),
        (1, 50484, ""),
        (2, 50512, ""),
        (3, 50601, ""),
        (4, 52789, ""),
    ]
    assert CommitRevert.objects.get().reverted_pr_number == 50484
    state = CommitSyncState.objects.get()
    assert state.tip_sha == "23f4929c66a170d810f6a32723c9e3f7d0713286"
    assert state.etag.startswith('W/"3e5a7c9e')


def test_rest_sync_sends_the_etag_and_a_304_changes_nothing():
    repository = Repository.objects.create(full_name=VLLM)
    with FakeGitHubRecordedServer(
        "recorded-commits-main-page-1.json",
        "recorded-commits-main-page-2.json",
        "recorded-commits-main-not-modified.json",
    ) as server:
        client = GitHubClient(token=None, base_url=server.base_url, timeout_s=5)
        commits_sync_from_api(repository=repository, client=client, since=RECORDED_SINCE, per_page=3)
        before = snapshot()
        outcome = commits_sync_from_api(
            repository=repository, client=client, since=RECORDED_SINCE, per_page=3
        )

    assert outcome.not_modified
    assert server.received[-1].headers["if-none-match"] == CommitSyncState.objects.get().etag
    assert snapshot() == before


def test_rest_sync_keeps_the_change_class_the_mirror_found(remote, tmp_path):
    repository = Repository.objects.create(full_name=VLLM)
    Commit.objects.create(
        repository=repository,
        sha="7c50debc32cc0c35db4ff72516224142ba9d0dd7",
        position=7,
        change_class="native",
    )
    with FakeGitHubRecordedServer(
        "recorded-commits-main-page-1.json", "recorded-commits-main-page-2.json"
    ) as server:
        client = GitHubClient(token=None, base_url=server.base_url, timeout_s=5)
        commits_sync_from_api(repository=repository, client=client, since=RECORDED_SINCE, per_page=3)

    assert list(Commit.objects.in_main_order().values_list("position", "pr_number", "change_class"))[:2] == [
        (7, 50383, "native"),
        (8, 50484, ""),
    ]


def test_an_unreachable_source_is_backed_off_quietly_and_said_once_on_the_runners_page(
    tmp_path, settings, client, caplog
):
    from workers.tasks import github_commits_sync

    settings.PERFWATCH_GIT_REMOTE = str(tmp_path / "no-such-repository")
    settings.PERFWATCH_GIT_MIRROR_DIR = str(tmp_path / "mirror.git")

    assert github_commits_sync() == 0  # no exception: nothing for Celery to print a traceback of
    first = CommitSyncState.objects.get()
    assert github_commits_sync() == 0  # within the back-off: not even tried
    again = CommitSyncState.objects.get()

    assert first.failures == again.failures == 1 and again.next_attempt_at is not None
    assert [record.exc_info for record in caplog.records if "commit sync failed" in record.getMessage()] == [
        None
    ]
    page = client.get("/runners/").content.decode()
    assert page.count("Commit sync is failing") == 1 and "git fetch failed" in page

    settings.PERFWATCH_GIT_REMOTE = str(tmp_path / "still-missing")
    CommitSyncState.objects.update(next_attempt_at=None)
    settings.PERFWATCH_COMMIT_SYNC = False
    assert github_commits_sync() == 0
    assert CommitSyncState.objects.get().failures == 1  # off: no attempt at all
