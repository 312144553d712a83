"""`make bench`: a year of vLLM main in PostgreSQL, and how fast the product reads, draws, stores and
detects on it. The dataset is built once per DATASET_VERSION and reused.

Longer than 500 lines: one command builds the dataset and measures every goal in one run; its steps
share that dataset and the server it starts.

Scale: 10,000 commits x 3 suites x 2 hardware classes x concurrency 1/4/16 x 21 metrics (378 series,
60,000 runs, 3.78 million measurements), repeat runs (verification and culprit search) on 10 % of the
commits, a release tag every two weeks, raw reports stored for a sample of runs, 100 tracking-issue PRs,
1,000 alert groups. Everything but a sample is loaded in bulk (COPY); the sample goes through the ingest
service as a runner's report would.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson
from django.core.cache import cache
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks.bulk import rows_copy
from dashboard.benchmarks.columns import iso_utc_sql
from dashboard.benchmarks.models import (
    HEADLINE_METRICS,
    Commit,
    Measurement,
    Repository,
    Run,
    RunKind,
    RunStatus,
    Series,
    Suite,
)
from dashboard.benchmarks.report_storage import report_save
from dashboard.benchmarks.services import report_ingest, repository_default
from dashboard.github.models import PullRequest, PullRequestState, Tag, TrackingIssue, TrackingIssueItem
from dashboard.regressions.detect.alerts import run_detect, suite_detect_history
from dashboard.regressions.models import Alert, AlertGroup, AlertKind, GroupKind
from dashboard.regressions.sheriff.settle import run_settle

DATASET_VERSION = "2"
COMMITS = 10_000
SUITES = ("year-kimi-k3-8k1k", "year-llama4-1k1k", "year-deepseek-v4-32k1k")
HARDWARE = ("b300", "h200")
CONCURRENCIES = (1, 4, 16)
STATISTICS = ("mean", "p50", "p90", "p99")
METRICS = (
    "output_throughput_tok_s",
    "request_throughput_req_s",
    *(f"{family}_{stat}" for family in ("ttft_ms", "itl_ms", "tpot_ms", "latency_s") for stat in STATISTICS),
    "requests_successful",
    "requests_errored",
    "requests_incomplete",
)
# The overview is measured with this many suite/hardware cards: the year's six and a fleet of small ones.
OVERVIEW_CARDS = 500
FLEET_COMMITS = 100
TRACKED_PRS = 100
ALERT_GROUPS = 1_000
# What the loop adds to main's one run a commit: repeats where a change was verified or searched.
REPEAT_SHARE = 0.10
TAG_EVERY_COMMITS = COMMITS // 26
STORED_REPORTS = 200
START = datetime(2025, 12, 1, tzinfo=UTC)
COMMIT_EVERY = timedelta(days=365) / COMMITS
SUBJECT_WORDS = (
    "[Perf] Fuse the MoE routing and top-k kernels for the decode path",
    "[Bugfix] Keep the KV cache block table in sync after preemption",
    "[Core] Schedule prefill chunks by token budget instead of request count",
    "[Kernel] Tune FP8 GEMM tiles for small batch sizes on Blackwell",
    "[Frontend] Stream tool-call deltas as they are parsed",
    "[Misc] Tidy up the speculative decoding metrics",
    "[CI] Split the distributed tests into their own job",
    "[Model] Support the new attention sink layout",
)


@dataclass(frozen=True)
class DatasetFacts:
    commits: int
    runs: int
    measurements: int
    bulk_runs: int
    built_now: bool


def _marker() -> str:
    return f"Benchmark dataset, version {DATASET_VERSION}: a synthetic year of main."


def dataset_present() -> bool:
    return Suite.objects.filter(name=SUITES[0], description=_marker()).exists()


def _sha(index: int) -> str:
    return hashlib.sha1(f"bench-v{DATASET_VERSION}-{index}".encode()).hexdigest()


def _level(metric: str, concurrency: int) -> float:
    if metric.startswith("output_throughput"):
        return 90.0 * concurrency**0.7
    if metric.startswith("request_throughput"):
        return 0.1 * concurrency**0.7
    if metric == "requests_successful":
        return 40.0 * concurrency
    if metric in ("requests_errored", "requests_incomplete"):
        return 0.0
    base = {"ttft_ms": 900.0, "itl_ms": 9.0, "tpot_ms": 9.5, "latency_s": 12.0}[metric.rsplit("_", 1)[0]]
    factor = {"mean": 1.0, "p50": 0.95, "p90": 1.3, "p99": 1.8}[metric.rsplit("_", 1)[1]]
    return base * factor * concurrency**0.3


def _steps(rng: np.random.Generator) -> np.ndarray:
    """A year of relative level: about 30 multiplicative steps of 2-15 % in either direction."""
    factors = np.ones(COMMITS)
    for at in rng.choice(np.arange(50, COMMITS - 50), size=30, replace=False):
        factors[at:] *= 1 + rng.choice((-1, 1)) * rng.uniform(0.02, 0.15)
    return factors


def dataset_build(*, say: Callable[[str], None]) -> DatasetFacts:
    """Load the year in bulk: commits, runs, series and measurements by COPY; PRs and alert groups by
    bulk INSERT. Idempotent by DATASET_VERSION: a second call finds it and returns at once."""
    if dataset_present():
        reports_sample_store(say=say)
        return _facts(built_now=False)
    rng = np.random.default_rng(2026)
    with transaction.atomic():
        # The product's own repository, so that the sample ingested through the service lands beside it.
        repository = repository_default()
        say(f"commits: {COMMITS} (COPY)")
        rows_copy(
            model=Commit,
            fields=("repository", "sha", "position", "committed_at", "subject", "pr_number", "author_name"),
            rows=(
                (
                    repository.pk,
                    _sha(index),
                    index,
                    START + COMMIT_EVERY * index,
                    f"{SUBJECT_WORDS[index % len(SUBJECT_WORDS)]} (#{40000 + index})",
                    40000 + index,
                    "A. Developer",
                )
                for index in range(COMMITS)
            ),
        )
        commit_ids = np.array(
            Commit.objects.filter(repository=repository).order_by("position").values_list("pk", flat=True)
        )
        suites = [
            Suite.objects.create(
                name=name,
                hardware_class=HARDWARE[0],
                concurrencies=list(CONCURRENCIES),
                description=_marker() if name == SUITES[0] else "",
            )
            for name in SUITES
        ]
        say(f"runs: {COMMITS * len(SUITES) * len(HARDWARE)} (COPY)")
        finished = [START + COMMIT_EVERY * index + timedelta(hours=2) for index in range(COMMITS)]
        rows_copy(
            model=Run,
            fields=("commit", "suite", "hardware_class", "status", "source", "queued_at", "finished_at"),
            rows=(
                (int(commit_ids[index]), suite.pk, hardware, RunStatus.SUCCEEDED, "runner", at, at)
                for suite in suites
                for hardware in HARDWARE
                for index, at in enumerate(finished)
            ),
        )
        series_rows = Series.objects.bulk_create(
            Series(suite=suite, hardware_class=hardware, concurrency=level, metric=metric)
            for suite in suites
            for hardware in HARDWARE
            for level in CONCURRENCIES
            for metric in METRICS
        )
        say(f"measurements: {len(series_rows) * COMMITS} (COPY)")
        for suite in suites:
            for hardware in HARDWARE:
                run_ids = np.array(
                    Run.objects.filter(suite=suite, hardware_class=hardware)
                    .order_by("commit__position")
                    .values_list("pk", flat=True)
                )
                steps = _steps(rng)
                buffer = io.StringIO()
                for series in series_rows:
                    if series.suite_id != suite.pk or series.hardware_class != hardware:
                        continue
                    level = _level(series.metric, series.concurrency)
                    shape = steps if series.metric.startswith(("output", "request_")) else 1 / steps
                    values = level * shape * (1 + rng.normal(0, 0.01, COMMITS))
                    if level == 0.0:
                        values = np.zeros(COMMITS)
                    np.savetxt(
                        buffer,
                        np.column_stack((run_ids, np.full(COMMITS, series.pk), commit_ids, values)),
                        fmt=("%d", "%d", "%d", "%.6g"),
                        delimiter="\t",
                    )
                columns = "run_id, series_id, commit_id, value"
                with (
                    connection.cursor() as cursor,
                    cursor.cursor.copy(f"COPY {Measurement._meta.db_table} ({columns}) FROM STDIN") as copy,
                ):
                    copy.write(buffer.getvalue())
        _repeats_build(commit_ids=commit_ids, suites=suites, series_rows=series_rows, rng=rng, say=say)
        _fleet_build(commit_ids=commit_ids, rng=rng, say=say)
        _tags_build(repository=repository, commit_ids=commit_ids)
        say(f"tracking-issue PRs: {TRACKED_PRS}, alert groups: {ALERT_GROUPS} (bulk INSERT)")
        _github_build(repository=repository, commit_ids=commit_ids)
        _alerts_build(commit_ids=commit_ids, series_rows=series_rows, rng=rng)
    reports_sample_store(say=say)
    # What autovacuum does to a table in use: statistics, and the visibility map that lets a covering
    # index answer without reading the table.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return _facts(built_now=True)


def _repeats_build(
    *,
    commit_ids: np.ndarray,
    suites: list[Suite],
    series_rows: list[Series],
    rng: np.random.Generator,
    say: Callable[[str], None],
) -> None:
    """A second run on REPEAT_SHARE of the commits of every suite and hardware class, as verification and
    the culprit search leave them: their values a little off the first run's, by the same noise."""
    chosen = np.sort(rng.choice(np.arange(COMMITS), size=int(COMMITS * REPEAT_SHARE), replace=False))
    at = {int(index): START + COMMIT_EVERY * int(index) + timedelta(hours=9) for index in chosen}
    pairs = [(suite, hardware) for suite in suites for hardware in HARDWARE]
    say(f"repeat runs: {len(chosen) * len(pairs)} on {len(chosen)} commits a pair (COPY)")
    rows_copy(
        model=Run,
        fields=("commit", "suite", "hardware_class", "status", "source", "kind", "queued_at", "finished_at"),
        rows=(
            (
                int(commit_ids[index]),
                suite.pk,
                hardware,
                RunStatus.SUCCEEDED,
                "runner",
                RunKind.VERIFICATION if order % 2 else RunKind.BISECTION,
                at[int(index)],
                at[int(index)],
            )
            for suite, hardware in pairs
            for order, index in enumerate(chosen)
        ),
    )
    repeat_ids = {
        (suite_id, hardware, commit_id): pk
        for pk, suite_id, hardware, commit_id in Run.objects.exclude(kind=RunKind.ROUTINE).values_list(
            "pk", "suite_id", "hardware_class", "commit_id"
        )
    }
    first_values = {
        (series_id, commit_id): value
        for series_id, commit_id, value in Measurement.objects.filter(
            commit_id__in=[int(commit_ids[index]) for index in chosen],
            series__in=series_rows,
        ).values_list("series_id", "commit_id", "value")
    }
    buffer = io.StringIO()
    for series in series_rows:
        for index in chosen:
            commit_id = int(commit_ids[index])
            value = first_values[(series.pk, commit_id)] * (1 + rng.normal(0, 0.01))
            run_id = repeat_ids[(series.suite_id, series.hardware_class, commit_id)]
            buffer.write(f"{run_id}\t{series.pk}\t{commit_id}\t{value:.6g}\n")
    _measurements_copy(buffer)


