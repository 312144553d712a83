"""The `vllm serve` lifecycle: start in its own process group, wait for /health, always tear down.

vLLM starts engine and worker processes of its own; signalling only the parent can leave them holding
GPUs, so the server runs in a new session and is ended as a whole group, in every path out.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runners.errors import BenchFailed, Cancelled, ServerFailed
from runners.metrics import MetricsSnapshot, metrics_snapshot
from runners.process import log_tail, process_group_terminate, process_start

HEALTH_POLL_S = 1.0
HTTP_TIMEOUT_S = 10.0
REASON_MAX_CHARS = 300


# The node's range for `vllm serve` ports ("8100-8199"), where a firewall or another service wants one.
SERVE_PORTS_VARIABLE = "PERFWATCH_SERVE_PORTS"


class PortsExhausted(ServerFailed):
    """No port of the node's range is free."""


def serve_ports_range(text: str) -> range | None:
    """The port range of a PERFWATCH_SERVE_PORTS value ('' or unset: any free port); ValueError if bad."""
    if not text.strip():
        return None
    low, _, high = text.strip().partition("-")
    first, last = int(low), int(high or low)
    if not 1024 <= first <= last <= 65535:
        raise ValueError(f"{SERVE_PORTS_VARIABLE}={text!r} is not a range of ports from 1024 to 65535")
    return range(first, last + 1)


def free_port_pick() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it moments later): from the node's range
    ($PERFWATCH_SERVE_PORTS) when it has one, else any."""
    ports = serve_ports_range(os.environ.get(SERVE_PORTS_VARIABLE, ""))
    for port in ports if ports is not None else (0,):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise PortsExhausted(
        reason=f"no free port in {SERVE_PORTS_VARIABLE}={os.environ[SERVE_PORTS_VARIABLE]}", log_tail=""
    )


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


def _lines(tail: str) -> list[str]:
    return [line.strip() for line in tail.splitlines() if line.strip() and not _noise(line)]


def error_line(*, tail: str) -> str:
    """The last line of a log tail that names an error ('' if none does)."""
    for line in reversed(_lines(tail)):
        if "Error" in line or "error:" in line.lower() or line.startswith("ERROR"):
            return line[:REASON_MAX_CHARS]
    return ""


def kernel_oom_line(*, within_s: float) -> str:
    """The kernel's last out-of-memory kill of the past `within_s` seconds, from `dmesg`, where this
    user may read it ('' when none or unreadable)."""
    try:
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        printed = subprocess.run(
            ["dmesg"], capture_output=True, text=True, timeout=5, check=False
        ).stdout.splitlines()
    except (OSError, ValueError, subprocess.SubprocessError):
        return ""
    found = ""
    for line in printed:
        stamp = re.match(r"^\[\s*(\d+\.\d+)\]\s*(.*)$", line)
        if (
            stamp
            and float(stamp.group(1)) >= uptime_s - within_s
            and ("Out of memory" in line or "oom-kill" in line or "Killed process" in line)
        ):
            found = stamp.group(2)
    return found


def killed_by_signal(status: int | None) -> bool:
    """Whether an exit status says the process was killed by a signal (the guard passes it on)."""
    return status is not None and status < 0


def death_line(*, status: int, tail: str, within_s: float, when: str) -> str:
    """What ended vllm serve, in one line: a signal is named as such (SIGKILL is what the kernel's OOM
    killer sends; its message is quoted when it can be read), never blamed on a line of the server's log."""
    if killed_by_signal(status):
        name = (
            signal.Signals(-status).name if -status in signal.Signals.__members__.values() else str(-status)
        )
        oom = kernel_oom_line(within_s=within_s) if -status == signal.SIGKILL else ""
        cause = f": {oom}" if oom else (" (the kernel's OOM killer sends it)" if name == "SIGKILL" else "")
        return f"vllm serve was killed by {name} {when}{cause}; the node's doing, not the code under test"
    return f"vllm serve exited with status {status} {when}: {failure_line(tail=tail)}"


def failure_line(*, tail: str) -> str:
    """The most telling line of a log tail: the last one naming an error, else the last line."""
    lines = _lines(tail)
    if not lines:
        return "no output"
    return error_line(tail=tail) or lines[-1][:REASON_MAX_CHARS]


@dataclass(frozen=True)
class RunningServer:
    """A healthy server: where it listens, what it says it runs, how long it took to come up."""

    base_url: str
    process: subprocess.Popen[bytes]
    version: str
    startup_s: float
    log_path: Path
    started_monotonic: float = 0.0

    def age_s(self) -> float:
        return time.monotonic() - self.started_monotonic

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
                    reason=death_line(
                        status=returncode,
                        tail=tail,
                        within_s=time.monotonic() - started + 5,
                        when="during start-up",
                    ),
                    log_tail=tail,
                    killed=killed_by_signal(returncode),
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
            base_url=base_url,
            process=process,
            version=version,
            startup_s=startup_s,
            log_path=log_path,
            started_monotonic=started,
        )
    finally:
        process_group_terminate(process=process, grace_s=stop_grace_s)


WARM_UP_RETRY_S = 2.0
ERROR_BODY_CHARS = 200


@dataclass(frozen=True)
class WarmUp:
    """How the server answered requests of the suite's own shape before the benchmark."""

    first_s: float  # the first completion that returned, one-time costs (kernels, allocator) included
    request_s: float  # one more completion of the same shape, on a warm server
    attempts: int  # requests sent until the first completion returned
    text: str = ""  # the prompt sent, sized with the served model's tokenizer
    prompt_tokens_measured: int | None = None  # its length in that tokenizer's tokens (None: not asked)


