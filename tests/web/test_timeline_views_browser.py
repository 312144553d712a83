"""The timeline as a triager reads it for steps, in Chromium: skeletons while it loads, the spread of a
commit's repeated runs, scales, small multiples and PR labels that never overlap."""

import itertools
from typing import cast

import pytest
from playwright.sync_api import Route

from dashboard.benchmarks.models import Suite
from dashboard.demo.history import DEMO_SUITE, REGRESSION_PR
from tests.factories import run_with_values
from tests.web import test_browser, test_triage_browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

browser = test_browser.browser
demo = test_triage_browser.demo  # the demo as `make demo` loads it

TIMELINE = "/suites/kimi-k3-8k1k/"
CHART = "document.querySelector('[data-metric=\"{metric}\"]')"


def test_each_chart_shows_a_skeleton_until_it_is_drawn(browser, build_history) -> None:
    build_history(commits=6, concurrencies=(1, 4))
    held: list[Route] = []
    browser.page.route("**/api/suites/**", lambda route: held.append(route))

    browser.page.goto(browser.base_url + TIMELINE)
    browser.page.wait_for_timeout(300)

    charts = browser.page.locator("[data-metric]")
    assert charts.count() == 5
    assert browser.page.locator("[data-metric] [data-skeleton]").count() == charts.count()
    assert browser.page.locator("[data-metric] [data-skeleton]").first.is_visible()
    assert held  # the charts' request is still waiting
    for route in held:
        route.continue_()
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")

    assert browser.page.locator("[data-skeleton]").count() == 0
    assert browser.page.locator("[data-metric].js-plotly-plot").count() == 5
    assert browser.console_errors == []


def test_a_commit_measured_three_times_is_drawn_with_a_bar_from_its_lowest_to_its_highest_run(
    browser, build_history
) -> None:
    commits = build_history(commits=6, concurrencies=(1,))
    suite = Suite.objects.get()
    repeated = commits[3]
    median = cast(float, repeated.measurements.get(series__metric="ttft_ms_mean").value)
    for value in (median - 40.0, median + 90.0):
        run_with_values(commit=repeated, suite=suite, values={(1, "ttft_ms_mean"): value})

    browser.open(TIMELINE)

    chart = CHART.format(metric="ttft_ms_mean")
    bars = browser.page.evaluate(
        f"""() => {{
          const gd = {chart};
          const yaxis = gd._fullLayout.yaxis;
          return Array.from(gd.querySelectorAll('.scatterlayer path.js-fill'))
            .filter(path => path.getAttribute('d'))
            .map(path => path.getBBox())
            .map(box => [yaxis.p2l(box.y + box.height), yaxis.p2l(box.y)]);
        }}"""
    )
    assert len(bars) == 1
    low, high = bars[0]
    assert low == pytest.approx(median - 40.0, rel=0.02) and high == pytest.approx(median + 90.0, rel=0.02)
    hover = browser.page.evaluate(
        f"""() => {{ const trace = {chart}.data[0];
          return trace.customdata[3][5]; }}"""
    )
    assert "median of 3 runs" in hover


SPREAD = """
(metric) => {
  const gd = document.querySelector(`[data-metric="${metric}"]`);
  return gd.data.filter(trace => trace.meta && trace.meta.kind === 'spread').map(trace => ({
    group: trace.legendgroup, x: Array.from(trace.meta.bars.x), low: Array.from(trace.meta.bars.low),
    high: Array.from(trace.meta.bars.high), yaxis: trace.yaxis || 'y', visible: trace.visible}));
}
"""
# The bars as drawn: each filled outline's width and height in pixels.
SPREAD_DRAWN = """
(metric) => Array.from(document.querySelectorAll(`[data-metric="${metric}"] .scatterlayer path.js-fill`))
  .map(path => { const box = path.getBBox(); return [box.width, box.height]; })
"""


