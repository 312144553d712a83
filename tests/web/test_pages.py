"""The pages and the figure endpoint, rendered with factory data against the real database."""

from typing import cast

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.benchmarks.models import HEADLINE_METRICS, Commit, Run, RunStatus, Suite
from dashboard.web.tables import HEADLINE_DISPLAYS
from tests.factories import CommitFactory, RunFactory, RunnerFactory, SuiteFactory, run_with_values
from tests.web.chart_data import column, trace_commits

pytestmark = pytest.mark.django_db


def _figure(client: Client, path: str) -> dict:
    response = client.get(path)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return response.json()


def test_timeline_page_has_one_chart_per_headline_metric_and_one_data_url(client, build_history) -> None:
    build_history(commits=4)
    response = client.get("/suites/kimi-k3-8k1k/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('data-timeline-url="/api/suites/kimi-k3-8k1k/timeline/?hardware=b300&amp;metric=') == 1
    for metric in HEADLINE_METRICS:
        assert f'data-metric="{metric}"' in html
    assert "data-figure-url" not in html
    assert html.count('data-figure-kind="timeline"') == len(HEADLINE_METRICS)
    assert "↑ higher is better" in html and "↓ lower is better" in html
    assert "/static/vendor/plotly/plotly-cartesian.min." in html
    assert "<script>" not in html  # no inline scripts: charts.js draws everything


def test_timeline_filters_travel_to_the_data_url(client, build_history) -> None:
    build_history(commits=4)
    html = client.get(
        "/suites/kimi-k3-8k1k/?from=2026-08-01&to=2026-08-02&concurrency=16&concurrency=1"
    ).content
    assert (
        b"/api/suites/kimi-k3-8k1k/timeline/"
        b"?hardware=b300&amp;from=2026-08-01&amp;to=2026-08-02&amp;concurrency=1&amp;concurrency=16"
    ) in html


def test_timeline_with_a_bad_date_says_why_and_is_a_400(client, build_history) -> None:
    build_history(commits=2)
    response = client.get("/suites/kimi-k3-8k1k/?from=yesterday")
    assert response.status_code == 400
    assert "&#x27;from&#x27; must be a date as YYYY-MM-DD" in response.content.decode()


def test_timeline_of_a_suite_without_results_renders_empty_charts(client) -> None:
    SuiteFactory(name="not-run-yet")
    response = client.get("/suites/not-run-yet/")
    assert response.status_code == 200
    assert response.context["facet"] is None
    figure = client.get("/api/suites/not-run-yet/figures/ttft_ms_mean/").json()
    assert figure["data"] == []


def test_unknown_suite_is_404(client) -> None:
    assert client.get("/suites/no-such-suite/").status_code == 404
    response = client.get("/api/suites/no-such-suite/figures/ttft_ms_mean/")
    assert response.status_code == 404
    assert response.json() == {"error": "unknown suite 'no-such-suite'"}


def test_figure_has_one_trace_per_concurrency_with_a_point_per_benchmarked_commit(
    client, build_history
) -> None:
    commits = build_history(commits=12, unbenchmarked=(5, 6))
    figure = _figure(client, "/api/suites/kimi-k3-8k1k/figures/output_throughput_tok_s/?hardware=b300")

    assert [trace["name"] for trace in figure["data"]] == ["c=1", "c=4", "c=16"]
    benchmarked = [c for i, c in enumerate(commits) if i not in (5, 6)]
    for trace in figure["data"]:
        # x is the position on main, so the two unbenchmarked commits leave a gap.
        assert column(trace["x"]) == [commit.position for commit in benchmarked]
        assert [point["url"] for point in trace_commits(figure["commits"], trace)] == [
            f"/commits/{c.sha}/" for c in benchmarked
        ]
        assert "tok/s" in trace["hovertemplate"]
    assert figure["layout"]["meta"]["metric"] == "output_throughput_tok_s"


def test_figure_hover_names_sha_subject_pr_and_date(client, build_history) -> None:
    commit = build_history(commits=1, concurrencies=(4,))[0]
    figure = _figure(client, "/api/suites/kimi-k3-8k1k/figures/ttft_ms_mean/")
    (trace,) = figure["data"]
    (point,) = trace_commits(figure["commits"], trace)
    assert (point["url"], point["sha"], point["subject"], point["pr"], point["time"]) == (
        f"/commits/{commit.sha}/",
        commit.sha,
        commit.subject,
        commit.pr_number,
        commit.committed_at.strftime("%Y-%m-%d %H:%M UTC"),
    )
    assert "customdata" not in trace  # the chart script fills it from the commits table
    assert " ms</b> at concurrency 4" in trace["hovertemplate"]


def test_a_commit_with_repeated_runs_is_the_median_of_them_with_its_spread(client) -> None:
    suite = cast(Suite, SuiteFactory())
    commit = cast(Commit, CommitFactory())
    for value in (100.0, 130.0, 104.0):
        run_with_values(commit=commit, suite=suite, values={(1, "ttft_ms_mean"): value})

    figure = _figure(client, "/api/suites/kimi-k3-8k1k/figures/ttft_ms_mean/")

    trace, spread = figure["data"]
    assert column(trace["y"]) == [104.0]
    assert (column(trace["repeats"]["runs"]), column(trace["repeats"]["spread"])) == ([3], [30.0])
    assert column(spread["x"])[:2] == column(trace["x"]) * 2 and column(spread["y"])[:2] == [100.0, 130.0]


def test_figure_filters_by_date_and_concurrency(client, build_history) -> None:
    build_history(commits=48)
    figure = _figure(
        client, "/api/suites/kimi-k3-8k1k/figures/latency_s_mean/?from=2026-08-02&to=2026-08-02&concurrency=4"
    )
    (trace,) = figure["data"]
    assert trace["name"] == "c=4"
    assert len(column(trace["x"])) == 24


def test_figure_without_points_says_so(client, build_history) -> None:
    build_history(commits=2)
    figure = _figure(client, "/api/suites/kimi-k3-8k1k/figures/itl_ms_mean/?from=2030-01-01")
    assert figure["data"] == []
    assert figure["layout"]["annotations"][0]["text"] == "No measurements for these filters"


def test_figure_rejects_a_bad_filter_with_a_json_reason(client, build_history) -> None:
    build_history(commits=1)
    response = client.get("/api/suites/kimi-k3-8k1k/figures/itl_ms_mean/?concurrency=many")
    assert response.status_code == 400
    assert response.json() == {"error": "'concurrency' must be a whole number, not 'many'"}


def test_commit_page_shows_measurements_runs_and_github_links(client, build_history) -> None:
    commits = build_history(commits=3)
    commit = commits[1]
    failed = cast(
        Run,
        RunFactory(
            commit=commit,
            suite=SuiteFactory(),
            status=RunStatus.FAILED,
            failure_reason="vllm serve exited with code 1 before /health answered",
            runner=RunnerFactory(),
        ),
    )

    response = client.get(f"/commits/{commit.sha}/")

    assert response.status_code == 200
    html = response.content.decode()
    assert commit.subject in html
    assert f'href="https://github.com/vllm-project/vllm/commit/{commit.sha}"' in html
    assert f'href="/prs/{commit.pr_number}/"' in html  # the PR page, which links on to GitHub
    assert "vllm serve exited with code 1 before /health answered" in html
    assert f"#{failed.pk}" in html
    blocks = response.context["blocks"]
    assert [row.concurrency for row in blocks[0].headline_rows] == [1, 4, 16]
    assert [len(row.cells) for row in blocks[0].headline_rows] == [len(HEADLINE_METRICS)] * 3
    assert f'href="/commits/{commits[0].sha}/"' in html and f'href="/commits/{commits[2].sha}/"' in html


def test_commit_page_shows_the_median_of_repeated_runs_with_their_range(client) -> None:
    commit = cast(Commit, CommitFactory())
    for value in (100.0, 300.0, 110.0):  # one run far off: the median ignores it
        run_with_values(commit=commit, values={(1, "output_throughput_tok_s"): value})
    html = client.get(f"/commits/{commit.sha[:10]}/").content.decode()
    assert 'title="median of 3 runs (100.0 to 300.0): 100.0, 300.0, 110.0">110.0*' in html


def test_commit_page_shows_each_change_with_its_interval_and_runs_coloured_only_when_significant(
    client,
) -> None:
    suite = cast(Suite, SuiteFactory())
    commits = [cast(Commit, CommitFactory()) for _ in range(12)]
    for index, commit in enumerate(commits[:-1]):  # a quiet history: 0.5 % run-to-run noise
        value = 100.0 * (1.0 + 0.005 * (-1) ** index)
        run_with_values(
            commit=commit,
            suite=suite,
            values={(1, "output_throughput_tok_s"): value, (1, "ttft_ms_mean"): 2000.0 / value * 100.0},
        )
    # The last commit: throughput 10 % down (far beyond the noise), TTFT 0.3 % up (within it).
    run_with_values(
        commit=commits[-1],
        suite=suite,
        values={(1, "output_throughput_tok_s"): 89.5, (1, "ttft_ms_mean"): 2000.0 * 1.003},
    )

    page = client.get(f"/commits/{commits[-1].sha}/")
    html = page.content.decode()

    (block,) = page.context["blocks"]
    (row,) = block.headline_rows
    cells = {display.key: cell for display, cell in zip(HEADLINE_DISPLAYS, row.cells, strict=True)}
    throughput = cells["output_throughput_tok_s"].change
    ttft = cells["ttft_ms_mean"].change
    assert throughput is not None and ttft is not None
    assert (throughput.text, throughput.css, throughput.runs) == ("−10.9 %", "bad", "1 → 1 run")
    assert throughput.interval.endswith("%") and "…" in throughput.interval
    assert ttft.css == "muted"
    assert f"<code>{commits[-2].short_sha}</code>" in html and "95 % interval" in html


def test_commit_page_query_count_does_not_grow_with_the_suites_that_ran_it(client) -> None:
    commits = [cast(Commit, CommitFactory()) for _ in range(4)]

    def suites_run(names: range) -> None:
        for number in names:
            suite = cast(
                Suite, SuiteFactory(name=f"suite-{number}", hardware_class=("b300", "h200")[number % 2])
            )
            for index, commit in enumerate(commits):
                run_with_values(
                    commit=commit,
                    suite=suite,
                    values={(16, "output_throughput_tok_s"): 100.0 + index + number},
                )

    suites_run(range(2))
    with CaptureQueriesContext(connection) as few:
        assert len(client.get(f"/commits/{commits[-1].sha}/").context["blocks"]) == 2
    suites_run(range(2, 12))
    with CaptureQueriesContext(connection) as many:
        blocks = client.get(f"/commits/{commits[-1].sha}/").context["blocks"]

    assert len(blocks) == 12
    assert all(any(cell.change for cell in block.headline_rows[0].cells) for block in blocks)  # all compared
    assert len(many) == len(few)


def test_unknown_commit_is_a_404_page(client) -> None:
    response = client.get("/commits/deadbeefdeadbeef/")
    assert response.status_code == 404
    assert "No commit &#x27;deadbeefdeadbeef&#x27; is known here" in response.content.decode()


def test_overview_lists_each_suite_and_hardware_with_latest_values_and_a_sparkline(
    client, build_history
) -> None:
    commits = build_history(commits=6)
    build_history(commits=3, suite=SuiteFactory(name="kimi-k3-dcp-120k", hardware_class="h200"))

    response = client.get("/")

    assert response.status_code == 200
    cards = response.context["cards"]
    assert [(c.overview.suite.name, c.overview.hardware_class) for c in cards] == [
        ("kimi-k3-8k1k", "b300"),
        ("kimi-k3-dcp-120k", "h200"),
    ]
    first = cards[0]
    assert first.overview.latest_commit == commits[-1]
    assert first.sparkline is not None
    assert len(first.sparkline.shape.line.split()) == 6
    html = response.content.decode()
    assert 'href="/suites/kimi-k3-8k1k/?hardware=b300"' in html
    assert f'<a class="sparkline" id="{first.sparkline.element_id}"' in html
    assert "application/json" not in html  # drawn by the page itself: no chart data, no chart script work
    assert f'href="/commits/{commits[-1].sha}/"' in html


def test_a_load_curve_suites_card_shows_its_capacity_instead_of_an_empty_table(client, build_history) -> None:
    build_history(commits=2)
    sweep = cast(
        Suite,
        SuiteFactory(
            name="tiny-llama-cpu-sweep",
            hardware_class="cpu",
            concurrencies=[],
            benchmark_settings={"profile": "sweep", "headline_metric": "capacity_req_s"},
        ),
    )
    # Its runs hold a capacity for the whole run and per-level figures of no fixed concurrency.
    run_with_values(commit=cast(Commit, CommitFactory()), suite=sweep, values={(0, "capacity_req_s"): 7.8412})

    response = client.get("/")

    cards = {card.overview.suite.name: card for card in response.context["cards"]}
    assert cards["tiny-llama-cpu-sweep"].rows == ()
    assert cards["tiny-llama-cpu-sweep"].whole_run == (("Capacity at the objectives", "7.84 req/s"),)
    # A suite of fixed levels keeps its table and shows no whole-run figure.
    assert cards["kimi-k3-8k1k"].whole_run == () and len(cards["kimi-k3-8k1k"].rows) == 3
    html = response.content.decode()
    sweep_card = html[html.index(">tiny-llama-cpu-sweep<") :]
    sweep_card = sweep_card[: sweep_card.index("</section>")]
    assert "<dt>Capacity at the objectives</dt><dd>7.84 req/s</dd>" in sweep_card
    assert "<table" not in sweep_card


def test_overview_query_count_does_not_grow_with_suites_or_commits(
    client, build_history, django_assert_num_queries
) -> None:
    # Positions from 0, whatever the tests before made: a pair whose newest position lies past the
    # sparklines' recent span reads its points from there first (one query more, by design).
    CommitFactory.reset_sequence(0)
    build_history(commits=3)
    # The suites, the pairs with runs (a step per pair), the shown pairs' counts and newest commits, ...
    # and one that finds the regressions a later change restored (none here).
    with django_assert_num_queries(12):
        assert client.get("/").status_code == 200

    build_history(commits=20, suite=SuiteFactory(name="kimi-k3-dcp-120k", hardware_class="h200"))
    build_history(commits=10, suite=SuiteFactory(name="llama-70b-chat", hardware_class="h100"))
    with django_assert_num_queries(12):
        response = client.get("/")
    assert len(response.context["cards"]) == 3
    assert len(response.context["recent_commits"]) == 15


def test_suites_page_query_count_is_fixed(client, build_history, django_assert_num_queries) -> None:
    build_history(commits=2)
    SuiteFactory(name="not-run-yet")
    with CaptureQueriesContext(connection) as few:
        client.get("/suites/")
    build_history(commits=5, suite=SuiteFactory(name="another", hardware_class="h200"))
    with django_assert_num_queries(len(few)):
        html = client.get("/suites/").content.decode()
    assert "no results yet" in html and 'href="/suites/another/?hardware=h200"' in html


def test_demo_banner_shows_only_in_demo_mode(client, settings) -> None:
    settings.PERFWATCH_DEMO = False
    assert "Demo data" not in client.get("/").content.decode()
    settings.PERFWATCH_DEMO = True
    assert "Demo data" in client.get("/").content.decode()


def test_a_headline_setting_that_names_no_metric_is_ignored_by_the_timeline_and_the_overview(
    client, build_history
) -> None:
    # Settings are free JSON (the admin edits them): a headline that is not a metric's name is no headline.
    build_history(commits=2)
    suite = Suite.objects.get(name="kimi-k3-8k1k")
    suite.benchmark_settings = {"headline_metric": {"name": "capacity_req_s"}}
    suite.save(update_fields=["benchmark_settings"])

    timeline = client.get(f"/suites/{suite.name}/")
    overview = client.get("/")

    # A dict as the first chart's metric was a server error (an unhashable metric name).
    assert timeline.status_code == 200 and overview.status_code == 200
    assert timeline.context["charts"][0]["display"].key == "output_throughput_tok_s"
    assert Suite(benchmark_settings={"headline_metric": "capacity_req_s"}).headline_metric == "capacity_req_s"
