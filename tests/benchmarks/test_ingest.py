"""Ingest of guidellm reports through the command line and the HTTP API."""

import base64
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client

from dashboard import dispatch
from dashboard.benchmarks.models import Commit, Measurement, Run, Runner, Series, Suite
from dashboard.benchmarks.services import report_ingest
from runners.guidellm_report import METRIC_KEYS

pytestmark = pytest.mark.django_db

SHA = "82a85dc1" + "0" * 32


def _table_counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count() for model in (Commit, Suite, Runner, Run, Series, Measurement)
    }


def _write(tmp_path: Path, raw: bytes, name: str = "report.json") -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    return path


def test_ingest_command_stores_a_run_with_every_metric_of_every_level(
    tmp_path, vllm_cpu_report, capsys
) -> None:
    call_command(
        "ingest_report",
        _write(tmp_path, vllm_cpu_report),
        commit=SHA,
        suite="tiny-llama-cpu",
        hardware="cpu",
        runner="ci-cpu-1",
    )

    run = Run.objects.get()
    assert (run.commit.sha, run.suite.name, run.hardware_class, run.runner and run.runner.name) == (
        SHA,
        "tiny-llama-cpu",
        "cpu",
        "ci-cpu-1",
    )
    assert run.status == "succeeded"
    # A report arrives whole: it is queued, started and finished at the moment it is stored, in that order.
    assert run.queued_at == run.started_at == run.finished_at
    assert run.measurements.count() == 3 * len(METRIC_KEYS)
    ttft = Measurement.objects.get(series__concurrency=4, series__metric="output_throughput_tok_s")
    assert ttft.value == pytest.approx(156.8)
    assert "stored run" in capsys.readouterr().out


