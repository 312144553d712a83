"""Hostile runner-API bodies: each is a 400 naming its field with nothing stored, never a 500; evidence
text PostgreSQL cannot hold (a crashing process's NUL bytes) is kept with U+FFFD instead of costing the run.
"""

import base64
import json

import pytest

from dashboard.benchmarks.models import Measurement, Run, Runner, RunStatus, Suite
from dashboard.benchmarks.runs import run_enqueue

pytestmark = pytest.mark.django_db

ACCURACY = {"name": "gsm8k", "correct": 90, "samples": 100, "ci_low_pct": 84.0, "ci_high_pct": 95.0}


def _complete_body(report: bytes, **changes: object) -> dict[str, object]:
    body: dict[str, object] = {
        "report": base64.b64encode(report).decode(),
        "environment": {"host": "n1", "gpu_count": 0},
        "vllm_version": "0.32.0+cpu",
        "telemetry": [{"t_s": 0.0, "gpus": []}],
        "server_metrics": {"delta": {"vllm:num_requests": 3}},
        "commands": {"serve": "vllm serve tiny"},
        "logs": {"server": "INFO ready"},
        "accuracy": ACCURACY,
    }
    body.update(changes)
    return body


@pytest.fixture
def held(tiny_run, node):
    """A run claimed by cpu-node-1 and in its storing stage; the node's calls."""
    holder = node("cpu-node-1")
    assert holder(tiny_run.pk, "claim").status_code == 200
    assert holder(tiny_run.pk, "stage", {"stage": "storing"}).status_code == 200
    return holder


def _refused(answer, field: str) -> None:
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field, answer.json()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"accuracy": {**ACCURACY, "correct": float("nan")}}, "accuracy.correct"),
        ({"accuracy": {**ACCURACY, "ci_high_pct": 500.0}}, "accuracy.ci_high_pct"),
        ({"accuracy": {**ACCURACY, "ci_low_pct": -50.0}}, "accuracy.ci_low_pct"),
        ({"accuracy": {**ACCURACY, "samples": 1e20}}, "accuracy.samples"),
        ({"accuracy": {**ACCURACY, "correct": 500, "samples": 100}}, "accuracy"),
        ({"vllm_version": "0.32\x00"}, "vllm_version"),
        ({"environment": {"os": "linux\x00"}}, "environment"),
        ({"commands": {"serve": "vllm\x00serve"}}, "commands.serve"),
        ({"server_metrics": {"vllm:x\x00": 1}}, "server_metrics"),
        ({"telemetry": [{"power_w": float("nan")}]}, "telemetry.0"),
        ({"telemetry": [{"power_w": float("inf")}]}, "telemetry.0"),
        ({"environment": {"gpu_count": "x"}}, "environment.gpu_count"),
        ({"environment": {"gpu_count": 99999}}, "environment.gpu_count"),
        ({"environment": {"gpu_count": -1}}, "environment.gpu_count"),
        ({"environment": {"gpu_count": float("inf")}}, "environment.gpu_count"),
        ({"environment": {"gpu_model": "H" * 10_000}}, "environment.gpu_model"),
        ({"logs": {"serv\x00er": "x"}}, "logs.serv\x00er.[key]"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_hostile_complete_is_refused_naming_its_field_and_stores_nothing(
    tiny_run, held, vllm_cpu_report, changes, field
) -> None:
    _refused(held(tiny_run.pk, "complete", _complete_body(vllm_cpu_report, **changes)), field)

    run = Run.objects.get(pk=tiny_run.pk)
    assert run.status == RunStatus.STORING and run.vllm_version == "" and run.telemetry == []
    assert not Measurement.objects.filter(run=run).exists()


def test_nan_and_1e400_as_python_json_reads_them_are_refused(tiny_run, held, vllm_cpu_report) -> None:
    body = json.dumps(_complete_body(vllm_cpu_report)).replace('"correct": 90', '"correct": NaN')
    _refused(held(tiny_run.pk, "complete", body), "accuracy.correct")
    body = json.dumps(_complete_body(vllm_cpu_report)).replace('"gpu_count": 0', '"gpu_count": 1e400')
    _refused(held(tiny_run.pk, "complete", body), "environment.gpu_count")
    assert not Measurement.objects.exists()


def test_a_good_complete_with_accuracy_is_stored(tiny_run, held, vllm_cpu_report) -> None:
    answer = held(tiny_run.pk, "complete", _complete_body(vllm_cpu_report))
    assert answer.status_code == 200, answer.content
    assert Run.objects.get(pk=tiny_run.pk).status == RunStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("endpoint", "body", "field"),
    [
        ("presence", {"environment": {"host": "n\x001"}}, "environment.host"),
        ("presence", {"environment": {"gpu_count": "x"}}, "environment.gpu_count"),
        ("presence", {"environment": {"gpu_model": "H" * 10_000}}, "environment.gpu_model"),
        ("presence", {"environment": {"nested": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}}, "environment"),
        ("presence", {"environment": {"host": "n1"}, "extra": 1}, "extra"),
    ],
)
def test_a_hostile_presence_is_refused_and_registers_nobody(node, bearer, endpoint, body, field) -> None:
    from django.test import Client

    headers = bearer(scope="runner:cpu/cpu-node-9", name="token-9")
    answer = Client().post(
        f"/api/runner/{endpoint}/", data=json.dumps(body), content_type="application/json", headers=headers
    )
    _refused(answer, field)
    assert not Runner.objects.filter(name="cpu-node-9").exists()