def _tags_build(*, repository: Repository, commit_ids: np.ndarray) -> None:
    """A release every two weeks, tagged as vLLM tags them."""
    Tag.objects.bulk_create(
        Tag(
            repository=repository,
            name=f"v0.{20 + order}.0",
            sha=_sha(index),
            commit_id=int(commit_ids[index]),
        )
        for order, index in enumerate(range(TAG_EVERY_COMMITS, COMMITS, TAG_EVERY_COMMITS))
    )


def reports_sample_store(*, say: Callable[[str], None]) -> None:
    """Raw reports in the report storage for a sample of the year's runs, as the ingest stores them: what
    a year of reports costs is measured from these, not assumed. The dataset outlives the report storage
    (`make clean` empties var/, another checkout has its own): where the dataset's runs name reports that
    are not there, the same sample report is written again under their keys."""
    raw = SAMPLE_REPORT.read_bytes()
    named = dict(Run.objects.exclude(report_key="").values_list("pk", "report_key"))
    if named:
        runs = [run_id for run_id, key in named.items() if not default_storage.exists(key)]
        if not runs:
            return
        say(f"stored reports: {len(runs)} of {len(named)} missing from the report storage, written again")
    else:
        runs = list(
            Run.objects.filter(suite__name__in=SUITES)
            .order_by("pk")
            .values_list("pk", flat=True)[:: max(1, COMMITS * len(SUITES) * len(HARDWARE) // STORED_REPORTS)][
                :STORED_REPORTS
            ]
        )
        say(f"stored reports: {len(runs)} of {len(raw) / 1024:.0f} KB each (gzip, report storage)")
    for run_id in runs:
        Run.objects.filter(pk=run_id).update(report_key=report_save(run_id=run_id, raw=raw))


def _fleet_build(*, commit_ids: np.ndarray, rng: np.random.Generator, say: Callable[[str], None]) -> None:
    """Enough further suites for an overview of OVERVIEW_CARDS suite/hardware cards: each with the
    headline metrics at concurrency 16 over the last FLEET_COMMITS commits."""
    names = [f"fleet-{index:03d}" for index in range((OVERVIEW_CARDS - len(SUITES) * len(HARDWARE)) // 2)]
    suites = Suite.objects.bulk_create(Suite(name=name, hardware_class=HARDWARE[0]) for name in names)
    recent = commit_ids[-FLEET_COMMITS:]
    at = [START + COMMIT_EVERY * (COMMITS - FLEET_COMMITS + index) for index in range(FLEET_COMMITS)]
    cards = len(suites) * len(HARDWARE)
    say(f"overview suites: {cards} cards, {cards * FLEET_COMMITS} runs (COPY)")
    rows_copy(
        model=Run,
        fields=("commit", "suite", "hardware_class", "status", "source", "queued_at", "finished_at"),
        rows=(
            (int(recent[index]), suite.pk, hardware, RunStatus.SUCCEEDED, "runner", at[index], at[index])
            for suite in suites
            for hardware in HARDWARE
            for index in range(FLEET_COMMITS)
        ),
    )
    series_rows = Series.objects.bulk_create(
        Series(suite=suite, hardware_class=hardware, concurrency=16, metric=metric)
        for suite in suites
        for hardware in HARDWARE
        for metric in HEADLINE_METRICS
    )
    runs: dict[tuple[int, str], list[int]] = {}
    for pk, suite_id, hardware in (
        Run.objects.filter(suite__in=suites)
        .order_by("commit__position")
        .values_list("pk", "suite_id", "hardware_class")
    ):
        runs.setdefault((suite_id, hardware), []).append(pk)
    buffer = io.StringIO()
    for series in series_rows:
        values = _level(series.metric, 16) * (1 + rng.normal(0, 0.01, FLEET_COMMITS))
        run_ids = np.array(runs[(series.suite_id, series.hardware_class)])
        np.savetxt(
            buffer,
            np.column_stack((run_ids, np.full(FLEET_COMMITS, series.pk), recent, values)),
            fmt=("%d", "%d", "%d", "%.6g"),
            delimiter="\t",
        )
    _measurements_copy(buffer)


def _measurements_copy(buffer: io.StringIO) -> None:
    columns = "run_id, series_id, commit_id, value"
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {Measurement._meta.db_table} ({columns}) FROM STDIN") as copy,
    ):
        copy.write(buffer.getvalue())


def _github_build(*, repository: Repository, commit_ids: np.ndarray) -> None:
    issue = TrackingIssue.objects.create(repository=repository, number=50587, title="Kimi K3 performance")
    merged_at = np.linspace(100, COMMITS - 100, TRACKED_PRS).astype(int)
    pulls = PullRequest.objects.bulk_create(
        PullRequest(
            repository=repository,
            number=40000 + int(at),
            title=f"[Perf] Tracked change {order}",
            author="a-developer",
            state=PullRequestState.MERGED,
            merge_commit_id=int(commit_ids[at]),
            merge_commit_sha=_sha(int(at)),
        )
        for order, at in enumerate(merged_at)
    )
    TrackingIssueItem.objects.bulk_create(
        TrackingIssueItem(tracking_issue=issue, pull_request=pull, checked=True, order=order)
        for order, pull in enumerate(pulls)
    )


def _alerts_build(*, commit_ids: np.ndarray, series_rows: list[Series], rng: np.random.Generator) -> None:
    heads = rng.choice(np.arange(1, COMMITS), size=ALERT_GROUPS, replace=False)
    groups = AlertGroup.objects.bulk_create(
        AlertGroup(
            base_commit_id=int(commit_ids[head - 1]),
            head_commit_id=int(commit_ids[head]),
            kind=GroupKind.REGRESSION if index % 3 else GroupKind.IMPROVEMENT,
            magnitude_pct=5.0,
        )
        for index, head in enumerate(heads)
    )
    throughput = [series for series in series_rows if series.metric == "output_throughput_tok_s"]
    Alert.objects.bulk_create(
        Alert(
            group=group,
            series=throughput[index % len(throughput)],
            kind=AlertKind.REGRESSION if index % 3 else AlertKind.IMPROVEMENT,
            before_value=100.0,
            after_value=95.0 if index % 3 else 105.0,
            change_pct=-5.0 if index % 3 else 5.0,
        )
        for index, group in enumerate(groups)
    )


def _facts(*, built_now: bool) -> DatasetFacts:
    runs = Run.objects.all()
    return DatasetFacts(
        commits=Commit.objects.filter(repository=repository_default()).count(),
        runs=runs.count(),
        measurements=Measurement.objects.count(),
        bulk_runs=runs.filter(source="runner").count(),
        built_now=built_now,
    )


# Measuring

REPEATS = 5
BROWSER_REPEATS = 3
BROWSER_LIMIT_MS = 90_000
INGEST_SAMPLE = 10
CHROMIUM = "/usr/bin/chromium"
# Where a page's time goes: its first byte, its scripts run, its chart data fetched (0: none fetched).
STAGES_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const fetched = performance.getEntriesByType('resource').filter(r => r.initiatorType === 'fetch');
  return [nav.responseStart, nav.domContentLoadedEventEnd, Math.max(0, ...fetched.map(r => r.responseEnd))];
}"""
SAMPLE_REPORT = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "guidellm" / "guidellm-stub-seed-scaled.json"
)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def _series_floor(*, series_id: int) -> bytes:
    """The least a series read can cost: its points fetched by one SQL statement and encoded, with the
    encoder and the server-side time formatting the series API itself uses."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT c.sha, {iso_utc_sql('c.committed_at')}, c.pr_number, m.value "
            "FROM benchmarks_measurement m JOIN benchmarks_commit c ON c.id = m.commit_id "
            "WHERE m.series_id = %s ORDER BY c.position",
            [series_id],
        )
        rows = cursor.fetchall()
    return orjson.dumps(
        [{"commit": sha, "committed_at": at, "pr_number": pr, "value": value} for sha, at, pr, value in rows]
    )


