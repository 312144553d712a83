"""Shape PR impacts and comparisons into the rows and cells the templates print; no queries here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from django.http import QueryDict
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from dashboard.benchmarks.compare import CompareRow, MetricColumn, change_pct_format
from dashboard.benchmarks.comparison import metric_columns
from dashboard.benchmarks.metrics import metric_display
from dashboard.benchmarks.models import HEADLINE_METRICS
from dashboard.benchmarks.statistics import ChangeEstimate
from dashboard.github.impact import CommitRef, MetricChange, PullImpact
from dashboard.web.routes import route_builder


@dataclass(frozen=True)
class ChangeCell:
    text: str
    css: str
    title: str
    interval: str = ""  # "−1.2 … +3.4 %", the 95 % interval
    runs: str = ""  # "1 → 3 runs"

    def table_cell(self) -> SafeString:
        """The cell as PR tables print it: a changelog of a hundred PRs has thousands, and a template loop
        over their fields was most of its time."""
        title = format_html(' title="{}"', self.title) if self.title else ""
        extra = (
            format_html('<small class="uncertainty">{}<br>{}</small>', self.interval, self.runs)
            if self.runs
            else ""
        )
        return format_html('<td class="num {}"{}>{}{}</td>', self.css, title, self.text, extra)


@dataclass(frozen=True)
class ImpactRow:
    """One concurrency level of one PR on one suite/hardware; the first row of a scope carries its span."""

    suite: str
    hardware_class: str
    concurrency: int
    cells: tuple[ChangeCell, ...]
    before: CommitRef
    after: CommitRef
    ambiguous: bool
    other_commits: int
    other_pull_numbers: tuple[int, ...]
    scope_rows: int  # rows of this scope when this is its first row, else 0
    # Where its scope's links go: the timeline, the two commits and their comparison (a changelog of a
    # hundred PRs has hundreds of scopes; reversing their routes in the template was a tenth of its time).
    timeline_href: str = ""
    before_href: str = ""
    after_href: str = ""
    compare_href: str = ""

    def scope_cell(self) -> SafeString:
        """The cell naming the row's suite and hardware class, its two commits and whether the PR is alone
        between them, spanning its scope's rows; empty on the scope's other rows. Built here rather than
        in the template: a changelog of a hundred PRs has hundreds, and their template was a third of
        its rendering."""
        if not self.scope_rows:
            return SafeString("")
        if self.ambiguous:
            numbers = ", ".join(f"#{number}" for number in self.other_pull_numbers)
            others = f": {numbers}" if numbers else ""
            plural = "" if self.other_commits == 1 else "s"
            verdict = format_html(
                '<span class="pill ambiguous" title="{} other commit{} in this range may have changed '
                'performance too{}">ambiguous · {} other</span>',
                self.other_commits,
                plural,
                others,
                self.other_commits,
            )
        else:
            verdict = SafeString(
                '<span class="pill exact" title="No other commit that could change performance lies between '
                'the two benchmarked commits">this PR alone</span>'
            )
        return format_html(
            '<td class="scope" rowspan="{}"><a href="{}">{}</a> <span class="pill hardware">{}</span>'
            '<div class="muted"><a href="{}"><code>{}</code></a> → <a href="{}"><code>{}</code></a> · '
            '<a class="compare-link" href="{}">compare</a></div>{}</td>',
            self.scope_rows,
            self.timeline_href,
            self.suite,
            self.hardware_class,
            self.before_href,
            self.before.short_sha,
            self.after_href,
            self.after.short_sha,
            self.compare_href,
            verdict,
        )

    def cells_html(self) -> SafeString:
        """The row's change cells, one per headline metric."""
        return SafeString("".join(cell.table_cell() for cell in self.cells))


def change_css(*, improvement_pct: float | None, significant: bool) -> str:
    """Colour only a change the runs show beyond the series' noise and the metric's minimum change."""
    if improvement_pct is None or not significant:
        return "muted"
    return "good" if improvement_pct > 0 else "bad"


def interval_format(estimate: ChangeEstimate | None) -> str:
    if estimate is None or estimate.low_pct is None or estimate.high_pct is None:
        return "no noise estimate yet"
    return f"{_signed(estimate.low_pct)} … {_signed(estimate.high_pct)} %"


