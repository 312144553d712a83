"""Pages: parse the request, call selectors, shape with dashboard.web.tables, render."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from dashboard.benchmarks import overview_selectors, selectors
from dashboard.benchmarks.capacity import CAPACITY_METRICS
from dashboard.benchmarks.capacity_selectors import commit_accuracy_scores, commit_load_curves
from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.models import WHOLE_RUN, Suite
from dashboard.benchmarks.scheduling import suites_waiting_for_nodes
from dashboard.benchmarks.selectors import HardwareFacet
from dashboard.github.commit_changes import commit_changes
from dashboard.github.selectors import tracking_issues_active
from dashboard.regressions.selectors import (
    alert_groups_naming,
    alert_groups_open,
    open_regression_counts,
    regressions_restored,
    regressions_restored_rows,
)
from dashboard.web.figures import CommitUrl, concurrency_color
from dashboard.web.filters import (
    STATISTICS,
    TimelineFilters,
    timeline_request_read,
    timeline_selection,
)
from dashboard.web.load_curves import load_curve_section
from dashboard.web.markers import tracking_toggles
from dashboard.web.routes import route_builder
from dashboard.web.search import search
from dashboard.web.tables import (
    HEADLINE_DISPLAYS,
    OverviewCard,
    commit_measurement_blocks,
    overview_cards,
    overview_folded,
    overview_split,
)

QUICK_RANGES_DAYS = (7, 30, 90)


def commit_url_builder() -> CommitUrl:
    """sha -> commit page path, reversing the route once rather than once per chart point."""
    return route_builder("web:commit", "0" * 40)


def _overview_cards(
    *, pairs: list[overview_selectors.OverviewPair], open_regressions: dict[tuple[str, str], int]
) -> list[OverviewCard]:
    return overview_cards(
        overviews=overview_selectors.suites_overview(pairs=pairs),
        sparklines=overview_selectors.suites_sparklines(pairs=pairs),
        suite_url=route_builder("web:suite-timeline", "suite-name-placeholder"),
        commit_url=commit_url_builder(),
        alerts_url=reverse("regressions:alerts"),
        open_regressions=open_regressions,
    )


def _headline_head() -> str:
    """The same head for every card: rendered once, not once per card."""
    return render_to_string("web/_headline_head.html", {"headline": HEADLINE_DISPLAYS})


@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    restored = regressions_restored()  # once: the open list, the cards' counts and the recovered list
    counts = open_regression_counts(restored=restored)
    shown, folded = overview_split(pairs=overview_selectors.overview_pair_keys(), open_regressions=counts)
    return render(
        request,
        "web/overview.html",
        {
            "cards": _overview_cards(
                pairs=overview_selectors.overview_pairs(among=shown), open_regressions=counts
            ),
            "folded_cards": overview_folded(pairs=folded, open_regressions=counts),
            "headline_head": _headline_head(),
            "recent_commits": overview_selectors.commits_recently_benchmarked(limit=15),
            "open_regressions": alert_groups_open(restored=restored),
            "recovered": regressions_restored_rows(restored=restored),
        },
    )


@require_GET
def overview_card(request: HttpRequest) -> HttpResponse:
    """One suite and hardware class of the overview (`suite`, `hardware`), as the overview folds it."""
    suite = Suite.objects.filter(name=request.GET.get("suite", "")).first()
    hardware = request.GET.get("hardware", "")
    among = [overview_selectors.PairKey(suite=suite, hardware_class=hardware)] if suite is not None else []
    pairs = overview_selectors.overview_pairs(among=among) if among else []
    if not pairs:
        return HttpResponse("No results of this suite here.", status=404, content_type="text/plain")
    cards = _overview_cards(pairs=pairs, open_regressions=open_regression_counts())
    return render(request, "web/_overview_card.html", {"card": cards[0], "headline_head": _headline_head()})


@require_GET
def suites(request: HttpRequest) -> HttpResponse:
    by_suite: dict[int, list[overview_selectors.SuiteOverview]] = {}
    for item in overview_selectors.suites_overview():
        by_suite.setdefault(item.suite.pk, []).append(item)
    waiting = suites_waiting_for_nodes()
    rows = [(suite, by_suite.get(suite.pk, []), waiting.get(suite.pk)) for suite in selectors.suites_list()]
    return render(request, "web/suites.html", {"rows": rows})


def timeline_metrics(*, statistic: str, headline: str | None, available: Collection[str]) -> list[str]:
    """The metrics a suite's timeline charts, in order: the suite's headline, throughput and the
    latencies at `statistic`, then capacity, goodput and accuracy where the suite measures them."""
    latencies = [f"{family}_{statistic}" for family in ("ttft_ms", "latency_s", "itl_ms", "tpot_ms")]
    whole_run = [m for m in CAPACITY_METRICS if m in available]
    accuracy = sorted(m for m in available if m.startswith("accuracy_"))
    first = [headline] if headline else []
    return list(dict.fromkeys([*first, "output_throughput_tok_s", *latencies, *whole_run, *accuracy]))


def _timeline_context(
    suite: Suite, facet: HardwareFacet | None, filters: TimelineFilters
) -> dict[str, object]:
    """The charts' data URL, the concurrency chips and the quick date ranges, each carrying the filters."""
    figure_query = filters.query_string()
    quick_ranges = []
    if facet and facet.last_commit_at:
        last_day = facet.last_commit_at.date()
        for days in QUICK_RANGES_DAYS:
            first_day = last_day - timedelta(days=days - 1)
            query = replace(filters, date_from=first_day, date_to=last_day).query_string()
            active = (filters.date_from, filters.date_to) == (first_day, last_day)
            quick_ranges.append((f"{days} days", f"?{query}", active))
        all_time = replace(filters, date_from=None, date_to=None)
        quick_ranges.append(
            ("All", f"?{all_time.query_string()}", not (filters.date_from or filters.date_to))
        )
    # Whole-run metrics (capacity, accuracy) sit at level 0 and are drawn whatever levels are picked.
    levels = tuple(level for level in facet.concurrencies if level != WHOLE_RUN) if facet else ()
    metrics = timeline_metrics(
        statistic=filters.statistic,
        headline=suite.headline_metric,
        available=selectors.suite_metrics(suite=suite, hardware_class=filters.hardware_class),
    )
    return {
        "filters": filters,
        "facet": facet,
        "quick_ranges": quick_ranges,
        "levels": [
            (
                level,
                concurrency_color(concurrency=level),
                not filters.concurrencies or level in filters.concurrencies,
            )
            for level in levels
        ],
        # One request for every chart: the metrics travel with the filters.
        "timeline_url": f"{reverse('web:suite-timeline-data', args=[suite.name])}?{figure_query}&"
        + urlencode([("metric", metric) for metric in metrics]),
        "charts": [
            {
                "display": metric_display(metric=metric),
                # The chart's points as a file: the series API with the page's filters and this metric.
                "data_url": f"{reverse('web:suite-series', args=[suite.name])}?{figure_query}&"
                + urlencode([("metric", metric)]),
            }
            for metric in metrics
        ],
        "statistics": [
            (option, f"?{replace(filters, statistic=option).query_string()}", option == filters.statistic)
            for option in STATISTICS
        ],
    }


