"""Real local endpoints for notifications: an SMTP server (aiosmtpd), an HTTP receiver standing in for a
Slack-compatible webhook, and one standing in for api.github.com (which cannot be reached from here)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth.models import User

from dashboard.benchmarks.models import Commit, Series, Suite
from tests.factories import CommitFactory, SeriesFactory, SuiteFactory, run_with_values
from tests.workers.conftest import broker_purged, start_worker  # noqa: F401  (fixtures reused here)
from workers.celery import app as celery_app


class _Inbox:
    """aiosmtpd handler keeping every message it accepts."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.recipients: list[list[str]] = []

    async def handle_DATA(
        self, server: Any, session: Any, envelope: Any
    ) -> str:  # aiosmtpd calls it by this name
        self.messages.append(message_from_bytes(envelope.original_content or envelope.content))
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp_server() -> Iterator[tuple[str, int, _Inbox]]:
    """A real SMTP server on 127.0.0.1 (a free port) that keeps what it receives."""
    yield from _smtp_server()


def _smtp_server() -> Iterator[tuple[str, int, _Inbox]]:
    inbox = _Inbox()
    # aiosmtpd checks that it is up by connecting to its own port, so it needs a real one, not 0.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port, ready_timeout=10)
    controller.start()
    try:
        yield "127.0.0.1", port, inbox
    finally:
        controller.stop()


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class HttpReceiver:
    """An HTTP server on 127.0.0.1 recording every POST; `statuses` answers the next requests in turn.

    What a POST stored (`stored`, by path) is what a GET of that path lists, as GitHub lists the comments
    of an issue; a test may store a comment itself to stand for one GitHub kept despite an error answer.
    """

    url: str
    requests: list[ReceivedRequest] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    response_body: Callable[[ReceivedRequest], dict[str, Any]] = lambda request: {"ok": True}
    stored: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    listed: int = 0
    hold_s: float = 0.0  # how long a POST waits for its answer after being received


def _http_receiver() -> Iterator[HttpReceiver]:
    receiver: HttpReceiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            request = ReceivedRequest(
                path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body=json.loads(raw)
            )
            receiver.requests.append(request)
            status = receiver.statuses.pop(0) if receiver.statuses else 200
            body = receiver.response_body(request) if status < 400 else {"message": "Server Error"}
            if status < 400:
                receiver.stored.setdefault(self.path, []).append(body)
            time.sleep(receiver.hold_s)
            self._answer(status, body)

        def do_GET(self) -> None:
            receiver.listed += 1
            self._answer(200, receiver.stored.get(self.path.partition("?")[0], []))

        def _answer(self, status: int, body: Any) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = HttpReceiver(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def slack_webhook() -> Iterator[HttpReceiver]:
    """A Slack-compatible incoming webhook on 127.0.0.1."""
    yield from _http_receiver()


@pytest.fixture
def recorded_github_api() -> Iterator[HttpReceiver]:
    """FakeGitHubApi: stands in for api.github.com and answers a new issue comment the way GitHub does."""
    yield from _github_api()


def _github_api() -> Iterator[HttpReceiver]:
    for receiver in _http_receiver():
        receiver.response_body = lambda request: {
            "id": 1,
            "html_url": "https://github.com" + request.path.replace("/repos", "", 1),
            "body": request.body.get("body"),
        }
        yield receiver


@dataclass(frozen=True)
class Channels:
    inbox: _Inbox
    slack: HttpReceiver
    github: HttpReceiver
    smtp_port: int

    def settings(self) -> dict[str, Any]:
        """The settings that turn every channel on, each pointing at its endpoint here."""
        return {
            "MAILERS": {
                "default": {
                    "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                    "OPTIONS": {"host": "127.0.0.1", "port": self.smtp_port, "timeout": 5},
                }
            },
            "PERFWATCH_ALERT_EMAILS": ["perf-team@example.com", "oncall@example.com"],
            "PERFWATCH_SLACK_WEBHOOK_URL": f"{self.slack.url}/services/T000/B000/XXXX",
            "GITHUB_TOKEN": "ghp_test_token",
            "GITHUB_API_URL": self.github.url,
            "PERFWATCH_NOTIFY_TIMEOUT_S": 5,
        }


@pytest.fixture
def notification_channels(settings: Any, smtp_server, slack_webhook, recorded_github_api) -> Channels:
    """Every notification channel on, each pointing at its real local endpoint."""
    _, port, inbox = smtp_server
    channels = Channels(inbox=inbox, slack=slack_webhook, github=recorded_github_api, smtp_port=port)
    for name, value in channels.settings().items():
        setattr(settings, name, value)
    return channels


@contextlib.contextmanager
def notification_endpoints() -> Iterator[Channels]:
    """Every channel's real local endpoint, for a fixture wider than one test (`notification_channels`
    is the one for a test); `Channels.settings()` turns them on."""
    with (
        contextlib.contextmanager(_smtp_server)() as (_, port, inbox),
        contextlib.contextmanager(_http_receiver)() as slack,
        contextlib.contextmanager(_github_api)() as github,
    ):
        yield Channels(inbox=inbox, slack=slack, github=github, smtp_port=port)


@contextlib.contextmanager
def tasks_eager() -> Iterator[None]:
    """Tasks enqueued on commit run in this process (the real-worker tests use real workers instead)."""
    previous = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = True, False
    try:
        yield
    finally:
        celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = previous


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    """Tasks enqueued on commit run in this process, for the test."""
    with tasks_eager():
        yield


@pytest.fixture
def staff_user(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("triager", password="pw", is_staff=True)


@dataclass(frozen=True)
class History:
    suite: Suite
    commits: list[Commit]

    def series(self, *, metric: str = "output_throughput_tok_s", concurrency: int = 16) -> Series:
        return Series.objects.get(suite=self.suite, metric=metric, concurrency=concurrency)


def noisy(level: float, index: int, *, noise: float = 0.01) -> float:
    """A deterministic, noise-like value around `level` (no random state shared between tests)."""
    wobble = ((index * 7919) % 101 - 50) / 50.0  # in [-1, 1], spread like uniform noise
    return level * (1.0 + noise * wobble)


@pytest.fixture
def history_build() -> Callable[..., History]:
    """Build a suite's history: `values[metric][i]` at commit i, for concurrency 16."""

    def build(*, values: dict[str, list[float]], suite_name: str = "kimi-k3-8k1k") -> History:
        suite = cast(Suite, SuiteFactory(name=suite_name))
        length = len(next(iter(values.values())))
        commits = [cast(Commit, CommitFactory()) for _ in range(length)]
        for index, commit in enumerate(commits):
            run_with_values(
                commit=commit,
                suite=suite,
                values={(16, metric): series[index] for metric, series in values.items()},
            )
        for metric in values:
            SeriesFactory(suite=suite, concurrency=16, metric=metric)
        return History(suite=suite, commits=commits)

    return build


def suite_create(**fields: Any) -> Suite:
    return cast(Suite, SuiteFactory(**fields))