def _pages() -> list[tuple[str, str]]:
    suite = SUITES[0]
    commits = Commit.objects.filter(repository=repository_default()).order_by("position")
    first, last = commits.first(), commits.last()
    assert first is not None and last is not None
    group = AlertGroup.objects.order_by("pk").first()
    pull = PullRequest.objects.order_by("pk")[TRACKED_PRS // 2]
    run = Run.objects.filter(suite__name=suite).order_by("-pk").first()
    assert group is not None and run is not None
    alert = group.alerts.first()
    assert alert is not None
    return [
        ("overview (500 cards)", "/"),
        ("suites", "/suites/"),
        ("timeline page", f"/suites/{suite}/"),
        ("timeline charts", f"/api/suites/{suite}/timeline/?hardware=b300&width=1100"),
        ("timeline charts zoomed", f"/api/suites/{suite}/timeline/?hardware=b300&width=1100&x0=5000&x1=5400"),
        ("one figure", f"/api/suites/{suite}/figures/ttft_ms_p99/?hardware=h200&width=1100"),
        ("commit", f"/commits/{last.sha}/"),
        ("compare", f"/compare/?base={first.sha}&head={last.sha}&suite={suite}"),
        ("alerts (1,000 groups)", "/alerts/"),
        ("alert group", f"/alerts/{group.pk}/"),
        ("alert figure", f"/api/alerts/{alert.pk}/figure/"),
        ("tracking issues", "/tracking/"),
        ("tracking issue (100 PRs)", "/tracking/vllm-project/vllm/50587/"),
        ("PR", f"/prs/{pull.number}/"),
        ("PR figure", f"/api/prs/{pull.number}/figures/{suite}/output_throughput_tok_s/?hardware=b300"),
        ("runs", "/runs/"),
        ("runs, page 100", "/runs/?view=succeeded&page=100"),
        ("run", f"/runs/{run.pk}/"),
        ("runners", "/runners/"),
    ]


# The pages whose cold figures are goals of their own: key -> the page's name in _pages().
PAGE_GOALS = {
    "commit_page_ms": "commit",
    "tracking_page_ms": "tracking issue (100 PRs)",
    "pr_page_ms": "PR",
    "overview_server_ms": "overview (500 cards)",
}


def _cold_ms(*, client: Client, url: str, repeats: int = 3) -> tuple[float, bytes]:
    """Median server time of `url` with an empty cache before each request, and the last body."""
    times, body = [], b""
    for _ in range(repeats):
        cache.clear()
        start = time.perf_counter()
        body = client.get(url).content
        times.append(_ms(start))
    return _median(times), body


def _pages_measure(*, client: Client, say: Callable[[str], None]) -> dict[str, float]:
    say("")
    say(f"{'page':<28} {'server ms':>10} {'queries':>8} {'payload KB':>11} {'gzip KB':>8}")
    figure_kb = 0.0
    goals: dict[str, float] = {}
    for name, url in _pages():
        times, queries = [], 0
        body = b""
        for _ in range(3):
            cache.clear()
            with CaptureQueriesContext(connection) as captured:
                start = time.perf_counter()
                response = client.get(url, headers={"Accept-Encoding": "gzip"})
                times.append(_ms(start))
            queries = len(captured)
            body = response.content
        raw = gzip.decompress(body) if response.get("Content-Encoding") == "gzip" else body
        packed = body if response.get("Content-Encoding") == "gzip" else gzip.compress(body, 6)
        if name == "timeline charts":
            figure_kb = len(packed) / 1024
        for key, page in PAGE_GOALS.items():
            if page == name:
                goals[key] = _median(times)
        if name == "commit":
            goals["commit_page_kb"] = len(raw) / 1024
        status = "" if response.status_code == 200 else f"  (HTTP {response.status_code})"
        say(
            f"{name:<28} {_median(times):>10.1f} {queries:>8} {len(raw) / 1024:>11.1f} "
            f"{len(packed) / 1024:>8.1f}{status}"
        )
    url = dict(_pages())["timeline charts"]
    client.get(url)
    warm = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        etag = client.get(url)["ETag"]
        warm.append(_ms(start))
    start = time.perf_counter()
    unchanged = client.get(url, headers={"If-None-Match": etag})
    say(
        f"timeline charts, cached: {_median(warm):.1f} ms; a reload: HTTP {unchanged.status_code}, "
        f"{len(unchanged.content)} bytes, {_ms(start):.1f} ms"
    )
    return {"figure_kb_gz": figure_kb, **goals}


def _series_measure(*, client: Client, say: Callable[[str], None]) -> dict[str, float]:
    series = Series.objects.get(
        suite__name=SUITES[0], hardware_class="b300", concurrency=16, metric="output_throughput_tok_s"
    )
    url = f"/api/suites/{SUITES[0]}/series/?hardware=b300&metric=output_throughput_tok_s&concurrency=16"
    api, floor = [], []
    client.get(url)  # both warm, so that neither pays for the process' first request
    _series_floor(series_id=series.pk)
    for _ in range(REPEATS):  # interleaved, so that load on the machine falls on both alike
        start = time.perf_counter()
        response = client.get(url)
        api.append(_ms(start))
        start = time.perf_counter()
        _series_floor(series_id=series.pk)
        floor.append(_ms(start))
    points = len(response.json()["series"][0]["points"])
    say(
        f"series API, {points} points: {_median(api):.1f} ms; raw SQL fetch + encode floor (orjson): "
        f"{_median(floor):.1f} ms ({_median(api) / _median(floor):.2f}x)"
    )
    return {"series_api_ms": _median(api), "series_floor_ms": _median(floor)}


def _ingest_measure(*, say: Callable[[str], None]) -> dict[str, float]:
    """A sample of reports through the ingest service, each followed by detection of its run and by
    what the task runs after a stored report (run_settle: detection, verification, verdicts, the next
    runs), each on its own report; rolled back afterwards so the dataset stays as built."""
    raw = SAMPLE_REPORT.read_bytes()
    ingest, detect, settle = [], [], []
    with transaction.atomic():
        repository = repository_default()
        for index in range(INGEST_SAMPLE):
            commit = Commit.objects.create(
                repository=repository,
                sha=_sha(COMMITS + index),
                position=COMMITS + index,
                committed_at=START + COMMIT_EVERY * (COMMITS + index),
            )
            start = time.perf_counter()
            outcome = report_ingest(
                raw=raw, commit_sha=commit.sha, suite_name=SUITES[0], hardware_class="b300"
            )
            ingest.append(_ms(start))
            start = time.perf_counter()
            if index % 2:
                run_detect(run_id=outcome.run.pk)
                detect.append(_ms(start))
            else:
                run_settle(run_id=outcome.run.pk)
                settle.append(_ms(start))
        transaction.set_rollback(True)
    say(
        f"ingest through the service ({INGEST_SAMPLE} reports of {len(raw) / 1024:.0f} KB): "
        f"{_median(ingest):.1f} ms; detection per run: {_median(detect):.1f} ms; "
        f"settle (what the task runs): {_median(settle):.1f} ms"
    )
    return {"ingest_ms": _median(ingest), "detect_ms": _median(detect), "settle_ms": _median(settle)}


def _rescan_measure(*, say: Callable[[str], None]) -> dict[str, float]:
    """Detection over the whole history of every suite on every hardware class, each pair timed and the
    times summed (no extrapolation), rolled back."""
    pairs = sorted(set(Series.objects.values_list("suite__name", "hardware_class")))
    seconds: dict[tuple[str, str], float] = {}
    with transaction.atomic():
        for suite, hardware in pairs:
            start = time.perf_counter()
            suite_detect_history(suite_name=suite, hardware_class=hardware)
            seconds[(suite, hardware)] = _ms(start) / 1000
        transaction.set_rollback(True)
    year = sum(value for (suite, _), value in seconds.items() if suite in SUITES)
    say(
        f"rescan of every pair, summed: {sum(seconds.values()):.1f} s ({len(pairs)} pairs; the year's "
        f"{len(SUITES) * len(HARDWARE)} pairs {year:.1f} s, the slowest {max(seconds.values()):.1f} s)"
    )
    return {"rescan_s": sum(seconds.values())}


def _size_measure(*, say: Callable[[str], None]) -> dict[str, float]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_database_size(current_database()), pg_total_relation_size('benchmarks_measurement')"
        )
        database, measurements_table = cursor.fetchone()
    count = Measurement.objects.count()
    per_million = database / 1e6 / (count / 1e6)
    # Reports live outside the database: what a year of them costs, from the sample stored.
    keys = list(Run.objects.exclude(report_key="").values_list("report_key", flat=True))
    stored = [default_storage.size(key) for key in keys]
    year_runs = Run.objects.filter(suite__name__in=SUITES).count()
    report_mb = _median([float(size) for size in stored]) / 1e6 * year_runs if stored else float("nan")
    say(
        f"database: {database / 1e6:.0f} MB for {count / 1e6:.2f} M measurements = "
        f"{per_million:.0f} MB per million "
        f"(measurement table with its indexes: {measurements_table / 1e6:.0f} MB); "
        f"reports outside it: {report_mb:.0f} MB a year ({year_runs} runs, median stored report "
        f"{_median([float(size) for size in stored]) / 1024:.0f} KB gzip, {len(stored)} sampled)"
    )
    return {"db_mb_per_million": per_million, "report_mb_per_year": report_mb}


