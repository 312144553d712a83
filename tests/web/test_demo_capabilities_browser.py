"""The demo in Chromium as a perf engineer meets it: anything in one step from the header's search box,
a PR page that lists its groups, a GitHub compare link on every range, every chart's and table's data
as a file, and every capability of the README shown by some page of the demo."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from urllib.parse import urlsplit

import pytest

from dashboard.benchmarks.models import Run, RunStatus
from dashboard.demo.model import DCP_SUITE, REGRESSION_PR, SWEEP_SUITE
from dashboard.regressions.models import AlertGroup, GroupKind
from tests.web import test_browser, test_triage_browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser
demo = test_triage_browser.demo  # the demo as `make demo` loads it


def _search(browser, query: str) -> str:
    box = browser.page.locator("header form.search input[name=q]")
    box.fill(query)
    with browser.page.expect_navigation():
        box.press("Enter")
    return urlsplit(browser.page.url).path


def test_anything_in_one_step_search_pr_groups_compare_links_and_downloads(browser, demo) -> None:
    regression = AlertGroup.objects.get(kind=GroupKind.REGRESSION)
    browser.open("/")

    # The header's search box: a PR number, a sha prefix and a suite's name each go straight there.
    assert _search(browser, f"#{REGRESSION_PR}") == f"/prs/{REGRESSION_PR}/"
    assert _search(browser, regression.head_commit.sha[:7]) == f"/commits/{regression.head_commit.sha}/"
    assert _search(browser, DCP_SUITE) == f"/suites/{DCP_SUITE}/"
    # Words of a PR title list the PRs that carry them.
    assert _search(browser, "DSpark speculative") == "/search/"
    hits = browser.page.locator(".search-hits a").all_text_contents()
    assert "#51146" in hits

    # The PR page lists its groups with their state, each with its range on GitHub.
    browser.open(f"/prs/{REGRESSION_PR}/")
    group = browser.page.locator(f".pr-groups [data-group-id='{regression.pk}']")
    assert group.locator(".verdict").inner_text() == regression.get_state_display()
    base, head = regression.base_commit.sha, regression.head_commit.sha
    github = f"https://github.com/vllm-project/vllm/compare/{base}...{head}"
    assert group.locator(".github-compare").get_attribute("href") == github
    assert browser.page.locator(".commit-actions .github-compare").count() == 1
    # The impact table and each chart as CSV.
    table = browser.page.request.get(browser.base_url + f"/prs/{REGRESSION_PR}/?format=csv")
    rows = list(csv.DictReader(io.StringIO(table.text())))
    assert {row["concurrency"] for row in rows} == {"1", "4", "16"}
    chart_links = browser.page.locator(".chart-card .downloads a", has_text="CSV")
    assert chart_links.count() >= 5
    chart = browser.page.request.get(browser.base_url + chart_links.first.get_attribute("href"))
    assert chart.ok and chart.text().startswith("chart,series,x,y")

    # The group page: its range on GitHub, and each chart's points as JSON.
    browser.open(f"/alerts/{regression.pk}/")
    assert browser.page.locator(".commit-actions .github-compare").get_attribute("href") == github
    link = browser.page.locator(".chart-card .downloads a", has_text="JSON").first.get_attribute("href")
    points = json.loads(browser.page.request.get(browser.base_url + link).text())
    assert points and {"series", "x", "y"} <= set(points[0])

    # The timeline's charts and compare's table download too.
    browser.open("/suites/kimi-k3-8k1k/")
    link = browser.page.locator(".chart-card .downloads a", has_text="CSV").first.get_attribute("href")
    series = list(csv.DictReader(io.StringIO(browser.page.request.get(browser.base_url + link).text())))
    assert len(series) > 300 and series[0]["metric"] == "output_throughput_tok_s"
    browser.page.goto(browser.base_url + "/compare/?base=v0.27.1&head=82a85dc1&suite=kimi-k3-8k1k")
    assert browser.page.locator(".commit-actions .github-compare").count() == 1
    compare = browser.page.request.get(
        browser.base_url + "/compare/?base=v0.27.1&head=82a85dc1&suite=kimi-k3-8k1k&format=json"
    ).json()
    throughput = next(
        r for r in compare if r["concurrency"] == 16 and r["metric"] == "output_throughput_tok_s"
    )
    assert (throughput["base_value"], throughput["head_value"]) == (258.3, 725.0)
    assert browser.console_errors == []


def test_the_demo_shows_every_capability(browser, demo) -> None:
    # The long-context DCP suite at the post's numbers, with GSM8K at 96.97 % against 96.21 % with TP 8.
    head = "82a85dc1"
    browser.open(f"/commits/{head}/")
    text = browser.page.locator("main").inner_text()
    assert DCP_SUITE in text and SWEEP_SUITE in text
    assert "96.97" in text and "96.21" in text
    browser.open(f"/suites/{DCP_SUITE}/")
    assert browser.page.locator("[data-metric]").count() >= 5
    # A sweep suite: load curves, capacity at its objectives and goodput.
    browser.open(f"/suites/{SWEEP_SUITE}/")
    sweep = browser.page.locator("main").inner_text().lower()
    assert "capacity" in sweep and "goodput" in sweep
    # Runs with their commands, logs and server metrics; one failed, one running, one queued.
    statuses = set(Run.objects.values_list("status", flat=True))
    assert {RunStatus.FAILED, RunStatus.BENCHMARKING, RunStatus.QUEUED, RunStatus.SUCCEEDED} <= statuses
    browser.open("/runs/")
    runs = browser.page.locator("main").inner_text().lower()
    assert "failed" in runs and "queued" in runs and "benchmarking" in runs
    run = Run.objects.filter(status=RunStatus.SUCCEEDED).order_by("pk").first()
    assert run is not None
    browser.open(f"/runs/{run.pk}/")
    page = browser.page.locator("main").inner_text()
    assert "No commands recorded" not in page and "No logs recorded" not in page
    assert "vllm serve moonshotai/Kimi-K3" in page and "Draft acceptance rate" in page
    failed = Run.objects.get(status=RunStatus.FAILED)
    browser.open(f"/runs/{failed.pk}/")
    assert "CUDA out of memory" in browser.page.locator("main").inner_text()
    assert browser.console_errors == []


HREF = re.compile(r'href="(/[^"#]*)"')
CRAWL_LIMIT = 400


def test_a_crawl_from_the_overview_answers_200_everywhere_and_reaches_every_capability(browser, demo) -> None:
    """Every page the demo links to answers 200, and each capability the README's tour names is linked
    from somewhere: all three suites, a failed, a running and a queued run, compare, a PR page, a group
    page, the tracking issue, the feed, the precision page and the data downloads."""
    seen: set[str] = set()
    queue = ["/"]
    statuses: dict[str, int] = {}
    while queue and len(seen) < CRAWL_LIMIT:
        path = queue.pop(0)
        if path in seen or path.startswith(("/admin/", "/static/", "/accounts/logout/")):
            continue
        seen.add(path)
        response = browser.page.request.get(browser.base_url + path)
        statuses[path] = response.status
        if "text/html" not in response.headers.get("content-type", ""):
            continue
        for href in HREF.findall(response.text()):
            href = html.unescape(href)
            if href not in seen:
                queue.append(href)
    assert {path: status for path, status in statuses.items() if status != 200} == {}

    paths = {urlsplit(path).path for path in seen}
    for suite in ("kimi-k3-8k1k", DCP_SUITE, SWEEP_SUITE):
        assert f"/suites/{suite}/" in paths, suite
    for status in (RunStatus.FAILED, RunStatus.BENCHMARKING, RunStatus.QUEUED):
        run = Run.objects.filter(status=status).first()
        assert run is not None and f"/runs/{run.pk}/" in paths, status
    for prefix in (
        "/compare/",
        "/prs/",
        "/alerts/",
        "/tracking/vllm-project/vllm/",
        "/commits/",
        "/runners/",
    ):
        assert any(path.startswith(prefix) and path != prefix for path in paths) or prefix in paths, prefix
    assert {"/alerts/feed/", "/alerts/precision/"} <= paths
    assert any("format=csv" in path for path in seen) and any("format=json" in path for path in seen)