def runs_format(estimate: ChangeEstimate | None) -> str:
    if estimate is None:
        return ""
    return f"{estimate.n_before} → {estimate.n_after} run{'s' if estimate.n_after != 1 else ''}"


def p_value_format(estimate: ChangeEstimate | None) -> str:
    if estimate is None or estimate.p_value is None:
        return "p n/a"
    return f"p {estimate.p_value:.2g}" if estimate.p_value >= 1e-4 else "p < 0.0001"


def _counts(estimate: ChangeEstimate | None) -> str:
    return f"n {estimate.n_before} → {estimate.n_after}" if estimate else ""


def _signed(value: float) -> str:
    return f"{'+' if value > 0 else '−' if value < 0 else '±'}{abs(value):.1f}"


def _verdict(estimate: ChangeEstimate | None) -> str:
    if estimate is None:
        return ""
    if estimate.significant:
        return "significant"
    return "within noise or below the metric's minimum change: not coloured"


def change_cell(change: MetricChange | None) -> ChangeCell:
    if change is None:
        return ChangeCell(text="–", css="muted", title="")
    display = metric_display(metric=change.metric)
    unit = f" {display.unit}" if display.unit else ""
    estimate = change.estimate
    return ChangeCell(
        text=change_pct_format(change.change_pct),
        css=change_css(improvement_pct=change.improvement_pct, significant=change.significant),
        title=f"{display.format(change.before)} → {display.format(change.after)}{unit} (medians); "
        f"95 % interval {interval_format(estimate)}, {p_value_format(estimate)}, {runs_format(estimate)}; "
        f"{_verdict(estimate)}",
        interval=interval_format(estimate),
        runs=runs_format(estimate),
    )


def impact_rows(*, impacts: Sequence[PullImpact]) -> list[ImpactRow]:
    rows = []
    commit_path = route_builder("web:commit", "0" * 40)
    compare_path = reverse("web:compare")
    timelines: dict[str, str] = {}
    for impact in impacts:
        if impact.suite not in timelines:
            timelines[impact.suite] = reverse("web:suite-timeline", args=[impact.suite])
        suite, hardware = quote(impact.suite, safe="/"), quote(impact.hardware_class, safe="/")
        for index, level in enumerate(impact.levels):
            rows.append(
                ImpactRow(
                    suite=impact.suite,
                    hardware_class=impact.hardware_class,
                    concurrency=level.concurrency,
                    cells=tuple(change_cell(change) for change in level.changes),
                    before=impact.before,
                    after=impact.after,
                    ambiguous=impact.ambiguous,
                    other_commits=impact.other_commits,
                    other_pull_numbers=impact.other_pull_numbers,
                    scope_rows=len(impact.levels) if index == 0 else 0,
                    timeline_href=f"{timelines[impact.suite]}?hardware={hardware}",
                    before_href=commit_path(impact.before.sha),
                    after_href=commit_path(impact.after.sha),
                    compare_href=f"{compare_path}?base={impact.before.sha}&head={impact.after.sha}"
                    f"&suite={suite}&hardware={hardware}",
                )
            )
    return rows


def changelog_rows(*, impacts: Sequence[PullImpact], keep: str = "") -> tuple[list[ImpactRow], list[str]]:
    """A PR's rows on the changelog: every suite and hardware class it changed beyond noise (and `keep`,
    the one the page is sorted by) in full; the others only named, their figures on the PR's page. A
    hundred PRs on six pairs each would otherwise be 3 MB of mostly grey cells."""
    shown, folded = impacts_fold(impacts=impacts, keep=keep)
    return impact_rows(impacts=shown), [f"{impact.suite} · {impact.hardware_class}" for impact in folded]


def impacts_fold(
    *, impacts: Sequence[PullImpact], keep: str = ""
) -> tuple[list[PullImpact], list[PullImpact]]:
    """A PR's impacts split into those a changelog shows in full (some change beyond noise, or the
    `keep` scope, "suite/hardware", that the page is sorted by) and the rest, which it names in one line
    and leaves to the PR's page."""
    shown: list[PullImpact] = []
    folded: list[PullImpact] = []
    for impact in impacts:
        changed = any(
            change is not None and change.significant for level in impact.levels for change in level.changes
        )
        (shown if changed or f"{impact.suite}/{impact.hardware_class}" == keep else folded).append(impact)
    return shown, folded


