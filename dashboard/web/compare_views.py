"""Compare: two commits or tags of one suite side by side; the address is the permalink."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from dashboard.benchmarks import selectors as benchmark_selectors
from dashboard.benchmarks.capacity_selectors import commit_load_curve
from dashboard.benchmarks.compare import compare_markdown
from dashboard.benchmarks.comparison import Comparison, ComparisonInvalid, comparison_get, metric_columns
from dashboard.benchmarks.metrics import metric_display
from dashboard.downloads import download_format, table_response
from dashboard.github import selectors
from dashboard.web.impact_tables import compare_table
from dashboard.web.load_curves import LoadCurveSection, load_curve_section


def _compare_load_curves(*, comparison: Comparison) -> list[LoadCurveSection]:
    """Both commits' load curves of the compared suite on one set of charts, when they have curves."""
    curves = [
        (commit.short_sha, curve)
        for commit in (comparison.base, comparison.head)
        if (
            curve := commit_load_curve(
                commit=commit, suite=comparison.suite, hardware_class=comparison.hardware_class
            )
        )
        is not None
        and len(curve.points) > 1
    ]
    return [load_curve_section(curves=curves, element_prefix="compare-load-curve")] if curves else []


@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    """Two commits or tags of one suite side by side; the address is the permalink."""
    suites = benchmark_selectors.suites_list()
    base_ref, head_ref = request.GET.get("base", "").strip(), request.GET.get("head", "").strip()
    suite_name = request.GET.get("suite", "").strip() or (suites[0].name if suites else "")
    hardware = request.GET.get("hardware", "").strip()
    context: dict[str, object] = {
        "suites": suites,
        "suite_name": suite_name,
        # Kept in the selector, marked, rather than shown as the first suite.
        "suite_unknown": bool(suite_name) and suite_name not in {suite.name for suite in suites},
        "hardware": hardware,
        "base_ref": base_ref,
        "head_ref": head_ref,
        "tags": selectors.release_tags(),
    }
    status = 200
    if base_ref and head_ref:
        try:
            comparison = comparison_get(
                base_ref=base_ref, head_ref=head_ref, suite_name=suite_name, hardware_class=hardware or None
            )
        except ComparisonInvalid as error:
            context["error"], status = str(error), 400
        else:
            fmt = download_format(request)
            if fmt is not None:
                return table_response(
                    rows=[
                        {
                            "suite": comparison.suite.name,
                            "hardware": comparison.hardware_class,
                            "base": comparison.base.sha,
                            "head": comparison.head.sha,
                            "concurrency": row.concurrency,
                            "metric": row.metric,
                            "base_value": row.base,
                            "head_value": row.head,
                            "change_pct": row.change_pct,
                            "low_pct": row.estimate.low_pct if row.estimate else None,
                            "high_pct": row.estimate.high_pct if row.estimate else None,
                            "p_value": row.estimate.p_value if row.estimate else None,
                        }
                        for row in comparison.rows
                    ],
                    fmt=fmt,
                    filename=f"compare-{comparison.base.short_sha}-{comparison.head.short_sha}",
                )
            columns, levels = compare_table(rows=comparison.rows)
            context.update(
                comparison=comparison,
                headers=[metric_display(metric=column.metric) for column in columns],
                levels=levels,
                markdown=compare_markdown(rows=comparison.rows, columns=metric_columns()),
                swap_query=urlencode(
                    {
                        "base": head_ref,
                        "head": base_ref,
                        "suite": suite_name,
                        "hardware": comparison.hardware_class,
                    }
                ),
                hardware_classes=benchmark_selectors.suite_hardware_classes(suite=comparison.suite),
                load_curves=_compare_load_curves(comparison=comparison),
            )
    return render(request, "github/compare.html", context, status=status)
