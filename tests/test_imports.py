"""What a web worker or a task worker loads: scipy.stats alone costs each process about 40 MB of memory,
for one normal tail that math.erfc gives as exactly; nothing the app imports may pull it back in."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import importlib, pkgutil, sys
import django
django.setup()
import dashboard
import dashboard.urls  # first: it registers the URL converters the apps' URL modules use
for module in pkgutil.walk_packages(dashboard.__path__, "dashboard."):
    if ".migrations" not in module.name and not module.name.endswith(".wsgi"):
        importlib.import_module(module.name)
print(sorted(name for name in sys.modules if name == "scipy.stats" or name.startswith("scipy.stats.")))
"""


def test_no_module_of_the_app_imports_scipy_stats() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
