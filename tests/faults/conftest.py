"""Real services that a fault-injection test owns and may break: a redis-server and a PostgreSQL cluster
of its own, on spare ports, never the shared ones on 6379 and 5432."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from tests.regressions.conftest import recorded_github_api, slack_webhook  # noqa: F401  (fixtures)
from tests.workers.conftest import ROOT, wait_for, worker_group_kill

# Bounded everywhere: a service that does not come up fails the test instead of hanging it.
START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _binary(name: str) -> str:
    """A server binary from PATH or Debian's versioned directory; the test is skipped without it."""
    found = shutil.which(name)
    if found is None:
        versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: p.parts[-3])
        found = str(versions[-1]) if versions else None
    if found is None:
        pytest.skip(f"{name} is not installed (make services installs it)")
    return found


class RedisServer:
    """redis-server on a spare port with an append-only file, as compose runs it: a restart keeps the
    queues and the unacknowledged messages."""

    def __init__(self, directory: Path) -> None:
        self.binary = _binary("redis-server")
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                *(self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)),
                *("--appendonly", "yes", "--appendfsync", "always", "--save", ""),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        client = redis.Redis(port=self.port, socket_timeout=2)
        wait_for(lambda: self._ping(client), timeout_s=START_TIMEOUT_S, what="redis-server", interval_s=0.2)

    @staticmethod
    def _ping(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # redis-server flushes its append-only file and exits
            self.process.wait(timeout=START_TIMEOUT_S)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class PostgresCluster:
    """A throw-away PostgreSQL cluster (initdb) on a spare port, run as the postgres user when root."""

    def __init__(self) -> None:
        self.initdb, self.pg_ctl = _binary("initdb"), _binary("pg_ctl")
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="perfwatch-faults-pg-"))
        self.data = self.directory / "data"
        self.as_owner: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            shutil.chown(self.directory, user="postgres")
            self.as_owner = ["runuser", "-u", "postgres", "--"]
        self._run([self.initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync"])

    def _run(self, command: list[str]) -> None:
        subprocess.run(self.as_owner + command, check=True, capture_output=True, timeout=START_TIMEOUT_S * 2)

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            [
                *(self.pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.directory / "log")),
                *("-w", "-t", str(START_TIMEOUT_S), "start"),
            ]
        )

    def stop(self) -> None:
        """Stop at once, as a crash or `systemctl restart` would: every connection is cut."""
        self._run([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"])

    def create_database(self, name: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=5) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def own_postgres() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
def start_own_worker(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start a control `celery worker` with the given environment; every one is stopped at the end."""
    workers: list[subprocess.Popen[bytes]] = []

    def start(*, name: str, env: dict[str, str], concurrency: int = 1) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"worker-{name}.log").open("ab")
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "default"),
                *("--concurrency", str(concurrency), "--prefetch-multiplier", "1"),
                *("--hostname", f"{name}@%h", "--loglevel", "INFO"),
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        workers.append(process)
        wait_for(
            lambda: "ready." in (tmp_path / f"worker-{name}.log").read_text() or process.poll() is not None,
            timeout_s=90,
            what=f"worker {name} to start",
        )
        assert process.poll() is None, (tmp_path / f"worker-{name}.log").read_text()[-3000:]
        return process

    yield start
    for process in workers:
        worker_group_kill(process)


def seconds_since(start: float) -> float:
    return time.monotonic() - start


def send_task(broker_url: str, name: str, *args: object) -> None:
    """Publish a task by name to this test's own broker (the app's configured one is the shared Redis)."""
    from workers.celery import app

    with app.connection_for_write(broker_url) as connection:
        app.send_task(name, args=args, connection=connection, queue="default")