def test_the_spread_of_a_repeated_commit_goes_with_its_level_relative_in_its_panel_and_hidden(
    browser, build_history
) -> None:
    commits = build_history(commits=6, concurrencies=(1, 16))
    suite = Suite.objects.get()
    measured = _measured(commits, 16)
    median, base = measured[3], measured[0]  # base: the first commit in view, as its line's
    for value in (median - 4.0, median + 9.0):
        run_with_values(commit=commits[3], suite=suite, values={(16, THROUGHPUT): value})
    browser.open(TIMELINE)

    # Its own trace, in its level's legend group, holding only the repeated commit: one filled outline
    # a pixel and a half wide, from its lowest run to its highest.
    (spread,) = browser.page.evaluate(SPREAD, THROUGHPUT)
    lines = {line["name"]: line for line in browser.page.evaluate(LINES, THROUGHPUT)}
    assert spread["group"] == "c=16" and spread["x"] == [lines["c=16"]["x"][3]]
    assert spread["low"] == pytest.approx([median - 4.0], abs=1e-3)
    assert spread["high"] == pytest.approx([median + 9.0], abs=1e-3)
    ((width, height),) = browser.page.evaluate(SPREAD_DRAWN, THROUGHPUT)
    assert 1.0 <= width <= 2.0 and height > 1.0

    browser.page.click("[data-scale=relative]")
    _wait_for_url(browser, "scale=relative")
    browser.page.wait_for_function(
        f"() => document.querySelector('[data-metric={THROUGHPUT}]').layout.yaxis.title.text.includes('%')"
    )
    (spread,) = browser.page.evaluate(SPREAD, THROUGHPUT)
    assert spread["low"] == pytest.approx([((median - 4.0) / base - 1) * 100], abs=1e-3)
    assert spread["high"] == pytest.approx([((median + 9.0) / base - 1) * 100], abs=1e-3)

    browser.page.check("[data-view-multiples]")
    _wait_for_url(browser, "multiples=1")
    browser.page.wait_for_function(
        f"() => document.querySelector('[data-metric={THROUGHPUT}]').data.some(trace => trace.yaxis === 'y3')"
    )
    lines = {line["name"]: line for line in browser.page.evaluate(LINES, THROUGHPUT)}
    (spread,) = browser.page.evaluate(SPREAD, THROUGHPUT)
    assert spread["yaxis"] == lines["c=16"]["yaxis"] != lines["c=1"]["yaxis"]

    # Hiding the level in the legend hides its bars too.
    browser.page.uncheck("[data-view-multiples]")
    chart = CHART.format(metric=THROUGHPUT)
    browser.page.wait_for_function(f"() => !{chart}.data.some(trace => trace.yaxis === 'y3')")
    browser.page.locator(f"[data-metric={THROUGHPUT}] .legend .traces", has_text="c=16").click()
    browser.page.wait_for_function(f"() => !{chart}.querySelector('.scatterlayer path.js-fill')")
    (spread,) = browser.page.evaluate(SPREAD, THROUGHPUT)
    assert spread["visible"] == "legendonly"
    assert browser.console_errors == []


# Each chart of the page: [its metric, whether it draws a legend, its traces' legend keys and visibility].
LEGENDS = """
() => Array.from(document.querySelectorAll('[data-metric].js-plotly-plot')).map(gd => [
  gd.dataset.metric, !!gd.querySelector('.legend'),
  gd.data.map(trace => [trace.legendgroup || trace.name, trace.visible === undefined || trace.visible])])
"""


def _hidden(browser: test_browser.BrowserPage) -> dict[str, frozenset[str]]:
    return {
        metric: frozenset(key for key, visible in traces if visible == "legendonly")
        for metric, _, traces in browser.page.evaluate(LEGENDS)
    }


def _wait_for_visible(browser: test_browser.BrowserPage, key: str, visible: object) -> None:
    """Until the last chart's trace of legend key `key` is `visible` (every chart is restyled in turn)."""
    browser.page.wait_for_function(
        """([key, visible]) => { const charts = document.querySelectorAll('[data-metric].js-plotly-plot');
          const trace = charts[charts.length - 1].data.find(trace => trace.legendgroup === key);
          return trace && (trace.visible === undefined ? true : trace.visible) === visible; }""",
        arg=[key, visible],
    )


