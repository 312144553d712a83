"""Commits, suites, runners, runs, series and measurements: the facts every page is drawn from.

Longer than 500 lines: every table of the benchmarks app, where Django looks for them.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import ClassVar
from urllib.parse import quote

from django.db import models
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from dashboard.benchmarks.direction import metric_higher_is_better
from runners.stages import (
    STAGE_BENCHMARKING,
    STAGE_INSTALLING,
    STAGE_PROFILING,
    STAGE_STARTING_SERVER,
    STAGE_STORING,
)
from runners.suites import InstallMethod

HEADLINE_METRICS: tuple[str, ...] = (
    "output_throughput_tok_s",
    "ttft_ms_mean",
    "latency_s_mean",
    "itl_ms_mean",
    "tpot_ms_mean",
)


# Built-in minimum relative changes by metric prefix; None leaves the metric out of detection. A
# DetectionSetting row overrides them, for detection and pages alike (`thresholds.threshold_resolve`).
# guidellm's request counts follow from latency and the run's length, and an errored request is the
# run's business, not a performance change.
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
            # A from/to window of the timelines and the series API reads only its commits.
            models.Index(fields=["committed_at"], name="commit_committed_at"),
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

    @property
    def install_method(self) -> InstallMethod | None:
        """How the suite installs vLLM; None for a suite stored without install settings."""
        try:
            return InstallMethod(self.install_settings.get("method"))
        except ValueError:
            return None

    @property
    def headline_metric(self) -> str | None:
        """The metric the suite's settings name as its headline (a load curve's capacity), if any: its
        timeline draws it first and its overview card shows it."""
        metric = (self.benchmark_settings or {}).get("headline_metric")
        return metric if isinstance(metric, str) and metric else None

    @property
    def installs_releases(self) -> bool:
        """A release suite installs versions, not commits: it cannot bisect or follow main."""
        return self.install_method == InstallMethod.PYPI_RELEASE


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
    PROFILING = STAGE_PROFILING
    STORING = STAGE_STORING
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_RUN_STATUSES = (
    RunStatus.INSTALLING,
    RunStatus.STARTING_SERVER,
    RunStatus.BENCHMARKING,
    RunStatus.PROFILING,
    RunStatus.STORING,
)
# A run that may still produce results: queued, or on its way on a node.
PENDING_RUN_STATUSES: tuple[str, ...] = (RunStatus.QUEUED, *ACTIVE_RUN_STATUSES)
FINAL_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class RunKind(models.TextChoices):
    """Why a run exists. Every kind is an ordinary run whose measurements count for its commit."""

    ROUTINE = "routine"  # a new commit of main, or a report sent in
    VERIFICATION = "verification"  # a repeat of a suspected change's base or head
    BISECTION = "bisection"  # a commit inside a confirmed change's range
    BACKFILL = "backfill"  # an older commit, or one asked for by hand
    RELEASE = "release"  # a released version
    PROFILE = "profile"  # a culprit or its parent, measured and then traced by the suite's profiling stage


# The order runners take queued runs in (Celery priority, 0 first): a suspected change is settled before
# it is narrowed, and both before main moves on.
RUN_KIND_PRIORITY: dict[str, int] = {
    RunKind.VERIFICATION: 0,
    RunKind.BISECTION: 3,
    RunKind.PROFILE: 4,
    RunKind.ROUTINE: 6,
    RunKind.RELEASE: 6,
    RunKind.BACKFILL: 9,
}
# A verification, search or recheck run queued beyond its suite's daily budget is spare-time work: it
# waits until no new commit does, so it costs only node time nothing else wanted (before backfill).
SPARE_TIME_PRIORITY = 8


def run_priority(*, kind: str, spare_time: bool = False) -> int:
    """A queued run's place in the order runners take runs in (Celery priority, 0 first)."""
    if spare_time:
        return SPARE_TIME_PRIORITY
    return RUN_KIND_PRIORITY.get(kind, max(RUN_KIND_PRIORITY.values()))