WARM_UP_WORD = "hello"


def _tokenizer_call(*, base_url: str, path: str, body: dict[str, object], timeout_s: float) -> dict:
    request = urllib.request.Request(
        f"{base_url}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with _LOCAL_OPENER.open(request, timeout=timeout_s) as response:
        answer = json.loads(response.read())
    if not isinstance(answer, dict):
        raise ValueError(f"{path} answered {type(answer).__name__}, not an object")
    return answer


def warm_up_text(
    *, base_url: str, model: str, prompt_tokens: int, timeout_s: float = 30
) -> tuple[str, int | None]:
    """A prompt of `prompt_tokens` tokens in the served model's own tokenizer, and its measured length.

    A word is one token in some tokenizers and three in others, so the words are counted by the server
    (vLLM's /tokenize and /detokenize): a prompt longer than the suite's would fail a server whose
    --max-model-len leaves no more room than the suite needs. A server without those endpoints gets one
    word a token, and None for the length.
    """
    words = " ".join([WARM_UP_WORD] * prompt_tokens)
    try:
        ids = _tokenizer_call(
            base_url=base_url,
            path="/tokenize",
            body={"model": model, "prompt": words, "add_special_tokens": False},
            timeout_s=timeout_s,
        )["tokens"]
        text = str(
            _tokenizer_call(
                base_url=base_url,
                path="/detokenize",
                body={"model": model, "tokens": list(ids)[:prompt_tokens]},
                timeout_s=timeout_s,
            )["prompt"]
        )
        # Decoding a cut sequence and encoding it again can merge differently: trim until it fits.
        for _ in range(8):
            count = int(
                _tokenizer_call(
                    base_url=base_url,
                    path="/tokenize",
                    body={"model": model, "prompt": text, "add_special_tokens": False},
                    timeout_s=timeout_s,
                )["count"]
            )
            if count <= prompt_tokens or " " not in text.strip():
                return text, count
            text = text.rsplit(" ", 1)[0]
        return text, count
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return words, None


def warm_up_body(
    *, model: str, request_format: str, prompt_tokens: int, output_tokens: int, text: str | None = None
) -> bytes:
    # `text` is the prompt sized by warm_up_text; without one, one short common word stands for a token.
    # ignore_eos (a vLLM extension, as guidellm sends it) makes the server generate exactly
    # output_tokens, like the benchmark's requests.
    text = text if text is not None else " ".join([WARM_UP_WORD] * prompt_tokens)
    body: dict[str, object] = {
        "model": model,
        "max_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": 0,
    }
    if request_format.endswith("chat/completions"):
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    return json.dumps(body).encode()


def _server_error_quote(error: urllib.error.HTTPError) -> str:
    """The server's own words for an error response: its JSON `message`/`detail`, else the body."""
    try:
        raw = error.read(4096).decode("utf-8", "replace")
    except OSError:
        raw = ""
    try:
        document = json.loads(raw)
        detail = document.get("error", document) if isinstance(document, dict) else document
        message = detail.get("message") or detail.get("detail") if isinstance(detail, dict) else None
        raw = str(message or raw)
    except ValueError:
        pass
    return " ".join(raw.split())[:ERROR_BODY_CHARS] or str(error.reason)


def server_warm_up(
    *,
    base_url: str,
    model: str,
    request_format: str,
    prompt_tokens: int,
    output_tokens: int,
    timeout_s: float,
    cancel: threading.Event | None = None,
) -> WarmUp:
    """Send completions of the suite's own shape (its prompt sized with the served model's tokenizer)
    until one returns, then time one more.

    A freshly started server pays one-time costs on its first requests; on a small or busy node that
    alone outlasts a short benchmark level, which then measures nothing. A request that times out or
    cannot connect is sent again until `timeout_s` has passed (then BenchFailed: the bench was too
    slow); an HTTP error is the server's answer and raises ServerFailed quoting it.
    """
    url = f"{base_url}{request_format}"
    text, measured = warm_up_text(base_url=base_url, model=model, prompt_tokens=prompt_tokens)
    body = warm_up_body(
        model=model,
        request_format=request_format,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        text=text,
    )
    deadline = time.monotonic() + timeout_s

    def one_completion() -> float:
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        started = time.monotonic()
        with _LOCAL_OPENER.open(request, timeout=max(1.0, deadline - started)) as response:
            response.read()
        return time.monotonic() - started

    attempts, last_error = 0, ""
    while True:
        if cancel is not None and cancel.is_set():
            raise Cancelled("the warm-up stopped: the run was cancelled")
        attempts += 1
        try:
            first_s = one_completion()
            return WarmUp(
                first_s=first_s,
                request_s=one_completion(),
                attempts=attempts,
                text=text,
                prompt_tokens_measured=measured,
            )
        except urllib.error.HTTPError as error:
            raise ServerFailed(
                reason=f"the server answered the warm-up request with HTTP {error.code}: "
                f"{_server_error_quote(error)}",
                log_tail="",
            ) from None
        except (urllib.error.URLError, OSError) as error:
            last_error = str(getattr(error, "reason", error))
        if time.monotonic() + WARM_UP_RETRY_S >= deadline:
            raise BenchFailed(
                reason=f"no warm-up completion of {prompt_tokens}/{output_tokens} tokens returned within "
                f"{timeout_s:.0f} s ({attempts} sent, last: {last_error})"
            )
        time.sleep(WARM_UP_RETRY_S)