def test_the_first_chart_s_legend_hides_a_level_in_every_chart_through_zooms_and_views(
    browser, build_history
) -> None:
    build_history(commits=12, concurrencies=(1, 4, 16))
    browser.open(TIMELINE)
    charts = browser.page.evaluate(LEGENDS)
    # One legend, the first chart's, for the five.
    assert [drawn for _, drawn, _ in charts] == [True, False, False, False, False]
    first = charts[0][0]
    entry = browser.page.locator(f"[data-metric={first}] .legend .traces")

    entry.filter(has_text="c=4").click()
    _wait_for_visible(browser, "c=4", "legendonly")
    assert set(_hidden(browser).values()) == {frozenset({"c=4"})}
    # A zoom brings new data for every chart: the level stays hidden, and so does it in another view.
    xs = browser.page.evaluate(LINES, first)[0]["x"]
    zoom = f"([x0, x1]) => Plotly.relayout({CHART.format(metric=first)}, {{'xaxis.range': [x0, x1]}})"
    browser.page.evaluate(zoom, [xs[2], xs[8]])
    browser.page.wait_for_function(f"() => {test_triage_browser.GROUP_RANGE} === '{xs[2]},{xs[8]}'")
    assert all(len(traces) >= 3 for _, _, traces in browser.page.evaluate(LEGENDS))
    assert set(_hidden(browser).values()) == {frozenset({"c=4"})}
    browser.page.click("[data-scale=relative]")
    _wait_for_url(browser, "scale=relative")
    first_chart = CHART.format(metric=first)
    browser.page.wait_for_function(f"() => {first_chart}.layout.yaxis.title.text.includes('%')")
    assert set(_hidden(browser).values()) == {frozenset({"c=4"})}

    # A second click shows it again everywhere (a click, not the second half of a double-click: the legend
    # reads two clicks on one entry within 300 ms as one); a double-click shows its level alone, and
    # another shows every level again.
    browser.page.wait_for_timeout(350)
    entry.filter(has_text="c=4").click()
    _wait_for_visible(browser, "c=4", True)
    assert set(_hidden(browser).values()) == {frozenset()}
    entry.filter(has_text="c=16").dblclick()
    _wait_for_visible(browser, "c=1", "legendonly")
    assert set(_hidden(browser).values()) == {frozenset({"c=1", "c=4"})}
    entry.filter(has_text="c=16").dblclick()
    _wait_for_visible(browser, "c=1", True)
    assert set(_hidden(browser).values()) == {frozenset()}
    assert browser.console_errors == []


def test_a_double_click_is_read_as_one_even_when_the_first_click_s_redraw_is_slow(
    browser, build_history
) -> None:
    build_history(commits=12, concurrencies=(1, 4, 16))
    browser.open(TIMELINE)
    first = browser.page.evaluate(LEGENDS)[0][0]
    # A long history's redraw after the first click holds the second click back for 400 ms.
    browser.page.evaluate(
        """() => { const update = Plotly.update;
          Plotly.update = function () { const until = performance.now() + 80;
            while (performance.now() < until) {} return update.apply(this, arguments); }; }"""
    )
    browser.page.locator(f"[data-metric={first}] .legend .traces").filter(has_text="c=16").dblclick()
    _wait_for_visible(browser, "c=1", "legendonly")
    assert set(_hidden(browser).values()) == {frozenset({"c=1", "c=4"})}
    assert browser.console_errors == []


# Each chart's y range beside the lines it must fit: [metric, range, {level: [low, high] in view}].
Y_FITS = """
() => Array.from(document.querySelectorAll('[data-metric].js-plotly-plot')).map(gd => {
  const [x0, x1] = gd.layout.xaxis.range;
  const levels = {};
  gd.data.filter(trace => !trace.meta).forEach(trace => {
    const ys = Array.from(trace.y).filter((y, i) => trace.x[i] >= x0 && trace.x[i] <= x1);
    levels[trace.name] = [Math.min(...ys), Math.max(...ys)];
  });
  return [gd.dataset.metric, gd.layout.yaxis.range, levels];
})
"""