def test_ingesting_the_same_report_twice_stores_nothing_new(tmp_path, vllm_cpu_report, capsys) -> None:
    path = _write(tmp_path, vllm_cpu_report)
    call_command("ingest_report", path, commit=SHA, suite="tiny-llama-cpu", hardware="cpu")
    before = _table_counts()
    capsys.readouterr()

    call_command("ingest_report", path, commit=SHA, suite="tiny-llama-cpu", hardware="cpu")

    assert _table_counts() == before
    assert "nothing new stored" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("make_report", "reason"),
    [
        (lambda good, bad: good[: len(good) // 3], "not valid JSON"),
        (lambda good, bad: bad, "no successful request"),
        (lambda good, bad: b'{"title": "not guidellm"}', "not a guidellm report"),
    ],
    ids=["truncated", "all-requests-failed", "not-guidellm"],
)
def test_bad_report_exits_non_zero_with_a_reason_and_stores_nothing(
    tmp_path, vllm_cpu_report, midstream_errors_report, make_report, reason
) -> None:
    path = _write(tmp_path, make_report(vllm_cpu_report, midstream_errors_report))
    before = _table_counts()
    with pytest.raises(CommandError, match=reason) as error:
        call_command("ingest_report", path, commit=SHA, suite="tiny-llama-cpu", hardware="cpu", runner="r1")
    assert "\n" not in str(error.value)
    assert _table_counts() == before


def test_report_missing_a_level_the_suite_expects_is_rejected(tmp_path, vllm_cpu_report) -> None:
    Suite.objects.create(name="kimi-k3-8k1k", hardware_class="b300", concurrencies=[1, 4, 16])
    before = _table_counts()
    with pytest.raises(CommandError, match=r"missing concurrency level\(s\) \[16\]"):
        call_command(
            "ingest_report",
            _write(tmp_path, vllm_cpu_report),
            commit=SHA,
            suite="kimi-k3-8k1k",
            hardware="b300",
        )
    assert _table_counts() == before


@pytest.mark.parametrize("sha", ["xyz", "12345", "g" * 40])
def test_bad_commit_sha_is_rejected(tmp_path, vllm_cpu_report, sha) -> None:
    with pytest.raises(CommandError, match="invalid commit sha"):
        call_command(
            "ingest_report", _write(tmp_path, vllm_cpu_report), commit=sha, suite="s", hardware="cpu"
        )
    assert Run.objects.count() == 0


def test_unreadable_path_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        call_command("ingest_report", tmp_path / "nope.json", commit=SHA, suite="s", hardware="cpu")


def test_api_accepts_a_multipart_report_and_is_idempotent(client: Client, vllm_cpu_report, bearer) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    headers = bearer("ingest:*+new-suites")

    def post():
        upload = SimpleUploadedFile("report.json", vllm_cpu_report, content_type="application/json")
        return client.post(
            "/api/runs/",
            {"report": upload, "commit": SHA, "suite": "tiny-llama-cpu", "hardware": "cpu"},
            headers=headers,
        )

    first = post()
    assert first.status_code == 201, first.content
    assert first.json()["measurements"] == 3 * len(METRIC_KEYS)
    second = post()
    assert second.status_code == 200
    assert second.json() == {**first.json(), "created": False, "measurements": 0}
    assert Run.objects.count() == 1


def test_api_accepts_json_with_base64_report(client: Client, vllm_cpu_report, bearer) -> None:
    body = {
        "report": base64.b64encode(vllm_cpu_report).decode(),
        "commit": SHA,
        "suite": "s",
        "hardware": "cpu",
    }
    response = client.post(
        "/api/runs/", json.dumps(body), content_type="application/json", headers=bearer("ingest:*+new-suites")
    )
    assert response.status_code == 201


def test_api_rejects_an_invalid_report_with_a_json_reason(
    client: Client, midstream_errors_report, bearer
) -> None:
    body = {"report": json.loads(midstream_errors_report), "commit": SHA, "suite": "s", "hardware": "cpu"}
    response = client.post(
        "/api/runs/", json.dumps(body), content_type="application/json", headers=bearer("ingest:*+new-suites")
    )
    assert response.status_code == 400
    assert "no successful request" in response.json()["error"]
    assert _table_counts() == dict.fromkeys(_table_counts(), 0)


def test_api_names_missing_fields(client: Client, vllm_cpu_report, bearer) -> None:
    body = {"report": json.loads(vllm_cpu_report)}
    response = client.post(
        "/api/runs/", json.dumps(body), content_type="application/json", headers=bearer("ingest:*+new-suites")
    )
    assert response.status_code == 400
    assert response.json() == {"error": "field 'commit': required", "field": "commit"}


def test_measurements_api_returns_the_documented_shape(client: Client, tmp_path, seed_scaled_report) -> None:
    call_command(
        "ingest_report",
        _write(tmp_path, seed_scaled_report),
        commit=SHA,
        suite="kimi-k3-8k1k",
        hardware="b300",
    )
    response = client.get(f"/api/commits/{SHA}/measurements/")
    assert response.status_code == 200
    body = response.json()
    assert body["commit"] == SHA
    assert {
        "suite": "kimi-k3-8k1k",
        "hardware": "b300",
        "concurrency": 16,
        "metric": "ttft_ms_mean",
        "value": pytest.approx(146.736, abs=1e-3),
    } in body["measurements"]
    assert len(body["measurements"]) == 3 * len(METRIC_KEYS)


def test_measurements_api_404_is_json(client: Client) -> None:
    response = client.get("/api/commits/deadbeef/measurements/")
    assert response.status_code == 404
    assert response.json() == {"error": "unknown commit 'deadbeef'"}


@pytest.mark.django_db(transaction=True)
def test_a_stored_report_asks_for_detection_once_its_transaction_commits(
    vllm_cpu_report, control_queue
) -> None:
    with transaction.atomic():
        run = report_ingest(raw=vllm_cpu_report, commit_sha=SHA, suite_name="tiny", hardware_class="cpu").run
        assert control_queue.drain() == []  # nothing leaves before the run is visible to a worker
    assert control_queue.drain() == [(dispatch.RUN_DETECT, (run.pk,))]
    # The same report again stores nothing and asks for nothing.
    report_ingest(raw=vllm_cpu_report, commit_sha=SHA, suite_name="tiny", hardware_class="cpu")
    assert control_queue.drain() == []
