"""The runner nodes' API: presence, claim, heartbeat, stages, results and failure, over HTTP with a runner
token. Runner nodes hold no database credentials; the lease and exactly-once rules are enforced here,
by the same conditional updates as before (dashboard.benchmarks.runs).

Every endpoint takes a JSON object and answers JSON: 200 when done, 409 `{"error", "stop": true}` when the
run is not (or no longer) this runner's to work on, 400 with a one-line reason for a malformed body,
401/403 from the token check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST
from pydantic import ValidationError

from dashboard.benchmarks import profiles, runs, services
from dashboard.benchmarks.bodies import (
    AccuracyBody,
    ClaimBody,
    CompleteBody,
    FailBody,
    HeartbeatBody,
    PresenceBody,
    ProfileBody,
    StageBody,
    report_decoded,
)
from dashboard.benchmarks.models import Run, RunKind, Runner, RunStatus
from dashboard.benchmarks.suites import suite_spec
from dashboard.edges import Body, BodyInvalid, json_body_parse
from dashboard.tokens.auth import token_required
from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import TokenForbidden, TokenKind
from runners.accuracy import AccuracyResult
from runners.guidellm_report import ReportInvalid, report_parse
from runners.profiles import ProfileSummary, TraceUnreadable
from runners.text import one_line


def _max_request_bytes() -> int:
    # A report as base64 (a third larger), with room for the logs, commands and telemetry beside it.
    return settings.PERFWATCH_MAX_REPORT_BYTES * 4 // 3 + 8 * 1024 * 1024


def _accuracy(body: AccuracyBody | None) -> AccuracyResult | None:
    if body is None:
        return None
    return AccuracyResult(
        name=body.name,
        correct=body.correct,
        samples=body.samples,
        ci_low_pct=body.ci_low_pct,
        ci_high_pct=body.ci_high_pct,
    )


def _runner(token: ApiToken) -> Runner | None:
    return Runner.objects.filter(name=token.scope.runner_name).first()


def _not_held(run_id: int, token: ApiToken) -> JsonResponse:
    message = f"run {run_id} is not held by {token.scope.runner_name}: it was cancelled, requeued or finished"
    return JsonResponse({"error": message, "stop": True}, status=409)


def _runner_endpoint(model: type[Body]) -> Callable[[Any], Any]:
    """POST only, a runner token, and a body read as `model`: a malformed one is answered 400 in one line
    naming its field, before anything is stored."""

    def decorator(view: Any) -> Any:
        def wrapper(request: HttpRequest, *args: Any, token: ApiToken, **kwargs: Any) -> JsonResponse:
            try:
                # Read from the stream: the endpoint's own limit (checked from Content-Length) applies,
                # not the site-wide one meant for forms.
                body = json_body_parse(model, request.read())
                return view(request, *args, token=token, body=body, **kwargs)
            except BodyInvalid as error:
                return JsonResponse({"error": str(error), "field": error.field}, status=400)
            except runs.RunNotOwned:
                return _not_held(kwargs.get("run_id", 0), token)

        wrapper.__name__ = view.__name__
        wrapper.__doc__ = view.__doc__
        wrapper.body_model = model  # type: ignore[attr-defined]  # read by the OpenAPI schema
        return require_POST(token_required(TokenKind.RUNNER, max_body_bytes=_max_request_bytes)(wrapper))

    return decorator


@_runner_endpoint(PresenceBody)
def presence(request: HttpRequest, *, token: ApiToken, body: PresenceBody) -> JsonResponse:
    """An idle node says it is alive, with its environment fingerprint."""
    runner = runs.runner_register(
        name=token.scope.runner_name,
        hardware_class=token.scope.hardware_class,
        environment=body.environment.as_json(),
    )
    return JsonResponse({"runner": runner.name, "hardware_class": runner.hardware_class})


@_runner_endpoint(ClaimBody)
def run_claim(request: HttpRequest, run_id: int, *, token: ApiToken, body: ClaimBody) -> JsonResponse:
    """Take a queued run; 409 when another delivery or runner has it already, or when its suite cannot
    be run (then the run fails, before anything is claimed)."""
    target = Run.objects.select_related("suite").filter(pk=run_id).first()
    if target is None:
        return JsonResponse({"error": f"no run {run_id}", "stop": True}, status=404)
    if target.hardware_class != token.scope.hardware_class:
        raise TokenForbidden(
            f"run {run_id} is for hardware class {target.hardware_class!r}, "
            f"this runner serves {token.scope.hardware_class!r}"
        )
    try:
        spec = suite_spec(suite=target.suite).model_dump(mode="json")
    except ValidationError as error:
        reason = f"suite {target.suite.name} cannot be run: {one_line(error, limit=300)}"
        runs.run_refuse_unrunnable(run_id=run_id, reason=reason)
        return JsonResponse({"error": reason, "stop": True}, status=409)
    runner = runs.runner_register(
        name=token.scope.runner_name,
        hardware_class=target.hardware_class,
        environment=body.environment.as_json(),
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
            "suite": spec,
            "lease_s": settings.PERFWATCH_RUN_LEASE_S,
            "heartbeat_s": settings.PERFWATCH_HEARTBEAT_S,
            "profile": run.kind == RunKind.PROFILE,
        }
    )


@_runner_endpoint(HeartbeatBody)
def run_heartbeat(request: HttpRequest, run_id: int, *, token: ApiToken, body: HeartbeatBody) -> JsonResponse:
    """Renew the lease and hand over the latest log tails; 409 (stop) when the run is not held any more."""
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    runs.run_heartbeat(run_id=run_id, runner=runner, logs=dict(body.logs))
    return JsonResponse({"run": run_id, "stop": False})


@_runner_endpoint(StageBody)
def run_stage(request: HttpRequest, run_id: int, *, token: ApiToken, body: StageBody) -> JsonResponse:
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    runs.run_stage_enter(run_id=run_id, runner=runner, stage=body.stage)
    return JsonResponse({"run": run_id, "stage": body.stage})


class ReportRefused(Exception):
    """A finished run's report does not validate; the run was failed with the reason."""