def _fitted_to(browser: test_browser.BrowserPage, shown: set[str]) -> bool:
    """Whether every chart's y axis starts below the lines of the levels `shown` in view, and above every
    other level's (in this history each level lies wholly above the one before it)."""
    for _, (low, _high), levels in browser.page.evaluate(Y_FITS):
        others = [levels[name][1] for name in levels if name not in shown]
        if not low < min(levels[name][0] for name in shown) or any(low <= high for high in others):
            return False
    return True


def test_a_level_shown_alone_in_the_legend_gets_every_chart_s_y_axis_to_itself_through_zooms(
    browser, build_history
) -> None:
    build_history(commits=12, concurrencies=(1, 4, 16))
    browser.open(TIMELINE)
    every = {"c=1", "c=4", "c=16"}
    first = browser.page.evaluate(LEGENDS)[0][0]
    entry = browser.page.locator(f"[data-metric={first}] .legend .traces")
    xs = browser.page.evaluate(LINES, first)[0]["x"]
    zoom = f"([x0, x1]) => Plotly.relayout({CHART.format(metric=first)}, {{'xaxis.range': [x0, x1]}})"

    # Zoomed, every axis is fitted to the lines in view: all three levels.
    browser.page.evaluate(zoom, [xs[1], xs[9]])
    browser.page.wait_for_function(f"() => {test_triage_browser.GROUP_RANGE} === '{xs[1]},{xs[9]}'")
    assert _fitted_to(browser, every)
    # c=16 alone: no chart keeps room for the levels hidden (c=1's throughput is a fifth of c=16's).
    entry.filter(has_text="c=16").dblclick()
    _wait_for_visible(browser, "c=1", "legendonly")
    assert _fitted_to(browser, {"c=16"})
    # Another zoom brings the range's own data: still fitted to c=16 alone.
    browser.page.evaluate(zoom, [xs[2], xs[8]])
    browser.page.wait_for_function(f"() => {test_triage_browser.GROUP_RANGE} === '{xs[2]},{xs[8]}'")
    assert _fitted_to(browser, {"c=16"})
    # Every level again: the axes make room for them all.
    browser.page.wait_for_timeout(350)
    entry.filter(has_text="c=16").dblclick()
    _wait_for_visible(browser, "c=1", True)
    assert _fitted_to(browser, every)
    assert browser.console_errors == []


LINES = """
(metric) => {
  const gd = document.querySelector(`[data-metric="${metric}"]`);
  return gd.data.filter(trace => !trace.meta).map(trace => ({
    name: trace.name, x: Array.from(trace.x), y: Array.from(trace.y), yaxis: trace.yaxis || 'y'}));
}
"""
AXES = """
(metric) => {
  const full = document.querySelector(`[data-metric="${metric}"]`)._fullLayout;
  return Object.keys(full).filter(key => /^yaxis\\d*$/.test(key) && key !== 'yaxis2')
    .map(key => ({id: full[key]._id, type: full[key].type, domain: full[key].domain, range: full[key].range,
                  title: full[key].title.text}));
}
"""
THROUGHPUT = "output_throughput_tok_s"


def _measured(commits, level: int, metric: str = THROUGHPUT) -> list[float]:
    return [
        commit.measurements.get(series__metric=metric, series__concurrency=level).value for commit in commits
    ]


def _wait_for_url(browser, fragment: str) -> None:
    browser.page.wait_for_url(lambda url: fragment in url)


