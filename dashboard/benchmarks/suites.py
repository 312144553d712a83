"""Writes: suite rows from their YAML descriptions, and the runner-side description of a row."""

from __future__ import annotations

from pydantic import ValidationError

from dashboard.benchmarks.capacity import suite_capacity_recompute
from dashboard.benchmarks.models import Suite
from runners.suites import InstallSpec, SuiteSpec


def suite_spec(*, suite: Suite) -> SuiteSpec:
    """The runner-side description of a suite, rebuilt from its row."""
    return SuiteSpec.model_validate(
        {
            "name": suite.name,
            "description": suite.description,
            "hardware_class": suite.hardware_class,
            "install": suite.install_settings,
            "serve": suite.serve_settings,
            "benchmark": suite.benchmark_settings,
            "timeouts": suite.timeouts,
            "max_error_rate": suite.max_error_rate,
            "oldest_supported_commit": suite.oldest_supported_commit or None,
            "active": suite.is_active,
        }
    )


def suite_runnable(*, suite: Suite) -> bool:
    """Whether a runner could install the suite's vLLM: a suite created by an ingest has no install
    settings, and a runner claiming its run could do nothing with it."""
    try:
        InstallSpec.model_validate(suite.install_settings)
    except ValidationError:
        return False
    return True


def suite_upsert(*, spec: SuiteSpec) -> tuple[Suite, bool]:
    """Store a suite description (from runners/suites/*.yaml) as its row; True when created. Changed
    objectives re-derive the capacity of every stored run."""
    data = spec.model_dump(mode="json")
    previous = Suite.objects.filter(name=spec.name).values_list("benchmark_settings", flat=True).first()
    suite, created = Suite.objects.update_or_create(
        name=spec.name,
        defaults={
            "description": spec.description,
            "hardware_class": spec.hardware_class,
            "install_settings": data["install"],
            "serve_settings": data["serve"],
            "benchmark_settings": data["benchmark"],
            "timeouts": data["timeouts"],
            "concurrencies": list(spec.benchmark.concurrencies),
            "max_error_rate": spec.max_error_rate,
            "oldest_supported_commit": spec.oldest_supported_commit or "",
            "is_active": spec.active,
        },
    )
    if previous is not None and previous.get("objectives", []) != data["benchmark"]["objectives"]:
        suite_capacity_recompute(suite=suite)
    return suite, created