# A page counts as drawn when every chart on it is: one that failed (its data did not come, Plotly threw)
# fails the figure, whatever the page's flag says.
FAILED_CHARTS_JS = "() => document.querySelectorAll('[data-drawn=\"failed\"], .chart-problem').length"
# From a zoom of the first timeline chart until every chart is drawn again at the range's full resolution:
# [that whole time, the first chart's own relayout, the range's data in (0: none fetched), every chart
# redrawn (its data-range set, before the frame that paints it)], ms from the zoom.
ZOOM_JS = """async ([x0, x1]) => {
  const group = document.querySelector('[data-timeline-url]');
  const first = group.querySelector('[data-metric]');
  const start = performance.now();
  await window.Plotly.relayout(first, {'xaxis.range': [x0, x1]});
  const relayout = performance.now() - start;
  const wanted = x0 + ',' + x1;
  while (group.dataset.range !== wanted) await new Promise((done) => setTimeout(done, 5));
  const redrawn = performance.now() - start;
  await new Promise((done) => requestAnimationFrame(() => done()));
  const total = performance.now() - start;
  const fetched = performance.getEntriesByType('resource')
    .filter((entry) => entry.initiatorType === 'fetch' && entry.startTime >= start);
  const dataIn = Math.max(0, ...fetched.map((entry) => entry.responseEnd - start));
  return [total, relayout, dataIn, redrawn];
}"""
ZOOM_RANGE = (5000, 5400)
# The pages that leave a web worker the largest, asked for before its memory is read.
HEAVY_PAGES = ("commit", "tracking issue (100 PRs)", "overview (500 cards)", "timeline charts", "compare")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# The web app as production serves it (docker-compose.yml): gunicorn's sync workers, three of them, with
# the production config (dashboard/gunicorn_conf.py).
WEB_WORKERS = 3


