"""A runner node finds every program its recipes call at start-up, and hands its installer settings to
pip and uv alike (uv reads none of pip's configuration)."""

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners.envs import EnvRecipe, EnvStep, env_ensure
from runners.install import machine_programs
from runners.node_setup import (
    NodeMisconfigured,
    env_python_resolve,
    installer_env,
    node_tools_check,
)

# What systemd gives a service that sets no PATH of its own: none of the node's virtual environment.
SERVICE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def test_installer_settings_reach_pip_and_uv_under_their_own_names():
    env = installer_env(
        {
            "PERFWATCH_INDEX_URL": "https://mirror.example/simple",
            "PERFWATCH_EXTRA_INDEX_URL": "https://a.example/simple https://b.example/simple",
            "PERFWATCH_FIND_LINKS": "/opt/wheels",
            "PERFWATCH_CA_BUNDLE": "/etc/ssl/corp.pem",
            "PERFWATCH_NATIVE_TLS": "true",
        }
    )

    assert env["PIP_INDEX_URL"] == env["UV_DEFAULT_INDEX"] == "https://mirror.example/simple"
    assert (
        env["PIP_EXTRA_INDEX_URL"] == env["UV_INDEX"] == "https://a.example/simple https://b.example/simple"
    )
    assert env["PIP_FIND_LINKS"] == env["UV_FIND_LINKS"] == "/opt/wheels"
    assert env["PIP_CERT"] == env["SSL_CERT_FILE"] == "/etc/ssl/corp.pem"
    assert env["UV_NATIVE_TLS"] == "1"
    assert installer_env({"PERFWATCH_INDEX_URL": "", "PERFWATCH_NATIVE_TLS": "false"}) == {}


@pytest.fixture
def index_server(tmp_path) -> Iterator[tuple[str, list[str]]]:
    """A PEP 503 index on the loopback that records every path asked of it (and has nothing)."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", asked
    server.shutdown()


def test_uv_under_a_bare_service_environment_asks_the_index_the_node_is_configured_with(
    tmp_path, index_server, monkeypatch
):
    url, asked = index_server
    monkeypatch.setenv("PATH", SERVICE_PATH)
    monkeypatch.setenv("PERFWATCH_INDEX_URL", url)
    recipe = EnvRecipe(
        name="probe",
        steps=(
            EnvStep(argv=(sys.executable, "-m", "venv", "--without-pip", "{env}"), timeout_s=120),
            # The bare name, as the recipes call it: resolved beside this interpreter, not on PATH.
            EnvStep(
                argv=("uv", "pip", "install", "--python", "{env}/bin/python", "--no-cache", "perfwatch-x"),
                timeout_s=120,
            ),
        ),
    )
    log = tmp_path / "install.log"

    with pytest.raises(Exception, match="exited with status"):
        env_ensure(
            recipe=recipe,
            cache_dir=tmp_path,
            log_path=log,
            timeout_s=300,
            programs=machine_programs(),
            extra_env=installer_env(),
        )

    assert "/simple/perfwatch-x/" in asked, log.read_text()


def test_a_node_without_its_interpreter_stops_with_what_to_install(monkeypatch):
    monkeypatch.setenv("PERFWATCH_ENV_PYTHON", "python3.99")

    with pytest.raises(
        NodeMisconfigured, match=r"no python3\.99 on PATH .* apt-get install python3\.99-venv"
    ):
        node_tools_check()


def test_an_interpreter_without_venv_support_is_named(tmp_path, monkeypatch):
    # An interpreter that runs but cannot import ensurepip, as Debian's python3.X without python3.X-venv.
    fake = tmp_path / "python3.11"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$2" in *ensurepip*) exit 1;; *sys.executable*) echo "$0"; exit 0;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PERFWATCH_ENV_PYTHON", str(fake))

    with pytest.raises(
        NodeMisconfigured, match=r"cannot create virtual environments .* install python3\.\d+-venv"
    ):
        node_tools_check()


@pytest.fixture
def service_path(monkeypatch) -> None:
    """The environment of a service: a bare PATH, and the interpreter named by its absolute path."""
    monkeypatch.setenv("PERFWATCH_ENV_PYTHON", env_python_resolve())
    monkeypatch.setenv("PATH", SERVICE_PATH)


def test_uv_is_found_beside_the_nodes_interpreter_when_the_service_path_lacks_it(service_path):

    tools = node_tools_check()

    assert tools.uv == str(Path(sys.executable).parent / "uv")
    assert tools.uv_version.count(".") == 2
    assert tools.python_version.startswith("3.")
    assert machine_programs()["uv"] == tools.uv


def test_a_node_without_uv_says_which_extra_installs_it(tmp_path, monkeypatch, service_path):
    # An interpreter of a virtual environment that has no uv beside it.
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))

    with pytest.raises(NodeMisconfigured, match=r"uv \(pip install '\.\[runner\]'"):
        node_tools_check()