@require_GET
def suite_timeline(request: HttpRequest, suite: str) -> HttpResponse:
    suite_row = get_object_or_404(Suite, name=suite)
    facets = selectors.suite_facets(suite=suite_row)
    hardware_classes = [facet.hardware_class for facet in facets]
    default_hardware = (
        suite_row.hardware_class
        if suite_row.hardware_class in hardware_classes or not hardware_classes
        else hardware_classes[0]
    )
    asked = timeline_request_read(query=request.GET, default_hardware=default_hardware)
    filters = asked.filters
    measured = {
        facet.hardware_class: tuple(level for level in facet.concurrencies if level != WHOLE_RUN)
        for facet in facets
    }
    selection = timeline_selection(asked=asked, measured=measured)
    facet = next((f for f in facets if f.hardware_class == filters.hardware_class), None)
    context = {
        "suite": suite_row,
        "facets": facets,
        "filter_problems": selection.problems,
        "unknown_hardware": selection.unknown_hardware,
        "unknown_levels": selection.unknown_levels,
        "unknown_statistic": selection.unknown_statistic,
        "unreadable_dates": selection.unreadable_dates,
        "span": selectors.timeline_span(
            suite=suite_row,
            hardware_class=filters.hardware_class,
            date_from=filters.date_from,
            date_to=filters.date_to,
        ),
        **_timeline_context(suite_row, facet, filters),
        "tracking_toggles": tracking_toggles(issues=tracking_issues_active(), selection=filters.tracking),
    }
    # A value that cannot be read is a bad request; a well-formed one that names nothing is not.
    status = 400 if asked.problems else 200
    return render(request, "web/timeline.html", context, status=status)


