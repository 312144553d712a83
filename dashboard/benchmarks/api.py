"""JSON API: the ingest endpoint for runners and CI systems, and the reads pages and checks use."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import HttpRequest, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.views.decorators.http import require_GET, require_POST

from dashboard.benchmarks import selectors
from dashboard.benchmarks.bodies import IngestBody, IngestFields, report_decoded
from dashboard.benchmarks.services import IngestRejected, report_ingest
from dashboard.edges import BodyInvalid, body_parse, json_body_parse
from dashboard.tokens.auth import token_required
from dashboard.tokens.models import ApiToken
from dashboard.tokens.scopes import TokenKind


def _error(message: str, *, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


_FIELDS = ("commit", "suite", "hardware", "runner")


def _max_request_bytes() -> int:
    # Room for the multipart framing or the JSON envelope (base64 grows a report by a third).
    return settings.PERFWATCH_MAX_REPORT_BYTES * 4 // 3 + 64 * 1024


def _multipart_report(request: HttpRequest) -> tuple[bytes, IngestFields]:
    # Django streams file parts over 2.5 MB to a temporary file; the size is checked before reading it.
    try:
        upload = request.FILES.get("report")
        values = {key: request.POST[key] for key in _FIELDS if key in request.POST}
    except (MultiPartParserError, BadRequest, SuspiciousOperation) as error:
        raise IngestRejected(f"unreadable multipart body: {str(error)[:200]}") from None
    fields = body_parse(IngestFields, values)
    if upload is None:
        raise BodyInvalid("field 'report': missing file in the multipart body", field="report")
    if upload.size is not None and upload.size > settings.PERFWATCH_MAX_REPORT_BYTES:
        raise IngestRejected(
            f"report is {upload.size} bytes, over the limit of {settings.PERFWATCH_MAX_REPORT_BYTES}"
        )
    return upload.read(), fields


def _json_report(request: HttpRequest) -> tuple[bytes, IngestFields]:
    # Read from the stream, not request.body: the endpoint's own limit (checked from Content-Length
    # before this) applies, not the site-wide DATA_UPLOAD_MAX_MEMORY_SIZE meant for forms.
    body = json_body_parse(IngestBody, request.read())
    if isinstance(body.report, dict):
        try:
            raw = json.dumps(body.report).encode()
        except RecursionError:
            raise BodyInvalid("field 'report': nested too deeply", field="report") from None
    else:
        raw = report_decoded(body.report)
    return raw, body


def _report_bytes(request: HttpRequest) -> tuple[bytes, IngestFields]:
    """Accept multipart (a `report` file plus fields) or JSON (`report` as an object or base64 text)."""
    if request.content_type == "multipart/form-data":
        return _multipart_report(request)
    return _json_report(request)


@require_POST
@token_required(TokenKind.INGEST, TokenKind.RUNNER, max_body_bytes=_max_request_bytes)
def runs_create(request: HttpRequest, *, token: ApiToken) -> JsonResponse:
    try:
        raw, fields = _report_bytes(request)
        runner_name = token.scope.require_report(
            suite_name=fields.suite, hardware_class=fields.hardware, runner_name=fields.runner or None
        )
        outcome = report_ingest(
            raw=raw,
            commit_sha=fields.commit,
            suite_name=fields.suite,
            hardware_class=fields.hardware,
            runner_name=runner_name,
            suite_create=token.scope.may_create_suites,
        )
    except BodyInvalid as error:
        return JsonResponse({"error": str(error), "field": error.field}, status=400)
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
