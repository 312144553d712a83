import itertools
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dashboard.benchmarks.subjects import change_class_from_paths, subject_pr_number, subject_reverted_pr
from dashboard.github.gitmirror import (
    GitCommit,
    GitMirrorError,
    GitTag,
    UnknownRevision,
    mirror_commits,
    mirror_fetch,
    mirror_tags,
)

TIMEOUT_S = 30.0
# Squash merges on GitHub are committed by GitHub; tags and merges made here need an identity too.
GIT_ENVIRONMENT = {
    "PATH": "/usr/bin:/bin",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Woosuk Kwon",
    "GIT_AUTHOR_EMAIL": "woosuk@example.com",
    "GIT_COMMITTER_NAME": "GitHub",
    "GIT_COMMITTER_EMAIL": "noreply@github.com",
}


class LocalVllmLikeRepository:
    """A real git repository whose history looks like vLLM main: squash-merged PRs with (#N) subjects."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.git("init", "--quiet", "--initial-branch=main")

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        completed = subprocess.run(
            ["git", "-C", str(self.path), *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=True,
            env={**GIT_ENVIRONMENT, "HOME": str(self.path), **(env or {})},
        )
        return completed.stdout.strip()

    def commit(
        self,
        subject: str,
        *,
        files: dict[str, str],
        when: str,
        body: str = "",
        author: tuple[str, str] = ("Kaichao You", "youkaichao@example.com"),
        deleted: tuple[str, ...] = (),
    ) -> str:
        for name, text in files.items():
            file_path = self.path / name
            file_path.parent.mkdir(parents=True, exist_ok=True)
            file_path.write_text(text)
            self.git("add", name)
        for name in deleted:
            self.git("rm", "--quiet", name)
        message = subject + ("\n\n" + body if body else "")
        author_and_dates = {
            "GIT_AUTHOR_NAME": author[0],
            "GIT_AUTHOR_EMAIL": author[1],
            "GIT_AUTHOR_DATE": when,
            "GIT_COMMITTER_DATE": when,
        }
        self.git("commit", "--quiet", "--allow-empty", "-m", message, env=author_and_dates)
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def remote(tmp_path: Path) -> LocalVllmLikeRepository:
    repository = LocalVllmLikeRepository(tmp_path / "vllm")
    repository.commit(
        "[Model] Kimi K3 day-0 support (#49870)",
        files={"vllm/model_executor/models/kimi_k3.py": "class KimiK3: ...\n", "README.md": "# vLLM\n"},
        when="2026-07-28T09:12:00+08:00",
        author=("Moonshot Dev", "dev@moonshot.example"),
    )
    repository.git("tag", "v0.27.0")
    repository.commit(
        "[Perf] Adaptive scheduler token budget for Kimi K3 (#50383)",
        files={"vllm/v1/core/sched/scheduler.py": "TOKEN_BUDGET = 'adaptive'\n"},
        when="2026-08-03T17:40:05-07:00",
        body="Signed-off-by: Woosuk Kwon <woosuk@example.com>",
    )
    repository.commit(
        "[Perf] Zero-copy mixed prefill/decode batches (#50484)",
        files={"vllm/v1/worker/gpu_model_runner.py": "ZERO_COPY = True\n"},
        when="2026-08-05T10:00:00+00:00",
    )
    repository.commit(
        "[Doc] Kimi K3 serving recipe (#50512)",
        files={"docs/recipes/kimi_k3.md": "vllm serve moonshotai/Kimi-K3\n"},
        when="2026-08-05T12:30:00+02:00",
    )
    repository.commit(
        'Revert "[Perf] Zero-copy mixed prefill/decode batches (#50484)" (#50601)',
        files={"vllm/v1/worker/gpu_model_runner.py": "ZERO_COPY = False\n"},
        when="2026-08-06T08:00:00+00:00",
        body="Reverts vllm-project/vllm#50484\n\nIt corrupts the KDA state under speculative decoding.",
    )
    repository.git("tag", "--annotate", "--message", "vLLM v0.27.1", "v0.27.1")
    repository.commit(
        "[Kernel] Deferred MXFP4 weight finalization (#52789)",
        files={
            "csrc/moe/mxfp4_finalize.cu": "__global__ void finalize() {}\n",
            "vllm/_custom_ops.py": "x=1\n",
        },
        when="2026-08-20T21:15:00-04:00",
    )
    return repository


def fetch(remote: LocalVllmLikeRepository, mirror: Path) -> str:
    return mirror_fetch(path=mirror, remote_url=str(remote.path), timeout_s=TIMEOUT_S)


def test_first_fetch_creates_a_bare_mirror_and_returns_the_tip(remote, tmp_path):
    mirror = tmp_path / "mirror.git"

    tip = fetch(remote, mirror)

    assert tip == remote.git("rev-parse", "HEAD")
    assert (mirror / "HEAD").is_file()
    assert not (mirror / ".git").exists()


def test_commits_come_in_first_parent_order_oldest_first(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    commits = mirror_commits(path=mirror, branch="main", since_sha=None, limit=None)

    assert [subject_pr_number(subject=c.subject) for c in commits] == [
        49870,
        50383,
        50484,
        50512,
        50601,
        52789,
    ]
    assert [c.sha for c in commits] == remote.git("rev-list", "--reverse", "main").split()
    assert all(commit.parents == (previous.sha,) for previous, commit in itertools.pairwise(commits))
    assert commits[0].parents == ()


def test_commit_carries_author_times_in_utc_message_and_paths(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    commit = mirror_commits(path=mirror, branch="main", since_sha=None, limit=None)[1]

    assert commit == GitCommit(
        sha=remote.git("rev-parse", "main~4"),
        parents=(remote.git("rev-parse", "main~5"),),
        author_name="Kaichao You",
        author_email="youkaichao@example.com",
        authored_at=datetime(2026, 8, 4, 0, 40, 5, tzinfo=UTC),
        committed_at=datetime(2026, 8, 4, 0, 40, 5, tzinfo=UTC),
        subject="[Perf] Adaptive scheduler token budget for Kimi K3 (#50383)",
        body="Signed-off-by: Woosuk Kwon <woosuk@example.com>",
        changed_paths=("vllm/v1/core/sched/scheduler.py",),
    )
    assert commit.authored_at.utcoffset() is not None


def test_revert_docs_only_and_native_commits_are_recognisable(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    by_pr = {
        subject_pr_number(subject=c.subject): c
        for c in mirror_commits(path=mirror, branch="main", since_sha=None, limit=None)
    }

    revert = by_pr[50601]
    assert subject_reverted_pr(subject=revert.subject, body=revert.body) == 50484
    assert revert.body.startswith("Reverts vllm-project/vllm#50484\n\nIt corrupts")
    assert change_class_from_paths(paths=by_pr[50512].changed_paths) == "docs_tests_ci"
    assert change_class_from_paths(paths=by_pr[50383].changed_paths) == "python"
    assert by_pr[52789].changed_paths == ("csrc/moe/mxfp4_finalize.cu", "vllm/_custom_ops.py")
    assert change_class_from_paths(paths=by_pr[52789].changed_paths) == "native"


def test_tags_point_at_their_commits_annotated_ones_peeled(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    assert mirror_tags(path=mirror) == [
        GitTag(name="v0.27.0", sha=remote.git("rev-parse", "main~5")),
        GitTag(name="v0.27.1", sha=remote.git("rev-parse", "main~1")),
    ]


def test_tags_come_in_version_order_and_tree_tags_are_skipped(remote, tmp_path):
    remote.git("tag", "v0.10.0", "main~2")
    remote.git("tag", "v0.9.2", "main~3")
    remote.git("tag", "tree-snapshot", "main^{tree}")
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    assert [tag.name for tag in mirror_tags(path=mirror)] == ["v0.9.2", "v0.10.0", "v0.27.0", "v0.27.1"]


def test_since_sha_lists_only_commits_after_it(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)
    since = remote.git("rev-parse", "main~2")

    commits = mirror_commits(path=mirror, branch="main", since_sha=since, limit=None)

    assert [subject_pr_number(subject=c.subject) for c in commits] == [50601, 52789]


def test_since_sha_may_be_abbreviated(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    commits = mirror_commits(path=mirror, since_sha=remote.git("rev-parse", "--short", "main~1"), limit=None)

    assert [c.sha for c in commits] == [remote.git("rev-parse", "main")]


def test_limit_keeps_the_newest_commits_oldest_first(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    commits = mirror_commits(path=mirror, branch="main", since_sha=None, limit=2)

    assert [subject_pr_number(subject=c.subject) for c in commits] == [50601, 52789]


def test_since_the_tip_there_is_nothing_new(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    tip = fetch(remote, mirror)

    assert mirror_commits(path=mirror, branch="main", since_sha=tip, limit=None) == []


def test_second_fetch_brings_only_the_new_commits(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    first_tip = fetch(remote, mirror)
    remote.commit(
        "[Perf] Decode context parallel for the MLA + KDA hybrid (#53396)",
        files={"vllm/distributed/dcp.py": "DCP = 8\n"},
        when="2026-09-01T09:00:00+00:00",
    )

    second_tip = fetch(remote, mirror)
    new = mirror_commits(path=mirror, branch="main", since_sha=first_tip, limit=None)

    assert second_tip == remote.git("rev-parse", "HEAD") != first_tip
    assert [subject_pr_number(subject=c.subject) for c in new] == [53396]


def test_fetch_twice_with_nothing_new_changes_nothing(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    first = fetch(remote, mirror)
    commits = mirror_commits(path=mirror, since_sha=None, limit=None)

    assert fetch(remote, mirror) == first
    assert mirror_commits(path=mirror, since_sha=None, limit=None) == commits


def test_fetch_follows_a_force_pushed_branch_and_a_deleted_tag(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)
    remote.git("reset", "--quiet", "--hard", "main~1")
    remote.git("tag", "--delete", "v0.27.0")

    tip = fetch(remote, mirror)

    assert tip == remote.git("rev-parse", "main")
    assert [tag.name for tag in mirror_tags(path=mirror)] == ["v0.27.1"]
    assert len(mirror_commits(path=mirror, since_sha=None, limit=None)) == 5


def test_side_branch_commits_stay_off_the_first_parent_history(remote, tmp_path):
    remote.git("checkout", "--quiet", "-b", "kimi-k3-dcp", "main~1")
    remote.commit(
        "wip: dcp", files={"vllm/distributed/dcp.py": "DCP = 1\n"}, when="2026-08-21T09:00:00+00:00"
    )
    remote.commit("wip: docs", files={"docs/dcp.md": "DCP\n"}, when="2026-08-21T10:00:00+00:00")
    remote.git("checkout", "--quiet", "main")
    remote.git(
        "merge",
        "--quiet",
        "--no-ff",
        "-m",
        "Merge branch 'kimi-k3-dcp'",
        "kimi-k3-dcp",
    )
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    commits = mirror_commits(path=mirror, since_sha=None, limit=None)

    assert [c.subject for c in commits if c.subject.startswith("wip")] == []
    merge = commits[-1]
    assert len(merge.parents) == 2
    assert merge.changed_paths == ("docs/dcp.md", "vllm/distributed/dcp.py")


def test_rename_counts_both_names(remote, tmp_path):
    remote.git("mv", "csrc/moe/mxfp4_finalize.cu", "vllm/mxfp4_finalize.py")
    remote.commit("[Misc] Move file (#53500)", files={}, when="2026-09-02T09:00:00+00:00")
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    (commit,) = mirror_commits(path=mirror, since_sha=None, limit=1)

    assert commit.changed_paths == ("csrc/moe/mxfp4_finalize.cu", "vllm/mxfp4_finalize.py")


def test_message_with_separator_characters_and_an_empty_commit_parse(remote, tmp_path):
    remote.commit("[CI] Retrigger\x1e\x1f builds (#53600)", files={}, when="2026-09-03T09:00:00+00:00")
    remote.commit(
        "[Misc] Note", files={}, when="2026-09-03T10:00:00+00:00", body="a\x1fb\x1ec\n\nSigned-off-by: X"
    )
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    retrigger, note = mirror_commits(path=mirror, since_sha=None, limit=2)

    assert retrigger.subject == "[CI] Retrigger\x1e\x1f builds (#53600)"
    assert retrigger.changed_paths == ()
    assert note.body == "a\x1fb\x1ec\n\nSigned-off-by: X"


def test_unknown_since_sha_is_an_unknown_revision(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    with pytest.raises(UnknownRevision, match="0123abcd is not a commit in the mirror"):
        mirror_commits(path=mirror, branch="main", since_sha="0123abcd", limit=None)


def test_since_sha_that_is_not_a_sha_is_refused(remote, tmp_path):
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    with pytest.raises(UnknownRevision, match="not a commit sha"):
        mirror_commits(path=mirror, branch="main", since_sha="--output=/tmp/x", limit=None)


def test_reading_a_mirror_that_was_never_fetched_says_so(tmp_path):
    with pytest.raises(GitMirrorError, match=r"no git mirror at .*run mirror_fetch first"):
        mirror_commits(path=tmp_path / "missing.git", since_sha=None, limit=None)


def test_fetch_from_a_missing_remote_fails_with_gits_reason(tmp_path):
    with pytest.raises(
        GitMirrorError, match=r"git fetch failed with exit code 128: .*(repository|not found)"
    ):
        mirror_fetch(path=tmp_path / "mirror.git", remote_url=str(tmp_path / "nowhere"), timeout_s=TIMEOUT_S)


def test_fetch_of_a_missing_branch_fails(remote, tmp_path):
    with pytest.raises(
        GitMirrorError, match=r"git fetch failed.*couldn't find remote ref refs/heads/release"
    ):
        mirror_fetch(
            path=tmp_path / "m.git", remote_url=str(remote.path), branch="release", timeout_s=TIMEOUT_S
        )


@pytest.mark.parametrize("branch", ["--upload-pack=touch /tmp/x", "main..x", "", "main/"])
def test_branch_that_is_not_a_branch_name_is_refused(remote, tmp_path, branch):
    with pytest.raises(GitMirrorError, match="not a branch name"):
        mirror_fetch(path=tmp_path / "m.git", remote_url=str(remote.path), branch=branch, timeout_s=TIMEOUT_S)


def test_fetch_from_a_hanging_remote_times_out(silent_server_port, tmp_path):
    hanging_remote = f"git://127.0.0.1:{silent_server_port}/vllm-project/vllm.git"
    started = datetime.now(tz=UTC)

    with pytest.raises(GitMirrorError, match=r"git fetch timed out after 1 s"):
        mirror_fetch(path=tmp_path / "mirror.git", remote_url=hanging_remote, timeout_s=1)

    assert (datetime.now(tz=UTC) - started).total_seconds() < 10


def test_subject_is_the_first_paragraph_on_one_line_like_git_log(remote, tmp_path):
    remote.commit(
        "[Bugfix] Fix KDA checkpoint\nalignment for DCP (#53700)",
        files={},
        when="2026-09-04T09:00:00+00:00",
        body="\nSigned-off-by: A <a@example.com>\n",
    )
    mirror = tmp_path / "mirror.git"
    fetch(remote, mirror)

    (commit,) = mirror_commits(path=mirror, since_sha=None, limit=1)

    assert commit.subject == remote.git("log", "-1", "--format=%s")
    assert commit.subject == "[Bugfix] Fix KDA checkpoint alignment for DCP (#53700)"
    assert commit.body == "Signed-off-by: A <a@example.com>"
