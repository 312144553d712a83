"""One cache for every web worker: what one process computed, another serves, and a write makes it stale
for both. Each worker here is a separate Python process with the production cache settings (Redis)."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from dashboard.benchmarks.models import HEADLINE_METRICS, Commit
from tests.factories import CommitFactory, run_with_values

ROOT = Path(__file__).resolve().parents[2]
# A web worker answering one request: its status, its ETag, the body's digest and how many SQL queries it
# took to answer.
WORKER = """
import hashlib, json, sys
import django
django.setup()
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
with CaptureQueriesContext(connection) as queries:
    response = Client(HTTP_HOST="127.0.0.1").get(sys.argv[1])
print(json.dumps({"status": response.status_code, "etag": response["ETag"], "queries": len(queries),
                  "body": hashlib.sha1(response.content).hexdigest(),
                  "backend": type(caches["default"]).__name__}))
"""


def _redis_url() -> str:
    broker = urlsplit(os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15"))
    return f"redis://{broker.netloc}{broker.path or '/0'}"


def _worker(url: str, *, prefix: str) -> dict:
    database = settings.DATABASES["default"]
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": (
            f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
        ),
        "PERFWATCH_CACHE_URL": _redis_url(),
        "PERFWATCH_CACHE_PREFIX": prefix,
        "PERFWATCH_HTTPS": "false",
        "SECRET_KEY": "k" + uuid.uuid4().hex + uuid.uuid4().hex,
    }
    done = subprocess.run(
        [sys.executable, "-c", WORKER, url],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("sqlite"), reason="the workers share a PostgreSQL database"
)
@pytest.mark.django_db(transaction=True)
def test_a_view_computed_by_one_worker_is_served_by_another_until_a_run_is_stored(build_history) -> None:
    commits = build_history(commits=6)
    suite = commits[0].runs.first().suite
    url = f"/api/suites/{suite.name}/timeline/?hardware={suite.hardware_class}&width=800"
    prefix = f"test-{uuid.uuid4().hex[:12]}"

    first = _worker(url, prefix=prefix)
    second = _worker(url, prefix=prefix)

    assert first["backend"] == second["backend"] == "RedisCache"
    assert first["status"] == second["status"] == 200
    assert second["body"] == first["body"]
    # The second worker only checked that the data is unchanged: it built no chart.
    assert second["queries"] < first["queries"]

    newer = cast(Commit, CommitFactory(committed_at=commits[-1].committed_at.replace(hour=23)))
    run_with_values(
        commit=newer,
        suite=suite,
        values={(level, metric): 100.0 for level in (1, 4, 16) for metric in HEADLINE_METRICS},
    )
    third = _worker(url, prefix=prefix)

    assert third["etag"] != first["etag"]
    assert third["body"] != first["body"]
    assert third["queries"] > second["queries"]
