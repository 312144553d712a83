"""JSON API: the ingest endpoint for runners and CI systems, and the reads pages and checks use."""

from __future__ import annotations

import base64
import binascii
import json

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from dashboard.benchmarks import selectors
from dashboard.benchmarks.services import IngestRejected, report_ingest
from dashboard.tokens.auth import token_required
from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import TokenKind


def _error(message: str, *, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _report_bytes(request: HttpRequest) -> tuple[bytes, dict[str, str]]:
    """Accept multipart (a `report` file plus fields) or JSON (`report` as an object or base64 text)."""
    if request.content_type == "multipart/form-data":
        upload = request.FILES.get("report")
        if upload is None:
            raise IngestRejected("missing 'report' file in the multipart body")
        return upload.read(), {
            key: str(request.POST.get(key, "")) for key in ("commit", "suite", "hardware", "runner")
        }
    try:
        body = json.loads(request.body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise IngestRejected(f"request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise IngestRejected("request body must be a JSON object")
    report = body.get("report")
    if isinstance(report, dict):
        raw = json.dumps(report).encode()
    elif isinstance(report, str):
        try:
            raw = base64.b64decode(report, validate=True)
        except (binascii.Error, ValueError):
            raise IngestRejected("'report' text must be base64 of the report file") from None
    else:
        raise IngestRejected("missing 'report': the guidellm JSON report as an object or base64 text")
    return raw, {key: str(body.get(key) or "") for key in ("commit", "suite", "hardware", "runner")}


@require_POST
@token_required(TokenKind.INGEST, TokenKind.RUNNER)
def runs_create(request: HttpRequest, *, token: ApiToken) -> JsonResponse:
    try:
        raw, fields = _report_bytes(request)
        missing = [key for key in ("commit", "suite", "hardware") if not fields[key]]
        if missing:
            raise IngestRejected(f"missing field(s): {', '.join(missing)}")
        runner_name = token.scope.require_report(
            suite_name=fields["suite"],
            hardware_class=fields["hardware"],
            runner_name=fields["runner"] or None,
        )
        outcome = report_ingest(
            raw=raw,
            commit_sha=fields["commit"],
            suite_name=fields["suite"],
            hardware_class=fields["hardware"],
            runner_name=runner_name,
        )
    except IngestRejected as error:
        return _error(error.reason, status=400)
    return JsonResponse(
        {
            "run": outcome.run.pk,
            "created": outcome.created,
            "measurements": outcome.measurement_count,
            "url": f"/runs/{outcome.run.pk}/",
        },
        status=201 if outcome.created else 200,
    )


@require_GET
def commit_measurements(request: HttpRequest, sha: str) -> JsonResponse:
    commit = selectors.commit_get(sha=sha)
    if commit is None:
        return _error(f"unknown commit {sha!r}", status=404)
    rows = selectors.commit_measurements(commit=commit)
    return JsonResponse(
        {
            "commit": commit.sha,
            "measurements": [
                {
                    "suite": row.suite,
                    "hardware": row.hardware,
                    "concurrency": row.concurrency,
                    "metric": row.metric,
                    "value": row.value,
                }
                for row in rows
            ],
        }
    )
