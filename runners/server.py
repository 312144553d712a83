"""The `vllm serve` lifecycle: start in its own process group, wait for /health, always tear down.

vLLM starts engine and worker processes of its own; signalling only the parent can leave them holding
GPUs, so the server runs in a new session and is ended as a whole group, in every path out.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runners.errors import Cancelled, ServerFailed
from runners.metrics import MetricsSnapshot, metrics_snapshot
from runners.process import log_tail, process_group_terminate, process_start

HEALTH_POLL_S = 1.0
HTTP_TIMEOUT_S = 10.0
REASON_MAX_CHARS = 300


def free_port_pick() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# The server is local: a proxy configured for the node's outbound traffic must not be asked for it.
_LOCAL_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(*, url: str, timeout_s: float = HTTP_TIMEOUT_S) -> bytes:
    """GET `url` (no proxy) and return the body; urllib's errors propagate."""
    with _LOCAL_OPENER.open(url, timeout=timeout_s) as response:
        return bytes(response.read())


def _healthy(*, base_url: str) -> bool:
    try:
        http_get(url=f"{base_url}/health", timeout_s=5.0)
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError):
        return False
    return True


def _noise(line: str) -> bool:
    # Python's shutdown chatter (leaked semaphores) says nothing about why a step failed.
    return "resource_tracker" in line or line.strip().startswith("warnings.warn(")


def failure_line(*, tail: str) -> str:
    """The most telling line of a log tail: the last one naming an error, else the last line."""
    lines = [line.strip() for line in tail.splitlines() if line.strip() and not _noise(line)]
    if not lines:
        return "no output"
    for line in reversed(lines):
        if "Error" in line or "error:" in line.lower():
            return line[:REASON_MAX_CHARS]
    return lines[-1][:REASON_MAX_CHARS]


@dataclass(frozen=True)
class RunningServer:
    """A healthy server: where it listens, what it says it runs, how long it took to come up."""

    base_url: str
    process: subprocess.Popen[bytes]
    version: str
    startup_s: float
    log_path: Path

    def exit_status(self) -> int | None:
        """The server's exit status once it has died, else None."""
        return self.process.poll()

    def metrics(self, *, timeout_s: float = HTTP_TIMEOUT_S) -> MetricsSnapshot:
        """Scrape /metrics now."""
        text = http_get(url=f"{self.base_url}/metrics", timeout_s=timeout_s).decode("utf-8", errors="replace")
        return metrics_snapshot(text=text)

    def metrics_text(self, *, timeout_s: float = HTTP_TIMEOUT_S) -> str:
        return http_get(url=f"{self.base_url}/metrics", timeout_s=timeout_s).decode("utf-8", errors="replace")


def vllm_serve_argv(*, vllm: Path, model: str, args: Sequence[str], port: int) -> tuple[str, ...]:
    """`vllm serve MODEL ARGS...` listening on 127.0.0.1:port (the benchmark client runs on the node)."""
    return (str(vllm), "serve", model, *args, "--host", "127.0.0.1", "--port", str(port))


@contextlib.contextmanager
def server_running(
    *,
    argv: Sequence[str],
    env: Mapping[str, str],
    port: int,
    log_path: Path,
    start_timeout_s: float,
    stop_grace_s: float = 20.0,
    cancel: threading.Event | None = None,
) -> Iterator[RunningServer]:
    """Start the server, yield it once /health answers, and tear its whole process group down on exit.

    Raises ServerFailed (with the log's tail) when the process exits during start-up, as soon as it
    does, or when it is not healthy within `start_timeout_s`.
    """
    base_url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    process = process_start(argv=argv, log_path=log_path, env=env)
    try:
        deadline = started + start_timeout_s
        while not _healthy(base_url=base_url):
            returncode = process.poll()
            if returncode is not None:
                tail = log_tail(path=log_path)
                raise ServerFailed(
                    reason=f"vllm serve exited with status {returncode} during start-up: "
                    f"{failure_line(tail=tail)}",
                    log_tail=tail,
                )
            if cancel is not None and cancel.is_set():
                raise Cancelled("vllm serve stopped during start-up: the run was cancelled")
            if time.monotonic() > deadline:
                tail = log_tail(path=log_path)
                raise ServerFailed(
                    reason=f"vllm serve was not healthy after {start_timeout_s:.0f} s: "
                    f"{failure_line(tail=tail)}",
                    log_tail=tail,
                )
            time.sleep(HEALTH_POLL_S)
        startup_s = time.monotonic() - started
        try:
            version = str(json.loads(http_get(url=f"{base_url}/version"))["version"])
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
            tail = log_tail(path=log_path)
            raise ServerFailed(reason=f"/version did not answer: {exc}", log_tail=tail) from exc
        yield RunningServer(
            base_url=base_url, process=process, version=version, startup_s=startup_s, log_path=log_path
        )
    finally:
        process_group_terminate(process=process, grace_s=stop_grace_s)


def server_warm_up(*, base_url: str, model: str, timeout_s: float) -> float:
    """Send one short completion and wait for it; return how long it took in seconds.

    A freshly started server pays one-time costs (kernel selection, allocator growth) on its first
    request; on a small CPU that alone outlasts a short benchmark level, which then measures nothing.
    """
    body = json.dumps({"model": model, "prompt": "Warm up", "max_tokens": 8, "temperature": 0}).encode()
    request = urllib.request.Request(
        f"{base_url}/v1/completions", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    started = time.monotonic()
    try:
        with _LOCAL_OPENER.open(request, timeout=timeout_s) as response:
            response.read()
    except urllib.error.HTTPError as error:
        raise ServerFailed(
            reason=f"warm-up request failed: HTTP {error.code} {error.reason}", log_tail=""
        ) from None
    except (urllib.error.URLError, OSError) as error:
        raise ServerFailed(reason=f"warm-up request failed: {error}", log_tail="") from None
    return time.monotonic() - started
