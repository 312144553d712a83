/*
 * How the timeline's charts are viewed: absolute, relative to a commit (in %) or log scale, and small
 * multiples (a panel per concurrency), chosen on the page, kept in the URL and applied to the figures the
 * server sent without a new request.
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
  var S = P.state;
  var decode = P.decode;
  var ticksFor = P.ticksFor;
  var ticksInside = P.ticksInside;
  var visibleYRange = P.visibleYRange;
  var fitY = P.fitY;
  var zoomFromUrl = P.zoomFromUrl;
  var firstAtOrAfter = P.firstAtOrAfter;
  var fullRange = P.fullRange;
  var labelFigure = P.labelFigure;
  var shareLegend = P.shareLegend;
  var roomForLabels = P.roomForLabels;

  // How the timeline's charts are viewed, chosen on the page and kept in the URL, applied here to the
  // figures the server sent (no new request): ?scale=absolute|relative|log, &base=<sha> (relative to that
  // commit; the visible window's first commit when absent) and &multiples=1 (a panel per concurrency).
  var SCALES = ["absolute", "relative", "log"];
  var sources = new WeakMap(); // chart -> its figure as the server sent it (hydrated), before any view
  var view = viewFromUrl();

  function viewFromUrl() {
    var params = new URLSearchParams(window.location.search);
    var scale = params.get("scale");
    return {
      scale: SCALES.indexOf(scale) >= 0 ? scale : "absolute",
      base: (params.get("base") || "").trim().toLowerCase(),
      multiples: params.get("multiples") === "1",
    };
  }

  function viewToUrl() {
    var url = new URL(window.location.href);
    var values = { scale: view.scale === "absolute" ? "" : view.scale,
      base: view.scale === "relative" ? view.base : "", multiples: view.multiples ? "1" : "" };
    Object.keys(values).forEach(function (name) {
      if (values[name]) url.searchParams.set(name, values[name]);
      else url.searchParams.delete(name);
      // The filter form keeps the view when it reloads the page.
      document.querySelectorAll('input[type="hidden"][data-view-field="' + name + '"]').forEach(function (input) {
        input.value = values[name];
        input.disabled = !values[name];
      });
    });
    window.history.replaceState(window.history.state, "", url);
  }

  function viewIsPlain() {
    return view.scale === "absolute" && !view.multiples;
  }

  // The base commit's x, when it is one of the drawn commits; else null (the window's start is used).
  function baseX(table) {
    if (!view.base || !table || !table._xs) return null;
    for (var i = 0; i < table.sha.length; i += 1) {
      if (table.sha[i].indexOf(view.base) === 0) return table._xs[i];
    }
    return null;
  }

  // A line's value at the base: the base commit's point (or the last before it), else the first point in
  // view.
  function referenceOf(trace, base) {
    var xs = trace.x, at = firstAtOrAfter(xs, base.x);
    if (base.commit && (at === xs.length || xs[at] !== base.x) && at > 0) at -= 1;
    return trace.y[Math.min(at, xs.length - 1)];
  }

  // A line, or the spread bars of its repeated commits (their ends), as percentages of `reference` (its
  // line's value at the base).
  function relativeTrace(trace, reference, base) {
    if (!reference) return trace;
    var scaled = function (values) {
      return Array.prototype.map.call(decode(values), function (value) { return (value / reference - 1) * 100; });
    };
    var shown = Object.assign({}, trace, { y: scaled(trace.y) });
    var bars = trace.meta && trace.meta.bars;
    if (bars) {
      shown.meta = Object.assign({}, trace.meta, { bars: { x: bars.x, low: scaled(bars.low), high: scaled(bars.high) } });
    }
    if (trace.hovertemplate) {
      shown.hovertemplate = trace.hovertemplate.replace(/<b>%\{y:[^}]*\}[^<]*<\/b>/,
        "<b>%{y:+.2f} %</b> against " + base.label);
    }
    return shown;
  }

  // One panel per line, stacked top to bottom, the last on the primary y axis (the one the markers
  // overlay and the x axis sits on).
  function panelAxes(layout, lines, data) {
    var count = lines.length, gap = 0.05;
    var height = (1 - gap * (count - 1)) / count;
    layout.height = Math.max(300, 50 + count * 130);
    layout.showlegend = false;
    lines.forEach(function (trace, i) {
      var id = i === count - 1 ? "" : String(i + 3);
      var top = 1 - i * (height + gap);
      layout["yaxis" + id] = Object.assign({}, layout.yaxis, {
        domain: [Math.max(0, top - height), top], anchor: "x",
        title: { text: trace.name, font: layout.yaxis.title && layout.yaxis.title.font },
      });
      trace.yaxis = "y" + id;
    });
    data.forEach(function (trace) {
      if (!trace.meta || trace.meta.kind !== "spread") return;
      var line = lines.filter(function (item) { return item.legendgroup === trace.legendgroup; })[0];
      if (line) trace.yaxis = line.yaxis;
    });
  }

  // The figure as the current view shows it over `range` (null: everything), with every panel's y axis
  // fitted to what is in view. The source is kept to view again later.
  function viewOf(gd, source, range) {
    sources.set(gd, source);
    // Plotly sizes a responsive chart to its element on a resize: the element must keep the panels' height.
    gd.style.minHeight = "";
    if (viewIsPlain()) return source;
    var table = S.commitsOf.get(gd) || null;
    var layout = Object.assign({}, source.layout, { yaxis: Object.assign({}, source.layout.yaxis) });
    var data = source.data.slice();
    var lines = [];
    var commitX = view.scale === "relative" ? baseX(table) : null;
    var base = { commit: commitX !== null, x: commitX !== null ? commitX : range ? range[0] : -Infinity };
    base.label = commitX !== null ? view.base.slice(0, 8) : "the first commit in view";
    var references = {}; // legend group -> its line's value at the base
    data.forEach(function (trace, i) {
      if (trace.meta || !trace.x || !trace.x.length) return;
      references[trace.legendgroup] = referenceOf(trace, base);
      data[i] = view.scale === "relative" ? relativeTrace(trace, references[trace.legendgroup], base)
        : Object.assign({}, trace);
      lines.push(data[i]);
    });
    // The spread bars of repeated commits go with their line: scaled by its reference, on its panel.
    data.forEach(function (trace, i) {
      if (!trace.meta || trace.meta.kind !== "spread") return;
      data[i] = view.scale === "relative" ? relativeTrace(trace, references[trace.legendgroup], base)
        : Object.assign({}, trace);
    });
    if (view.scale === "relative") layout.yaxis.title = { text: "% against " + base.label, font: layout.yaxis.title && layout.yaxis.title.font };
    if (view.scale === "log") layout.yaxis.type = "log";
    if (view.multiples && lines.length > 1) {
      panelAxes(layout, lines, data);
      gd.style.minHeight = layout.height + 6 + "px"; // and the element's bottom padding
    }
    return { data: data, layout: fittedTo(gd, data, layout, range, table) };
  }

  // The layout zoomed to `range` (null: everything), each y axis but the markers' fitted to its lines'
  // points in view.
  function fittedTo(gd, data, layout, range, table) {
    layout = Object.assign({}, layout);
    var whole = range ? null : fullRange(data);
    var shown = range || (whole && roomForLabels(gd, data, layout, whole));
    layout.xaxis = Object.assign({}, layout.xaxis, shown ? { range: shown.slice(), autorange: false } : { autorange: true });
    var ticks = ticksFor(layout.meta, range, table);
    if (ticks) {
      layout.xaxis.tickvals = ticks["xaxis.tickvals"];
      layout.xaxis.ticktext = ticks["xaxis.ticktext"];
    }
    var lines = data.filter(function (trace) { return !trace.meta; });
    Object.keys(layout).forEach(function (key) {
      if (!/^yaxis\d*$/.test(key) || key === "yaxis2") return;
      var id = "y" + key.slice(5);
      var own = lines.filter(function (trace) { return (trace.yaxis || "y") === id; })
        .map(function (trace) { return { x: trace.x, y: trace.y, visible: trace.visible }; });
      // The lane above the lines is kept on a single panel's axis; small multiples fill their panels.
      var fitted = key === "yaxis" && !view.multiples ? fitY(own, layout[key], range, layout.meta)
        : range && visibleYRange(own, layout[key], range);
      layout[key] = Object.assign({}, layout[key], fitted ? { range: fitted, autorange: false } : { autorange: true });
    });
    ticksInside(gd, layout);
    return layout;
  }

  // Draws every timeline again from its source as the view now says, over the zoom in the URL.
  function redrawViews() {
    viewToUrl();
    showViewControls();
    var range = zoomFromUrl();
    S.syncing += 1;
    P.measureWidths(S.timelines);
    Promise.all(S.timelines.map(function (gd) {
      var source = sources.get(gd);
      if (!source) return null;
      P.legendHidden(source.data);
      var shown = viewOf(gd, source, range);
      var layout = shown === source ? fittedTo(gd, source.data, source.layout, range, S.commitsOf.get(gd)) : shown.layout;
      var data = shown.data.map(function (trace) { return Object.assign({}, trace); });
      labelFigure(gd, data, layout);
      shareLegend(gd, data, layout);
      return window.Plotly.react(gd, data, layout);
    })).finally(function () { S.syncing -= 1; });
  }

  // A chart's unit in its header follows the scale: % against the base in relative scale.
  function unitText(unit) {
    if (view.scale === "relative") return "% against " + (view.base ? view.base.slice(0, 8) : "the first commit in view");
    if (view.scale === "log") return unit ? unit + ", log scale" : "log scale";
    return unit;
  }

  function showViewControls() {
    document.querySelectorAll("[data-unit]").forEach(function (label) {
      label.textContent = unitText(label.dataset.unit);
    });
    document.querySelectorAll("[data-scale]").forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.dataset.scale === view.scale));
    });
    document.querySelectorAll("[data-view-base]").forEach(function (input) {
      input.value = view.base;
      input.closest("[data-view-base-field]").hidden = view.scale !== "relative";
    });
    document.querySelectorAll("[data-view-multiples]").forEach(function (box) { box.checked = view.multiples; });
  }

  function viewControls() {
    showViewControls();
    viewToUrl();
    document.querySelectorAll("[data-scale]").forEach(function (button) {
      button.addEventListener("click", function () { view.scale = button.dataset.scale; redrawViews(); });
    });
    document.querySelectorAll("[data-view-base]").forEach(function (input) {
      input.addEventListener("change", function () { view.base = input.value.trim().toLowerCase(); redrawViews(); });
    });
    document.querySelectorAll("[data-view-multiples]").forEach(function (box) {
      box.addEventListener("change", function () { view.multiples = box.checked; redrawViews(); });
    });
  }

  P.viewOf = viewOf;
  P.viewControls = viewControls;
})();
