"""The timeline's filters, read from and written to the query string so that every view is a permalink."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.http import QueryDict
from django.utils.http import urlencode

from dashboard.github.timeline import tracking_query_pairs, tracking_selection_parse

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


def _date(query: QueryDict, name: str) -> date | None:
    value = query.get(name, "").strip()
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise FilterInvalid(f"'{name}' must be a date as YYYY-MM-DD, not {value!r}") from None


def timeline_filters_parse(*, query: QueryDict, default_hardware: str) -> TimelineFilters:
    """Filters from `?hardware=&from=YYYY-MM-DD&to=YYYY-MM-DD&concurrency=N&concurrency=M&stat=p99`."""
    date_from, date_to = _date(query, "from"), _date(query, "to")
    if date_from and date_to and date_from > date_to:
        raise FilterInvalid(f"'from' ({date_from}) is after 'to' ({date_to})")
    levels = []
    for value in query.getlist("concurrency"):
        if not value.strip():
            continue
        try:
            level = int(value)
        except ValueError:
            raise FilterInvalid(f"'concurrency' must be a whole number, not {value!r}") from None
        if level < 1:
            raise FilterInvalid(f"'concurrency' must be at least 1, not {level}")
        levels.append(level)
    statistic = query.get("stat", "").strip() or "mean"
    if statistic not in STATISTICS:
        raise FilterInvalid(f"'stat' must be one of {', '.join(STATISTICS)}, not {statistic!r}")
    return TimelineFilters(
        statistic=statistic,
        hardware_class=query.get("hardware", "").strip() or default_hardware,
        date_from=date_from,
        date_to=date_to,
        concurrencies=tuple(sorted(set(levels))),
        tracking=tracking_selection_parse(query=query),
    )
