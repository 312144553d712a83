/*
 * Draws every Plotly figure on a page. Figures are built by the server; this file only places them.
 *
 *   <div data-figure-url="/api/...">           fetches the figure JSON ({data, layout})
 *   <div data-figure-data="element-id">        reads it from a json_script block
 *   data-figure-kind="timeline" | "sparkline"  timelines share one zoom, kept in the URL as ?x0=&x1=
 *   data-figure-kind="plain"                   any other chart: its own zoom, not kept
 *   <div data-timeline-url="/api/...">         one request for every chart inside it that has a
 *     <div data-metric="m">                    data-metric: the response's figures[m]; a zoom fetches
 *                                              the range again at full resolution (?x0=&x1=&width=)
 *
 * A point whose customdata[0] is a path ("/commits/<sha>/") opens that page when clicked. Line traces
 * come as typed arrays without hover text; the response's `commits` table (x, sha, subject, pr, time)
 * gives each point its hover and click target, found by x.
 * Forms marked data-autosubmit submit themselves when a choice (select, checkbox) changes.
 *
 * Pages that change while one reads them (runs, a running run):
 *   <div data-live-url="/api/..." data-live-signature="s" data-live-interval="10">
 *                                              polls the URL; reloads the page when its signature moves
 *   <span data-elapsed-base="42">              seconds at render; counts on every second
 *   <button data-copy-target="element-id">     copies that element's text
 *   <pre data-scroll-end>                      shows its end (a log's tail), also when its <details> opens
 */