@dataclass(frozen=True)
class CompareCell:
    base: str
    head: str
    change: ChangeCell
    runs: str  # "n 1 → 3"
    spread: str  # "spread ±0.4 → ±1.1 %": half the range of each side's runs, when there are repeats
    p_value: str


@dataclass(frozen=True)
class CompareLevel:
    concurrency: int
    cells: tuple[CompareCell | None, ...]  # one per shown column


def compare_table(*, rows: Sequence[CompareRow]) -> tuple[list[MetricColumn], list[CompareLevel]]:
    """Rows per concurrency, a column per headline metric present: the layout of DESIGN.md's table."""
    columns = [column for column in metric_columns() if any(row.metric == column.metric for row in rows)]
    by_key = {(row.concurrency, row.metric): row for row in rows}
    levels = []
    for concurrency in sorted({row.concurrency for row in rows}):
        cells: list[CompareCell | None] = []
        for column in columns:
            row = by_key.get((concurrency, column.metric))
            if row is None:
                cells.append(None)
                continue
            improvement = row.change_pct
            if improvement is not None and not metric_display(metric=row.metric).higher_is_better:
                improvement = -improvement
            significant = row.estimate is not None and row.estimate.significant
            cells.append(
                CompareCell(
                    base=f"{row.base:.{column.decimals}f}",
                    head=f"{row.head:.{column.decimals}f}",
                    change=ChangeCell(
                        text=change_pct_format(row.change_pct),
                        css=change_css(improvement_pct=improvement, significant=significant),
                        title=_verdict(row.estimate),
                        interval=interval_format(row.estimate),
                        runs=runs_format(row.estimate),
                    ),
                    runs=_counts(row.estimate),
                    spread=f"spread ±{row.base_spread_pct:.1f} → ±{row.head_spread_pct:.1f} %"
                    if row.base_spread_pct or row.head_spread_pct
                    else "",
                    p_value=p_value_format(row.estimate),
                )
            )
        levels.append(CompareLevel(concurrency=concurrency, cells=tuple(cells)))
    return columns, levels


@dataclass(frozen=True)
class ImpactSort:
    """How the tracking page orders its PRs: as in the issue, or by the change of ``metric`` at
    ``concurrency`` on one suite/hardware ``scope``; each choice falls back to a sensible default."""

    scopes: tuple[str, ...]
    scope: str
    levels: tuple[int, ...]
    metric: str
    concurrency: int | None
    by_impact: bool

    @property
    def suite(self) -> str:
        return self.scope.split("/", 1)[0]

    @property
    def hardware_class(self) -> str:
        return self.scope.split("/", 1)[1] if "/" in self.scope else ""

    def query(self, *, by_impact: bool) -> str:
        return urlencode(
            {
                "scope": self.scope,
                "metric": self.metric,
                "concurrency": self.concurrency or "",
                "sort": "impact" if by_impact else "order",
            }
        )


def impact_sort_parse(*, query: QueryDict, scopes: Sequence[tuple[str, str, tuple[int, ...]]]) -> ImpactSort:
    """``?sort=impact&scope=suite/hardware&metric=…&concurrency=N``: the first scope, output throughput and
    the highest level unless the query names valid ones."""
    levels_of = {f"{suite}/{hardware}": levels for suite, hardware, levels in scopes}
    scope = query.get("scope", "")
    scope = scope if scope in levels_of else next(iter(levels_of), "")
    levels = levels_of.get(scope, ())
    metric = query.get("metric", "")
    concurrency_text = query.get("concurrency", "")
    concurrency = int(concurrency_text) if concurrency_text.isdigit() else None
    concurrency = concurrency if concurrency in levels else (levels[-1] if levels else None)
    return ImpactSort(
        scopes=tuple(levels_of),
        scope=scope,
        levels=levels,
        metric=metric if metric in HEADLINE_METRICS else HEADLINE_METRICS[0],
        concurrency=concurrency,
        by_impact=query.get("sort") == "impact" and concurrency is not None,
    )
