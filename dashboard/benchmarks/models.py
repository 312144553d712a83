"""Commits, suites, runners, runs, series and measurements: the facts every page is drawn from."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar
from urllib.parse import quote

from django.db import models
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from runners.stages import STAGE_BENCHMARKING, STAGE_INSTALLING, STAGE_STARTING_SERVER, STAGE_STORING

HEADLINE_METRICS: tuple[str, ...] = (
    "output_throughput_tok_s",
    "ttft_ms_mean",
    "latency_s_mean",
    "itl_ms_mean",
    "tpot_ms_mean",
)
HIGHER_IS_BETTER_PREFIXES: tuple[str, ...] = (
    "output_throughput",
    "request_throughput",
    "requests_successful",
    "capacity_",
    "goodput_",
    "slo_attainment",
    "accuracy_",
)


def metric_higher_is_better(metric: str) -> bool:
    return metric.startswith(HIGHER_IS_BETTER_PREFIXES)


# Built-in minimum relative changes by metric prefix; None leaves the metric out of detection. A
# detection setting overrides them there. guidellm's request counts follow from latency and the run's
# length, and an errored request is the run's business, not a performance change.
MIN_RELATIVE_CHANGES: tuple[tuple[str, float | None], ...] = (
    ("output_throughput", 0.02),
    ("request_throughput", 0.02),
    ("ttft_", 0.03),
    ("itl_", 0.03),
    ("tpot_", 0.03),
    ("latency_", 0.03),
    ("requests_", None),
)
FALLBACK_MIN_RELATIVE_CHANGE = 0.03


def metric_min_relative_change(metric: str) -> float:
    """The smallest relative change of `metric` that matters (a fraction), by the built-in defaults."""
    for prefix, change in MIN_RELATIVE_CHANGES:
        if metric.startswith(prefix):
            return change or 0.0
    return FALLBACK_MIN_RELATIVE_CHANGE


class Repository(models.Model):
    full_name = models.CharField(max_length=200, unique=True, help_text="owner/name on GitHub")
    default_branch = models.CharField(max_length=100, default="main")

    class Meta:
        verbose_name_plural = "repositories"

    def __str__(self) -> str:
        return self.full_name

    @property
    def html_url(self) -> str:
        # Built, never taken from stored data: always a page on github.com, whatever full_name holds.
        return f"https://github.com/{quote(self.full_name, safe='/')}"


# The order of commits on main, the one rule every page, the detector and compare share: the position on
# the first-parent history where known, then the commit time, then arrival (the id). Three spellings of
# it, kept side by side: ORM ordering, a Python sort key, and SQL for the detector's window query.


def main_order(*, prefix: str = "", newest_first: bool = False) -> list[models.expressions.OrderBy]:
    """Main's order as ORM ordering; `prefix` reaches the commit through a relation (``"commit__"``)."""
    fields = (f"{prefix}position", f"{prefix}committed_at", f"{prefix}id")
    if newest_first:
        return [models.F(field).desc(nulls_first=True) for field in fields]
    return [models.F(field).asc(nulls_last=True) for field in fields]


def main_order_key(
    *, position: int | None, committed_at: datetime | None, commit_id: int = 0
) -> tuple[bool, int, float, int]:
    """Main's order as a sort key, oldest first."""
    return (
        position is None,
        position or 0,
        committed_at.timestamp() if committed_at else float("inf"),
        commit_id,
    )


def main_order_sql(*, alias: str) -> str:
    """Main's order as an SQL ORDER BY list over the commit table aliased `alias`, oldest first."""
    return (
        ", ".join(f"{alias}.{column} IS NULL, {alias}.{column}" for column in ("position", "committed_at"))
        + f", {alias}.id"
    )


class CommitQuerySet(QuerySet["Commit"]):
    def in_main_order(self, *, newest_first: bool = False) -> CommitQuerySet:
        """Commits in main's order (see main_order), oldest first unless `newest_first`."""
        return self.order_by(*main_order(newest_first=newest_first))


