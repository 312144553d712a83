"""The per-commit wheel index (wheels.vllm.ai, or a node's mirror of it): where it is, and whether it has
a wheel for a commit, asked before anything is built."""

from __future__ import annotations

import os
import re
import urllib.error
import urllib.request

from runners.errors import InstallRefused, RunnerError
from runners.node_setup import WHEEL_INDEX_VARIABLE
from runners.suites import InstallSpec

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")


class WheelIndexUnreachable(RunnerError):
    """The per-commit wheel index answered neither 200 nor 404, or not at all."""


class WheelMissing(InstallRefused):
    """The per-commit index has no wheel for the commit; `wait` when the suite waits for one."""

    def __init__(self, message: str, *, wait: bool) -> None:
        self.wait = wait
        super().__init__(message)


def full_sha_check(*, sha: str, what: str) -> str:
    """Return `sha` when it is a full 40-character commit id; refuse anything shorter.

    A short sha is ambiguous, and VLLM_PRECOMPILED_WHEEL_COMMIT silently takes the latest nightly when
    it does not name a full commit, which would benchmark the wrong code without a trace.
    """
    if not FULL_SHA.match(sha):
        raise InstallRefused(f"{what} must be a full 40-character lower-case sha, got '{sha}'")
    return sha


def wheel_index_base(install: InstallSpec) -> str:
    """The per-commit wheel index this node uses: its own mirror ($PERFWATCH_WHEEL_INDEX_URL), else the
    suite's."""
    return (os.environ.get(WHEEL_INDEX_VARIABLE) or "").strip() or install.wheel_index_url


def wheel_metadata_url(*, index_url: str, commit_sha: str, package: str = "vllm") -> str:
    return f"{index_url.rstrip('/')}/{commit_sha}/{package}/metadata.json"


def wheel_available(*, index_url: str, commit_sha: str, package: str = "vllm", timeout_s: float = 20) -> bool:
    """Whether the per-commit wheel index has a wheel of `package` for the commit (200) or not (404)."""
    url = wheel_metadata_url(
        index_url=index_url, commit_sha=full_sha_check(sha=commit_sha, what="commit"), package=package
    )
    request = urllib.request.Request(url, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise WheelIndexUnreachable(f"{url} answered HTTP {exc.code}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise WheelIndexUnreachable(f"{url} could not be read: {exc}") from exc
