"""A bare git mirror of one branch and its tags, read with ``git log``. Pure: no Django.

The worker keeps the mirror on disk, so a sync costs one incremental ``git fetch`` instead of thousands
of REST calls, and the files each commit touched (which the REST commit list does not give) come free.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dashboard.benchmarks.subjects import message_split

DEFAULT_READ_TIMEOUT_S = 120.0

_SHA_PREFIX = re.compile(r"[0-9a-fA-F]{4,64}")
_BRANCH = re.compile(r"(?!-)(?!.*\.\.)[A-Za-z0-9._/-]+(?<![./])")
# One git log record: the fields below separated by \x1f, the raw message last (it is the only free-form
# field, and may hold anything but NUL), NUL, then with -z the touched paths as "\n" + NUL-ended names.
_LOG_FORMAT = "%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%ct%x1f%B"
_LOG_FIELDS = 7


class GitMirrorError(Exception):
    """A git command on the mirror failed, timed out or could not run; the message says which and why."""


class UnknownRevision(GitMirrorError):
    """The mirror has no such commit (not fetched yet, or gone after a force-push)."""


@dataclass(frozen=True)
class GitCommit:
    """One commit of the mirrored branch. Times are timezone-aware UTC."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    authored_at: datetime
    committed_at: datetime
    subject: str
    body: str
    changed_paths: tuple[str, ...]


@dataclass(frozen=True)
class GitTag:
    """A tag and the commit it points at (annotated tags are peeled to their commit)."""

    name: str
    sha: str


def mirror_fetch(*, path: Path, remote_url: str, branch: str = "main", timeout_s: float) -> str:
    """Create the bare mirror at ``path`` if needed, fetch ``branch`` and all tags; return the branch tip.

    Idempotent: a second fetch with nothing new changes nothing. The branch and tags follow the remote
    even when it rewrote them (forced refspecs, pruned tags), because the remote is the truth.
    """
    _branch_validate(branch=branch)
    if remote_url.startswith("-") or not remote_url:
        raise GitMirrorError(f"not a git remote: {remote_url!r}")
    if not (path / "HEAD").is_file():
        path.mkdir(parents=True, exist_ok=True)
        _git("init", "--bare", "--quiet", str(path), path=None, timeout_s=timeout_s)
        _git("symbolic-ref", "HEAD", f"refs/heads/{branch}", path=path, timeout_s=timeout_s)
    _git(
        "fetch",
        "--quiet",
        "--prune",
        "--no-tags",
        "--no-write-fetch-head",
        remote_url,
        f"+refs/heads/{branch}:refs/heads/{branch}",
        "+refs/tags/*:refs/tags/*",
        path=path,
        timeout_s=timeout_s,
    )
    return _revision_resolve(path=path, revision=f"refs/heads/{branch}", timeout_s=timeout_s)


def mirror_commits(
    *,
    path: Path,
    branch: str = "main",
    since_sha: str | None,
    limit: int | None,
    timeout_s: float = DEFAULT_READ_TIMEOUT_S,
) -> list[GitCommit]:
    """The branch's first-parent history after ``since_sha`` (all of it if None), oldest to newest.

    ``limit`` keeps the newest ``limit`` of those commits: a first import of a long history wants the
    recent end. Paths are those changed against the first parent, a rename counting as both names.
    Raise UnknownRevision if ``since_sha`` is not in the mirror.
    """
    _branch_validate(branch=branch)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    tip = _revision_resolve(path=path, revision=f"refs/heads/{branch}", timeout_s=timeout_s)
    revisions = [tip]
    if since_sha is not None:
        revisions.append("^" + _revision_resolve(path=path, revision=since_sha, timeout_s=timeout_s))
    output = _git(
        "log",
        "-z",
        "--first-parent",
        "--reverse",
        "--no-renames",
        "--diff-merges=first-parent",
        "--name-only",
        "--encoding=UTF-8",
        f"--format={_LOG_FORMAT}",
        *([f"--max-count={limit}"] if limit is not None else []),
        *revisions,
        "--",
        path=path,
        timeout_s=timeout_s,
    )
    return _log_parse(output)


