/*
 * Draws every Plotly figure on a page. Figures are built by the server; these modules only place them
 * (chart-data.js, chart-axes.js, chart-labels.js, chart-legend.js and chart-views.js load before this one).
 *
 *   <div data-figure-url="/api/...">           fetches the figure JSON ({data, layout})
 *   <div data-figure-data="element-id">        reads it from a json_script block
 *   data-figure-kind="timeline" | "sparkline"  timelines share one zoom, kept in the URL as ?x0=&x1=
 *   data-figure-kind="plain"                   any other chart: its own zoom, not kept
 *   <div data-timeline-url="/api/...">         one request for every chart inside it that has a
 *     <div data-metric="m">                    data-metric: the response's figures[m]; a zoom fetches
 *                                              the range again at full resolution (?x0=&x1=&width=)
 *
 * A point whose customdata[0] is a path ("/commits/<sha>/") opens that page when clicked.
 * When every chart is drawn, body[data-charts-drawn] is "true".
 *
 * The chart data is asked for as soon as this script runs, which is before plotly.js (loaded after it)
 * is run: the request and the library's start overlap (a timeline page asks earlier still, from
 * timeline-request.js, and this takes that answer). Each chart is drawn once, at its final x range and
 * with its labels placed (chart-labels.js).
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
  var S = P.state;
  var commitsIndex = P.commitsIndex;
  var hydrate = P.hydrate;
  var fetchJson = P.fetchJson;
  var zoomFromUrl = P.zoomFromUrl;
  var zoomToUrl = P.zoomToUrl;
  var ticksFor = P.ticksFor;
  var rangeOf = P.rangeOf;
  var fitY = P.fitY;
  var viewOf = P.viewOf;
  var viewControls = P.viewControls;
  var labelAlerts = P.labelAlerts;
  var labelFigure = P.labelFigure;
  var shareLegend = P.shareLegend;
  var legendClicks = P.legendClicks;
  var roomForLabels = P.roomForLabels;
  var fullRange = P.fullRange;
  var isFullRange = P.isFullRange;
  var measureWidths = P.measureWidths;
  var ticksInside = P.ticksInside;
  // A timeline's x range when it was drawn whole: a double-click's reset back to it is a zoom-out.
  var wholeRangeOf = new WeakMap();

  // A timeline's layout over `range` (null: its whole span), from `layout` as drawn or sent: the x range
  // and its ticks, the y range fitted to the lines in view (below the markers' lane) and, when `table` is
  // given, ticks re-picked for the range. Autorange only where nothing is drawn.
  function layoutOver(element, figure, layout, range, table) {
    var whole = range ? null : fullRange(figure.data);
    if (whole) whole = roomForLabels(element, figure.data, layout, whole);
    layout = Object.assign({}, layout);
    if (layout.xaxis && layout.xaxis.visible === false) return layout;
    layout.xaxis = Object.assign({}, layout.xaxis,
      range || whole ? { range: (range || whole).slice(), autorange: false } : { autorange: true });
    var ticks = table === undefined ? null : ticksFor(layout.meta, range, table);
    if (ticks) {
      layout.xaxis.tickmode = "array";
      layout.xaxis.tickvals = ticks["xaxis.tickvals"];
      layout.xaxis.ticktext = ticks["xaxis.ticktext"];
    }
    // Small multiples have their panels fitted already (viewOf).
    if (!layout.yaxis3) {
      var yRange = fitY(figure.data, layout.yaxis, range, layout.meta);
      layout.yaxis = Object.assign({}, layout.yaxis, yRange ? { range: yRange, autorange: false } : { autorange: true });
    }
    ticksInside(element, layout);
    return layout;
  }

  // Zooming one timeline zooms them all to the same commits and records the range in the URL. The
  // timeline page asks the server for the range at full resolution and draws every chart once with it
  // (after FOLLOW_WAIT_MS without an answer, they follow with the points in hand first, one at a time,
  // until the answer comes).
  function onTimelineRelayout(source, event) {
    if (S.syncing) return;
    var range = rangeOf(event);
    if (!range) return;
    if (range === "auto" || isFullRange(range, wholeRangeOf.get(source))) range = null;
    zoomToUrl(range);
    if (S.group) zoomGroup(range);
    else follow(range);
  }

  // Every timeline drawn again over `range` with the points it holds, one per task while `going()`
  // says so (without it, all of them): an answer that comes meanwhile waits for one chart, not for all.
  function follow(range, going) {
    S.syncing += 1;
    measureWidths(S.timelines);
    var step = function (gd) {
      if (going && !going()) return null;
      var data = gd.data.map(function (trace) { return Object.assign({}, trace); });
      var layout = layoutOver(gd, { data: data }, gd.layout, range, S.commitsOf.get(gd));
      labelFigure(gd, data, layout);
      shareLegend(gd, data, layout);
      return window.Plotly.react(gd, data, layout);
    };
    var updates = going
      ? S.timelines.reduce(function (previous, gd) {
        return previous.then(function () {
          return new Promise(function (next) { window.setTimeout(next, 0); });
        }).then(function () { return step(gd); });
      }, Promise.resolve())
      : Promise.all(S.timelines.map(step));
    return updates.finally(function () {
      S.syncing -= 1;
    });
  }

  // The server thinned the lines to the charts' width: a zoom asks it for the range at full resolution,
  // a zoom out goes back to the first answer. Only the latest zoom's answer is drawn.
  var FOLLOW_WAIT_MS = 250;
  var zooms = 0;
  function zoomGroup(range) {
    var zoom = (zooms += 1);
    if (!range) {
      redrawGroup(S.group.full, null);
      return;
    }
    var answered = false;
    var waiting = function () { return zoom === zooms && !answered; };
    var interim = window.setTimeout(function () { if (waiting()) follow(range, waiting); }, FOLLOW_WAIT_MS);
    fetchGroup(range)
      .then(function (payload) {
        answered = true;
        window.clearTimeout(interim);
        if (zoom === zooms) return redrawGroup(payload, range);
      })
      .catch(function () {});
  }

  function groupUrl(range) {
    var url = new URL(S.group.url, window.location.href);
    url.searchParams.set("width", String(S.group.width));
    if (range) {
      url.searchParams.set("x0", (+range[0]).toFixed(1));
      url.searchParams.set("x1", (+range[1]).toFixed(1));
    }
    return url.toString();
  }

  function fetchGroup(range) {
    return fetchJson(groupUrl(range));
  }

  function redrawGroup(payload, range) {
    S.syncing += 1;
    measureWidths(S.timelines);
    var updates = S.timelines.map(function (gd) {
      var figure = payload.figures[gd.dataset.metric];
      if (!figure) return Promise.resolve();
      hydrate(figure, payload.commits);
      S.commitsOf.set(gd, commitsIndex(payload.commits));
      P.legendHidden(figure.data);
      figure = viewOf(gd, figure, range);
      var data = figure.data.map(function (trace) { return Object.assign({}, trace); });
      var layout = layoutOver(gd, figure, Object.assign({}, gd.layout, figure.layout, { meta: figure.layout.meta }),
        range, payload.commits);
      if (!range) wholeRangeOf.set(gd, layout.xaxis.range);
      labelFigure(gd, data, layout);
      shareLegend(gd, data, layout);
      return window.Plotly.react(gd, data, layout);
    });
    return Promise.all(updates).finally(function () {
      S.syncing -= 1;
      S.group.element.dataset.resolution = payload.decimated ? "decimated" : "full";
      S.group.element.dataset.range = range ? range.join(",") : "";
    });
  }

  var ZOOM_COMMITS = 150;

  function openClickedPoint(event) {
    var point = event && event.points && event.points[0];
    var target = point && point.customdata && point.customdata[0];
    // Only this site's own pages: "/path", never "//host" or "/\\host", which browsers read as another site.
    if (typeof target === "string" && /^\/(?![\/\\])/.test(target)) window.location.assign(target);
    else if (target === "" && S.group && S.timelines.length) {
      // A thinned point: zoom every chart around it (the server then sends the range in full).
      window.Plotly.relayout(S.timelines[0], { "xaxis.range": [point.x - ZOOM_COMMITS, point.x + ZOOM_COMMITS] });
    }
  }

  function showProblem(element, message) {
    element.textContent = "";
    var note = document.createElement("p");
    note.className = "chart-problem";
    note.textContent = message;
    element.appendChild(note);
    element.dataset.drawn = "failed";
  }
  function draw(element, figure, table) {
    var kind = element.dataset.figureKind || "timeline";
    hydrate(figure, table || figure.commits);
    if (kind === "timeline") {
      S.commitsOf.set(element, commitsIndex(table || figure.commits));
      figure = viewOf(element, figure, zoomFromUrl());
    }
    var layout = figure.layout || {};
    var phone = window.matchMedia("(max-width: 600px)").matches;
    // On a phone a timeline's legend is one short line of levels: a small font, tight entries, a short
    // title, and the PR, tag and alert markers left to their own symbols (their hover names them). Other
    // charts' legends name their traces in words: only the font shrinks.
    if (phone && layout.legend && kind !== "timeline") {
      layout.legend = Object.assign({}, layout.legend, { font: { size: 10 }, tracegroupgap: 0 });
    } else if (phone && layout.legend) {
      layout.legend = Object.assign({}, layout.legend, {
        title: { text: "c=", font: { size: 10 } }, font: { size: 10 }, itemwidth: 30, tracegroupgap: 0,
        itemsizing: "constant",
      });
      (figure.data || []).forEach(function (trace) { if (trace.meta) trace.showlegend = false; });
    }
    // A phone has room for about three "date / sha" ticks lying flat: keep every other one.
    if (phone && kind === "plain" && layout.xaxis && layout.xaxis.tickvals && layout.xaxis.ticktext &&
        layout.xaxis.tickvals.length > 3) {
      layout.xaxis = Object.assign({}, layout.xaxis, {
        tickvals: layout.xaxis.tickvals.filter(function (_, index) { return index % 2 === 0; }),
        ticktext: layout.xaxis.ticktext.filter(function (_, index) { return index % 2 === 0; }),
      });
    }
    var config = { responsive: true, displaylogo: false };
    // On a phone the mode bar would cover the legend; a drag zooms and a double tap resets without it.
    if (kind === "sparkline" || phone) {
      config.displayModeBar = false;
    } else {
      config.modeBarButtonsToRemove = ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"];
    }
    if (kind === "timeline") {
      var zoom = zoomFromUrl();
      layout = layoutOver(element, figure, layout, zoom, zoom ? commitsIndex(table || figure.commits) : undefined);
      labelFigure(element, figure.data || [], layout);
      shareLegend(element, figure.data || [], layout);
    }
    element.textContent = "";
    return window.Plotly.newPlot(element, figure.data || [], layout, config).then(function (gd) {
      gd.on("plotly_click", openClickedPoint);
      S.commitsOf.set(gd, commitsIndex(table || figure.commits));
      if (kind === "timeline") {
        S.timelines.push(gd);
        if (!zoom) wholeRangeOf.set(gd, layout.xaxis && layout.xaxis.range);
        gd.on("plotly_relayout", function (event) { onTimelineRelayout(gd, event); });
        legendClicks(gd);
        labelAlerts(gd, function (event) { return !S.syncing && rangeOf(event) !== null; });
      }
      element.dataset.drawn = "true";
    });
  }

  // A chart's figure: asked for at once (see start), drawn once plotly.js has run.
  function load(element, ready) {
    var figure;
    if (element.dataset.figureData) {
      var block = document.getElementById(element.dataset.figureData);
      if (!block) return Promise.resolve(showProblem(element, "Chart data is missing."));
      figure = JSON.parse(block.textContent);
    } else {
      figure = fetchJson(element.dataset.figureUrl);
    }
    return Promise.all([figure, ready])
      .then(function (answers) {
        return draw(element, answers[0]);
      })
      .catch(function (error) {
        showProblem(element, "Could not load this chart: " + error.message);
      });
  }

  // After the browser has painted what is drawn so far (at once in a hidden tab, which paints nothing).
  function afterPaint() {
    return new Promise(function (resolve) {
      if (document.hidden) return resolve();
      window.requestAnimationFrame(function () { window.setTimeout(resolve, 0); });
    });
  }

  // The first chart (the page's widest, at the top) replaces its skeleton and is shown before the others
  // are drawn, so it appears at once rather than with the last; the others follow one after another
  // without a frame of their own in between (a frame is the whole page's style, layout and paint: 100 ms
  // of the bench's year timeline for the four of them, under load).
  function inTurn(charts, drawOne) {
    return charts.reduce(function (previous, chart, index) {
      return previous.then(index === 1 ? afterPaint : null).then(function () { return drawOne(chart); });
    }, Promise.resolve());
  }

  // A small timeline of the same kinds of traces, drawn out of sight and thrown away while the page's
  // chart data is still on its way: plotly.js compiles its drawing code on its first chart, which took
  // 150-250 ms of the first chart's draw (the same chart draws in 40-90 ms once warm), time the page
  // otherwise spends waiting.
  function warmUp(element) {
    var spare = document.createElement("div");
    spare.setAttribute("aria-hidden", "true");
    spare.style.cssText = "position:absolute;left:-10000px;top:0;width:600px;height:300px;visibility:hidden";
    element.appendChild(spare);
    var xs = [0, 1, 2, 3, 4, 5, 6, 7];
    var data = [
      { type: "scatter", mode: "lines", x: xs, y: [3, 1, 4, 1, 5, 9, 2, 6], name: "c=1", legendgroup: "c=1" },
      { type: "scatter", mode: "lines", x: [2, 2, NaN, 5, 5, NaN], y: [3, 5, NaN, 8, 10, NaN], legendgroup: "c=1",
        showlegend: false, hoverinfo: "skip", connectgaps: false },
      { type: "scatter", mode: "lines", x: [1, 1, null, 6, 6], y: [0, 1, null, 0, 1], yaxis: "y2",
        hoverinfo: "skip", showlegend: false, line: { dash: "dot" } },
      { type: "scatter", mode: "markers+text", x: [1, 6], y: [0.9, 0.9], yaxis: "y2", text: ["#1", ""],
        textposition: "middle right", marker: { symbol: "triangle-down", size: 10 }, name: "PRs", cliponaxis: false },
      { type: "scatter", mode: "markers", x: [3, 5], y: [0.71, 0.71], yaxis: "y2", showlegend: false,
        marker: { symbol: ["triangle-up", "triangle-down"], color: ["#dc2626", "#16a34a"], size: 11 }, cliponaxis: false },
    ];
    var layout = {
      height: 300, margin: { l: 64, r: 16, t: 12, b: 36 }, showlegend: true,
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      xaxis: { range: [-0.5, 7.5], tickmode: "array", tickvals: [0, 4], ticktext: ["Jan 1", "Jan 5"] },
      yaxis: { range: [0, 12] }, yaxis2: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
      annotations: [{ text: "#1", x: 1, xref: "x", y: 0.7, yref: "y2", showarrow: false }],
    };
    return window.Plotly.newPlot(spare, data, layout, { responsive: false, displaylogo: false })
      .then(function () { window.Plotly.purge(spare); })
      .catch(function () {})
      .finally(function () { spare.remove(); });
  }

  // The timeline page: one request for all its charts, thinned to the width of the widest.
  function loadGroup(element, ready) {
    var charts = Array.prototype.slice.call(element.querySelectorAll("[data-metric]"));
    var width = Math.max.apply(null, charts.map(function (chart) { return chart.clientWidth; }).concat([300]));
    S.group = { element: element, url: element.dataset.timelineUrl, width: Math.round(width), full: null,
      first: charts[0] || null };
    var zoom = zoomFromUrl();
    var first = fetchGroup(null).then(function (payload) { S.group.full = payload; return payload; });
    var answer = zoom ? fetchGroup(zoom) : first;
    var arrived = false;
    answer.then(function () { arrived = true; }, function () {});
    var warmed = ready.then(function () { if (!arrived) return warmUp(element); });
    return Promise.all([answer, first, ready, warmed])
      .then(function (payloads) {
        var payload = payloads[0];
        element.dataset.resolution = payload.decimated ? "decimated" : "full";
        return inTurn(charts, function (chart) {
          var figure = payload.figures[chart.dataset.metric];
          if (!figure) return showProblem(chart, "No chart for " + chart.dataset.metric + ".");
          return draw(chart, figure, payload.commits);
        });
      })
      .catch(function (error) {
        charts.forEach(function (chart) { showProblem(chart, "Could not load this chart: " + error.message); });
      });
  }

  // Resolved once the page's deferred scripts, plotly.js among them, have run; rejected when plotly.js
  // did not load.
  function plotlyReady() {
    return new Promise(function (resolve, reject) {
      var check = function () {
        if (window.Plotly) resolve();
        else reject(new Error("plotly.js did not load."));
      };
      if (window.Plotly || document.readyState === "complete") check();
      else document.addEventListener("DOMContentLoaded", check);
    });
  }

  // Runs as soon as the document is parsed, before plotly.js: the charts' requests leave now, their
  // drawing waits for the library.
  function start() {
    var elements = document.querySelectorAll("[data-figure-url], [data-figure-data]");
    var groups = document.querySelectorAll("[data-timeline-url]");
    if (!elements.length && !groups.length) {
      document.body.dataset.chartsDrawn = "true";
      return;
    }
    if (groups.length) viewControls();
    var ready = plotlyReady();
    var loads = Array.prototype.map.call(elements, function (element) { return load(element, ready); })
      .concat(Array.prototype.map.call(groups, function (element) { return loadGroup(element, ready); }));
    // Without plotly.js every chart says so, and the page is never marked drawn.
    Promise.all(loads.concat([ready])).then(function () {
      document.body.dataset.chartsDrawn = "true";
    }, function () {});
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