(function () {
  "use strict";

  var MAX_TICKS = 8;
  var timelines = [];
  var syncing = false;
  var group = null; // the timeline page's one request: {element, url, full (the unzoomed payload)}
  var commitsOf = new WeakMap(); // chart -> its commits table

  var DTYPES = { f8: Float64Array, f4: Float32Array, i4: Int32Array, u4: Uint32Array, i2: Int16Array,
    u2: Uint16Array, i1: Int8Array, u1: Uint8Array };

  // A base64 typed-array column as a typed array (plain lists pass through).
  function decode(column) {
    if (!column || !column.dtype) return column || [];
    var raw = window.atob(column.bdata);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i += 1) bytes[i] = raw.charCodeAt(i);
    return new DTYPES[column.dtype](bytes.buffer);
  }

  // The commits table, decoded once: x -> row index.
  function commitsIndex(table) {
    if (!table) return null;
    if (table._index) return table;
    var xs = decode(table.x);
    var index = new Map();
    xs.forEach(function (x, i) { index.set(x, i); });
    table._xs = xs;
    table._index = index;
    return table;
  }

  // The day a thinned point falls on, from the axis' day ticks (the last one at or before it).
  // Ticks are in x order: a binary search, since every thinned point of every chart asks (a year's
  // history has a tick per day).
  function dayOf(ticks, x) {
    var low = 0, high = ticks.length;
    while (low < high) {
      var middle = (low + high) >> 1;
      if (ticks[middle][0] <= x) low = middle + 1;
      else high = middle;
    }
    return low ? ticks[low - 1][1] : "";
  }

  // Each line point's hover facts and click target, from the commits table. A thinned chart comes
  // without one: its points say their day, and a click zooms in, which brings every commit.
  function hydrate(figure, table) {
    table = commitsIndex(table);
    var days = (figure.layout && figure.layout.meta && figure.layout.meta.day_ticks) || [];
    (figure.data || []).forEach(function (trace) {
      if (trace.meta || !trace.x || !trace.x.dtype) return;
      var xs = decode(trace.x);
      trace.x = xs;
      trace.y = decode(trace.y);
      var repeats = trace.repeats ? { runs: decode(trace.repeats.runs), spread: decode(trace.repeats.spread) } : null;
      delete trace.repeats;
      trace.customdata = Array.prototype.map.call(xs, function (x, i) {
        var row = table ? table._index.get(x) : undefined;
        if (row === undefined) return ["", dayOf(days, x), "click to zoom in on these commits", "", "", ""];
        var sha = table.sha[row];
        var runs = repeats ? repeats.runs[i] : 1;
        return [
          table.url.replace("{sha}", sha),
          sha.slice(0, 8),
          table.subject[row],
          table.pr[row] ? "PR #" + table.pr[row] : "no PR",
          table.time[row],
          runs > 1 ? " · median of " + runs + " runs, spread " + (+repeats.spread[i].toPrecision(3)) : "",
        ];
      });
    });
    return figure;
  }

  function commitTicks(table) {
    if (!table || !table._xs) return [];
    return Array.prototype.map.call(table._xs, function (x, i) { return [x, table.sha[i].slice(0, 8)]; });
  }

  function zoomFromUrl() {
    var params = new URLSearchParams(window.location.search);
    var x0 = parseFloat(params.get("x0"));
    var x1 = parseFloat(params.get("x1"));
    return Number.isFinite(x0) && Number.isFinite(x1) && x0 < x1 ? [x0, x1] : null;
  }

  function zoomToUrl(range) {
    var url = new URL(window.location.href);
    if (range) {
      url.searchParams.set("x0", (+range[0]).toFixed(1));
      url.searchParams.set("x1", (+range[1]).toFixed(1));
    } else {
      url.searchParams.delete("x0");
      url.searchParams.delete("x1");
    }
    window.history.replaceState(window.history.state, "", url);
  }

  function spread(candidates, count) {
    if (candidates.length <= count) return candidates;
    var step = candidates.length / count;
    var picked = [];
    for (var i = 0; i < count; i += 1) picked.push(candidates[Math.floor(i * step)]);
    return picked;
  }

  // Day labels while at least three days are in view, short shas when zoomed closer than that.
  function ticksFor(meta, range, table) {
    if (!meta || !meta.day_ticks) return null;
    var inRange = function (tick) {
      return !range || (tick[0] >= range[0] && tick[0] <= range[1]);
    };
    var days = meta.day_ticks.filter(inRange);
    var ticks = days.length >= 3 ? days : commitTicks(table).filter(inRange);
    ticks = spread(ticks, MAX_TICKS);
    return {
      "xaxis.tickmode": "array",
      "xaxis.tickvals": ticks.map(function (t) { return t[0]; }),
      "xaxis.ticktext": ticks.map(function (t) { return t[1]; }),
    };
  }

  function rangeOf(event) {
    if (event["xaxis.autorange"]) return "auto";
    if ("xaxis.range[0]" in event) return [event["xaxis.range[0]"], event["xaxis.range[1]"]];
    if (Array.isArray(event["xaxis.range"])) return event["xaxis.range"];
    return null;
  }

  // The y range of the lines' points between x0 and x1, with a margin: a zoomed chart shows its own step,
  // not the whole history's span. Null when no point is in view (the axis is then left as it is).
  function visibleYRange(traces, yaxis, range) {
    var low = Infinity, high = -Infinity;
    (traces || []).forEach(function (trace) {
      if (trace.meta || trace.visible === false || trace.visible === "legendonly") return;
      if (!trace.x || !trace.y || (trace.yaxis && trace.yaxis !== "y")) return;
      for (var i = 0; i < trace.x.length; i++) {
        var x = trace.x[i], y = trace.y[i];
        if (x >= range[0] && x <= range[1] && typeof y === "number" && isFinite(y)) {
          if (y < low) low = y;
          if (y > high) high = y;
        }
      }
    });
    if (low > high) return null;
    if (yaxis && yaxis.type === "log") {
      if (low <= 0) return null;
      low = Math.log10(low);
      high = Math.log10(high);
    }
    var margin = (high - low) * 0.08 || Math.abs(high) * 0.05 || 1;
    return [low - margin, high + margin];
  }

  // Zooming one timeline zooms them all to the same commits and records the range in the URL.
  function onTimelineRelayout(event) {
    if (syncing) return;
    var range = rangeOf(event);
    if (!range) return;
    syncing = true;
    var updates = timelines.map(function (gd) {
      var update = range === "auto" ? { "xaxis.autorange": true, "yaxis.autorange": true } : { "xaxis.range": range.slice() };
      var yRange = range === "auto" ? null : visibleYRange(gd.data, gd.layout.yaxis, range);
      if (yRange) update["yaxis.range"] = yRange;
      var ticks = ticksFor(gd.layout.meta, range === "auto" ? null : range, commitsOf.get(gd));
      if (ticks) Object.assign(update, ticks);
      return window.Plotly.relayout(gd, update);
    });
    Promise.all(updates).finally(function () {
      syncing = false;
    });
    zoomToUrl(range === "auto" ? null : range);
    if (group) refetch(range === "auto" ? null : range);
  }

  // The server thinned the lines to the charts' width: a zoom asks it for the range at full resolution,
  // a zoom out goes back to the first answer.
  var pending = null;
  function refetch(range) {
    window.clearTimeout(pending);
    pending = window.setTimeout(function () {
      var answer = range ? fetchGroup(range) : Promise.resolve(group.full);
      answer.then(function (payload) { redrawGroup(payload, range); }).catch(function () {});
    }, 150);
  }

  function groupUrl(range) {
    var url = new URL(group.url, window.location.href);
    url.searchParams.set("width", String(group.width));
    if (range) {
      url.searchParams.set("x0", (+range[0]).toFixed(1));
      url.searchParams.set("x1", (+range[1]).toFixed(1));
    }
    return url.toString();
  }

  function fetchJson(url) {
    return fetch(url, { headers: { Accept: "application/json" } }).then(function (response) {
      return response.json().then(function (body) {
        if (!response.ok) throw new Error(body.error || response.statusText);
        return body;
      });
    });
  }

  function fetchGroup(range) {
    return fetchJson(groupUrl(range));
  }

  function redrawGroup(payload, range) {
    syncing = true;
    var updates = timelines.map(function (gd) {
      var figure = payload.figures[gd.dataset.metric];
      if (!figure) return Promise.resolve();
      hydrate(figure, payload.commits);
      commitsOf.set(gd, commitsIndex(payload.commits));
      figure = viewOf(gd, figure, range);
      var layout = Object.assign({}, gd.layout, figure.layout, { meta: figure.layout.meta });
      var yRange = range && visibleYRange(figure.data, gd.layout.yaxis, range);
      if (range) {
        layout.xaxis = Object.assign({}, gd.layout.xaxis, { range: range.slice(), autorange: false });
      } else {
        layout.xaxis = Object.assign({}, figure.layout.xaxis);
      }
      layout.yaxis = yRange
        ? Object.assign({}, gd.layout.yaxis, { range: yRange, autorange: false })
        : Object.assign({}, figure.layout.yaxis);
      var ticks = ticksFor(layout.meta, range, payload.commits);
      if (ticks) {
        layout.xaxis.tickmode = "array";
        layout.xaxis.tickvals = ticks["xaxis.tickvals"];
        layout.xaxis.ticktext = ticks["xaxis.ticktext"];
      }
      return window.Plotly.react(gd, figure.data, layout);
    });
    return Promise.all(updates).finally(function () {
      syncing = false;
      group.element.dataset.resolution = payload.decimated ? "decimated" : "full";
      group.element.dataset.range = range ? range.join(",") : "";
    });
  }

  var ZOOM_COMMITS = 150;

  function openClickedPoint(event) {
    var point = event && event.points && event.points[0];
    var target = point && point.customdata && point.customdata[0];
    // Only this site's own pages: "/path", never "//host" or "/\\host", which browsers read as another site.
    if (typeof target === "string" && /^\/(?![\/\\])/.test(target)) window.location.assign(target);
    else if (target === "" && group && timelines.length) {
      // A thinned point: zoom every chart around it (the server then sends the range in full).
      window.Plotly.relayout(timelines[0], { "xaxis.range": [point.x - ZOOM_COMMITS, point.x + ZOOM_COMMITS] });
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

  // The first index at or after x in ascending xs (xs.length when none).
  function firstAtOrAfter(xs, x) {
    var low = 0, high = xs.length;
    while (low < high) {
      var middle = (low + high) >> 1;
      if (xs[middle] < x) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  // The base commit's x, when it is one of the drawn commits; else null (the window's start is used).
  function baseX(table) {
    if (!view.base || !table || !table._xs) return null;
    for (var i = 0; i < table.sha.length; i += 1) {
      if (table.sha[i].indexOf(view.base) === 0) return table._xs[i];
    }
    return null;
  }

  // A line as percentages of its value at the base: the base commit's point (or the last before it), else
  // the first point in view.
  function relativeTrace(trace, base) {
    var xs = trace.x, at = firstAtOrAfter(xs, base.x);
    if (base.commit && (at === xs.length || xs[at] !== base.x) && at > 0) at -= 1;
    var reference = trace.y[Math.min(at, xs.length - 1)];
    if (!reference) return trace;
    var scaled = function (values, offset) {
      return Array.prototype.map.call(decode(values), function (value) { return (value / reference - offset) * 100; });
    };
    var shown = Object.assign({}, trace, { y: scaled(trace.y, 1) });
    if (trace.error_y) {
      shown.error_y = Object.assign({}, trace.error_y,
        { array: scaled(trace.error_y.array, 0), arrayminus: scaled(trace.error_y.arrayminus, 0) });
    }
    shown.hovertemplate = (trace.hovertemplate || "").replace(/<b>%\{y:[^}]*\}[^<]*<\/b>/,
      "<b>%{y:+.2f} %</b> against " + base.label);
    return shown;
  }

  // One panel per line, stacked top to bottom, the last on the primary y axis (the one the markers
  // overlay and the x axis sits on).
  function panelAxes(layout, lines) {
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
  }

  // The figure as the current view shows it over `range` (null: everything), with every panel's y axis
  // fitted to what is in view. The source is kept to view again later.
  function viewOf(gd, source, range) {
    sources.set(gd, source);
    // Plotly sizes a responsive chart to its element on a resize: the element must keep the panels' height.
    gd.style.minHeight = "";
    if (viewIsPlain()) return source;
    var table = commitsOf.get(gd) || null;
    var layout = Object.assign({}, source.layout, { yaxis: Object.assign({}, source.layout.yaxis) });
    var data = source.data.slice();
    var lines = [];
    var commitX = view.scale === "relative" ? baseX(table) : null;
    var base = { commit: commitX !== null, x: commitX !== null ? commitX : range ? range[0] : -Infinity };
    base.label = commitX !== null ? view.base.slice(0, 8) : "the first commit in view";
    data.forEach(function (trace, i) {
      if (trace.meta || !trace.x || !trace.x.length) return;
      data[i] = view.scale === "relative" ? relativeTrace(trace, base) : Object.assign({}, trace);
      lines.push(data[i]);
    });
    if (view.scale === "relative") layout.yaxis.title = { text: "% against " + base.label, font: layout.yaxis.title && layout.yaxis.title.font };
    if (view.scale === "log") layout.yaxis.type = "log";
    if (view.multiples && lines.length > 1) {
      panelAxes(layout, lines);
      gd.style.minHeight = layout.height + 6 + "px"; // and the element's bottom padding
    }
    return { data: data, layout: fittedTo(data, layout, range, table) };
  }

  // The layout zoomed to `range` (null: everything), each y axis but the markers' fitted to its lines'
  // points in view.
  function fittedTo(data, layout, range, table) {
    layout = Object.assign({}, layout);
    layout.xaxis = Object.assign({}, layout.xaxis, range ? { range: range.slice(), autorange: false } : { autorange: true });
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
        .map(function (trace) { return { x: trace.x, y: trace.y }; });
      var fitted = range && visibleYRange(own, layout[key], range);
      layout[key] = Object.assign({}, layout[key], fitted ? { range: fitted, autorange: false } : { autorange: true });
    });
    return layout;
  }

  // Draws every timeline again from its source as the view now says, over the zoom in the URL.
  function redrawViews() {
    viewToUrl();
    showViewControls();
    var range = zoomFromUrl();
    syncing = true;
    Promise.all(timelines.map(function (gd) {
      var source = sources.get(gd);
      if (!source) return null;
      var shown = viewOf(gd, source, range);
      var layout = shown === source ? fittedTo(source.data, source.layout, range, commitsOf.get(gd)) : shown.layout;
      return window.Plotly.react(gd, shown.data, layout);
    })).finally(function () { syncing = false; });
  }

  function showViewControls() {
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

  // Alert markers labelled with their PR ("#51830") above them. Labels never overlap: one that would
  // touch its neighbour goes a row higher, and where LABEL_ROWS rows are full it is left to the marker's
  // hover (which names the PR too). Placed by pixel distance, so again after every zoom or resize.
  var LABEL_ROWS = 3;
  var LABEL_FONT_PX = 11;
  var labelMeasure = null;

  function labelWidth(text, family) {
    labelMeasure = labelMeasure || document.createElement("canvas").getContext("2d");
    labelMeasure.font = LABEL_FONT_PX + "px " + family;
    return labelMeasure.measureText(text).width + 8; // Plotly's padding and border around the text
  }

  var LABEL_RANK = { regression: 0, trade_off: 1, improvement: 2 };

  function alertLabels(gd) {
    var full = gd._fullLayout;
    var trace = (gd.data || []).filter(function (item) { return item.meta && item.meta.kind === "alerts"; })[0];
    if (!trace || !full || !full.xaxis) return [];
    var family = (full.font && full.font.family) || "sans-serif";
    var range = full.xaxis.range;
    var placed = trace.x.map(function (x, i) {
      var text = trace.customdata[i][2];
      var color = Array.isArray(trace.marker.color) ? trace.marker.color[i] : trace.marker.color;
      var rank = LABEL_RANK[trace.customdata[i][3]];
      return { x: x, text: text, color: color, px: full.xaxis.l2p(x), width: text ? labelWidth(text, family) : 0,
               rank: rank === undefined ? LABEL_RANK.improvement : rank };
    }).filter(function (label) {
      return label.text && label.x >= Math.min(range[0], range[1]) && label.x <= Math.max(range[0], range[1]);
    }).sort(function (a, b) { return a.rank - b.rank || a.px - b.px; });
    // Regressions are placed first, so that a crowded chart leaves an improvement's label to the hover.
    var rows = [];
    var shown = [];
    placed.forEach(function (label) {
      var left = label.px - label.width / 2;
      var right = label.px + label.width / 2;
      for (var row = 0; row < LABEL_ROWS; row += 1) {
        rows[row] = rows[row] || [];
        var free = rows[row].every(function (taken) { return right + 2 <= taken[0] || left >= taken[1] + 2; });
        if (free) {
          rows[row].push([left, right]);
          shown.push({
            name: "pr-label", text: label.text, x: label.x, xref: "x", y: 0.03, yref: "y2",
            yanchor: "bottom", yshift: 10 + row * (LABEL_FONT_PX + 7), showarrow: false,
            font: { size: LABEL_FONT_PX, color: label.color }, bgcolor: "rgba(255, 255, 255, 0.85)",
          });
          return;
        }
      }
    });
    return shown;
  }

  function placeAlertLabels(gd) {
    var labels = alertLabels(gd);
    var current = (gd.layout.annotations || []);
    var mine = current.filter(function (note) { return note.name === "pr-label"; });
    var key = function (notes) { return JSON.stringify(notes.map(function (note) { return [note.text, note.x, note.yshift]; })); };
    if (key(mine) === key(labels)) return;
    var others = current.filter(function (note) { return note.name !== "pr-label"; });
    window.Plotly.relayout(gd, { annotations: others.concat(labels) });
  }

  // The PR and tag labels beside the markers at the top: the server spreads them over rows; here a label
  // that would run into another label or the next marker is left to its marker's hover.
  var markerTexts = new WeakMap(); // markers trace -> every label, as the server sent them

  function placeMarkerLabels(gd) {
    var full = gd._fullLayout;
    if (!full || !full.xaxis) return;
    var family = (full.font && full.font.family) || "sans-serif";
    var wanted = [];
    (gd.data || []).forEach(function (trace, index) {
      if (!trace.meta || trace.meta.kind !== "markers" || !Array.isArray(trace.text)) return;
      if (!markerTexts.has(trace)) markerTexts.set(trace, trace.text.slice());
      wanted.push({ trace: trace, index: index, texts: markerTexts.get(trace).slice() });
    });
    var points = [];
    wanted.forEach(function (item) {
      item.trace.x.forEach(function (x, i) { points.push({ item: item, i: i, px: full.xaxis.l2p(x) }); });
    });
    points.sort(function (a, b) { return a.px - b.px; });
    // The marker rows sit closer than a label is tall, so a label must end before the next marker of any
    // row and start after the previous label of any row.
    var labelEnd;
    points.forEach(function (point, order) {
      var text = point.item.texts[point.i];
      if (!text) return;
      var left = point.px + 6; // beside the marker
      var right = left + labelWidth(text, family) - 6;
      var next = points[order + 1];
      if ((labelEnd !== undefined && left < labelEnd + 2) || (next !== undefined && right > next.px - 6)) {
        point.item.texts[point.i] = "";
      } else {
        labelEnd = right;
      }
    });
    wanted.forEach(function (item) {
      if (JSON.stringify(item.texts) === JSON.stringify(item.trace.text)) return;
      window.Plotly.restyle(gd, { text: [item.texts] }, [item.index]);
    });
  }

  function labelAlerts(gd) {
    var later = null;
    var place = function () {
      window.clearTimeout(later);
      later = window.setTimeout(function () { placeAlertLabels(gd); placeMarkerLabels(gd); }, 0);
    };
    gd.on("plotly_afterplot", place);
    gd.on("plotly_relayout", place);
    placeAlertLabels(gd);
    placeMarkerLabels(gd);
  }

  function draw(element, figure, table) {
    var kind = element.dataset.figureKind || "timeline";
    hydrate(figure, table || figure.commits);
    if (kind === "timeline") {
      commitsOf.set(element, commitsIndex(table || figure.commits));
      figure = viewOf(element, figure, zoomFromUrl());
    }
    var layout = figure.layout || {};
    var phone = window.matchMedia("(max-width: 600px)").matches;
    // On a phone the legend's title would push the last level off the card.
    if (phone && layout.legend) layout.legend = Object.assign({}, layout.legend, { title: { text: "" } });
    var config = { responsive: true, displaylogo: false };
    // On a phone the mode bar would cover the legend; a drag zooms and a double tap resets without it.
    if (kind === "sparkline" || phone) {
      config.displayModeBar = false;
    } else {
      config.modeBarButtonsToRemove = ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"];
    }
    if (kind === "timeline") {
      var zoom = zoomFromUrl();
      if (zoom && layout.xaxis && layout.xaxis.visible !== false) {
        layout.xaxis.range = zoom;
        layout.xaxis.autorange = false;
        var ticks = ticksFor(layout.meta, zoom, commitsIndex(table || figure.commits));
        if (ticks) {
          layout.xaxis.tickvals = ticks["xaxis.tickvals"];
          layout.xaxis.ticktext = ticks["xaxis.ticktext"];
        }
        var yRange = visibleYRange(figure.data, layout.yaxis, zoom);
        if (yRange) layout.yaxis = Object.assign({}, layout.yaxis, { range: yRange, autorange: false });
      }
    }
    element.textContent = "";
    return window.Plotly.newPlot(element, figure.data || [], layout, config).then(function (gd) {
      gd.on("plotly_click", openClickedPoint);
      commitsOf.set(gd, commitsIndex(table || figure.commits));
      if (kind === "timeline") {
        timelines.push(gd);
        gd.on("plotly_relayout", onTimelineRelayout);
        labelAlerts(gd);
      }
      element.dataset.drawn = "true";
    });
  }

  function load(element) {
    if (element.dataset.figureData) {
      var block = document.getElementById(element.dataset.figureData);
      if (!block) return Promise.resolve(showProblem(element, "Chart data is missing."));
      return draw(element, JSON.parse(block.textContent));
    }
    return fetchJson(element.dataset.figureUrl)
      .then(function (figure) {
        return draw(element, figure);
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

  // Each chart replaces its skeleton and is shown before the next is drawn, so the first appears at once
  // rather than all together after the last.
  function inTurn(charts, drawOne) {
    return charts.reduce(function (previous, chart, index) {
      return previous.then(index ? afterPaint : null).then(function () { return drawOne(chart); });
    }, Promise.resolve());
  }

  // The timeline page: one request for all its charts, thinned to the width of the widest.
  function loadGroup(element) {
    var charts = Array.prototype.slice.call(element.querySelectorAll("[data-metric]"));
    var width = Math.max.apply(null, charts.map(function (chart) { return chart.clientWidth; }).concat([300]));
    group = { element: element, url: element.dataset.timelineUrl, width: Math.round(width), full: null };
    var zoom = zoomFromUrl();
    var first = fetchGroup(null).then(function (payload) { group.full = payload; return payload; });
    var answer = zoom ? fetchGroup(zoom) : first;
    return Promise.all([answer, first])
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

  // Dates are typed digit by digit and would submit half-written years: they wait for the button.
  function autosubmit(form) {
    form.addEventListener("change", function (event) {
      if (event.target && event.target.type === "date") return;
      if (form.requestSubmit) form.requestSubmit();
      else form.submit();
    });
  }

  // Same words as the server's duration_text: "42 s", "14 min 05 s", "1 h 02 min", "3 d 07 h".
  function durationText(seconds) {
    var whole = Math.max(0, Math.floor(seconds));
    var hours = Math.floor(whole / 3600);
    var minutes = Math.floor((whole % 3600) / 60);
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    if (hours >= 48) return Math.floor(hours / 24) + " d " + pad(hours % 24) + " h";
    if (hours) return hours + " h " + pad(minutes) + " min";
    if (minutes) return minutes + " min " + pad(whole % 60) + " s";
    return whole + " s";
  }

  // Counted from the page's own load, so the reader's clock never has to agree with the server's.
  function tickElapsed(elements) {
    var loaded = Date.now();
    var tick = function () {
      var since = (Date.now() - loaded) / 1000;
      elements.forEach(function (element) {
        element.textContent = durationText(parseFloat(element.dataset.elapsedBase) + since);
      });
    };
    window.setInterval(tick, 1000);
  }

  // A hidden tab does not poll; a failed poll is tried again at the next interval.
  function follow(element) {
    var seconds = parseFloat(element.dataset.liveInterval) || 10;
    var poll = function () {
      if (document.hidden) return;
      fetch(element.dataset.liveUrl, { headers: { Accept: "application/json" }, cache: "no-store" })
        .then(function (response) {
          return response.ok ? response.json() : null;
        })
        .then(function (body) {
          if (body && body.signature && body.signature !== element.dataset.liveSignature) {
            window.location.reload();
          }
        })
        .catch(function () {});
    };
    window.setInterval(poll, seconds * 1000);
  }

  function copyButton(button) {
    button.addEventListener("click", function () {
      var target = document.getElementById(button.dataset.copyTarget);
      if (!target || !navigator.clipboard) return;
      navigator.clipboard.writeText(target.textContent).then(function () {
        var label = button.textContent;
        button.textContent = "Copied";
        window.setTimeout(function () { button.textContent = label; }, 1500);
      });
    });
  }

  function scrollToEnd(element) {
    var show = function () { element.scrollTop = element.scrollHeight; };
    show();
    var details = element.closest("details");
    if (details) details.addEventListener("toggle", show);
  }

  function start() {
    document.querySelectorAll("form[data-autosubmit]").forEach(autosubmit);
    document.querySelectorAll("[data-live-url]").forEach(follow);
    document.querySelectorAll("button[data-copy-target]").forEach(copyButton);
    document.querySelectorAll("[data-scroll-end]").forEach(scrollToEnd);
    var elapsed = document.querySelectorAll("[data-elapsed-base]");
    if (elapsed.length) tickElapsed(Array.prototype.slice.call(elapsed));
    var elements = document.querySelectorAll("[data-figure-url], [data-figure-data]");
    var groups = document.querySelectorAll("[data-timeline-url]");
    if (groups.length) viewControls();
    if (!elements.length && !groups.length) {
      document.body.dataset.chartsDrawn = "true";
      return;
    }
    if (!window.Plotly) {
      elements.forEach(function (element) {
        showProblem(element, "plotly.js did not load.");
      });
      groups.forEach(function (element) {
        showProblem(element, "plotly.js did not load.");
      });
      return;
    }
    var loads = Array.prototype.map.call(elements, load).concat(Array.prototype.map.call(groups, loadGroup));
    Promise.all(loads).then(function () {
      document.body.dataset.chartsDrawn = "true";
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