def mirror_tags(*, path: Path, timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> list[GitTag]:
    """Tags that point at commits, in version order (v0.9.2 before v0.10.0)."""
    output = _git(
        "for-each-ref",
        "--sort=version:refname",
        "--format=%(refname:strip=2)%00%(objecttype)%00%(objectname)%00%(*objecttype)%00%(*objectname)",
        "refs/tags",
        path=path,
        timeout_s=timeout_s,
    )
    tags: list[GitTag] = []
    for line in output.decode("utf-8", errors="replace").splitlines():
        name, object_type, sha, peeled_type, peeled_sha = line.split("\0")
        if peeled_type:
            object_type, sha = peeled_type, peeled_sha
        # A tag of a tree or a blob names no point in history.
        if object_type == "commit":
            tags.append(GitTag(name=name, sha=sha))
    return tags


def _log_parse(output: bytes) -> list[GitCommit]:
    # A commit message cannot hold NUL, so NUL + record separator only ever starts a record.
    records = (b"\0" + output).split(b"\0\x1e")[1:]
    commits = []
    for record in records:
        header, _, paths_part = record.partition(b"\0")
        fields = header.decode("utf-8", errors="replace").split("\x1f", _LOG_FIELDS - 1)
        if len(fields) != _LOG_FIELDS:
            raise GitMirrorError(f"unreadable git log record: {header[:80]!r}")
        sha, parents, author_name, author_email, authored_epoch, committed_epoch, message = fields
        subject, body = message_split(message=message)
        paths = paths_part.removeprefix(b"\n").split(b"\0")
        commits.append(
            GitCommit(
                sha=sha,
                parents=tuple(parents.split()),
                author_name=author_name,
                author_email=author_email,
                authored_at=datetime.fromtimestamp(int(authored_epoch), tz=UTC),
                committed_at=datetime.fromtimestamp(int(committed_epoch), tz=UTC),
                subject=subject,
                body=body,
                changed_paths=tuple(p.decode("utf-8", errors="replace") for p in paths if p),
            )
        )
    return commits


def _revision_resolve(*, path: Path, revision: str, timeout_s: float) -> str:
    if not revision.startswith("refs/heads/") and not _SHA_PREFIX.fullmatch(revision):
        raise UnknownRevision(f"not a commit sha: {revision!r}")
    try:
        output = _git(
            "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}", path=path, timeout_s=timeout_s
        )
    except GitMirrorError as exc:
        if not (path / "HEAD").is_file():
            raise GitMirrorError(f"no git mirror at {path}: run mirror_fetch first") from exc
        raise UnknownRevision(f"{revision} is not a commit in the mirror at {path}") from exc
    return output.decode().strip()


def _branch_validate(*, branch: str) -> None:
    if not _BRANCH.fullmatch(branch):
        raise GitMirrorError(f"not a branch name: {branch!r}")


def _git(*args: str, path: Path | None, timeout_s: float) -> bytes:
    """Run ``git args`` in the repository at ``path``; return stdout or raise GitMirrorError saying why."""
    # Never wait for a password nobody will type, and keep messages in one language for the errors.
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    command = f"git {args[0]}"
    location = [] if path is None else ["-C", str(path)]
    try:
        # A session of its own, because git fetch runs helpers (remote-https, index-pack) that must die
        # with it on a timeout.
        process = subprocess.Popen(
            ["git", *location, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise GitMirrorError("git is not installed") from exc
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise GitMirrorError(f"{command} timed out after {timeout_s:g} s") from exc
    if process.returncode != 0:
        lines = stderr.decode("utf-8", errors="replace").strip().splitlines()
        reason = lines[-1] if lines else "no message"
        raise GitMirrorError(f"{command} failed with exit code {process.returncode}: {reason}")
    return stdout
