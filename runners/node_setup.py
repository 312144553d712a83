"""What a runner node needs from its host before it takes a run, checked once when it starts.

The install recipes call a few programs by name (the environments' interpreter, `uv`, `git`, `bash`), and
a service started by systemd has a bare PATH with none of the node's virtual environment on it. Each
program is resolved here to an absolute path, once, and a missing or unusable one stops the node with a
line that says what to install, instead of failing every run at its install step.

The installers are configured from the node's own settings (`installer_env`): uv reads none of pip's
configuration files, so one set of variables is handed to both.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runners.errors import RunnerError
from runners.process import command_output

ENV_PYTHON_VARIABLE = "PERFWATCH_ENV_PYTHON"
# The wheels of torch+cpu this machine has are built for CPython 3.11, whatever runs the web app.
DEFAULT_ENV_PYTHON = "python3.11"
# Programs the recipes call by name besides the interpreter (see runners/install.py).
RECIPE_PROGRAMS = ("uv", "git", "bash")

# The node's installer settings, each handed to pip and to uv under their own names.
INDEX_URL_VARIABLE = "PERFWATCH_INDEX_URL"
EXTRA_INDEX_URL_VARIABLE = "PERFWATCH_EXTRA_INDEX_URL"
FIND_LINKS_VARIABLE = "PERFWATCH_FIND_LINKS"
CA_BUNDLE_VARIABLE = "PERFWATCH_CA_BUNDLE"
NATIVE_TLS_VARIABLE = "PERFWATCH_NATIVE_TLS"
# The node's mirror of the per-commit wheel index (wheels.vllm.ai); empty: each suite's own.
WHEEL_INDEX_VARIABLE = "PERFWATCH_WHEEL_INDEX_URL"
INSTALLER_VARIABLES = (
    WHEEL_INDEX_VARIABLE,
    INDEX_URL_VARIABLE,
    EXTRA_INDEX_URL_VARIABLE,
    FIND_LINKS_VARIABLE,
    CA_BUNDLE_VARIABLE,
    NATIVE_TLS_VARIABLE,
)
# Every optional setting of a node that the runners package reads itself (the env file shows each, empty).
NODE_OPTIONAL_VARIABLES = (*INSTALLER_VARIABLES, "PERFWATCH_SERVE_PORTS")
_INSTALLER_NAMES: Mapping[str, tuple[str, ...]] = {
    INDEX_URL_VARIABLE: ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"),
    EXTRA_INDEX_URL_VARIABLE: ("PIP_EXTRA_INDEX_URL", "UV_INDEX"),  # both take a space-separated list
    FIND_LINKS_VARIABLE: ("PIP_FIND_LINKS", "UV_FIND_LINKS"),
    CA_BUNDLE_VARIABLE: ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"),
}
_TRUE = ("1", "true", "yes", "on")


class NodeMisconfigured(RunnerError):
    """The host lacks a program the recipes call, or has one that cannot build environments."""


@dataclass(frozen=True)
class NodeTools:
    """The absolute paths of the programs the recipes call, as found at start-up."""

    python: str
    python_version: str
    uv: str
    uv_version: str
    git: str
    bash: str

    @property
    def programs(self) -> dict[str, str]:
        """Bare program names of the recipes -> the path this node runs."""
        return {"uv": self.uv, "git": self.git, "bash": self.bash}

    def summary(self) -> str:
        return (
            f"environments: {self.python} (Python {self.python_version}); uv {self.uv_version} at {self.uv}; "
            f"git at {self.git}; bash at {self.bash}"
        )


def _beside_interpreter(name: str) -> str | None:
    # A program installed into the node's own virtual environment (uv from the runner extra) is not on
    # the PATH of a service that runs .venv/bin/celery directly.
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def program_find(name: str) -> str | None:
    """`name` on PATH, else beside the running interpreter; None when neither has it."""
    return shutil.which(name) or _beside_interpreter(name)


def env_python_resolve() -> str:
    """The interpreter the environments are built with: $PERFWATCH_ENV_PYTHON, else python3.11, as the
    real path of the executable (not a shim or symlink) so that recipe keys agree between callers."""
    command = os.environ.get(ENV_PYTHON_VARIABLE) or DEFAULT_ENV_PYTHON
    found = shutil.which(command)
    if found is None:
        raise NodeMisconfigured(
            f"no {command} on PATH to build the vLLM and guidellm environments with: install it "
            f"(e.g. apt-get install {Path(command).name}-venv) or set {ENV_PYTHON_VARIABLE} to one"
        )
    try:
        return command_output(argv=(found, "-c", "import sys; print(sys.executable)"), timeout_s=30).strip()
    except RunnerError as error:
        raise NodeMisconfigured(f"{ENV_PYTHON_VARIABLE}={command} does not run: {error}") from None


# ensurepip is what `python -m venv` needs; Debian ships it apart (python3.X-venv).
_VENV_CHECK = "import ensurepip, venv, sys; print('%d.%d.%d' % sys.version_info[:3])"


def node_tools_check() -> NodeTools:
    """Resolve and check every program the recipes call; NodeMisconfigured names what is missing."""
    python = env_python_resolve()
    try:
        python_version = command_output(argv=(python, "-c", _VENV_CHECK), timeout_s=60).strip()
    except RunnerError:
        raise NodeMisconfigured(
            f"{python} cannot create virtual environments (no ensurepip/venv module): install "
            f"python{_minor(python)}-venv, or set {ENV_PYTHON_VARIABLE} to an interpreter that has them"
        ) from None
    found = {name: program_find(name) for name in RECIPE_PROGRAMS}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        hints = {"uv": "pip install '.[runner]' into the node's environment", "git": "apt-get install git"}
        raise NodeMisconfigured(
            "the install recipes call "
            + ", ".join(f"{name} ({hints.get(name, 'install it')})" for name in missing)
            + f", which {'is' if len(missing) == 1 else 'are'} not on PATH ({os.environ.get('PATH', '')}) "
            f"nor beside {sys.executable}"
        )
    from runners.server import SERVE_PORTS_VARIABLE, serve_ports_range

    try:
        serve_ports_range(os.environ.get(SERVE_PORTS_VARIABLE, ""))
    except ValueError as error:
        raise NodeMisconfigured(f"{error} (e.g. 8100-8199)") from None
    uv = str(found["uv"])
    try:
        uv_version = command_output(argv=(uv, "--version"), timeout_s=30).strip().removeprefix("uv ")
    except RunnerError as error:
        raise NodeMisconfigured(f"{uv} does not run: {error}") from None
    return NodeTools(
        python=python,
        python_version=python_version,
        uv=uv,
        uv_version=uv_version.split()[0] if uv_version else "",
        git=str(found["git"]),
        bash=str(found["bash"]),
    )


def _minor(python: str) -> str:
    try:
        return command_output(
            argv=(python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"), timeout_s=30
        ).strip()
    except RunnerError:
        return "3"


def installer_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """pip's and uv's own variables from the node's installer settings (unset or empty: left alone)."""
    source = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for setting, names in _INSTALLER_NAMES.items():
        value = (source.get(setting) or "").strip()
        if value:
            env.update(dict.fromkeys(names, value))
    if (source.get(NATIVE_TLS_VARIABLE) or "").strip().lower() in _TRUE:
        # The host's certificate store instead of uv's bundled roots (a private CA installed system-wide).
        env["UV_NATIVE_TLS"] = "1"
    return env
