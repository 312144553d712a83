import sys
import time
from pathlib import Path

import pytest

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
