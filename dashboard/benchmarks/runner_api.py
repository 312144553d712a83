"""The runner nodes' API: presence, claim, heartbeat, stages, results and failure, over HTTP with a runner
token. Runner nodes hold no database credentials; the lease and exactly-once rules are enforced here,
by the same conditional updates as before (dashboard.benchmarks.runs).

Every endpoint takes a JSON object and answers JSON: 200 when done, 409 `{"error", "stop": true}` when the
run is not (or no longer) this runner's to work on, 400 with a one-line reason for a malformed body,
401/403 from the token check.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from dashboard.benchmarks import runs, services
from dashboard.benchmarks.models import Run, Runner, RunStatus
from dashboard.benchmarks.suites import suite_spec
from dashboard.tokens.auth import token_required
from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import TokenForbidden, TokenKind
from runners.accuracy import AccuracyResult
from runners.guidellm_report import ReportInvalid, report_parse

RUNNER_STAGES = (RunStatus.INSTALLING, RunStatus.STARTING_SERVER, RunStatus.BENCHMARKING, RunStatus.STORING)
TEXT_MAX_CHARS = 200_000


class BodyInvalid(Exception):
    """A request body that cannot be used; the message is one line."""


def _max_request_bytes() -> int:
    # A report as base64 (a third larger), with room for the logs, commands and telemetry beside it.
    return settings.PERFWATCH_MAX_REPORT_BYTES * 4 // 3 + 8 * 1024 * 1024


def _body(request: HttpRequest) -> dict[str, Any]:
    # Read from the stream: the endpoint's own limit (checked from Content-Length) applies, not the
    # site-wide one meant for forms.
    try:
        body = json.loads(request.read() or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BodyInvalid(f"the body is not valid JSON: {error}") from None
    except RecursionError:
        raise BodyInvalid("the body is JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise BodyInvalid("the body must be a JSON object")
    return body


def _texts(body: dict[str, Any], key: str) -> dict[str, str]:
    value = body.get(key) or {}
    if not isinstance(value, dict) or not all(
        isinstance(name, str) and isinstance(text, str) and len(text) <= TEXT_MAX_CHARS
        for name, text in value.items()
    ):
        raise BodyInvalid(f"'{key}' must be an object of texts")
    return value


def _object(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key) or {}
    if not isinstance(value, dict):
        raise BodyInvalid(f"'{key}' must be an object")
    return value


def _report(body: dict[str, Any], *, required: bool) -> bytes | None:
    text = body.get("report")
    if text in (None, "") and not required:
        return None
    if not isinstance(text, str):
        raise BodyInvalid("'report' must be base64 of the report file")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BodyInvalid("'report' must be base64 of the report file") from None


def _accuracy(body: dict[str, Any]) -> AccuracyResult | None:
    value = body.get("accuracy")
    if value is None:
        return None
    try:
        return AccuracyResult(
            name=str(value["name"])[:50],
            correct=float(value["correct"]),
            samples=int(value["samples"]),
            ci_low_pct=float(value["ci_low_pct"]),
            ci_high_pct=float(value["ci_high_pct"]),
        )
    except (TypeError, KeyError, ValueError):
        raise BodyInvalid(
            "'accuracy' must be an object of name, correct, samples, ci_low_pct, ci_high_pct"
        ) from None


def _runner(token: ApiToken) -> Runner | None:
    return Runner.objects.filter(name=token.scope.runner_name).first()


def _not_held(run_id: int, token: ApiToken) -> JsonResponse:
    message = f"run {run_id} is not held by {token.scope.runner_name}: it was cancelled, requeued or finished"
    return JsonResponse({"error": message, "stop": True}, status=409)


def _runner_endpoint(view: Any) -> Any:
    """POST only, a runner token, and a malformed body answered 400 in one line."""

    def wrapper(request: HttpRequest, *args: Any, token: ApiToken, **kwargs: Any) -> JsonResponse:
        try:
            return view(request, *args, token=token, body=_body(request), **kwargs)
        except BodyInvalid as error:
            return JsonResponse({"error": str(error)}, status=400)
        except runs.RunNotOwned:
            return _not_held(kwargs.get("run_id", 0), token)

    wrapper.__name__ = view.__name__
    wrapper.__doc__ = view.__doc__
    return require_POST(token_required(TokenKind.RUNNER, max_body_bytes=_max_request_bytes)(wrapper))


@_runner_endpoint
def presence(request: HttpRequest, *, token: ApiToken, body: dict[str, Any]) -> JsonResponse:
    """An idle node says it is alive, with its environment fingerprint."""
    runner = runs.runner_register(
        name=token.scope.runner_name,
        hardware_class=token.scope.hardware_class,
        environment=_object(body, "environment"),
    )
    return JsonResponse({"runner": runner.name, "hardware_class": runner.hardware_class})


@_runner_endpoint
def run_claim(request: HttpRequest, run_id: int, *, token: ApiToken, body: dict[str, Any]) -> JsonResponse:
    """Take a queued run; 409 when another delivery or runner has it already."""
    hardware_class = Run.objects.filter(pk=run_id).values_list("hardware_class", flat=True).first()
    if hardware_class is None:
        return JsonResponse({"error": f"no run {run_id}", "stop": True}, status=404)
    if hardware_class != token.scope.hardware_class:
        raise TokenForbidden(
            f"run {run_id} is for hardware class {hardware_class!r}, "
            f"this runner serves {token.scope.hardware_class!r}"
        )
    runner = runs.runner_register(
        name=token.scope.runner_name, hardware_class=hardware_class, environment=_object(body, "environment")
    )
    run = runs.run_claim(run_id=run_id, runner=runner)
    if run is None:
        return _not_held(run_id, token)
    return JsonResponse(
        {
            "run": run.pk,
            "attempt": run.attempt,
            "commit": run.commit.sha,
            "version": run.vllm_version_requested,
            "suite": suite_spec(suite=run.suite).model_dump(mode="json"),
            "lease_s": settings.PERFWATCH_RUN_LEASE_S,
            "heartbeat_s": settings.PERFWATCH_HEARTBEAT_S,
        }
    )


@_runner_endpoint
def run_heartbeat(
    request: HttpRequest, run_id: int, *, token: ApiToken, body: dict[str, Any]
) -> JsonResponse:
    """Renew the lease and hand over the latest log tails; 409 (stop) when the run is not held any more."""
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    runs.run_heartbeat(run_id=run_id, runner=runner, logs=_texts(body, "logs"))
    return JsonResponse({"run": run_id, "stop": False})


@_runner_endpoint
def run_stage(request: HttpRequest, run_id: int, *, token: ApiToken, body: dict[str, Any]) -> JsonResponse:
    stage = body.get("stage")
    if stage not in RUNNER_STAGES:
        raise BodyInvalid(f"'stage' must be one of {', '.join(RUNNER_STAGES)}")
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    runs.run_stage_enter(run_id=run_id, runner=runner, stage=str(stage))
    return JsonResponse({"run": run_id, "stage": stage})


class ReportRefused(Exception):
    """A finished run's report does not validate; the run was failed with the reason."""


