"""The JSON bodies of the ingest and runner APIs, one model each (the types are dashboard.edges').

A body that breaks its model is a 400 naming the field, and nothing is stored.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dashboard.edges import Body, BodyInvalid, EvidenceText, Finite, JsonObject, Text, json_checked
from runners.stages import PIPELINE_STAGES

LOG_MAX_CHARS = 200_000
MAX_LOGS = 16
MAX_COMMANDS = 16
MAX_TELEMETRY_SAMPLES = 50_000
MAX_GPUS = 1024
# A report as base64; its decoded size is checked against PERFWATCH_MAX_REPORT_BYTES after decoding.
Base64Report = Annotated[str, Field(description="base64 of the guidellm report file")]
StageName = Literal["installing", "starting_server", "benchmarking", "profiling", "storing"]
assert get_args(StageName) == PIPELINE_STAGES, "the stages a runner reports are the pipeline's"
LogName = Annotated[Text, Field(min_length=1, max_length=50)]
Logs = Annotated[
    dict[LogName, Annotated[EvidenceText, Field(max_length=LOG_MAX_CHARS)]], Field(max_length=MAX_LOGS)
]
Commands = Annotated[
    dict[LogName, Annotated[Text, Field(max_length=LOG_MAX_CHARS)]], Field(max_length=MAX_COMMANDS)
]


class RunnerEnvironment(BaseModel):
    """A node's fingerprint: the fields the dashboard reads are typed, the rest is free-form JSON."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False, frozen=True)

    host: Annotated[Text, Field(max_length=200)] | None = None
    gpu_model: Annotated[Text, Field(max_length=100)] | None = None
    gpu_count: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _free_form_checked(cls, data: Any) -> Any:
        if isinstance(data, dict):
            # The typed fields name themselves when they are wrong; the rest is checked as free-form JSON.
            json_checked({key: value for key, value in data.items() if key not in cls.model_fields})
        return data

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class PresenceBody(Body):
    environment: RunnerEnvironment = RunnerEnvironment()


class ClaimBody(Body):
    environment: RunnerEnvironment = RunnerEnvironment()


class HeartbeatBody(Body):
    logs: Logs = {}


class StageBody(Body):
    stage: StageName


class AccuracyBody(Body):
    """`correct` of `samples` answers right, with the score's 95 % interval in percent."""

    name: Annotated[Text, Field(min_length=1, max_length=50, pattern=r"^[a-z0-9][a-z0-9._-]*$")]
    correct: Annotated[Finite, Field(ge=0)]
    samples: Annotated[int, Field(ge=1, le=10_000_000)]
    ci_low_pct: Annotated[Finite, Field(ge=0, le=100)]
    ci_high_pct: Annotated[Finite, Field(ge=0, le=100)]

    @model_validator(mode="after")
    def _consistent(self) -> AccuracyBody:
        if self.correct > self.samples:
            raise ValueError(f"correct ({self.correct:g}) is more than samples ({self.samples})")
        if self.ci_low_pct > self.ci_high_pct:
            raise ValueError("ci_low_pct is above ci_high_pct")
        return self


class _Evidence(Body):
    environment: RunnerEnvironment = RunnerEnvironment()
    commands: Commands = {}
    logs: Logs = {}


class DeliveryBody(Body):
    """How a finished report reached the dashboard: `resent` after the node kept it for `kept_s`."""

    resent: bool = False
    kept_at: Annotated[Text, Field(max_length=40)] | None = None
    kept_s: Annotated[Finite, Field(ge=0, lt=10**9)] = 0.0


class CompleteBody(_Evidence):
    report: Base64Report
    # The attempt the report is of: a late report of an attempt requeued meanwhile is still the run's.
    attempt: Annotated[int, Field(ge=1, le=1000)] | None = None
    delivery: DeliveryBody | None = None
    vllm_version: Annotated[Text, Field(max_length=100)] | None = None
    telemetry: Annotated[list[JsonObject], Field(max_length=MAX_TELEMETRY_SAMPLES)] = []
    server_metrics: JsonObject = {}
    accuracy: AccuracyBody | None = None


class FailBody(_Evidence):
    reason: Annotated[EvidenceText, Field(min_length=1, max_length=10_000, pattern=r"\S")]
    retryable: bool = False
    # Waiting for the commit's wheel: queued again without spending an attempt.
    waiting: bool = False
    retries_max: Annotated[int, Field(ge=0, le=10)] | None = None
    report: Base64Report | None = None


class IngestFields(BaseModel):
    """The fields beside an ingested report, in a multipart form or a JSON body."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    commit: Annotated[Text, Field(min_length=1, max_length=40)]
    suite: Annotated[Text, Field(min_length=1, max_length=100)]
    hardware: Annotated[Text, Field(min_length=1, max_length=50)]
    runner: Annotated[Text, Field(max_length=100)] | None = None


class IngestBody(IngestFields):
    """A JSON ingest: the guidellm report as its object, or base64 of its file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    report: dict[str, Any] | Base64Report


def report_decoded(text: str, *, field: str = "report") -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BodyInvalid(f"field {field!r}: must be base64 of the report file", field=field) from None


# A profile's gzip'd trace as base64: traces of the short profiled load are megabytes, not hundreds.
TRACE_MAX_BASE64_CHARS = 200 * 1024 * 1024 // 3 * 4


class ProfileBody(Body):
    """A profile run's trace (base64 of the gzip'd Chrome trace), its summary per op and kernel, and the
    server's /metrics deltas over the profiled load."""

    trace: Annotated[str, Field(min_length=4, max_length=TRACE_MAX_BASE64_CHARS)]
    trace_name: Annotated[Text, Field(max_length=200)] = ""
    summary: JsonObject
    server_metrics: Annotated[
        dict[Annotated[Text, Field(max_length=100)], Finite], Field(max_length=2000)
    ] = {}
    settings: JsonObject = {}

    @model_validator(mode="after")
    def _trace_is_gzip(self) -> ProfileBody:
        self.trace_gzip()
        return self

    def trace_gzip(self) -> bytes:
        try:
            raw = base64.b64decode(self.trace, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if raw[:2] != b"\x1f\x8b":
            raise ValueError("trace must be base64 of the gzip'd trace")
        return raw