class Commit(models.Model):
    # No single-column index: the unique (repository, sha) and (repository, position) lead with it.
    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, related_name="commits", db_index=False
    )
    sha = models.CharField(max_length=40)
    parents = models.JSONField(default=list, blank=True)
    author_name = models.CharField(max_length=200, blank=True)
    author_email = models.CharField(max_length=200, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    subject = models.CharField(max_length=500, blank=True)
    pr_number = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    position = models.PositiveIntegerField(
        null=True, blank=True, help_text="Index on the first-parent history of the default branch"
    )
    change_class = models.CharField(
        max_length=20, blank=True, help_text="docs_tests_ci, python or native: what the commit's files touch"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects: ClassVar[CommitQuerySet] = CommitQuerySet.as_manager()  # type: ignore[assignment]

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repository", "sha"], name="commit_unique_sha")]
        indexes = [
            models.Index(fields=["repository", "position"]),
            # Main's order (nulls last, as main_order sorts): detection's window walks it from a commit.
            models.Index(fields=["position", "committed_at", "id"], name="commit_main_order"),
        ]

    def __str__(self) -> str:
        return f"{self.short_sha} {self.subject}".strip()

    @property
    def short_sha(self) -> str:
        return self.sha[:8]

    @property
    def html_url(self) -> str:
        return f"{self.repository.html_url}/commit/{self.sha}"

    @property
    def pr_url(self) -> str | None:
        return f"{self.repository.html_url}/pull/{self.pr_number}" if self.pr_number else None


class Suite(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    hardware_class = models.SlugField(max_length=50, help_text="Default hardware class, e.g. b300")
    install_settings = models.JSONField(default=dict, blank=True)
    serve_settings = models.JSONField(default=dict, blank=True)
    benchmark_settings = models.JSONField(default=dict, blank=True)
    timeouts = models.JSONField(default=dict, blank=True, help_text="install_s, server_start_s, benchmark_s")
    concurrencies = models.JSONField(default=list, blank=True, help_text="Levels a valid report must hold")
    max_error_rate = models.FloatField(default=0.0, help_text="Errored share of requests tolerated per level")
    oldest_supported_commit = models.CharField(max_length=40, blank=True)
    is_active = models.BooleanField(default=True)
    # When the suite was first loaded: a hardware class no node ever served has waited since then.
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name


class Runner(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    hardware_class = models.SlugField(max_length=50)
    gpu_model = models.CharField(max_length=100, blank=True)
    gpu_count = models.PositiveSmallIntegerField(default=0)
    host = models.CharField(max_length=200, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class RunStatus(models.TextChoices):
    """A run's state; while a runner works on it, the pipeline stage it is in (runners/stages.py)."""

    QUEUED = "queued"
    INSTALLING = STAGE_INSTALLING
    STARTING_SERVER = STAGE_STARTING_SERVER, "starting server"
    BENCHMARKING = STAGE_BENCHMARKING
    STORING = STAGE_STORING
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_RUN_STATUSES = (
    RunStatus.INSTALLING,
    RunStatus.STARTING_SERVER,
    RunStatus.BENCHMARKING,
    RunStatus.STORING,
)
FINAL_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class RunKind(models.TextChoices):
    """Why a run exists. Every kind is an ordinary run whose measurements count for its commit."""

    ROUTINE = "routine"  # a new commit of main, or a report sent in
    VERIFICATION = "verification"  # a repeat of a suspected change's base or head
    BISECTION = "bisection"  # a commit inside a confirmed change's range
    BACKFILL = "backfill"  # an older commit, or one asked for by hand
    RELEASE = "release"  # a released version


# The order runners take queued runs in (Celery priority, 0 first): a suspected change is settled before
# it is narrowed, and both before main moves on.
RUN_KIND_PRIORITY: dict[str, int] = {
    RunKind.VERIFICATION: 0,
    RunKind.BISECTION: 3,
    RunKind.ROUTINE: 6,
    RunKind.RELEASE: 6,
    RunKind.BACKFILL: 9,
}


class RunQuerySet(QuerySet["Run"]):
    def succeeded(self) -> RunQuerySet:
        return self.filter(status=RunStatus.SUCCEEDED)

    def for_suite(self, suite: Suite, hardware_class: str | None = None) -> RunQuerySet:
        runs = self.filter(suite=suite)
        return runs.filter(hardware_class=hardware_class) if hardware_class else runs

    def in_dispatch_order(self) -> RunQuerySet:
        """Queued runs in the order a runner takes them: by the priority of their kind, then oldest first."""
        priority = models.Case(
            *(models.When(kind=kind, then=models.Value(rank)) for kind, rank in RUN_KIND_PRIORITY.items()),
            default=models.Value(max(RUN_KIND_PRIORITY.values())),
            output_field=models.IntegerField(),
        )
        return self.filter(status=RunStatus.QUEUED).order_by(priority, "queued_at", "pk")


class Run(models.Model):
    class Source(models.TextChoices):
        RUNNER = "runner"
        INGEST = "ingest", "report ingest"

    # Indexed by the composites below, which lead with them, rather than on their own.
    commit = models.ForeignKey(Commit, on_delete=models.PROTECT, related_name="runs", db_index=False)
    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="runs", db_index=False)
    runner = models.ForeignKey(Runner, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs")
    hardware_class = models.SlugField(max_length=50)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.INGEST)
    status = models.CharField(
        max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True
    )
    failure_reason = models.CharField(max_length=500, blank=True)
    queued_at = models.DateTimeField(default=timezone.now, help_text="When it last entered the queue")
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="When its message last went out")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    environment = models.JSONField(default=dict, blank=True, help_text="Fingerprint: GPU, driver, versions")
    report_key = models.CharField(
        max_length=200, blank=True, editable=False, help_text="The raw report's gzip in the report storage"
    )
    report_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    guidellm_version = models.CharField(max_length=50, blank=True)
    # What a runner is asked to install when the suite installs releases rather than commits.
    vllm_version_requested = models.CharField(max_length=50, blank=True)
    vllm_version = models.CharField(max_length=100, blank=True, help_text="What /version answered")
    forced = models.BooleanField(default=False, help_text="Asked for explicitly, even if already benchmarked")
    kind = models.CharField(max_length=20, choices=RunKind.choices, default=RunKind.ROUTINE, db_index=True)
    # Lease: the runner holding the run renews it; an expired lease means the runner died.
    attempt = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    lease_expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    stage_started_at = models.DateTimeField(null=True, blank=True)
    stage_durations = models.JSONField(default=dict, blank=True, help_text="stage -> seconds")
    telemetry = models.JSONField(default=list, blank=True, help_text="GPU samples during the benchmark")
    server_metrics = models.JSONField(default=dict, blank=True, help_text="/metrics before and after")
    commands = models.JSONField(default=dict, blank=True, help_text="The exact commands to reproduce the run")
    logs = models.JSONField(default=dict, blank=True, help_text="Tail of each step's log")
    attempts = models.JSONField(
        default=list, blank=True, help_text="Each finished attempt: number, runner, outcome, when"
    )

    objects: ClassVar[RunQuerySet] = RunQuerySet.as_manager()  # type: ignore[assignment]

    class Meta:
        constraints = [
            # The same report for the same commit, suite and hardware is one run, however often it is sent.
            models.UniqueConstraint(
                fields=["commit", "suite", "hardware_class", "report_sha256"],
                condition=~Q(report_sha256=""),
                name="run_unique_report",
            )
        ]
        indexes = [
            models.Index(fields=["suite", "hardware_class", "status"]),
            # Whether a commit was benchmarked by a suite on a hardware class, without reading the run.
            models.Index(fields=["commit", "suite", "hardware_class", "status"], name="run_commit_scope"),
            # The runs list, newest finished first.
            models.Index(F("finished_at").desc(nulls_last=True), F("id").desc(), name="run_finished_newest"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.suite} @ {self.commit.short_sha} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_RUN_STATUSES


class SeriesQuerySet(QuerySet["Series"]):
    def for_suite(self, suite: Suite, hardware_class: str | None = None) -> SeriesQuerySet:
        series = self.filter(suite=suite)
        return series.filter(hardware_class=hardware_class) if hardware_class else series


class Series(models.Model):
    """One line on a chart: (suite, concurrency, metric with its statistic, hardware class)."""

    # No single-column index: the unique (suite, hardware_class, concurrency, metric) leads with it.
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="series", db_index=False)
    hardware_class = models.SlugField(max_length=50)
    concurrency = models.PositiveIntegerField()
    metric = models.CharField(max_length=50, help_text="e.g. ttft_ms_p99")

    objects: ClassVar[SeriesQuerySet] = SeriesQuerySet.as_manager()  # type: ignore[assignment]

    class Meta:
        verbose_name_plural = "series"
        constraints = [
            models.UniqueConstraint(
                fields=["suite", "hardware_class", "concurrency", "metric"], name="series_unique_identity"
            )
        ]

    def __str__(self) -> str:
        return f"{self.suite.name}/{self.hardware_class} c={self.concurrency} {self.metric}"

    @property
    def higher_is_better(self) -> bool:
        return metric_higher_is_better(self.metric)


class Measurement(models.Model):
    # No single-column indexes on run and series: the unique (run, series) and the (series, commit)
    # index start with them.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="measurements", db_index=False)
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="measurements", db_index=False)
    # Denormalised from run so a series' points are one indexed scan.
    commit = models.ForeignKey(Commit, on_delete=models.PROTECT, related_name="measurements")
    value = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "series"], name="measurement_unique_per_run")]
        # Covering on PostgreSQL: a series' points are read from the index alone.
        indexes = [
            models.Index(
                fields=["series", "commit"], include=["value", "run"], name="measurement_series_cover"
            )
        ]

    def __str__(self) -> str:
        return f"{self.series}: {self.value}"