def _delivery(body: dict[str, Any]) -> tuple[int | None, float | None]:
    """(the attempt the report is of, how long the node kept it when its first upload failed)."""
    attempt = body.get("attempt")
    if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1):
        raise BodyInvalid("'attempt' must be the attempt's number")
    delivery = _object(body, "delivery")
    kept_s = delivery.get("kept_s", 0.0)
    if not isinstance(kept_s, int | float) or isinstance(kept_s, bool) or not 0 <= kept_s < 10**9:
        raise BodyInvalid("'delivery.kept_s' must be seconds")
    return attempt, float(kept_s) if delivery.get("resent") is True else None


def complete_store(*, run_id: int, runner: Runner, body: dict[str, Any]) -> Run:
    """Store a finished run's upload (from the API or, by hand, from the file a node kept) exactly once.

    Raises BodyInvalid for a malformed body, ReportRefused for a report that does not validate (the run is
    failed with the reason), runs.RunNotOwned when the run is not this runner's to complete.
    """
    raw = _report(body, required=True) or b""
    attempt, kept_s = _delivery(body)
    run = Run.objects.select_related("suite").filter(pk=run_id).first()
    if run is None:
        raise runs.RunNotOwned(f"no run {run_id}")
    logs, commands = _texts(body, "logs"), _texts(body, "commands")
    try:
        report = report_parse(
            raw=raw, expected_concurrencies=run.suite.concurrencies, max_error_rate=run.suite.max_error_rate
        )
    except ReportInvalid as error:
        runs.run_fail(
            run_id=run_id, runner=runner, reason=f"storing: invalid report: {error.reason}", logs=logs,
            commands=commands, raw_report=raw,
        )  # fmt: skip
        raise ReportRefused(f"invalid report: {error.reason}") from None
    telemetry = body.get("telemetry") or []
    if not isinstance(telemetry, list):
        raise BodyInvalid("'telemetry' must be a list of samples")
    return services.run_complete(
        run_id=run_id,
        runner=runner,
        attempt=attempt,
        kept_s=kept_s,
        result=services.RunResult(
            raw_report=raw,
            report=report,
            environment=_object(body, "environment"),
            vllm_version=str(body.get("vllm_version") or "")[:100],
            telemetry=telemetry,
            server_metrics=_object(body, "server_metrics"),
            commands=commands,
            logs=logs,
            accuracy=_accuracy(body),
        ),
    )


@_runner_endpoint
def run_complete(request: HttpRequest, run_id: int, *, token: ApiToken, body: dict[str, Any]) -> JsonResponse:
    """Store a held run's results exactly once. A report that does not validate fails the run."""
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    try:
        complete_store(run_id=run_id, runner=runner, body=body)
    except ReportRefused as refusal:
        return JsonResponse({"error": str(refusal)}, status=400)
    return JsonResponse({"run": run_id, "status": RunStatus.SUCCEEDED})


@_runner_endpoint
def run_fail(request: HttpRequest, run_id: int, *, token: ApiToken, body: dict[str, Any]) -> JsonResponse:
    """A held run failed: queued again when the bench failed and attempts are left, else failed, keeping
    its logs, commands and any report."""
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    reason = body.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise BodyInvalid("'reason' must be a one-line text")
    if body.get("waiting") is True and runs.run_requeue_waiting(run_id=run_id, runner=runner, reason=reason):
        return JsonResponse({"run": run_id, "status": RunStatus.QUEUED})
    retries_max = body.get("retries_max")
    if retries_max is not None and (
        not isinstance(retries_max, int) or isinstance(retries_max, bool) or not 0 <= retries_max <= 10
    ):
        raise BodyInvalid("'retries_max' must be a small number of attempts")
    if body.get("retryable") is True and runs.run_requeue_after_timeout(
        run_id=run_id, runner=runner, reason=reason, retries_max=retries_max
    ):
        return JsonResponse({"run": run_id, "status": RunStatus.QUEUED})
    runs.run_fail(
        run_id=run_id,
        runner=runner,
        reason=reason,
        logs=_texts(body, "logs"),
        environment=_object(body, "environment"),
        commands=_texts(body, "commands"),
        raw_report=_report(body, required=False),
    )
    return JsonResponse({"run": run_id, "status": RunStatus.FAILED})
