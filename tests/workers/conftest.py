"""Real Celery workers on the real Redis broker. A runner worker gets the environment the README
documents for a runner node, and nothing else: no DATABASE_URL; it reaches the test's live server with a
runner token of its own. A control worker gets the test database."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import redis
from django.conf import settings

from runners.node_setup import NODE_OPTIONAL_VARIABLES
from workers.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]
RUNNER_ENV_HEADER = "# /etc/perfwatch/runner.env"


def readme_runner_environment() -> dict[str, str]:
    """The runner node's environment as the README documents it: the KEY=VALUE lines of its block."""
    text = (ROOT / "README.md").read_text()
    block = text.split(RUNNER_ENV_HEADER, 1)[1].split("```", 1)[0]
    pairs = [line.split("=", 1) for line in block.splitlines() if re.match(r"^[A-Z][A-Z0-9_]*=", line)]
    return {key: value for key, value in pairs}


def _database_url() -> str:
    database = settings.DATABASES["default"]
    return (
        f"postgres://{database['USER']}:{database.get('PASSWORD') or ''}@{database['HOST'] or '127.0.0.1'}:"
        f"{database['PORT'] or 5432}/{database['NAME']}"
    )


@pytest.fixture
def broker_purged() -> Iterator[str]:
    url = settings.CELERY_BROKER_URL
    client = redis.Redis.from_url(url, socket_timeout=5)
    client.flushdb()
    yield url
    client.flushdb()


@pytest.fixture
def start_worker(
    broker_purged: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start `celery worker` processes; every one still running is stopped at the end of the test."""
    workers: list[subprocess.Popen[bytes]] = []

    def runner_environment(name: str, hardware_class: str) -> dict[str, str]:
        from dashboard.tokens.scopes import TokenScope
        from dashboard.tokens.services import token_create

        live_server = request.getfixturevalue("live_server")
        token = token_create(
            name=f"{name}-token", scope=TokenScope.parse(f"runner:{hardware_class}/{name}")
        ).secret
        values = {
            "CELERY_BROKER_URL": broker_purged,
            "PERFWATCH_API_URL": live_server.url,
            "PERFWATCH_RUNNER_TOKEN": token,
            "PERFWATCH_RUNNER_NAME": name,
            "PERFWATCH_RUNNER_HARDWARE_CLASS": hardware_class,
            "PERFWATCH_ENV_PYTHON": os.environ.get("PERFWATCH_ENV_PYTHON", "python3.11"),
            "PERFWATCH_CACHE_DIR": os.environ.get(
                "PERFWATCH_CACHE_DIR", str(Path.home() / ".cache" / "perfwatch")
            ),
            "PERFWATCH_WORK_DIR": str(tmp_path / "runs"),
            # The test process sends unsigned messages; tests/faults/test_signed_messages.py signs them.
            "PERFWATCH_SIGNING_KEY": "",
            "PERFWATCH_SIGNING_CERT": "",
            "PERFWATCH_SIGNING_TRUSTED": "",
            # This machine's pip finds its packages through /etc/pip.conf, which pip reads under any user.
            **{variable: os.environ.get(variable, "") for variable in NODE_OPTIONAL_VARIABLES},
        }
        documented = readme_runner_environment()
        assert set(values) == set(documented), "the README documents another runner environment"
        # What any process has, and nothing of this test's own settings (no database, no secrets).
        basics = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
        return {**basics, **values, "PYTHONUNBUFFERED": "1"}

    def start(*, name: str, queue: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = worker_log(tmp_path, name).open("wb")
        if queue.startswith("runner."):
            env = runner_environment(name, queue.removeprefix("runner."))
        else:
            env = {
                **os.environ,
                "DATABASE_URL": _database_url(),
                "CELERY_BROKER_URL": broker_purged,
                "PERFWATCH_RUNNER_NAME": name,
                "PERFWATCH_WORK_DIR": str(tmp_path / "runs"),
                "PYTHONUNBUFFERED": "1",
            }
        env.update(extra_env or {})
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "workers",
                "worker",
                "-Q",
                queue,
                "--concurrency",
                "1",
                "--prefetch-multiplier",
                "1",
                "--hostname",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        workers.append(process)
        return process

    yield start
    for process in workers:
        worker_group_kill(process)


def worker_log(directory: Path, name: str) -> Path:
    """Where `start_worker` writes the output of worker `name` (`directory`: the test's tmp_path)."""
    return directory / f"worker-{name}.log"


def worker_ready(log: Path) -> bool:
    """Whether the worker writing `log` has connected and is consuming."""
    return log.exists() and "ready." in log.read_text()


def workers_quiet(broker: redis.Redis, *, names: Sequence[str], queue: str = "default") -> bool:
    """Nothing waits on `queue`, and every named worker (its `--hostname`, ``name@host``) answers holding no
    task: none running, none taken ahead (a message taken but not yet acknowledged), none waiting out a
    retry's countdown. Other workers' messages (a runner's, held unacknowledged) do not count."""
    if broker.llen(queue):
        return False
    inspect = celery_app.control.inspect(destination=list(names), timeout=2.0)
    held = (inspect.active(), inspect.reserved(), inspect.scheduled())
    return all(
        replies is not None and len(replies) == len(names) and not any(replies.values()) for replies in held
    )


def worker_group_kill(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop a worker and everything in its process group."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def wait_for(predicate: Callable[[], bool], *, timeout_s: float, what: str, interval_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