class RunQuerySet(QuerySet["Run"]):
    def succeeded(self) -> RunQuerySet:
        return self.filter(status=RunStatus.SUCCEEDED)

    def for_suite(self, suite: Suite, hardware_class: str | None = None) -> RunQuerySet:
        runs = self.filter(suite=suite)
        return runs.filter(hardware_class=hardware_class) if hardware_class else runs

    def in_dispatch_order(self) -> RunQuerySet:
        """Queued runs in the order a runner takes them: by the priority of their kind, then oldest first."""
        priority = models.Case(
            models.When(spare_time=True, then=models.Value(SPARE_TIME_PRIORITY)),
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
    spare_time = models.BooleanField(
        default=False, help_text="Queued beyond its suite's daily budget: taken only when no new commit waits"
    )
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


# A stored float that is a number (in PostgreSQL NaN sorts above Infinity, so it fails `< Infinity`).
FINITE_VALUE = Q(value__gt=-math.inf, value__lt=math.inf)


class FiniteMeasurementManager(models.Manager["Measurement"]):
    """Reads see finite values only. The API has refused NaN and infinities since its bodies were typed;
    one stored before that is left out of every page, chart and detection rather than break them (the
    data migration 0011 removes them)."""

    def get_queryset(self) -> models.QuerySet[Measurement]:
        return super().get_queryset().filter(FINITE_VALUE)


class Measurement(models.Model):
    # No single-column indexes on run and series: the unique (run, series) and the (series, commit)
    # index start with them.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="measurements", db_index=False)
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="measurements", db_index=False)
    # Denormalised from run so a series' points are one indexed scan.
    commit = models.ForeignKey(Commit, on_delete=models.PROTECT, related_name="measurements")
    value = models.FloatField()

    objects = FiniteMeasurementManager()
    # Every stored row, finite or not: for writes that must find a row whatever its value.
    stored: ClassVar[models.Manager[Measurement]] = models.Manager()

    class Meta:
        base_manager_name = "stored"
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

    @property
    def is_valid(self) -> bool:
        """A possible score: finite, 0-100 % with its interval around it, no more correct than samples
        (a row stored before the API checked may be neither; pages show it as invalid)."""
        numbers = (self.correct, self.score_pct, self.ci_low_pct, self.ci_high_pct)
        return (
            all(math.isfinite(number) for number in numbers)
            and 0 <= self.correct <= self.samples
            and 0 <= self.ci_low_pct <= self.ci_high_pct <= 100
            and 0 <= self.score_pct <= 100
        )


class RunProfile(models.Model):
    """What a profile run's profiling stage recorded: its trace (gzip'd Chrome trace, loadable in Perfetto)
    in the report storage and its summary per op and kernel (runners.profiles.ProfileSummary's JSON)."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="profile")
    trace_key = models.CharField(max_length=200, help_text="The gzip'd trace in the report storage")
    trace_name = models.CharField(max_length=200, blank=True, help_text="The file name the server gave it")
    trace_bytes = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, help_text="ops: name, device, calls, self/total ms; step_ms")
    server_metrics = models.JSONField(default=dict, blank=True, help_text="/metrics deltas over the profile")
    settings = models.JSONField(
        default=dict, blank=True, help_text="The profiled load: requests, concurrency"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"profile of run {self.run_id}"


class DetectionSetting(models.Model):
    """How large a change must be before it is an alert, per suite (or every suite) and metric prefix.

    The most specific row wins: a suite's own row over an every-suite row, a longer prefix over a shorter
    one. Without any row the built-in MIN_RELATIVE_CHANGES apply (`thresholds.threshold_resolve`, used by
    detection and compare alike).
    """

    suite = models.ForeignKey(
        Suite, on_delete=models.CASCADE, null=True, blank=True, help_text="Empty: every suite"
    )
    metric_prefix = models.CharField(
        max_length=50, blank=True, help_text="e.g. ttft_ms (every TTFT statistic) or ttft_ms_p99; empty: all"
    )
    min_relative_change = models.FloatField(help_text="Fraction: 0.02 is 2 %")
    p_threshold = models.FloatField(default=1e-4)
    enabled = models.BooleanField(default=True)

    class Meta:
        # The table keeps the name it was created with in the regressions app.
        db_table = "regressions_detectionsetting"
        constraints = [
            models.UniqueConstraint(
                fields=["suite", "metric_prefix"],
                condition=Q(suite__isnull=False),
                name="detection_setting_unique_suite",
            ),
            models.UniqueConstraint(
                fields=["metric_prefix"],
                condition=Q(suite__isnull=True),
                name="detection_setting_unique_global",
            ),
            models.CheckConstraint(
                condition=Q(min_relative_change__gte=0) & Q(p_threshold__gt=0) & Q(p_threshold__lt=1),
                name="detection_setting_sane_thresholds",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.suite or 'every suite'} {self.metric_prefix or 'every metric'}"
