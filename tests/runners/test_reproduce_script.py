"""The reproduce script holds what another machine needs: the interpreter by its version, checked before
anything is built, and the index the pinned torch comes from; never the node's own paths."""

import subprocess
import sys

from runners.install import env_python_resolve, guidellm_recipe, vllm_recipe
from runners.reproduce import recipe_lines, reproduce_script
from runners.suites import suite_get

SHA = "82a85dc1e5c2a4b8f0e3d6a7c9b1f2e4d5a6b7c8"


def _script() -> str:
    python = env_python_resolve()
    install = suite_get(name="tiny-llama-cpu").install
    commands = {
        "install_vllm": "\n".join(
            recipe_lines(recipe=vllm_recipe(install=install, commit_sha=SHA, python=python), name="vllm")
        ),
        "install_guidellm": "\n".join(recipe_lines(recipe=guidellm_recipe(python=python), name="guidellm")),
    }
    return reproduce_script(commands=commands, title="run 1")


def test_the_script_names_the_interpreter_by_version_and_the_torch_index() -> None:
    script = _script()

    assert env_python_resolve() not in script  # the node's own interpreter path
    assert "${PYTHON_3_11} -m venv ${REPRO_DIR}/vllm" in script
    assert 'PYTHON_3_11="${PYTHON_3_11:-python3.11}"' in script
    assert "torch==2.13.0 --extra-index-url ${TORCH_INDEX}" in script
    assert "guidellm==0.8.1 torch==2.13.0 --extra-index-url ${TORCH_INDEX}" in script
    assert 'TORCH_INDEX="${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"' in script


def test_the_script_stops_before_building_anything_without_that_interpreter(tmp_path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(_script())
    repro = tmp_path / "repro"

    done = subprocess.run(
        ["bash", str(path)],
        env={"PATH": "/usr/bin:/bin", "REPRO_DIR": str(repro), "PORT": "8123", "PYTHON_3_11": sys.executable},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    assert "the environments need Python 3.11 (with venv): set PYTHON_3_11" in done.stderr
    assert not repro.exists()
