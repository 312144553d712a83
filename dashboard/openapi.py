"""The OpenAPI document of the JSON API, built from the pydantic models of its bodies (dashboard.edges'
types), served at /api/schema/ and fuzzed in CI (tests/security/test_schema_fuzz.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from dashboard.benchmarks.bodies import (
    ClaimBody,
    CompleteBody,
    FailBody,
    HeartbeatBody,
    IngestBody,
    PresenceBody,
    StageBody,
)
from dashboard.github.webhook import PullRequestPayload

_ERROR = {
    "type": "object",
    "properties": {"error": {"type": "string"}, "field": {"type": "string"}, "stop": {"type": "boolean"}},
    "required": ["error"],
}
_ANSWERS = {
    "200": "done",
    "400": "a body or filter that breaks its model; `field` names it",
    "401": "no token, or an unknown, malformed or revoked one",
    "403": "a token used outside its scope",
    "404": "unknown row",
    "409": "the run is not (or no longer) this runner's: `stop` is true",
    "413": "a body announced larger than the endpoint's limit",
    "503": "the database is unavailable; retry after Retry-After seconds",
}
_MODELS: tuple[type[BaseModel], ...] = (
    IngestBody,
    PresenceBody,
    ClaimBody,
    HeartbeatBody,
    StageBody,
    CompleteBody,
    FailBody,
    PullRequestPayload,
)


def _responses(*statuses: str) -> dict[str, Any]:
    return {
        status: {
            "description": _ANSWERS.get(status, "done"),
            "content": {"application/json": {"schema": {} if status in ("200", "201", "202") else _ERROR}},
        }
        for status in statuses
    }


def _path_parameter(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _query(
    name: str, schema: dict[str, Any], *, required: bool = False, many: bool = False
) -> dict[str, Any]:
    if many:
        schema = {"type": "array", "items": schema, "maxItems": 12}
    return {"name": name, "in": "query", "required": required, "schema": schema, "explode": True}


_RUN_ID = _path_parameter("run_id", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1})
_SLUG = {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$", "maxLength": 120}
_TEXT = {"type": "string", "maxLength": 200}


def _post(model: type[BaseModel], *, summary: str, statuses: tuple[str, ...], bearer: bool = True) -> dict:
    operation: dict[str, Any] = {
        "summary": summary,
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}},
        },
        "responses": _responses(*statuses),
    }
    if bearer:
        operation["security"] = [{"bearer": []}]
    return {"post": operation}


def _get(*, summary: str, parameters: list[dict[str, Any]], statuses: tuple[str, ...]) -> dict:
    return {"get": {"summary": summary, "parameters": parameters, "responses": _responses(*statuses)}}


def _runner(model: type[BaseModel], summary: str) -> dict:
    return {
        **_post(model, summary=summary, statuses=("200", "400", "401", "403", "404", "409", "413", "503")),
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every JSON endpoint, its bodies' schemas from their models."""
    _, definitions = models_json_schema(
        [(model, "validation") for model in _MODELS], ref_template="#/components/schemas/{model}"
    )
    timeline_filters = [
        _query("hardware", _SLUG),
        _query("concurrency", {"type": "string", "maxLength": 40}, many=True),
        _query("from", {"type": "string", "maxLength": 20}),
        _query("to", {"type": "string", "maxLength": 20}),
    ]
    suite = _path_parameter("suite", _SLUG)
    paths: dict[str, Any] = {
        "/api/runs/": _post(
            IngestBody,
            summary="Store a guidellm report (an ingest or runner token)",
            statuses=("201", "200", "400", "401", "403", "413", "503"),
        ),
        "/api/commits/{sha}/measurements/": _get(
            summary="Every measurement of a commit",
            parameters=[_path_parameter("sha", {"type": "string", "maxLength": 60})],
            statuses=("200", "404", "503"),
        ),
        "/api/suites/{suite}/series/": _get(
            summary="Points of 1 to 10 metrics, at most 5,000 newest per series",
            parameters=[suite, _query("metric", _TEXT, required=True, many=True), *timeline_filters],
            statuses=("200", "400", "404", "503"),
        ),
        "/api/suites/{suite}/timeline/": _get(
            summary="Every chart of the timeline page, thinned to the chart's width",
            parameters=[
                suite,
                _query("metric", _TEXT, many=True),
                _query("width", {"type": "string", "maxLength": 10}),
                _query("x0", {"type": "string", "maxLength": 30}),
                _query("x1", {"type": "string", "maxLength": 30}),
                _query("stat", {"type": "string", "maxLength": 10}),
                *timeline_filters,
            ],
            statuses=("200", "304", "400", "404", "503"),
        ),
        "/api/suites/{suite}/figures/{metric}/": _get(
            summary="One timeline chart",
            parameters=[suite, _path_parameter("metric", _SLUG), *timeline_filters],
            statuses=("200", "304", "400", "404", "503"),
        ),
        "/api/alerts/": _get(
            summary="Alert groups, newest first, at most 500",
            parameters=[
                _query(name, {"type": "string", "maxLength": 60})
                for name in ("suite", "hardware", "kind", "state", "status", "since")
            ],
            statuses=("200", "400", "503"),
        ),
        "/api/runs/live/": _get(
            summary="A signature of the runs list that changes when a run moves on",
            parameters=[_query(name, _TEXT) for name in ("view", "suite", "hardware", "runner")],
            statuses=("200", "400", "503"),
        ),
        "/api/runs/{run_id}/live/": _get(
            summary="A signature of one run", parameters=[_RUN_ID], statuses=("200", "404", "503")
        ),
        "/api/runs/{run_id}/figures/telemetry/": _get(
            summary="A run's GPU telemetry chart", parameters=[_RUN_ID], statuses=("200", "404", "503")
        ),
        "/api/runner/presence/": _runner(PresenceBody, "An idle runner node is alive"),
        "/api/runner/runs/{run_id}/claim/": _runner(ClaimBody, "Take a queued run"),
        "/api/runner/runs/{run_id}/heartbeat/": _runner(
            HeartbeatBody, "Renew the lease, hand over log tails"
        ),
        "/api/runner/runs/{run_id}/stage/": _runner(StageBody, "Enter a stage"),
        "/api/runner/runs/{run_id}/complete/": _runner(CompleteBody, "Store a held run's results once"),
        "/api/runner/runs/{run_id}/fail/": _runner(FailBody, "A held run failed"),
        "/github/webhook/": {
            "post": {
                "summary": "GitHub's deliveries, signed with X-Hub-Signature-256 (a pull_request body shown)",
                "parameters": [
                    {"name": name, "in": "header", "required": False, "schema": _TEXT}
                    for name in ("X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256")
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/PullRequestPayload"}}
                    },
                },
                "responses": _responses("200", "202", "204", "400", "403", "503"),
            }
        },
    }
    for path, item in paths.items():
        for operation in item.values():
            if "{run_id}" in path and _RUN_ID not in operation.setdefault("parameters", []):
                operation["parameters"].append(_RUN_ID)
    return {
        "openapi": "3.1.0",
        "info": {"title": "PerfWatch JSON API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


@require_GET
def schema(request: HttpRequest) -> JsonResponse:
    return JsonResponse(openapi_document())