def complete_store(*, run_id: int, runner: Runner, body: CompleteBody) -> Run:
    """Store a finished run's upload (from the API or, by hand, from the file a node kept) exactly once.

    Raises ReportRefused for a report that does not validate (the run is failed with the reason),
    runs.RunNotOwned when the run is not this runner's to complete.
    """
    raw = report_decoded(body.report)
    attempt = body.attempt
    kept_s = body.delivery.kept_s if body.delivery is not None and body.delivery.resent else None
    run = Run.objects.select_related("suite").filter(pk=run_id).first()
    if run is None:
        raise runs.RunNotOwned(f"no run {run_id}")
    # The same report for the same commit, suite and hardware is one run: another run cannot take it.
    twin = (
        Run.objects.filter(
            commit_id=run.commit_id,
            suite_id=run.suite_id,
            hardware_class=run.hardware_class,
            report_sha256=hashlib.sha256(raw).hexdigest(),
        )
        .exclude(pk=run_id)
        .values_list("pk", flat=True)
        .first()
    )
    if twin is not None:
        raise BodyInvalid(f"report: this very report is already stored as run {twin}", field="report")
    logs, commands = dict(body.logs), dict(body.commands)
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
    return services.run_complete(
        run_id=run_id,
        runner=runner,
        attempt=attempt,
        kept_s=kept_s,
        result=services.RunResult(
            raw_report=raw,
            report=report,
            environment=body.environment.as_json(),
            vllm_version=body.vllm_version or "",
            telemetry=list(body.telemetry),
            server_metrics=dict(body.server_metrics),
            commands=commands,
            logs=logs,
            accuracy=_accuracy(body.accuracy),
        ),
    )


@_runner_endpoint(CompleteBody)
def run_complete(request: HttpRequest, run_id: int, *, token: ApiToken, body: CompleteBody) -> JsonResponse:
    """Store a held run's results exactly once. A report that does not validate fails the run."""
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    try:
        complete_store(run_id=run_id, runner=runner, body=body)
    except ReportRefused as refusal:
        return JsonResponse({"error": str(refusal), "field": "report"}, status=400)
    return JsonResponse({"run": run_id, "status": RunStatus.SUCCEEDED})


@_runner_endpoint(ProfileBody)
def run_profile(request: HttpRequest, run_id: int, *, token: ApiToken, body: ProfileBody) -> JsonResponse:
    """Store a held profile run's trace (base64 of its gzip) and summary; sent again, it replaces them."""
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    try:
        summary = ProfileSummary.from_json(body.summary)
    except TraceUnreadable as error:
        raise BodyInvalid(f"summary: {error}", field="summary") from None
    profiles.profile_store(
        run_id=run_id,
        runner=runner,
        trace_gzip=body.trace_gzip(),
        trace_name=body.trace_name,
        summary=summary,
        server_metrics=dict(body.server_metrics),
        settings=body.settings,
    )
    return JsonResponse({"run": run_id, "profile": True})


@_runner_endpoint(FailBody)
def run_fail(request: HttpRequest, run_id: int, *, token: ApiToken, body: FailBody) -> JsonResponse:
    """A held run failed: queued again when it waits for its wheel, or when the bench failed and attempts
    are left, else failed, keeping its logs, commands and any report; 409 (stop) when not held."""
    runner = _runner(token)
    if runner is None:
        return _not_held(run_id, token)
    raw_report = report_decoded(body.report) if body.report else None
    if body.waiting and runs.run_requeue_waiting(run_id=run_id, runner=runner, reason=body.reason):
        return JsonResponse({"run": run_id, "status": RunStatus.QUEUED})
    if body.retryable and runs.run_requeue_after_timeout(
        run_id=run_id, runner=runner, reason=body.reason, retries_max=body.retries_max
    ):
        return JsonResponse({"run": run_id, "status": RunStatus.QUEUED})
    runs.run_fail(
        run_id=run_id,
        runner=runner,
        reason=body.reason,
        logs=dict(body.logs),
        environment=body.environment.as_json(),
        commands=dict(body.commands),
        raw_report=raw_report,
    )
    return JsonResponse({"run": run_id, "status": RunStatus.FAILED})