# Series of a run as a whole (capacity, accuracy) rather than of one concurrency level.
WHOLE_RUN = 0


class LoadLevel(models.Model):
    """One level of a run's load curve as guidellm ran it, with every statistic it reported."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="load_levels")
    index = models.PositiveSmallIntegerField(help_text="Position in guidellm's report")
    label = models.CharField(max_length=60, help_text="e.g. constant 2.35 req/s, concurrency 4")
    strategy = models.CharField(max_length=20)
    streams = models.PositiveIntegerField(null=True, blank=True)
    rate = models.FloatField(null=True, blank=True, help_text="Requested requests per second")
    metrics = models.JSONField(default=dict, help_text="metric key -> value, as in measurements")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="load_level_unique_index")]
        ordering = ["run", "index"]

    def __str__(self) -> str:
        return f"run {self.run_id} level {self.index} ({self.label})"


class AccuracyScore(models.Model):
    """A run's score on an accuracy task, with its sample count and 95 % interval."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="accuracy_scores")
    name = models.CharField(max_length=40, help_text="The task, e.g. gsm8k; the metric is accuracy_<name>")
    correct = models.FloatField()
    samples = models.PositiveIntegerField()
    score_pct = models.FloatField()
    ci_low_pct = models.FloatField()
    ci_high_pct = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="accuracy_unique_per_run")]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.name}: {self.score_pct:.2f} % of {self.samples}"