# A commit run by more suites and hardware classes than FOLD_BLOCKS_FROM shows those that changed in full
# (the first CHANGED_SHOWN of them) and folds the rest, each fetched when opened; so do its runs beyond
# RUNS_SHOWN. A 1 % noise alone colours a change in about one suite of seven at 95 %: a fleet of 500
# would otherwise still print seventy tables.
FOLD_BLOCKS_FROM = 20
CHANGED_SHOWN = 30
RUNS_SHOWN = 25


@require_GET
def commit_detail(request: HttpRequest, sha: str) -> HttpResponse:
    commit = selectors.commit_get(sha=sha)
    if commit is None:
        return render(
            request,
            "404.html",
            {"exception": f"No commit {sha!r} is known here: it has not been synced or benchmarked."},
            status=404,
        )
    older, newer = selectors.commit_neighbours(commit=commit)
    rows = selectors.commit_measurements(commit=commit)
    # Folded blocks print no change: only the scopes whose change could be significant need their noise.
    fold = len({(row.suite, row.hardware) for row in rows}) >= FOLD_BLOCKS_FROM
    blocks = commit_measurement_blocks(
        rows=rows, changes=commit_changes(commit=commit, could_matter_only=fold)
    )
    shown = [block for block in blocks if block.changed][:CHANGED_SHOWN] if fold else blocks
    runs = selectors.commit_runs(commit=commit, limit=RUNS_SHOWN)
    runs_count = commit.runs.count() if len(runs) == RUNS_SHOWN else len(runs)
    return render(
        request,
        "web/commit.html",
        {
            "commit": commit,
            "blocks": shown,
            "folded_blocks": blocks[len(shown) :],
            "headline": HEADLINE_DISPLAYS,
            "runs": runs,
            "runs_folded": runs_count - len(runs),
            "load_curves": [
                load_curve_section(curves=[(commit.short_sha, curve)], element_prefix=f"load-curve-{index}")
                for index, curve in enumerate(commit_load_curves(commit=commit))
            ],
            "accuracy_scores": commit_accuracy_scores(commit=commit),
            "older": older,
            "newer": newer,
            "alert_groups": alert_groups_naming(commit=commit),
        },
    )


@require_GET
def commit_block(request: HttpRequest, sha: str) -> HttpResponse:
    """One suite and hardware class of a commit page (`suite`, `hardware`), as the page folds it."""
    commit = selectors.commit_get(sha=sha)
    suite = Suite.objects.filter(name=request.GET.get("suite", "")).first()
    hardware = request.GET.get("hardware", "")
    if commit is None or suite is None or not hardware:
        return HttpResponse("No such commit, suite or hardware class.", status=404, content_type="text/plain")
    blocks = commit_measurement_blocks(
        rows=selectors.commit_measurements(commit=commit, suite=suite.name, hardware_class=hardware),
        changes=commit_changes(commit=commit, only=(suite.pk, hardware)),
    )
    if not blocks:
        return HttpResponse("No measurements of this suite here.", status=404, content_type="text/plain")
    return render(request, "web/_measurement_block.html", {"block": blocks[0], "headline": HEADLINE_DISPLAYS})


@require_GET
def commit_runs(request: HttpRequest, sha: str) -> HttpResponse:
    """The runs of a commit past those its page shows, as rows of its runs table."""
    commit = selectors.commit_get(sha=sha)
    if commit is None:
        return HttpResponse("No such commit.", status=404, content_type="text/plain")
    runs = selectors.commit_runs(commit=commit, offset=RUNS_SHOWN)
    return render(request, "web/_commit_runs.html", {"runs": runs})


@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    """The header's search: straight to the one page an exact query names, else the matches."""
    results = search(query=request.GET.get("q", ""))
    if results.exact_path is not None:
        return redirect(results.exact_path)
    return render(request, "web/search.html", {"results": results})