def _workers_rss_mb(master: int) -> float:
    """The largest resident memory among the gunicorn master's workers (its child processes)."""
    workers = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # a process that ended while the list was read
            continue
        if int(fields[1]) == master:  # the parent's pid, after the name and the state
            workers.append(int(stat.parent.name))
    return max((_rss_mb(pid) for pid in workers), default=float("nan"))


def _stage_medians(runs: list[list[float]]) -> list[float]:
    """The median of each stage over `runs` (each run one time per stage, in the same order)."""
    return [_median([run[index] for run in runs]) for index in range(len(runs[0]))]


def _browser_measure(*, say: Callable[[str], None]) -> dict[str, float]:
    """The timeline and the overview in headless Chromium, from navigation until every chart is drawn,
    each in a fresh browser context, against a server started for it as production runs it (gunicorn,
    `WEB_WORKERS` sync workers); a zoom of the timeline until every chart is drawn again; the largest
    worker's memory after the heaviest pages."""
    import urllib.request

    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "dashboard.wsgi",
            "--config",
            "python:dashboard.gunicorn_conf",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(WEB_WORKERS),
            "--timeout",
            "60",
        ],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Plain HTTP on the loopback, with a key of its own: the production posture needs a TLS proxy.
        env={**os.environ, "PERFWATCH_HTTPS": "false"},
    )
    results: dict[str, list[float]] = {"timeline": [], "overview": [], "zoom": []}
    stages: dict[str, list[list[float]]] = {"timeline": [], "overview": []}
    zoom_stages: list[list[float]] = []
    failed: dict[str, int] = {"timeline": 0, "overview": 0}
    rss = {"start": float("nan"), "after": float("nan")}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        base = f"http://127.0.0.1:{port}"
        urllib.request.urlopen(f"{base}/suites/", timeout=120).read()
        rss["start"] = _workers_rss_mb(server.pid)
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--headless=new", "--no-sandbox", "--disable-gpu"]
            )
            try:
                for _ in range(BROWSER_REPEATS):
                    for name, path in (("timeline", f"/suites/{SUITES[0]}/"), ("overview", "/")):
                        cache.clear()
                        context = chromium.new_context(viewport={"width": 1440, "height": 900})
                        page = context.new_page()
                        try:
                            page.goto(f"{base}{path}", timeout=BROWSER_LIMIT_MS)
                            page.wait_for_function(
                                "() => document.body.dataset.chartsDrawn === 'true'", timeout=BROWSER_LIMIT_MS
                            )
                            drawn = page.evaluate("() => performance.now()")
                            broken = page.evaluate(FAILED_CHARTS_JS)
                            stages[name].append(page.evaluate(STAGES_JS))
                            if broken:
                                failed[name] += 1
                                say(f"Chromium: {broken} chart(s) of the {name} failed to draw")
                                drawn = float(BROWSER_LIMIT_MS)
                            results[name].append(drawn)
                            if name == "timeline" and not broken:
                                zoom = page.evaluate(ZOOM_JS, list(ZOOM_RANGE))
                                results["zoom"].append(zoom[0])
                                zoom_stages.append(zoom[1:])
                        except PlaywrightError as error:
                            say(f"Chromium: the {name} was not drawn within {BROWSER_LIMIT_MS} ms ({error})")
                            results[name].append(float(BROWSER_LIMIT_MS))
                        context.close()
            finally:
                chromium.close()
        pages = dict(_pages())
        for name in HEAVY_PAGES:
            cache.clear()
            urllib.request.urlopen(f"{base}{pages[name]}", timeout=300).read()
        rss["after"] = _workers_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    say(
        f"Chromium, until every chart is drawn: timeline {_median(results['timeline']):.0f} ms, "
        f"overview with {OVERVIEW_CARDS} cards {_median(results['overview']):.0f} ms; a zoom until every "
        f"chart is drawn again: {_median(results['zoom']):.0f} ms; failed draws: {failed}"
    )
    for name, found in stages.items():
        if found:
            first_byte, scripts_run, data_in = _stage_medians(found)
            say(
                f"  {name}, medians: first byte {first_byte:.0f} ms, scripts run (DOMContentLoaded) "
                f"{scripts_run:.0f} ms, chart data in {data_in:.0f} ms, every chart drawn "
                f"{_median(results[name]):.0f} ms"
            )
    if zoom_stages:
        relayout, data_in, redrawn = _stage_medians(zoom_stages)
        say(
            f"  zoom, medians: the first chart's own relayout {relayout:.0f} ms, the range's data in "
            f"{data_in:.0f} ms, every chart redrawn {redrawn:.0f} ms, "
            f"painted {_median(results['zoom']):.0f} ms"
        )
    say(
        f"web worker memory (the largest of {WEB_WORKERS} gunicorn workers): {rss['start']:.0f} MB started, "
        f"{rss['after']:.0f} MB after the heaviest pages "
        f"({', '.join(HEAVY_PAGES)})"
    )
    return {
        "timeline_draw_ms": _median(results["timeline"]),
        "overview_draw_ms": _median(results["overview"]),
        "zoom_redraw_ms": _median(results["zoom"]) if results["zoom"] else float(BROWSER_LIMIT_MS),
        "worker_rss_mb": rss["after"],
    }


