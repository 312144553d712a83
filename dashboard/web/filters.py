"""The timeline's filters, read from and written to the query string so that every view is a permalink."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.http import QueryDict
from django.utils.http import urlencode

from dashboard.web.markers import tracking_query_pairs, tracking_selection_parse

STATISTICS: tuple[str, ...] = ("mean", "p50", "p90", "p99")


class FilterInvalid(ValueError):
    """A query-string filter that cannot be understood; the message says which and why."""


@dataclass(frozen=True)
class TimelineFilters:
    hardware_class: str
    date_from: date | None = None
    date_to: date | None = None
    concurrencies: tuple[int, ...] = ()
    # Tracking issues whose PRs are drawn, by label (owner/name#N); None draws every one.
    tracking: frozenset[str] | None = None
    # Which statistic of TTFT, ITL, TPOT and latency the timeline charts.
    statistic: str = "mean"

    def query_string(self) -> str:
        """The canonical query string of these filters (without the zoom, which only the page keeps)."""
        pairs: list[tuple[str, str]] = [("hardware", self.hardware_class)]
        if self.date_from:
            pairs.append(("from", self.date_from.isoformat()))
        if self.date_to:
            pairs.append(("to", self.date_to.isoformat()))
        pairs += [("concurrency", str(level)) for level in self.concurrencies]
        pairs += tracking_query_pairs(selection=self.tracking)
        if self.statistic != "mean":
            pairs.append(("stat", self.statistic))
        return urlencode(pairs)


@dataclass(frozen=True)
class FilterProblem:
    """A filter value the page cannot use as asked: which parameter, the value, and what the page did."""

    name: str
    value: str
    reason: str
    consequence: str = ""

    @property
    def message(self) -> str:
        return f"{self.reason}: {self.consequence}" if self.consequence else self.reason


@dataclass(frozen=True)
class TimelineRequest:
    """The filters a timeline page applies, and what it could not use as asked (said on the page)."""

    filters: TimelineFilters
    problems: tuple[FilterProblem, ...] = ()

    def unknown(self, name: str) -> list[str]:
        """The values of parameter `name` the page could not use, for its controls to show them marked."""
        return [problem.value for problem in self.problems if problem.name == name]


def _date(query: QueryDict, name: str) -> date | None:
    value = query.get(name, "").strip()
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise FilterInvalid(f"'{name}' must be a date as YYYY-MM-DD, not {value!r}") from None


def _level(value: str) -> int:
    try:
        level = int(value)
    except ValueError:
        raise FilterInvalid(f"'concurrency' must be a whole number, not {value!r}") from None
    if level < 1:
        raise FilterInvalid(f"'concurrency' must be at least 1, not {level}")
    return level


def timeline_request_read(*, query: QueryDict, default_hardware: str) -> TimelineRequest:
    """Filters from `?hardware=&from=YYYY-MM-DD&to=YYYY-MM-DD&concurrency=N&concurrency=M&stat=p99`; a value
    that cannot be understood is left out and named in `problems`, the others still apply."""
    problems: list[FilterProblem] = []

    def ignored(name: str, value: str, reason: str) -> None:
        problems.append(FilterProblem(name=name, value=value, reason=reason, consequence="ignored"))

    dates: dict[str, date | None] = {}
    for name in ("from", "to"):
        try:
            dates[name] = _date(query, name)
        except FilterInvalid as error:
            dates[name] = None
            ignored(name, query.get(name, ""), str(error))
    date_from, date_to = dates["from"], dates["to"]
    if date_from and date_to and date_from > date_to:
        ignored("range", f"{date_from}..{date_to}", f"'from' ({date_from}) is after 'to' ({date_to})")
        date_from = date_to = None
    levels = []
    for value in query.getlist("concurrency"):
        if value.strip():
            try:
                levels.append(_level(value))
            except FilterInvalid as error:
                ignored("concurrency", value, str(error))
    statistic = query.get("stat", "").strip() or "mean"
    if statistic not in STATISTICS:
        reason = f"'stat' must be one of {', '.join(STATISTICS)}, not {statistic!r}"
        problems.append(
            FilterProblem(name="stat", value=statistic, reason=reason, consequence="charting the mean")
        )
        statistic = "mean"
    filters = TimelineFilters(
        statistic=statistic,
        hardware_class=query.get("hardware", "").strip() or default_hardware,
        date_from=date_from,
        date_to=date_to,
        concurrencies=tuple(sorted(set(levels))),
        tracking=tracking_selection_parse(query=query),
    )
    return TimelineRequest(filters=filters, problems=tuple(problems))


def timeline_filters_parse(*, query: QueryDict, default_hardware: str) -> TimelineFilters:
    """The filters of `timeline_request_read`; raises FilterInvalid on the first value it cannot use."""
    request = timeline_request_read(query=query, default_hardware=default_hardware)
    if request.problems:
        raise FilterInvalid(request.problems[0].reason)
    return request.filters


def timeline_problems_unknown(
    *, filters: TimelineFilters, measured: dict[str, tuple[int, ...]]
) -> tuple[FilterProblem, ...]:
    """Well-formed values that name nothing measured: a hardware class the suite never ran on, a
    concurrency level it never measured there. `measured`: concurrency levels by hardware class."""
    if not measured:
        return ()  # nothing measured at all: the page says so already
    levels = measured.get(filters.hardware_class)
    if levels is None:
        reason = f"No measurements of this suite on hardware {filters.hardware_class!r}"
        consequence = f"it is measured on {', '.join(sorted(measured))}"
        return (
            FilterProblem(
                name="hardware", value=filters.hardware_class, reason=reason, consequence=consequence
            ),
        )
    return tuple(
        FilterProblem(
            name="concurrency",
            value=str(level),
            reason=f"Concurrency {level} is not measured on {filters.hardware_class}",
            consequence=f"its levels are {', '.join(str(known) for known in levels)}",
        )
        for level in filters.concurrencies
        if level not in levels
    )


@dataclass(frozen=True)
class TimelineSelection:
    """What a timeline page says about its filters: every problem, and each value asked for that the page
    cannot use, kept for its control to show marked rather than replaced by another value."""

    problems: tuple[FilterProblem, ...]
    unknown_hardware: str
    unknown_levels: tuple[int, ...]
    unknown_statistic: str
    unreadable_dates: dict[str, str]


def timeline_selection(*, asked: TimelineRequest, measured: dict[str, tuple[int, ...]]) -> TimelineSelection:
    """The problems of `asked` and the unknown values it names. `measured`: concurrency levels by hardware
    class."""
    filters = asked.filters
    unknown = timeline_problems_unknown(filters=filters, measured=measured)
    hardware_measured = filters.hardware_class in measured
    return TimelineSelection(
        problems=(*asked.problems, *unknown),
        unknown_hardware=filters.hardware_class if measured and not hardware_measured else "",
        # On a hardware class it never ran on, no level is known: each asked for stays, marked.
        unknown_levels=filters.concurrencies
        if not hardware_measured
        else tuple(int(problem.value) for problem in unknown if problem.name == "concurrency"),
        unknown_statistic=next(iter(asked.unknown("stat")), ""),
        unreadable_dates={name: next(iter(asked.unknown(name)), "") for name in ("from", "to")},
    )
