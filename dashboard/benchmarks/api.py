"""JSON API: the ingest endpoint for runners and CI systems, and the reads pages and checks use."""

from __future__ import annotations

import base64
import binascii
import json

from django.conf import settings
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import HttpRequest, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.views.decorators.http import require_GET, require_POST

from dashboard.benchmarks import selectors
from dashboard.benchmarks.services import IngestRejected, report_ingest
from dashboard.tokens.auth import token_required
from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import TokenKind


def _error(message: str, *, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


_FIELDS = ("commit", "suite", "hardware", "runner")


def _max_request_bytes() -> int:
    # Room for the multipart framing or the JSON envelope (base64 grows a report by a third).
    return settings.PERFWATCH_MAX_REPORT_BYTES * 4 // 3 + 64 * 1024


def _text_fields(values: dict[str, object]) -> dict[str, str]:
    fields = {}
    for key in _FIELDS:
        value = values.get(key)
        if value is not None and not isinstance(value, str):
            raise IngestRejected(f"field {key!r} must be a string, not {type(value).__name__}")
        fields[key] = value or ""
    return fields


def _multipart_report(request: HttpRequest) -> tuple[bytes, dict[str, str]]:
    # Django streams file parts over 2.5 MB to a temporary file; the size is checked before reading it.
    try:
        upload = request.FILES.get("report")
        values: dict[str, object] = {key: request.POST.get(key) for key in _FIELDS}
    except (MultiPartParserError, BadRequest, SuspiciousOperation) as error:
        raise IngestRejected(f"unreadable multipart body: {str(error)[:200]}") from None
    if upload is None:
        raise IngestRejected("missing 'report' file in the multipart body")
    if upload.size is not None and upload.size > settings.PERFWATCH_MAX_REPORT_BYTES:
        raise IngestRejected(
            f"report is {upload.size} bytes, over the limit of {settings.PERFWATCH_MAX_REPORT_BYTES}"
        )
    return upload.read(), _text_fields(values)


def _json_report(request: HttpRequest) -> tuple[bytes, dict[str, str]]:
    # Read from the stream, not request.body: the endpoint's own limit (checked from Content-Length
    # before this) applies, not the site-wide DATA_UPLOAD_MAX_MEMORY_SIZE meant for forms.
    try:
        body = json.loads(request.read())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise IngestRejected(f"request body is not valid JSON: {error}") from None
    except RecursionError:
        raise IngestRejected("request body is JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise IngestRejected("request body must be a JSON object")
    report = body.get("report")
    if isinstance(report, dict):
        try:
            raw = json.dumps(report).encode()
        except RecursionError:
            raise IngestRejected("'report' is nested too deeply") from None
    elif isinstance(report, str):
        try:
            raw = base64.b64decode(report, validate=True)
        except (binascii.Error, ValueError):
            raise IngestRejected("'report' text must be base64 of the report file") from None
    else:
        raise IngestRejected("missing 'report': the guidellm JSON report as an object or base64 text")
    return raw, _text_fields(body)


def _report_bytes(request: HttpRequest) -> tuple[bytes, dict[str, str]]:
    """Accept multipart (a `report` file plus fields) or JSON (`report` as an object or base64 text)."""
    if request.content_type == "multipart/form-data":
        return _multipart_report(request)
    return _json_report(request)


@require_POST
@token_required(TokenKind.INGEST, TokenKind.RUNNER, max_body_bytes=_max_request_bytes)
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