# Growth: the pages that should not grow with history, on windows of the one dataset (its last N commits,
# everything older deleted inside a transaction that is rolled back).
GROWTH_COMMITS = (1_000, 3_000, COMMITS)
GROWTH_FLAT = ("PR page", "tracking page", "overview", "commit page")
GROWTH_LIMIT = 1.5


def _statistics_refresh() -> None:
    """The dataset as autovacuum keeps a database in use: vacuumed, and the planner's statistics of the
    whole of it. The growth windows run ANALYZE inside transactions that are rolled back, but part of what
    ANALYZE writes is written in place and stays (pg_class's row counts): after a run the planner took the
    commit table for the 3,000 commits of the last window, not the year's 10,000. And every measure here
    writes and rolls back (ingest, rescan, the windows' deletes), which leaves dead rows and clears the
    visibility map that index-only scans rely on; the test servers run with autovacuum off, so without
    this each run measured the garbage of the runs before it (76,000 dead alerts in a table of 1,000:
    11 MB read by every scan of it)."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def _window_keep(*, last: int) -> None:
    """Delete every commit older than the last `last` and all that hangs on them (inside the caller's
    transaction; PostgreSQL checks the foreign keys at commit, which never comes). The PRs merged before
    the window move into it first, each to the commit as far through the window as it was through the
    year, so a tracking page holds its 100 PRs in every window: a page compared across history lengths,
    not across PR counts."""
    cut = COMMITS - last
    old = "SELECT id FROM benchmarks_commit WHERE position < %s"
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE github_pullrequest AS pull SET merge_commit_id = moved.id, merge_commit_sha = moved.sha "
            "FROM benchmarks_commit AS merged, benchmarks_commit AS moved "
            "WHERE pull.merge_commit_id = merged.id AND merged.position < %s "
            "AND moved.repository_id = merged.repository_id "
            "AND moved.position = %s + merged.position * %s / %s",
            [cut, cut, last, COMMITS],
        )
        for statement in (
            f"DELETE FROM regressions_alert WHERE group_id IN (SELECT id FROM regressions_alertgroup "
            f"WHERE base_commit_id IN ({old}) OR head_commit_id IN ({old}))",
            f"DELETE FROM regressions_alertgroup WHERE base_commit_id IN ({old}) "
            f"OR head_commit_id IN ({old})",
            f"DELETE FROM github_trackingissueitem WHERE pull_request_id IN "
            f"(SELECT id FROM github_pullrequest WHERE merge_commit_id IN ({old}))",
            f"DELETE FROM github_pullrequest WHERE merge_commit_id IN ({old})",
            f"DELETE FROM github_tag WHERE commit_id IN ({old})",
            f"DELETE FROM benchmarks_measurement WHERE commit_id IN ({old})",
            f"DELETE FROM benchmarks_run WHERE commit_id IN ({old})",
            f"DELETE FROM benchmarks_commit WHERE id IN ({old})",
        ):
            cursor.execute(statement, [cut] * statement.count("%s"))
        cursor.execute("ANALYZE")


def _growth_measure(*, client: Client, say: Callable[[str], None]) -> dict[str, float]:
    suite = SUITES[0]
    last = Commit.objects.filter(repository=repository_default()).order_by("-position").first()
    # A PR merged inside the smallest window, so that every window has it.
    pull = PullRequest.objects.filter(merge_commit__position__gte=COMMITS - GROWTH_COMMITS[0] // 2).first()
    assert last is not None and pull is not None
    urls = {
        "PR page": f"/prs/{pull.number}/",
        "tracking page": "/tracking/vllm-project/vllm/50587/",
        "overview": "/",
        "commit page": f"/commits/{last.sha}/",
        "timeline charts": f"/api/suites/{suite}/timeline/?hardware=b300&width=1100",
        "series API": f"/api/suites/{suite}/series/?hardware=b300&metric=output_throughput_tok_s",
    }
    table: dict[str, dict[int, float]] = {name: {} for name in urls}
    for commits in GROWTH_COMMITS:
        with transaction.atomic():
            if commits < COMMITS:
                _window_keep(last=commits)
            for name, url in urls.items():
                table[name][commits] = _cold_ms(client=client, url=url)[0]
            transaction.set_rollback(True)
    _statistics_refresh()
    say("")
    say(f"growth, cold ms: {'page':<16}" + "".join(f"{n:>10,}" for n in GROWTH_COMMITS) + "   10k/1k")
    worst = 0.0
    for name, row in table.items():
        ratio = row[COMMITS] / row[GROWTH_COMMITS[0]]
        expected = "flat" if name in GROWTH_FLAT else "grows with history"
        if name in GROWTH_FLAT:
            worst = max(worst, ratio)
        verdict = ("ok" if ratio <= GROWTH_LIMIT else "GROWS") if name in GROWTH_FLAT else expected
        say(
            f"{'':>16}{name:<16}"
            + "".join(f"{row[n]:>10.0f}" for n in GROWTH_COMMITS)
            + f"   {ratio:.2f}x {verdict}"
        )
    return {
        "pr_page_growth": table["PR page"][COMMITS] / table["PR page"][GROWTH_COMMITS[0]],
        "growth_flat_worst": worst,
    }


@dataclass(frozen=True)
class Goal:
    key: str
    text: str
    met: Callable[[dict[str, float]], bool]


GOALS = (
    Goal("commit_page_ms", "commit page, 500 pairs, cold < 1,000 ms", lambda r: r["commit_page_ms"] < 1000),
    Goal("commit_page_kb", "commit page HTML < 500 KB", lambda r: r["commit_page_kb"] < 500),
    Goal(
        "tracking_page_ms", "tracking page, 100 PRs, cold < 1,000 ms", lambda r: r["tracking_page_ms"] < 1000
    ),
    Goal(
        "pr_page_ms",
        "PR page cold < 300 ms and within 1.5x from 1k to 10k commits",
        lambda r: r["pr_page_ms"] < 300 and r["pr_page_growth"] <= GROWTH_LIMIT,
    ),
    Goal(
        "overview_server_ms", "overview, 500 cards, server < 500 ms", lambda r: r["overview_server_ms"] < 500
    ),
    Goal(
        "timeline_draw_ms", "timeline, every chart drawn < 1,500 ms", lambda r: r["timeline_draw_ms"] < 1500
    ),
    Goal("zoom_redraw_ms", "zoom until every chart redrawn < 300 ms", lambda r: r["zoom_redraw_ms"] < 300),
    Goal(
        "series_api_ms",
        "series API <= 1.5x its one-statement floor",
        lambda r: r["series_api_ms"] <= 1.5 * r["series_floor_ms"],
    ),
    Goal("settle_ms", "settle after a stored report < 200 ms", lambda r: r["settle_ms"] < 200),
    Goal("rescan_s", "rescan summed over every pair < 60 s", lambda r: r["rescan_s"] < 60),
    Goal("worker_rss_mb", "web worker after the heaviest pages < 150 MB", lambda r: r["worker_rss_mb"] < 150),
    Goal(
        "db_mb_per_million",
        "database < 250 MB per million measurements, reports outside it",
        lambda r: r["db_mb_per_million"] < 250,
    ),
    Goal(
        "growth_flat_worst",
        "pages that should not grow: within 1.5x from 1k to 10k",
        lambda r: r["growth_flat_worst"] <= GROWTH_LIMIT,
    ),
)


def _goals_print(results: dict[str, float], *, say: Callable[[str], None]) -> None:
    say("")
    say(f"{'goal':<66} {'figure':>10}  verdict")
    for goal in GOALS:
        verdict = "pass" if goal.met(results) else "FAIL"
        say(f"{goal.text:<66} {results[goal.key]:>10.1f}  {verdict}")
    say(
        f"{'reports outside the database, MB a year (beside db_mb_per_million)':<66} "
        f"{results['report_mb_per_year']:>10.0f}"
    )


def measure(*, say: Callable[[str], None]) -> dict[str, float]:
    """Every figure of the issue's goals, measured in one run and printed side by side with its goal and
    verdict; the last line is them as one JSON object. Pages are asked for over plain HTTP on the loopback
    (make bench sets PERFWATCH_HTTPS=false), with the shared cache emptied before each cold figure."""

    client = Client(HTTP_HOST="127.0.0.1")
    _statistics_refresh()  # a run stopped during its growth windows left them as the windows had them
    results: dict[str, float] = {}
    results |= _series_measure(client=client, say=say)
    results |= _pages_measure(client=client, say=say)
    results |= _browser_measure(say=say)
    results |= _ingest_measure(say=say)
    results |= _rescan_measure(say=say)
    results |= _size_measure(say=say)
    results |= _growth_measure(client=client, say=say)
    _goals_print(results, say=say)
    keys = (
        "series_api_ms",
        "series_floor_ms",
        "figure_kb_gz",
        "timeline_draw_ms",
        "overview_draw_ms",
        "ingest_ms",
        "detect_ms",
        "rescan_s",
        "db_mb_per_million",
        "commit_page_ms",
        "commit_page_kb",
        "tracking_page_ms",
        "pr_page_ms",
        "pr_page_growth",
        "overview_server_ms",
        "zoom_redraw_ms",
        "settle_ms",
        "worker_rss_mb",
        "report_mb_per_year",
        "growth_flat_worst",
    )
    say(json.dumps({key: round(results[key], 2) for key in keys}))
    return results
