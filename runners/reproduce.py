"""Commands that reproduce a run by hand, and the one script that runs them in order.

A run records what it did as shell lines that do not depend on the node it ran on: environments and the
model go to a fresh directory (`${REPRO_DIR}`), the server listens on a free port (`${PORT}`), every output
path is absolute under `${REPRO_DIR}`, and the warm-up the runner sent is there too, so the first level
does not pay the server's one-time costs.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from runners.envs import EnvRecipe
from runners.errors import RunnerError
from runners.process import command_output

# Stand-ins used while building the commands; they become shell variables in the recorded text.
_DIR_SENTINEL = "/PERFWATCHREPRODIR"
_PORT_SENTINEL = "65599"
REPRO_DIR = Path(_DIR_SENTINEL)
PORT = int(_PORT_SENTINEL)
SERVER_URL = f"http://127.0.0.1:{_PORT_SENTINEL}"
REPORT_NAME = "guidellm-report.json"
# The environments' interpreter is named by its version (PYTHON_3_11), never by the node's own path.
_PYTHON_SENTINEL = "/PERFWATCHPYTHON"
_PYTHON_PATTERN = re.compile(re.escape(_PYTHON_SENTINEL) + r"(\d+)_(\d+)")
# torch is pinned by version; where its CPU build comes from is named too (a node's pip may have it on
# disk, another machine gets it from PyTorch's index or a mirror of it).
_TORCH_INDEX_SENTINEL = "https://PERFWATCHTORCHINDEX"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# The order a run's commands run in; `serve` runs in the background in the script.
COMMAND_ORDER = ("install_vllm", "install_guidellm", "model", "serve", "warm_up", "benchmark")
WARM_UP_ATTEMPTS = 150
WARM_UP_PAUSE_S = 2


def _variables(text: str, *, quoted: bool) -> str:
    # Inside single quotes a variable is not expanded: close the quotes around it.
    def variable(name: str) -> str:
        return f"'\"${{{name}}}\"'" if quoted else f"${{{name}}}"

    text = text.replace(_DIR_SENTINEL, variable("REPRO_DIR")).replace(
        f":{_PORT_SENTINEL}", f":{variable('PORT')}"
    )
    text = _PYTHON_PATTERN.sub(lambda found: variable(f"PYTHON_{found[1]}_{found[2]}"), text)
    return text.replace(_TORCH_INDEX_SENTINEL, variable("TORCH_INDEX"))


def shell_word(part: str) -> str:
    if part == _PORT_SENTINEL:
        return "${PORT}"
    quoted = shlex.quote(part)
    return _variables(quoted, quoted=quoted.startswith("'"))


def shell_line(*, argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """One line a person can paste: `KEY=value ... argv...` with REPRO_DIR and PORT as variables."""
    assignments = [f"{key}={shell_word(value)}" for key, value in sorted((env or {}).items())]
    return " ".join([*assignments, *(shell_word(part) for part in argv)])


def port_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """`argv` with the value after --port replaced by the port variable."""
    parts = list(argv)
    if "--port" in parts:
        parts[parts.index("--port") + 1] = _PORT_SENTINEL
    return tuple(parts)


@functools.lru_cache(maxsize=8)
def interpreter_version(python: str) -> tuple[int, int]:
    """(major, minor) of an interpreter: asked of it, else read from its name (python3.11)."""
    try:
        text = command_output(argv=(python, "-c", "import sys; print(*sys.version_info[:2])"), timeout_s=30)
        major, minor = text.split()
        return int(major), int(minor)
    except (RunnerError, OSError, ValueError):
        found = re.search(r"(\d+)\.(\d+)$", python)
        return (int(found[1]), int(found[2])) if found else (3, 11)


def recipe_lines(*, recipe: EnvRecipe, name: str) -> tuple[str, ...]:
    """The steps of an environment's recipe, building it in ${REPRO_DIR}/NAME, with the interpreter named
    by its version and torch's index named where torch is pinned."""
    lines = []
    for step in recipe.steps:
        argv, env = step.render(env_dir=REPRO_DIR / name)
        if argv[1:3] == ("-m", "venv"):
            major, minor = interpreter_version(argv[0])
            argv = (f"{_PYTHON_SENTINEL}{major}_{minor}", *argv[1:])
        if "install" in argv and any(part.startswith("torch==") for part in argv):
            argv = (*argv, "--extra-index-url", _TORCH_INDEX_SENTINEL)
        lines.append(shell_line(argv=argv, env=env))
    return tuple(lines)


