"""Subprocesses in their own process group, with a timeout, a log file, and a teardown that kills all.

vLLM and guidellm both leave worker processes behind when only their parent is signalled, so every
long-lived command here gets its own session and is always ended as a whole group. A group in its own
session also outlives the process that started it, so each one is led by a small guard that kills the
group when its starter dies, even by SIGKILL: a crashed runner never leaves a server holding the GPUs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from runners.errors import Cancelled, CommandFailed

TERM_GRACE_S = 10.0
LOG_TAIL_LINES = 40
CANCEL_POLL_S = 0.5

# The group's leader: runs the command in the same group and waits for it; its stdin is a pipe whose
# other end only the starter holds, so end-of-file means the starter is gone and the group must go too.
# It ignores SIGTERM (after starting the command) so that a polite stop reaches the command and the
# leader reports the command's own exit status; a command killed by a signal kills the leader by the same
# signal, so that its starter sees the kill (SIGKILL: the OOM killer) and not an exit status.
_GUARD = """\
import os, signal, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
def starter_watch():
    while os.read(0, 4096):
        pass
    os.killpg(0, signal.SIGKILL)
threading.Thread(target=starter_watch, daemon=True).start()
status = child.wait()
if status < 0:
    if -status not in (signal.SIGKILL, signal.SIGSTOP):  # neither can have a handler, nor be ignored
        signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
os._exit(status)
"""


def log_tail(*, path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """Return the last `lines` lines of a log file ('' when it does not exist)."""
    try:
        with path.open("rb") as handle:
            # Only the end matters; a server log can be large.
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])


def process_start(
    *,
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session (its own process group, led by the guard), stdout and stderr
    appended to `log_path`. The returned process is the guard; its exit status is the command's."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(f"$ {' '.join(argv)}\n".encode())
        log.flush()
        return subprocess.Popen(
            # -I: the guard ignores PYTHON* variables meant for the command's own interpreter.
            [sys.executable, "-I", "-c", _GUARD, *argv],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
        )


def _group_alive(*, pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_group_terminate(*, process: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the process's whole group, SIGKILL what is left after `grace_s`, and reap the leader.

    The group id equals the leader's pid because it was started with start_new_session; the group can
    outlive its leader (orphaned grandchildren), so liveness is checked on the group, not the leader.
    """
    pgid = process.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.1)
        if not _group_alive(pgid=pgid):
            break
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    process.wait(timeout=grace_s)
    # SIGKILL is delivered asynchronously; wait until the group is really gone.
    deadline = time.monotonic() + grace_s
    while _group_alive(pgid=pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if process.stdin is not None:
        process.stdin.close()


def command_run(
    *,
    argv: Sequence[str],
    log_path: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    cancel: threading.Event | None = None,
    stop_grace_s: float = TERM_GRACE_S,
) -> None:
    """Run `argv` to completion in its own process group; raise CommandFailed on failure or timeout,
    Cancelled as soon as `cancel` is set (the group is ended in every case, SIGKILLed after
    `stop_grace_s` if SIGTERM did not do)."""
    process = process_start(argv=argv, log_path=log_path, env=env, cwd=cwd)
    timed_out = False
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                process.wait(timeout=max(0.0, min(CANCEL_POLL_S, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"{argv[0]} stopped: the run was cancelled") from None
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
    finally:
        # Also on success: a finished leader may leave daemons behind in its group.
        process_group_terminate(process=process, grace_s=stop_grace_s)
    if timed_out or process.returncode != 0:
        raise CommandFailed(
            argv=tuple(argv),
            returncode=None if timed_out else process.returncode,
            timed_out=timed_out,
            log_path=log_path,
            log_tail=log_tail(path=log_path),
        )


def command_output(*, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> str:
    """Run a short command and return its stdout; raise CommandFailed on failure or timeout."""
    try:
        completed = subprocess.run(
            list(argv),
            capture_output=True,
            timeout=timeout_s,
            env=None if env is None else dict(env),
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(
            argv=tuple(argv), returncode=None, timed_out=True, log_path=Path("-"), log_tail=""
        ) from exc
    if completed.returncode != 0:
        raise CommandFailed(
            argv=tuple(argv),
            returncode=completed.returncode,
            timed_out=False,
            log_path=Path("-"),
            log_tail=completed.stderr.decode("utf-8", errors="replace")[-4000:],
        )
    return completed.stdout.decode("utf-8", errors="replace")
