/*
 * Chart data as the server sends it: typed-array columns decoded, and each line point given its hover
 * facts and click target from the response's `commits` table (x, sha, subject, pr, time), found by x.
 * Also holds the state the chart modules share (the timelines drawn, the page's one request).
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
  // Shared by the chart modules: the timelines drawn, how many updates of them are being applied (a
  // count: a zoom's interim drawing and its answer may overlap), the timeline page's one request
  // ({element, url, width, full (the unzoomed payload)}) and each chart's commits table.
  P.state = { timelines: [], syncing: 0, group: null, commitsOf: new WeakMap() };

  // Each chart element's width, read once for all the charts a pass draws (`measureWidths`) rather than
  // by each chart's labels after the chart before it was drawn: a read after a draw makes the browser lay
  // the whole page out again there and then. Forgotten when the window is resized.
  var widths = new WeakMap();
  function measureWidths(elements) {
    Array.prototype.forEach.call(elements, function (element) { widths.set(element, element.clientWidth); });
  }
  function widthOf(element) {
    var known = widths.get(element);
    return known === undefined ? element.clientWidth : known;
  }
  window.addEventListener("resize", function () { widths = new WeakMap(); });

  // The width in pixels of `text` in the CSS font `font` ("11px sans-serif"), measured on a canvas (no
  // layout of the page); a text of several lines ("<br>") is as wide as its widest.
  var measure = null;
  function textWidth(text, font) {
    measure = measure || document.createElement("canvas").getContext("2d");
    measure.font = font;
    return Math.max.apply(null, String(text).split("<br>").map(function (line) {
      return measure.measureText(line).width;
    }));
  }

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

  // The JSON at `url`: the page's early request for it when there is one (timeline-request.js), once.
  function fetchJson(url) {
    var early = P.early && P.early.url === url ? P.early.response : null;
    if (early) P.early = null;
    var asked = early || fetch(url, { headers: { Accept: "application/json" } });
    return asked.then(function (response) {
      return response.json().then(function (body) {
        if (!response.ok) throw new Error(body.error || response.statusText);
        return body;
      });
    });
  }

  P.decode = decode;
  P.commitsIndex = commitsIndex;
  P.dayOf = dayOf;
  P.hydrate = hydrate;
  P.commitTicks = commitTicks;
  P.fetchJson = fetchJson;
  P.measureWidths = measureWidths;
  P.widthOf = widthOf;
  P.textWidth = textWidth;
})();