def _prerequisites(text: str) -> list[str]:
    """Header lines that define and check the interpreters and the torch index the commands use."""
    lines = []
    for major, minor in sorted(set(re.findall(r"\$\{PYTHON_(\d+)_(\d+)\}", text))):
        variable = f"PYTHON_{major}_{minor}"
        lines += [
            f'{variable}="${{{variable}:-python{major}.{minor}}}"  # the environments\' interpreter',
            f"\"${{{variable}}}\" -c 'import sys; sys.exit(sys.version_info[:2] != ({major}, {minor}))' "
            f'|| {{ echo "the environments need Python {major}.{minor} (with venv): set {variable}" >&2; '
            "exit 1; }",
        ]
    if "${TORCH_INDEX}" in text:
        lines.append(
            f'TORCH_INDEX="${{TORCH_INDEX:-{TORCH_CPU_INDEX}}}"  # where the pinned +cpu torch comes from'
        )
    return lines


def warm_up_lines(*, request_format: str, body: bytes, timeout_s: float) -> tuple[str, ...]:
    """curl the server with the runner's warm-up request until one completes, then once more."""
    url = f"http://127.0.0.1:${{PORT}}{request_format}"
    payload = shlex.quote(json.dumps(json.loads(body), separators=(",", ":")))
    curl = (
        f"curl -sS --fail-with-body --max-time {timeout_s:.0f} -o /dev/null "
        f"-H 'Content-Type: application/json' -d {payload} {url}"
    )
    return (
        f"for attempt in $(seq {WARM_UP_ATTEMPTS}); do {curl} && break; sleep {WARM_UP_PAUSE_S}; done",
        curl,
    )


def reproduce_script(*, commands: Mapping[str, str], title: str) -> str:
    """One bash script running a run's recorded commands in order (the server in the background, stopped
    on exit), reusing environments a previous run of the script built in the same REPRO_DIR."""
    lines = [
        "#!/usr/bin/env bash",
        f"# {title}",
        "# Run from the root of a PerfWatch checkout. REPRO_DIR (default: a new temporary directory) holds",
        "# the environments, the model, the logs and the report; PORT (default: a free one) is the server's.",
        "set -euo pipefail",
        'REPRO_DIR="${REPRO_DIR:-$(mktemp -d -t perfwatch-reproduce.XXXXXX)}"',
        'PORT="${PORT:-$(python3 -c \'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); '
        "print(s.getsockname()[1])')}\"",
        *_prerequisites("\n".join(commands.values())),
        'export REPRO_DIR PORT && mkdir -p "${REPRO_DIR}"',
        'echo "reproducing in ${REPRO_DIR}, server on port ${PORT}"',
    ]
    reuse = {"install_vllm": "vllm/bin/vllm", "install_guidellm": "guidellm/bin/guidellm"}
    for name in COMMAND_ORDER:
        text = commands.get(name, "").strip()
        if not text:
            continue
        lines.append(f"\n# {name.replace('_', ' ')}")
        if name in reuse:
            # Not indented: a step's inline Python script spans lines inside its quotes.
            lines += [f'if [ ! -x "${{REPRO_DIR}}/{reuse[name]}" ]; then', text, "fi"]
        elif name == "serve":
            # Its own session, so the whole server (engine processes too) is stopped as a group.
            lines.append(f'setsid env {text} > "${{REPRO_DIR}}/server.log" 2>&1 &')
            lines.append("SERVER_PID=$!")
            lines.append(
                'trap \'kill -- -"${SERVER_PID}" 2>/dev/null || kill "${SERVER_PID}" 2>/dev/null\' EXIT'
            )
            lines.append(
                f"for attempt in $(seq {WARM_UP_ATTEMPTS}); do "
                'curl -sf -o /dev/null "http://127.0.0.1:${PORT}/health" && break; '
                f"sleep {WARM_UP_PAUSE_S}; done"
            )
        else:
            lines.append(text)
    lines.append(f'\necho "report: ${{REPRO_DIR}}/{REPORT_NAME}"')
    return "\n".join(lines) + "\n"
