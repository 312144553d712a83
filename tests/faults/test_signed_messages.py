"""A runner's broker credentials cannot drive the control worker: with signed messages, a real control
worker on a real redis-server runs what the control side signed and nothing a runner node sends, signed
with the runner's own key or not signed at all."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from dashboard import dispatch
from dashboard.benchmarks.models import Repository
from dashboard.github.models import PullRequest
from tests.faults.conftest import RedisServer
from tests.workers.conftest import ROOT, _database_url, wait_for, worker_group_kill

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

VLLM = "vllm-project/vllm"


def _key_and_certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A private key and its self-signed certificate, as an operator makes them with openssl."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_path, certificate_path = directory / f"{name}.key", directory / f"{name}.pem"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return key_path, certificate_path


def _pull(*, title: str, updated_at: str, author: str) -> dict[str, object]:
    return {
        "number": 50383,
        "title": title,
        "state": "closed",
        "merged": True,
        "merge_commit_sha": "7c50debc32cc0c35db4ff72516224142ba9d0dd7",
        "merged_at": "2026-08-04T00:41:02Z",
        "html_url": f"https://github.com/{VLLM}/pull/50383",
        "updated_at": updated_at,
        "user": {"login": author},
    }


def _send_as(env: dict[str, str], pull: dict[str, object]) -> None:
    """Send the PR-record task from a process of its own with only `env`'s broker and signing settings."""
    script = (
        "import sys, json; from workers.celery import app; "
        "app.send_task(sys.argv[1], args=json.loads(sys.argv[2]), queue='default')"
    )
    import json

    done = subprocess.run(
        [sys.executable, "-c", script, dispatch.PULL_REQUEST_RECORD, json.dumps([VLLM, pull])],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def _send_run_as(env: dict[str, str], *, run_id: int) -> None:
    script = (
        "import sys; from workers.celery import app; "
        "app.send_task(sys.argv[1], args=[int(sys.argv[2])], queue='runner.cpu', priority=6)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, dispatch.RUN_EXECUTE, str(run_id)],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_control_worker_runs_only_what_the_control_side_signed(
    own_redis: RedisServer, start_own_worker, tmp_path: Path
) -> None:
    control_key, control_certificate = _key_and_certificate(tmp_path, "perfwatch-control")
    runner_key, runner_certificate = _key_and_certificate(tmp_path, "perfwatch-runner-cpu")
    control = {
        "CELERY_BROKER_URL": own_redis.url,
        "PERFWATCH_SIGNING_KEY": str(control_key),
        "PERFWATCH_SIGNING_CERT": str(control_certificate),
        "PERFWATCH_SIGNING_TRUSTED": str(control_certificate),
    }
    # A runner node's own key, trusting the control certificate (what it needs to take its runs).
    runner_signed = {
        "CELERY_BROKER_URL": own_redis.url,
        "PERFWATCH_SIGNING_KEY": str(runner_key),
        "PERFWATCH_SIGNING_CERT": str(runner_certificate),
        "PERFWATCH_SIGNING_TRUSTED": str(control_certificate),
    }
    unsigned = {"CELERY_BROKER_URL": own_redis.url, "PERFWATCH_SIGNING_KEY": ""}
    repository = Repository.objects.create(full_name=VLLM)
    tracked = PullRequest.objects.create(repository=repository, number=50383, title="before")
    start_own_worker(
        name="control", env={**control, "DATABASE_URL": _database_url(), "GITHUB_TOKEN": ""}, concurrency=1
    )
    # A runner node on the same broker, with its own key: it takes what the control side signed for it,
    # and its start-up broadcasts (signed by a key the control side does not trust) break nothing there.
    runner_log = tmp_path / "worker-runner.log"
    runner = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "runner.cpu"),
            *("--concurrency", "1", "--hostname", "cpu-node-1@%h", "--loglevel", "INFO"),
        ],
        cwd=ROOT,
        env={
            **os.environ,
            **runner_signed,
            "PERFWATCH_RUNNER_HARDWARE_CLASS": "cpu",
            "PERFWATCH_RUNNER_NAME": "cpu-node-1",
            "PERFWATCH_API_URL": "http://127.0.0.1:9",
            "PERFWATCH_RUNNER_TOKEN": "pwt_not_a_token",
        },
        stdout=runner_log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: "ready." in runner_log.read_text(), timeout_s=90, what="the runner worker")
        _send_run_as(control, run_id=424242)
        wait_for(
            lambda: f"Task {dispatch.RUN_EXECUTE}[" in runner_log.read_text(),
            timeout_s=60,
            what="the runner to take a run the control side signed",
        )
    finally:
        worker_group_kill(runner)

    # Newer than the control side's state: had either run, the control side's older state would be refused.
    _send_as(runner_signed, _pull(title="signed by a runner", updated_at="2030-01-01T00:00:00Z", author="m"))
    _send_as(unsigned, _pull(title="not signed", updated_at="2030-01-02T00:00:00Z", author="m"))
    control_pull = _pull(title="signed by the control side", updated_at="2026-08-04T00:41:02Z", author="w")
    _send_as(control, control_pull)

    wait_for(
        lambda: PullRequest.objects.get(pk=tracked.pk).title != "before",
        timeout_s=60,
        what="the control side's message to run",
    )
    tracked.refresh_from_db()
    assert (tracked.title, tracked.author) == ("signed by the control side", "w")
    log = (tmp_path / "worker-control.log").read_text()
    assert len(re.findall(rf"Task {re.escape(dispatch.PULL_REQUEST_RECORD)}\[[^\]]+\] received", log)) == 1
    assert "Unknown certificate: b'perfwatch-runner-cpu" in log  # signed, but not by a trusted key
    assert "Refusing to deserialize untrusted content of type json" in log  # not signed