def test_relative_scale_shows_each_level_as_percent_of_the_first_commit_in_view_then_of_a_chosen_one(
    browser, build_history
) -> None:
    commits = build_history(commits=8, concurrencies=(1, 16))
    browser.open(TIMELINE)

    browser.page.click("[data-scale=relative]")
    _wait_for_url(browser, "scale=relative")
    browser.page.wait_for_function(
        f"() => document.querySelector('[data-metric={THROUGHPUT}]').layout.yaxis.title.text.includes('%')"
    )

    for line, level in zip(browser.page.evaluate(LINES, THROUGHPUT), (1, 16), strict=True):
        values = _measured(commits, level)
        assert line["y"] == pytest.approx([(value / values[0] - 1) * 100 for value in values], abs=1e-3)

    # Zoomed, the base is the first commit in the window.
    browser.page.evaluate(
        "([low, high]) => Plotly.relayout(document.querySelector('.js-plotly-plot'), "
        "{'xaxis.range': [low, high]})",
        [commits[2].position - 0.5, commits[6].position + 0.5],
    )
    _wait_for_url(browser, "x0=")
    browser.page.wait_for_function(
        f"() => document.querySelector('[data-metric={THROUGHPUT}]').data[0].y[2] === 0"
    )
    values = _measured(commits, 16)
    assert browser.page.evaluate(LINES, THROUGHPUT)[1]["y"] == pytest.approx(
        [(value / values[2] - 1) * 100 for value in values], abs=1e-3
    )

    base = commits[3].sha
    browser.page.fill("[data-view-base]", base[:10])
    browser.page.press("[data-view-base]", "Enter")
    _wait_for_url(browser, f"base={base[:10]}")
    browser.page.wait_for_function(
        f"() => document.querySelector('[data-metric={THROUGHPUT}]').data[0].y[3] === 0"
    )
    for line, level in zip(browser.page.evaluate(LINES, THROUGHPUT), (1, 16), strict=True):
        values = _measured(commits, level)
        assert line["y"] == pytest.approx([(value / values[3] - 1) * 100 for value in values], abs=1e-3)
    assert browser.console_errors == []


def test_log_scale_sets_a_logarithmic_y_axis_and_is_kept_in_a_permalink(browser, build_history) -> None:
    build_history(commits=6, concurrencies=(1, 16))
    browser.open(TIMELINE)
    assert {axis["type"] for axis in browser.page.evaluate(AXES, THROUGHPUT)} == {"linear"}

    browser.page.click("[data-scale=log]")
    _wait_for_url(browser, "scale=log")
    browser.page.wait_for_function(
        f"() => document.querySelector('[data-metric={THROUGHPUT}]')._fullLayout.yaxis.type === 'log'"
    )

    browser.open(browser.page.url.removeprefix(browser.base_url))
    assert {axis["type"] for axis in browser.page.evaluate(AXES, "ttft_ms_mean")} == {"log"}
    assert browser.page.get_attribute("[data-scale=log]", "aria-pressed") == "true"
    # Applying the filters keeps the scale.
    with browser.page.expect_navigation():
        browser.page.click("form.filters button[type=submit]")
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")
    assert "scale=log" in browser.page.url
    assert {axis["type"] for axis in browser.page.evaluate(AXES, THROUGHPUT)} == {"log"}


def test_small_multiples_draw_each_concurrency_in_its_own_panel_fitted_to_its_own_values(
    browser, build_history
) -> None:
    commits = build_history(commits=6, concurrencies=(1, 4, 16))
    browser.open(TIMELINE)

    browser.page.check("[data-view-multiples]")
    _wait_for_url(browser, "multiples=1")
    browser.page.wait_for_function(
        f"() => document.querySelector('[data-metric={THROUGHPUT}]').data.some(trace => trace.yaxis === 'y3')"
    )

    lines = browser.page.evaluate(LINES, THROUGHPUT)
    axes = {axis["id"]: axis for axis in browser.page.evaluate(AXES, THROUGHPUT)}
    assert len({line["yaxis"] for line in lines}) == 3 == len(axes)
    domains = sorted(axes[line["yaxis"]]["domain"] for line in lines)
    assert all(lower[1] <= upper[0] for lower, upper in itertools.pairwise(domains))
    for line, level in zip(lines, (1, 4, 16), strict=True):
        low, high = axes[line["yaxis"]]["range"]
        values = _measured(commits, level)
        # Each panel spans its own level's values, not every level's: c=16 does not flatten c=1.
        assert low <= min(values) and max(values) <= high
        assert high - low < 2 * (max(values) - min(values)) + 1e-6
        assert axes[line["yaxis"]]["title"] == f"c={level}"
    # Resized, the card still holds every panel.
    browser.page.set_viewport_size({"width": 1100, "height": 900})
    browser.page.wait_for_timeout(800)
    assert browser.page.evaluate(
        f"""() => {{ const gd = document.querySelector('[data-metric={THROUGHPUT}]');
          const plot = gd.querySelector('.main-svg').getBoundingClientRect();
          const card = gd.closest('.card').getBoundingClientRect();
          return plot.height >= 380 && plot.bottom <= card.bottom; }}"""
    )


