"""Shape selector results into the rows and cells the templates print; no queries here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from django.utils.http import urlencode

from dashboard.benchmarks.direction import change_kind
from dashboard.benchmarks.metrics import MetricDisplay, metric_display
from dashboard.benchmarks.models import HEADLINE_METRICS, WHOLE_RUN
from dashboard.benchmarks.overview_selectors import PairKey, SparklineSeries, SuiteOverview
from dashboard.benchmarks.selectors import MeasurementRow
from dashboard.benchmarks.statistics import commit_value
from dashboard.github.commit_changes import CommitChanges
from dashboard.github.impact import MetricChange
from dashboard.web.figures import SparklineShape, sparkline_shape
from dashboard.web.impact_tables import ChangeCell, change_cell

HEADLINE_DISPLAYS: tuple[MetricDisplay, ...] = tuple(metric_display(metric=m) for m in HEADLINE_METRICS)


@dataclass(frozen=True)
class Cell:
    text: str
    title: str = ""
    change: ChangeCell | None = None  # against the benchmarked commit before, with its uncertainty


@dataclass(frozen=True)
class LevelRow:
    concurrency: int
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class MeasurementBlock:
    """One suite on one hardware class at one commit: headline metrics per level, and every metric."""

    suite: str
    hardware: str
    headline_rows: tuple[LevelRow, ...]
    concurrencies: tuple[int, ...]
    all_metric_rows: tuple[tuple[MetricDisplay, tuple[Cell, ...]], ...]
    previous_sha: str = ""  # the commit the changes are measured against
    changed: bool = False  # a headline change beyond the series' noise and the metric's minimum
    largest_change_pct: float = 0.0  # the largest such change, in % either way

    @property
    def fragment_query(self) -> str:
        """The query string that asks for this block alone (a folded block is fetched when opened)."""
        return urlencode({"suite": self.suite, "hardware": self.hardware})


def _cell(display: MetricDisplay, samples: Sequence[float] | None) -> Cell:
    if not samples:
        return Cell("–")
    value = commit_value(samples)
    if value.runs == 1:
        return Cell(display.format(value.value))
    runs = ", ".join(display.format(sample) for sample in samples)
    return Cell(
        f"{display.format(value.value)}*",
        title=f"median of {value.runs} runs ({display.format(value.low)} to {display.format(value.high)}): "
        f"{runs}",
    )


def _with_change(cell: Cell, change: MetricChange | None) -> Cell:
    return replace(cell, change=change_cell(change)) if change is not None else cell


def _metric_order(metric: str) -> tuple[int, str]:
    return (HEADLINE_METRICS.index(metric) if metric in HEADLINE_METRICS else len(HEADLINE_METRICS), metric)


def commit_measurement_blocks(
    *, rows: Sequence[MeasurementRow], changes: Sequence[CommitChanges] = ()
) -> list[MeasurementBlock]:
    """Group a commit's measurements by suite and hardware; a repeated run's value is the median, marked;
    each headline value carries its change against the benchmarked commit before, when there is one."""
    changes_of = {(found.suite, found.hardware_class): found for found in changes}
    grouped: dict[tuple[str, str], dict[tuple[int, str], list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for row in rows:
        grouped[(row.suite, row.hardware)][(row.concurrency, row.metric)].append(row.value)
    blocks = []
    for (suite, hardware), values in grouped.items():
        concurrencies = tuple(sorted({concurrency for concurrency, _ in values}))
        metrics = sorted({metric for _, metric in values}, key=_metric_order)
        found = changes_of.get((suite, hardware))
        significant = [
            abs(change.change_pct or 0.0)
            for change in (found.changes.values() if found else ())
            if change.significant
        ]
        blocks.append(
            MeasurementBlock(
                suite=suite,
                hardware=hardware,
                previous_sha=found.previous.sha if found else "",
                changed=bool(significant),
                largest_change_pct=max(significant, default=0.0),
                concurrencies=concurrencies,
                headline_rows=tuple(
                    LevelRow(
                        concurrency=concurrency,
                        cells=tuple(
                            _with_change(
                                _cell(display, values.get((concurrency, display.key))),
                                found.changes.get((concurrency, display.key)) if found else None,
                            )
                            for display in HEADLINE_DISPLAYS
                        ),
                    )
                    # Level 0 holds whole-run metrics (capacity, accuracy): no headline row of its own.
                    for concurrency in concurrencies
                    if concurrency
                ),
                all_metric_rows=tuple(
                    (
                        metric_display(metric=metric),
                        tuple(
                            _cell(metric_display(metric=metric), values.get((concurrency, metric)))
                            for concurrency in concurrencies
                        ),
                    )
                    for metric in metrics
                ),
            )
        )
    # The suites and hardware classes that changed first, the largest change first; the rest as read.
    blocks.sort(key=lambda block: (not block.changed, -block.largest_change_pct))
    return blocks


@dataclass(frozen=True)
class Sparkline:
    element_id: str
    shape: SparklineShape
    latest_text: str
    caption: str
    change_text: str
    change_is_good: bool | None


@dataclass(frozen=True)
class OverviewCard:
    overview: SuiteOverview
    rows: tuple[LevelRow, ...]
    sparkline: Sparkline | None
    timeline_href: str
    commit_href: str  # the latest commit's page
    open_regressions: int  # open regression groups with an alert on this suite and hardware class
    alerts_href: str  # the alerts list of this suite and hardware class
    # The suite's whole-run headline (label, value with its unit), such as a load curve's capacity.
    whole_run: tuple[tuple[str, str], ...] = ()


def _sparkline(series: SparklineSeries | None, element_id: str) -> Sparkline | None:
    if series is None or len(series.values) < 2:
        return None
    display = metric_display(metric=series.metric)
    first, last = series.values[0], series.values[-1]
    change = (last - first) / first * 100 if first else 0.0
    return Sparkline(
        element_id=element_id,
        latest_text=f"{display.format(last)} {display.unit}".strip(),
        shape=sparkline_shape(series=series),
        caption=f"{display.short_label.split(' ')[0]} at c={series.concurrency}, "
        f"last {len(series.values)} benchmarked commits",
        change_text=f"{change:+.1f} %",
        change_is_good=None
        if abs(change) < 0.05
        else change_kind(metric=series.metric, change_pct=change) == "improvement",
    )


def _latest_cell(overview: SuiteOverview, display: MetricDisplay, concurrency: int) -> Cell:
    value = overview.latest_values.get((display.key, concurrency))
    return _cell(display, None if value is None else [value])


# The overview lists a fleet's suites and hardware classes (hundreds) as cards up to OVERVIEW_FOLD_FROM;
# from there it shows OVERVIEW_SHOWN cards, those with the most open regressions, and folds the rest into
# one line each, whose card is fetched when it is opened (a first screenful, not a whole fleet).
OVERVIEW_FOLD_FROM = 24
OVERVIEW_SHOWN = 12


def overview_split(
    *, pairs: Sequence[PairKey], open_regressions: dict[tuple[str, str], int]
) -> tuple[list[PairKey], list[PairKey]]:
    """(shown as cards, folded), each in the order of `pairs`: every pair is shown below
    OVERVIEW_FOLD_FROM; from there the OVERVIEW_SHOWN with the most open regressions (by (suite name,
    hardware class)), the first in order among equals."""
    if len(pairs) < OVERVIEW_FOLD_FROM:
        return list(pairs), []
    ranked = sorted(
        range(len(pairs)),
        key=lambda index: (
            -open_regressions.get((pairs[index].suite.name, pairs[index].hardware_class), 0),
            index,
        ),
    )
    chosen = set(ranked[:OVERVIEW_SHOWN])
    return (
        [pair for index, pair in enumerate(pairs) if index in chosen],
        [pair for index, pair in enumerate(pairs) if index not in chosen],
    )


@dataclass(frozen=True)
class FoldedCard:
    """A suite and hardware class the overview folds into one line: its card is fetched when opened."""

    suite: str
    hardware_class: str
    open_regressions: int
    fragment_query: str  # the card's query string (suite and hardware)


def overview_folded(
    *, pairs: Sequence[PairKey], open_regressions: dict[tuple[str, str], int]
) -> list[FoldedCard]:
    return [
        FoldedCard(
            suite=pair.suite.name,
            hardware_class=pair.hardware_class,
            open_regressions=open_regressions.get((pair.suite.name, pair.hardware_class), 0),
            fragment_query=urlencode({"suite": pair.suite.name, "hardware": pair.hardware_class}),
        )
        for pair in pairs
    ]


def overview_cards(
    *,
    overviews: Sequence[SuiteOverview],
    sparklines: dict[tuple[int, str], SparklineSeries],
    suite_url: Callable[[str], str],
    commit_url: Callable[[str], str],
    alerts_url: str,
    open_regressions: dict[tuple[str, str], int],
) -> list[OverviewCard]:
    """A card per suite and hardware class, with its count of `open_regressions` by (suite name, hardware
    class); links built by `suite_url(name)`, `commit_url(sha)` and from `alerts_url`, each route reversed
    once rather than once a card (hundreds of cards)."""
    cards = []
    for overview in overviews:
        levels = sorted({concurrency for _, concurrency in overview.latest_values} - {WHOLE_RUN})
        whole_run = tuple(
            (display.label, f"{display.format(value)} {display.unit}".strip())
            for (metric, concurrency), value in sorted(overview.latest_values.items())
            if concurrency == WHOLE_RUN
            for display in [metric_display(metric=metric)]
        )
        rows = tuple(
            LevelRow(
                concurrency=concurrency,
                cells=tuple(_latest_cell(overview, display, concurrency) for display in HEADLINE_DISPLAYS),
            )
            for concurrency in levels
        )
        series = sparklines.get((overview.suite.pk, overview.hardware_class))
        latest = overview.latest_commit
        query = urlencode({"hardware": overview.hardware_class})
        cards.append(
            OverviewCard(
                overview=overview,
                rows=rows,
                whole_run=whole_run,
                sparkline=_sparkline(series, f"sparkline-{overview.suite.pk}-{overview.hardware_class}"),
                timeline_href=f"{suite_url(overview.suite.name)}?{query}",
                commit_href=commit_url(latest.sha) if latest else "",
                open_regressions=open_regressions.get((overview.suite.name, overview.hardware_class), 0),
                alerts_href=f"{alerts_url}?"
                + urlencode({"suite": overview.suite.name, "hardware": overview.hardware_class}),
            )
        )
    return cards
