"""Model factories: tests build their data here, not in fixture files."""

import hashlib
from datetime import UTC, datetime, timedelta
from typing import cast

import factory

from dashboard.benchmarks.models import Commit, Measurement, Repository, Run, Runner, RunStatus, Series, Suite


class RepositoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Repository
        django_get_or_create = ("full_name",)

    full_name = "vllm-project/vllm"


class CommitFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Commit

    repository = factory.SubFactory(RepositoryFactory)
    sha = factory.Sequence(lambda n: hashlib.sha1(f"commit-{n}".encode()).hexdigest())
    position = factory.Sequence(lambda n: n)
    committed_at = factory.Sequence(lambda n: datetime(2026, 8, 1, tzinfo=UTC) + timedelta(hours=n))
    subject = factory.Sequence(lambda n: f"[Perf] Change number {n} (#{50000 + n})")
    pr_number = factory.Sequence(lambda n: 50000 + n)
    author_name = "A. Developer"


class SuiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Suite
        django_get_or_create = ("name",)

    name = "kimi-k3-8k1k"
    hardware_class = "b300"
    concurrencies = [1, 4, 16]


class RunnerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Runner
        django_get_or_create = ("name",)

    name = "b300-node-1"
    hardware_class = "b300"
    gpu_model = "NVIDIA B300"
    gpu_count = 8


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    commit = factory.SubFactory(CommitFactory)
    suite = factory.SubFactory(SuiteFactory)
    hardware_class = "b300"
    status = RunStatus.SUCCEEDED


class SeriesFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Series
        django_get_or_create = ("suite", "hardware_class", "concurrency", "metric")

    suite = factory.SubFactory(SuiteFactory)
    hardware_class = "b300"
    concurrency = 1
    metric = "output_throughput_tok_s"


def run_with_values(
    *, commit: Commit, values: dict[tuple[int, str], float], suite: Suite | None = None
) -> Run:
    """A succeeded run of `suite` at `commit` holding {(concurrency, metric): value}."""
    suite = suite or cast(Suite, SuiteFactory())
    run = cast(Run, RunFactory(commit=commit, suite=suite, hardware_class=suite.hardware_class))
    for (concurrency, metric), value in values.items():
        series = cast(
            Series,
            SeriesFactory(
                suite=suite, hardware_class=suite.hardware_class, concurrency=concurrency, metric=metric
            ),
        )
        Measurement.objects.create(run=run, series=series, commit=commit, value=value)
    return run
