"""Domain exceptions of the GPU-node side. Each carries a one-line reason fit for a run's page."""

from __future__ import annotations

from pathlib import Path


class RunnerError(Exception):
    """Base of every failure raised by `runners`."""


class SuiteInvalid(RunnerError):
    """A suite file is missing, unparsable or has a bad field; the message names file and field."""


class CommandFailed(RunnerError):
    """A subprocess exited non-zero or ran past its timeout."""

    def __init__(
        self,
        *,
        argv: tuple[str, ...],
        returncode: int | None,
        timed_out: bool,
        log_path: Path,
        log_tail: str,
    ) -> None:
        self.argv = argv
        self.returncode = returncode
        self.timed_out = timed_out
        self.log_path = log_path
        self.log_tail = log_tail
        what = "timed out" if timed_out else f"exited with status {returncode}"
        super().__init__(f"{argv[0]} {what} (log: {log_path})")


class Cancelled(RunnerError):
    """The work was stopped on request (a failed heartbeat or a cancelled run) before it finished."""


class InstallRefused(RunnerError):
    """An install cannot be attempted as asked (short sha, no wheel for a commit, unknown method)."""


class ServerFailed(RunnerError):
    """The vLLM server exited during start-up or did not become healthy in time; `killed` when a
    signal ended it (the OOM killer, an operator), which is the node's doing, not the code's."""

    def __init__(self, *, reason: str, log_tail: str, killed: bool = False) -> None:
        self.reason = reason
        self.log_tail = log_tail
        self.killed = killed
        super().__init__(reason)


class BenchFailed(RunnerError):
    """The bench, not the code under test, failed: a request timed out or the node was too loaded to
    complete one. Another attempt may well succeed, so it is retried before it counts."""

    def __init__(self, *, reason: str, log_tail: str = "") -> None:
        self.reason = reason
        self.log_tail = log_tail
        super().__init__(reason)


class RunFailed(RunnerError):
    """A benchmark run failed at a stage; `reason` is one line, `log_tail` the evidence. `retryable` marks
    a failure that another attempt may not meet (a step that timed out), unlike a deterministic one;
    `server_errors` one where the server under test answered requests with errors; `waiting` one that
    only means "not yet" (no wheel for the commit yet): the run is tried again later, costing no attempt;
    `timed_out` one where a step ran past its timeout (the step's process group was ended)."""

    def __init__(
        self,
        *,
        stage: str,
        reason: str,
        log_tail: str = "",
        retryable: bool = False,
        server_errors: bool = False,
        waiting: bool = False,
        retries_max: int | None = None,
        timed_out: bool = False,
    ) -> None:
        self.waiting = waiting
        self.timed_out = timed_out
        # At most this many more attempts for this kind of failure (a killed server: one), if retryable.
        self.retries_max = retries_max
        self.stage = stage
        self.reason = reason
        self.log_tail = log_tail
        self.retryable = retryable
        self.server_errors = server_errors
        # The evidence a failed run keeps, filled in by the pipeline as it passes through.
        self.commands: dict[str, tuple[str, ...]] = {}
        self.raw_report: bytes | None = None
        super().__init__(f"{stage}: {reason}")
