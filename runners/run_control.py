"""What every stage of a run shares: the heartbeat thread, the stage clock, and the one mapping of the
steps' failures to a stage and a one-line reason."""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from runners.accuracy import AccuracyFailed
from runners.errors import (
    BenchFailed,
    Cancelled,
    CommandFailed,
    InstallRefused,
    RunFailed,
    RunnerError,
    ServerFailed,
)
from runners.server import failure_line
from runners.text import one_line
from runners.wheel_index import WheelIndexUnreachable, WheelMissing


class Heartbeat:
    """Calls `heartbeat` every interval in a daemon thread; if it raises, the run is cancelled and the
    exception is raised again by the run once everything is torn down."""

    def __init__(self, *, heartbeat: Callable[[], None], interval_s: float, cancel: threading.Event):
        self._heartbeat = heartbeat
        self._interval_s = interval_s
        self._cancel = cancel
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="run-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._heartbeat()
            except BaseException as exc:  # handed to the run's thread, never lost
                self.error = exc
                self._cancel.set()
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


class Stages:
    """Tracks the current stage, its start, and each finished stage's duration; a cancelled run goes
    no further than the stage it is in."""

    def __init__(self, *, on_stage: Callable[[str], None], cancel: threading.Event):
        self._on_stage = on_stage
        self._cancel = cancel
        self.current = ""
        self._started = 0.0
        self.durations_s: dict[str, float] = {}

    def enter(self, stage: str) -> None:
        if self._cancel.is_set():
            raise Cancelled(f"the run was cancelled before {stage}")
        self.close()
        self.current = stage
        self._started = time.monotonic()
        self._on_stage(stage)

    def close(self) -> None:
        if self.current and self.current not in self.durations_s:
            self.durations_s[self.current] = round(time.monotonic() - self._started, 3)


def shell_line(*, argv: tuple[str, ...], env: Mapping[str, str]) -> str:
    assignments = [f"{key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    return " ".join([*assignments, *(shlex.quote(part) for part in argv)])


REASON_CHARS = 300
# A server killed by a signal (the OOM killer on a loaded node) gets one more attempt, not the full budget.
KILLED_RETRIES = 1


@contextmanager
def failures_as_run_failed(stages: Stages) -> Iterator[None]:
    """Turn the domain exceptions of the steps into RunFailed at the stage where they happened."""
    try:
        yield
    except RunFailed:
        raise
    except CommandFailed as exc:
        what = "timed out" if exc.timed_out else f"exited with status {exc.returncode}"
        reason = f"{Path(exc.argv[0]).name} {what}: {failure_line(tail=exc.log_tail)}"
        raise RunFailed(
            stage=stages.current,
            reason=one_line(reason, limit=REASON_CHARS),
            log_tail=exc.log_tail,
            retryable=exc.timed_out,
        ) from exc
    except ServerFailed as exc:
        raise RunFailed(
            stage=stages.current,
            reason=one_line(exc.reason, limit=REASON_CHARS),
            log_tail=exc.log_tail,
            retryable=exc.killed,
            retries_max=KILLED_RETRIES if exc.killed else None,
        ) from exc
    except BenchFailed as exc:
        raise RunFailed(
            stage=stages.current,
            reason=one_line(f"the bench failed: {exc.reason}", limit=REASON_CHARS),
            log_tail=exc.log_tail,
            retryable=True,
        ) from exc
    except WheelMissing as exc:
        raise RunFailed(
            stage=stages.current, reason=one_line(exc, limit=REASON_CHARS), waiting=exc.wait
        ) from exc
    except (InstallRefused, WheelIndexUnreachable, Cancelled, AccuracyFailed, RunnerError) as exc:
        raise RunFailed(stage=stages.current, reason=one_line(exc, limit=REASON_CHARS)) from exc
    except OSError as exc:
        raise RunFailed(
            stage=stages.current, reason=one_line(f"{type(exc).__name__}: {exc}", limit=REASON_CHARS)
        ) from exc
