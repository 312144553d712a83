"""A runner node writes nothing inside its checkout: the checkout is often root's, and the node runs as
an unprivileged user. Its settings are loaded and its worker module imported from a copy of the checkout,
with the node's environment and no database settings, and the copy is compared before and after."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What the worker does at start: Django's checks (which open the database) and the task modules.
_LOAD = """
import django
django.setup()
from django.core.management import call_command
call_command("check", databases=["default"])
import workers.celery, workers.presence, runners.node
"""


def _tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


def test_a_runner_node_loads_without_writing_inside_its_checkout(tmp_path) -> None:
    checkout = tmp_path / "perfwatch"
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file() and name.endswith((".py", ".toml", ".yaml", ".jsonl")):
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    before = _tree(checkout)
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "PYTHONDONTWRITEBYTECODE": "1",  # as the systemd unit sets it
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/11",
        "PERFWATCH_API_URL": "http://127.0.0.1:9",
        "PERFWATCH_RUNNER_TOKEN": "pwt_x",
        "PERFWATCH_RUNNER_NAME": "cpu-node-1",
        "PERFWATCH_RUNNER_HARDWARE_CLASS": "cpu",
        "PERFWATCH_CACHE_DIR": str(tmp_path / "cache"),
        "PERFWATCH_WORK_DIR": str(tmp_path / "runs"),
    }

    loaded = subprocess.run(
        [sys.executable, "-c", _LOAD],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert loaded.returncode == 0, loaded.stderr
    assert _tree(checkout) - before == set()