PR_LABELS = """
(metric) => {
  const gd = document.querySelector(`[data-metric="${metric}"]`);
  const alerts = gd.data.find(trace => trace.meta && trace.meta.kind === 'alerts');
  return {
    markers: alerts ? alerts.customdata.filter(point => point[2]).length : 0,
    rows: (gd.layout.annotations || []).filter(note => note.name === 'pr-label').map(note => note.yshift),
    boxes: Array.from(gd.querySelectorAll('g.annotation'))
      .filter(note => /^#\\d+$/.test(note.textContent.trim()))
      .map(note => { const box = note.getBoundingClientRect();
                     return {text: note.textContent.trim(), left: box.left, right: box.right,
                             top: box.top, bottom: box.bottom}; }),
    beside: Array.from(gd.querySelectorAll('.textpoint text'))
      .filter(text => text.textContent.trim())
      .map(text => { const box = text.getBoundingClientRect();
                     return {text: text.textContent, left: box.left, right: box.right,
                             top: box.top, bottom: box.bottom}; }),
    // The glyphs of the traces whose points carry those labels.
    glyphs: Array.from(gd.querySelectorAll('.scatterlayer .trace'))
      .filter(trace => trace.querySelector('.textpoint text'))
      .flatMap(trace => Array.from(trace.querySelectorAll('.points path.point')))
      .map(glyph => { const box = glyph.getBoundingClientRect();
                      return {left: box.left, right: box.right, top: box.top, bottom: box.bottom}; }),
    legend: gd.querySelector('.legend') && gd.querySelector('.legend').getBoundingClientRect().right,
    card: gd.getBoundingClientRect().right,
  };
}
"""


def _overlap(one: dict, other: dict) -> bool:
    return (
        one["left"] < other["right"]
        and other["left"] < one["right"]
        and one["top"] < other["bottom"]
        and other["top"] < one["bottom"]
    )


# Records every Plotly call that draws a chart again, by chart: (call, metric).
PLOTLY_CALLS = """
(() => {
  window.plotlyCalls = [];
  let plotly;
  Object.defineProperty(window, 'Plotly', {
    configurable: true,
    get() { return plotly; },
    set(value) {
      plotly = value;
      ['newPlot', 'react', 'relayout', 'restyle', 'update'].forEach((name) => {
        const call = value[name];
        value[name] = function (gd, ...rest) {
          window.plotlyCalls.push([name, gd && gd.dataset ? gd.dataset.metric : null]);
          return call.call(this, gd, ...rest);
        };
      });
    },
  });
})();
"""