def test_a_hostile_claim_is_refused_and_claims_nothing(tiny_run, node) -> None:
    _refused(
        node("cpu-node-1")(tiny_run.pk, "claim", {"environment": {"gpu_count": -1}}), "environment.gpu_count"
    )
    assert Run.objects.get(pk=tiny_run.pk).status == RunStatus.QUEUED


def test_log_tails_with_nul_bytes_and_lone_surrogates_keep_the_lease(tiny_run, held) -> None:
    """The tail of a crashing process's output holds binary: the heartbeat must still renew the lease."""
    answer = held(tiny_run.pk, "heartbeat", {"logs": {"server": "core dumped \x00\x01 \ud800 end"}})

    assert answer.status_code == 200, answer.content
    assert Run.objects.get(pk=tiny_run.pk).logs == {"server": "core dumped \ufffd\x01 \ufffd end"}


def test_a_hostile_heartbeat_log_name_is_refused(tiny_run, held) -> None:
    before = Run.objects.values("logs", "lease_expires_at").get(pk=tiny_run.pk)
    _refused(held(tiny_run.pk, "heartbeat", {"logs": {"a\x00": "x"}}), "logs.a\x00.[key]")
    _refused(held(tiny_run.pk, "heartbeat", {"logs": {"server": "x" * 200_001}}), "logs.server")
    assert Run.objects.values("logs", "lease_expires_at").get(pk=tiny_run.pk) == before


def test_fail_and_complete_on_a_run_not_held_answer_409_stop_and_change_nothing(
    tiny_run, node, vllm_cpu_report
) -> None:
    holder, stranger = node("cpu-node-1"), node("cpu-node-2")
    holder(tiny_run.pk, "claim")
    stranger(tiny_run.pk + 1000, "claim")  # registers the stranger
    before = Run.objects.values().get(pk=tiny_run.pk)

    failed = stranger(tiny_run.pk, "fail", {"reason": "installing: no wheel"})
    completed = stranger(tiny_run.pk, "complete", _complete_body(vllm_cpu_report))

    assert failed.status_code == 409 and failed.json()["stop"] is True
    assert completed.status_code == 409 and completed.json()["stop"] is True
    assert Run.objects.values().get(pk=tiny_run.pk) == before
    assert not Measurement.objects.exists()


def test_a_claim_of_a_suite_without_install_settings_fails_the_run_and_answers_409(tiny_run, node) -> None:
    """A suite an ingest made has no install settings: its run is failed, never left installing."""
    suite = Suite.objects.create(name="made-by-ingest", hardware_class="cpu")
    run = run_enqueue(commit=tiny_run.commit, suite=suite)

    answer = node("cpu-node-1")(run.pk, "claim")

    assert answer.status_code == 409 and answer.json()["stop"] is True
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.runner is None and run.attempt == 0
    assert "cannot be run" in run.failure_reason


def test_a_report_already_stored_by_another_run_of_the_commit_is_a_400_and_the_run_stays_held(
    tiny_run, node, vllm_cpu_report
) -> None:
    first = node("cpu-node-1")
    assert first(tiny_run.pk, "claim").status_code == 200
    assert first(tiny_run.pk, "complete", _complete_body(vllm_cpu_report)).status_code == 200
    again = run_enqueue(commit=tiny_run.commit, suite=tiny_run.suite, version="0.32.0", forced=True)
    assert first(again.pk, "claim").status_code == 200

    _refused(first(again.pk, "complete", _complete_body(vllm_cpu_report)), "report")

    again.refresh_from_db()
    assert again.status != RunStatus.SUCCEEDED and not Measurement.objects.filter(run=again).exists()
