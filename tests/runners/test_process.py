"""Subprocess groups: whatever a command spawned is gone after a stop, a timeout or a cancel."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runners.errors import Cancelled, CommandFailed
from runners.process import command_run, log_tail, process_group_terminate, process_start
from tests.runners.conftest import RUNNER_FIXTURES, pids_read, processes_gone

TREE = str(RUNNER_FIXTURES / "stubborn_process_tree.py")
ROOT = Path(__file__).resolve().parents[2]


def test_teardown_kills_grandchildren_that_ignore_sigterm(tmp_path):
    pids_file = tmp_path / "pids"
    process = process_start(argv=(sys.executable, TREE, str(pids_file)), log_path=tmp_path / "tree.log")
    pids = pids_read(pids_file, count=3)
    assert not processes_gone(pids, within_s=0.2)

    started = time.monotonic()
    process_group_terminate(process=process, grace_s=1.0)

    assert processes_gone(pids, within_s=2.0)
    assert time.monotonic() - started < 30  # not the hour its grandchildren would sleep
    assert "tree running" in log_tail(path=tmp_path / "tree.log")


def test_command_past_its_timeout_fails_and_leaves_nothing_running(tmp_path):
    pids_file = tmp_path / "pids"
    started = time.monotonic()

    with pytest.raises(CommandFailed) as raised:
        command_run(
            argv=(sys.executable, TREE, str(pids_file)),
            log_path=tmp_path / "t.log",
            timeout_s=2,
            stop_grace_s=1,
        )

    assert raised.value.timed_out and raised.value.returncode is None
    assert time.monotonic() - started < 60  # the timeout fired: the command itself sleeps an hour
    assert processes_gone(pids_read(pids_file, count=3), within_s=2.0)


def test_cancel_stops_a_running_command_and_its_group(tmp_path):
    pids_file = tmp_path / "pids"
    cancel = threading.Event()
    threading.Timer(1.5, cancel.set).start()

    with pytest.raises(Cancelled):
        command_run(
            argv=(sys.executable, TREE, str(pids_file)),
            log_path=tmp_path / "t.log",
            timeout_s=60,
            cancel=cancel,
            stop_grace_s=1,
        )

    assert processes_gone(pids_read(pids_file, count=3), within_s=2.0)


def test_failing_command_reports_its_status_and_the_end_of_its_log(tmp_path):
    script = (
        "import sys\n"
        "for i in range(100): print('line', i)\n"
        "print('fatal: no space left', file=sys.stderr)\n"
        "sys.exit(7)"
    )

    with pytest.raises(CommandFailed) as raised:
        command_run(argv=(sys.executable, "-c", script), log_path=tmp_path / "c.log", timeout_s=30)

    assert raised.value.returncode == 7 and not raised.value.timed_out
    tail = raised.value.log_tail.splitlines()
    assert tail[-1] == "fatal: no space left"
    assert "line 0" not in tail and len(tail) == 40


def test_log_starts_with_the_command_that_wrote_it(tmp_path):
    command_run(argv=("echo", "hello"), log_path=tmp_path / "e.log", timeout_s=30)

    assert (tmp_path / "e.log").read_text() == "$ echo hello\nhello\n"


def test_group_dies_with_its_starter_even_when_the_starter_is_killed_hard(tmp_path):
    pids_file = tmp_path / "pids"
    starter_script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from runners.process import process_start\n"
        f"process_start(argv=(sys.executable, {TREE!r}, {str(pids_file)!r}),\n"
        f"              log_path=Path({str(tmp_path / 't.log')!r}))\n"
        "time.sleep(3600)\n"
    )
    starter = subprocess.Popen([sys.executable, "-c", starter_script], cwd=ROOT)
    try:
        pids = pids_read(pids_file, count=3)
        assert not processes_gone(pids, within_s=0.5)

        os.kill(starter.pid, signal.SIGKILL)

        assert processes_gone(pids, within_s=3.0)
    finally:
        starter.kill()
        starter.wait(timeout=10)