def test_plotly_warms_up_out_of_sight_while_the_chart_data_is_on_its_way(browser, build_history) -> None:
    build_history(commits=6, concurrencies=(1, 16))
    browser.page.add_init_script(PLOTLY_CALLS)
    held: list[Route] = []
    browser.page.route("**/api/suites/**", lambda route: held.append(route))

    browser.page.goto(browser.base_url + TIMELINE)
    browser.page.wait_for_function("() => window.plotlyCalls && window.plotlyCalls.length === 1")
    browser.page.wait_for_timeout(200)

    # One draw of no chart of the page, thrown away: the charts still show their skeletons.
    assert browser.page.evaluate("() => window.plotlyCalls") == [["newPlot", None]]
    assert browser.page.locator(".js-plotly-plot").count() == 0
    assert browser.page.locator("[data-metric] [data-skeleton]").count() == 5
    for route in held:
        route.continue_()
    browser.page.wait_for_function("() => document.body.dataset.chartsDrawn === 'true'")
    assert browser.page.locator(".js-plotly-plot").count() == 5
    assert browser.console_errors == []


@pytest.mark.parametrize("width", [1000, 390])
def test_markers_are_labelled_with_their_pr_and_no_two_labels_overlap(browser, demo, width) -> None:
    browser.page.add_init_script(PLOTLY_CALLS)
    browser.page.set_viewport_size({"width": width, "height": 900})
    browser.open(f"/suites/{DEMO_SUITE}/")

    # Each chart is drawn once, its labels placed before: no relayout or restyle pass after the draw.
    browser.page.wait_for_timeout(300)
    metrics = browser.page.evaluate(
        "() => Array.from(document.querySelectorAll('[data-metric]'), c => c.dataset.metric)"
    )
    calls = browser.page.evaluate("() => window.plotlyCalls")
    assert [call for call in calls if call[1]] == [["newPlot", metric] for metric in metrics]
    # Besides the charts, at most the library's warm-up, drawn out of sight while the data was on its way.
    assert [call for call in calls if not call[1]] in ([], [["newPlot", None]])

    for metric in (THROUGHPUT, "ttft_ms_mean"):
        found = browser.page.evaluate(PR_LABELS, metric)
        boxes = found["boxes"]
        assert boxes, metric
        assert all(not _overlap(one, other) for one, other in itertools.combinations(boxes, 2)), metric
        # The PR and tag labels beside the tracking markers at the top neither.
        beside = found["beside"]
        assert beside, metric
        assert all(not _overlap(one, other) for one, other in itertools.combinations(beside, 2)), metric
        # Nor does a label run into the next marker of its row (its own marker sits left of it).
        clashes = [
            (label["text"], glyph)
            for label in beside
            for glyph in found["glyphs"]
            if glyph["left"] > label["left"] and _overlap(label, glyph)
        ]
        assert clashes == [], (metric, clashes)
        # Every level's legend entry fits on the card (the first chart's legend, which serves them all).
        assert (found["legend"] is None) == (metric != THROUGHPUT), metric
        assert found["legend"] is None or found["legend"] <= found["card"], metric
        # Crowded at this width: some labels went up a row or were left to the hover.
        assert len(set(found["rows"])) > 1 or len(boxes) < found["markers"], metric
    labels = [box["text"] for box in browser.page.evaluate(PR_LABELS, THROUGHPUT)["boxes"]]
    assert f"#{REGRESSION_PR}" in labels
    assert browser.console_errors == []


def test_an_x_label_that_would_run_past_the_chart_is_left_out_and_the_others_kept(
    browser, build_history
) -> None:
    build_history(commits=12, concurrencies=(1,))
    browser.open(TIMELINE)
    (line,) = browser.page.evaluate(LINES, "ttft_ms_mean")
    # Eight commits in view, fewer than three days: a tick per commit, the last at the plot's right edge,
    # where half its label would lie past the chart.
    browser.open(f"{TIMELINE}?x0={line['x'][2]}&x1={line['x'][9]}")

    labels = browser.page.evaluate(
        f"""() => {{
          const gd = {CHART.format(metric="ttft_ms_mean")};
          const chart = gd.getBoundingClientRect();
          return Array.from(gd.querySelectorAll('.xtick text')).map(text => {{
            const box = text.getBoundingClientRect();
            return [text.textContent, box.left - chart.left, chart.right - box.right];
          }});
        }}"""
    )
    assert len(labels) == 7, labels
    assert all(left >= 0 and right >= 0 for _, left, right in labels), labels
