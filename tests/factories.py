"""Model factories: tests build their data here, not in fixture files."""

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import cast

import factory
from django.db.models import Max

from dashboard.benchmarks.bulk import rows_copy
from dashboard.benchmarks.models import (
    HEADLINE_METRICS,
    Commit,
    Measurement,
    Repository,
    Run,
    Runner,
    RunStatus,
    Series,
    Suite,
)


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


def bulk_history(
    *,
    suite: Suite,
    values: dict[tuple[int, str], list[float]],
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
    every: timedelta = timedelta(minutes=50),
) -> list[Commit]:
    """A long benchmarked history in a few bulk inserts: commit i on main (position i) has one succeeded
    run of `suite` holding values[(concurrency, metric)][i]."""
    count = len(next(iter(values.values())))
    repository = cast(Repository, RepositoryFactory())
    tag = f"bulk-{suite.name}-{Commit.objects.count()}"
    shas = [hashlib.sha1(f"{tag}-{index}".encode()).hexdigest() for index in range(count)]
    rows_copy(
        model=Commit,
        fields=("repository", "sha", "position", "committed_at", "subject", "pr_number"),
        rows=(
            (
                repository.pk,
                shas[index],
                index,
                start + every * index,
                f"[Perf] Bulk change {index} (#{60000 + index})",
                60000 + index,
            )
            for index in range(count)
        ),
    )
    commits = list(
        Commit.objects.filter(
            sha__in=[hashlib.sha1(f"{tag}-{i}".encode()).hexdigest() for i in range(count)]
        ).order_by("position")
    )
    first_run = Run.objects.aggregate(last=Max("pk"))["last"] or 0
    rows_copy(
        model=Run,
        fields=("commit", "suite", "hardware_class", "status", "finished_at"),
        rows=((c.pk, suite.pk, suite.hardware_class, RunStatus.SUCCEEDED, c.committed_at) for c in commits),
    )
    runs = list(Run.objects.filter(pk__gt=first_run, suite=suite).order_by("commit__position"))
    series = {
        key: Series.objects.get_or_create(
            suite=suite, hardware_class=suite.hardware_class, concurrency=key[0], metric=key[1]
        )[0]
        for key in values
    }
    rows_copy(
        model=Measurement,
        fields=("run", "series", "commit", "value"),
        rows=(
            (run.pk, series[key].pk, run.commit_id, column[index])
            for key, column in values.items()
            for index, run in enumerate(runs)
        ),
    )
    return commits


def fleet_history(
    *, suites: int, hardware: tuple[str, ...], commits: int, value: Callable[[Series, int], float]
) -> list[Commit]:
    """A fleet in a few bulk inserts: `commits` commits, each run once by every pair of the suites
    fleet-000, fleet-001, ... and `hardware`, with the headline metrics at concurrency 16, the point of
    a series at commit i being value(series, i)."""
    made = [cast(Commit, CommitFactory()) for _ in range(commits)]
    fleet = Suite.objects.bulk_create(
        Suite(name=f"fleet-{index:03d}", hardware_class=hardware[0]) for index in range(suites)
    )
    rows_copy(
        model=Run,
        fields=("commit", "suite", "hardware_class", "status", "finished_at"),
        rows=(
            (commit.pk, suite.pk, pair, RunStatus.SUCCEEDED, commit.committed_at)
            for suite in fleet
            for pair in hardware
            for commit in made
        ),
    )
    runs = {
        (suite_id, pair, commit_id): pk
        for pk, suite_id, pair, commit_id in Run.objects.values_list(
            "pk", "suite_id", "hardware_class", "commit_id"
        )
    }
    series = Series.objects.bulk_create(
        Series(suite=suite, hardware_class=pair, concurrency=16, metric=metric)
        for suite in fleet
        for pair in hardware
        for metric in HEADLINE_METRICS
    )
    rows_copy(
        model=Measurement,
        fields=("run", "series", "commit", "value"),
        rows=(
            (runs[(item.suite_id, item.hardware_class, commit.pk)], item.pk, commit.pk, value(item, index))
            for item in series
            for index, commit in enumerate(made)
        ),
    )
    return made
