"""The runs pages in a real Chromium: live elapsed times, reload on a stage change, the telemetry chart."""

import os
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from dashboard.benchmarks.models import Run, RunKind, Runner, RunStatus
from dashboard.web import run_views
from tests.factories import RunnerFactory
from tests.web import test_browser, test_triage_browser
from tests.web.test_browser import BrowserPage
from tests.web.test_runs_pages import _failed_run, _queued_run, _running_run, _succeeded_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser  # the same Chromium fixture as the other pages' checks
demo = test_triage_browser.demo  # what `make demo` loads

# Set to a folder to keep a full-page screenshot of each page these tests open.
SCREENSHOT_DIR = os.environ.get("PERFWATCH_SCREENSHOT_DIR", "")
STATUS_BADGE = "document.querySelector('.run-title .status').textContent"


def _screenshot(browser: BrowserPage, *, name: str) -> None:
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        browser.page.screenshot(path=str(Path(SCREENSHOT_DIR) / f"{name}.png"), full_page=True)


def _open(browser: BrowserPage, path: str, *, name: str) -> None:
    response = browser.page.goto(browser.base_url + path)
    assert response is not None and response.ok, path
    browser.page.wait_for_load_state("networkidle")
    _screenshot(browser, name=name)


def test_a_running_run_counts_its_time_and_reloads_when_it_changes_stage(browser, monkeypatch) -> None:
    monkeypatch.setattr(run_views, "LIVE_INTERVAL_S", 1)
    run = _running_run()
    _open(browser, f"/runs/{run.pk}/", name="run-running")

    ticking = browser.page.locator(".stages .stage-current .elapsed")
    first = ticking.text_content()
    browser.page.wait_for_function(
        "text => document.querySelector('.stages .stage-current .elapsed').textContent !== text", arg=first
    )
    assert browser.page.evaluate(STATUS_BADGE) == "Benchmarking"

    Run.objects.filter(pk=run.pk).update(status=RunStatus.STORING, stage_started_at=timezone.now())
    browser.page.wait_for_function(f"() => {STATUS_BADGE} === 'Storing'", timeout=10_000)
    assert browser.console_errors == []


def test_a_succeeded_run_draws_its_gpu_telemetry(browser, vllm_cpu_report) -> None:
    run = _succeeded_run(raw_report=vllm_cpu_report)
    _open(browser, f"/runs/{run.pk}/", name="run-succeeded")

    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")
    traces = browser.page.evaluate(
        "() => document.querySelector('.chart.telemetry').data.map(trace => [trace.yaxis, trace.x.length])"
    )
    assert traces == [["y", 22], ["y2", 22], ["y3", 22], ["y4", 22]]
    assert browser.console_errors == []


def test_runs_and_runners_pages_render_without_errors(browser, vllm_cpu_report) -> None:
    for minutes in (42, 17, 3):
        _queued_run(minutes_ago=minutes)
    second_node = RunnerFactory(name="b300-node-2", last_heartbeat_at=timezone.now() - timedelta(seconds=9))
    _running_run(runner=cast(Runner, second_node))
    failed = _failed_run()
    _succeeded_run(raw_report=vllm_cpu_report)
    RunnerFactory(name="b300-node-3", host="gpu-19", last_heartbeat_at=timezone.now() - timedelta(hours=3))

    _open(browser, "/runs/", name="runs")
    assert browser.page.locator("#queued tbody tr").count() == 3
    assert browser.page.locator("#failed td.reason").first.text_content() == failed.failure_reason

    _open(browser, f"/runs/{failed.pk}/", name="run-failed")
    assert browser.page.locator("details#log-server").get_attribute("open") == ""
    # A log's tail is what tells why: a long one opens scrolled to its end.
    Run.objects.filter(pk=failed.pk).update(logs={"server": "".join(f"line {n}\n" for n in range(400))})
    _open(browser, f"/runs/{failed.pk}/", name="run-failed-long-log")
    scrolled = "pre => pre.scrollTop > 0 && pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 1"
    assert browser.page.locator("details#log-server pre").evaluate(scrolled)

    _open(browser, "/runners/", name="runners")
    assert browser.page.locator(".runners-table tbody tr").count() == 4
    assert browser.console_errors == []


def test_staff_retry_a_failed_run_from_its_page(browser, dispatched) -> None:
    # The benchmark message itself is the broker's business; here it is only recorded.
    failed = _failed_run()
    # Signed in as staff through a session made by Django's test client, handed to the browser.
    signed_in = Client()
    signed_in.force_login(User.objects.create_user("operator", is_staff=True))
    session = signed_in.cookies[settings.SESSION_COOKIE_NAME].value
    browser.page.context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": browser.base_url}]
    )
    _open(browser, f"/runs/{failed.pk}/", name="run-failed-staff")
    with browser.page.expect_navigation():
        browser.page.click("text=Retry run")

    _screenshot(browser, name="run-retried")
    assert browser.page.locator(".alert.success").text_content() == f"Run #{failed.pk} is queued again."
    assert browser.page.evaluate(STATUS_BADGE) == "Queued"
    assert dispatched.runs == [failed.pk]
    assert browser.console_errors == []


def test_the_demos_run_page_shows_timed_stages_its_gpus_telemetry_and_vllm(browser, demo) -> None:
    # The reference suite's newest routine run on its B300 node (the demo's CPU sweep has no GPUs).
    run = Run.objects.filter(
        status=RunStatus.SUCCEEDED, suite__name="kimi-k3-8k1k", kind=RunKind.ROUTINE
    ).latest("finished_at")
    _open(browser, f"/runs/{run.pk}/", name="demo-run")

    stages = browser.page.locator(".stages tr")
    labels = stages.locator("th").all_inner_texts()
    assert labels == ["Installing", "Starting server", "Benchmarking", "Storing"]
    assert browser.page.locator(".stages .stage-done").count() == 4
    assert "–" not in stages.locator("td.num").all_inner_texts()
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")
    legend = browser.page.evaluate(
        "() => document.querySelector('.chart.telemetry').data.filter(t => t.showlegend).map(t => t.name)"
    )
    assert legend == [f"GPU {index}" for index in range(8)]
    terms, values = (browser.page.locator(f"dl.facts {tag}").all_inner_texts() for tag in ("dt", "dd"))
    facts = dict(zip(terms, values, strict=True))
    assert facts["VLLM"] == run.vllm_version and facts["QUEUED"] <= facts["STARTED"] <= facts["FINISHED"]

    _open(browser, "/runners/", name="demo-runners")
    # The B300 node beats now; the demo's CPU sweep node went quiet long ago.
    heartbeat = browser.page.locator(".runners-table td.heartbeat").first.inner_text()
    assert " ago" in heartbeat and "never" not in heartbeat, heartbeat
    _open(browser, "/runs/", name="demo-runs")
    versions = browser.page.locator("#succeeded tbody td.mono:not(:first-child)").all_inner_texts()
    assert len(versions) == 10 and all(version.startswith("0.27.") for version in versions), versions
    assert browser.console_errors == []
