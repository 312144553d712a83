/*
 * A timeline's axes: the zoom kept in the URL (?x0=&x1=), the x range when not zoomed (its lines' span),
 * the x ticks (days while three or more are in view, short shas closer than that) and the y range fitted
 * to the points in view.
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
  var commitTicks = P.commitTicks;
  var widthOf = P.widthOf;
  var textWidth = P.textWidth;

  var MAX_TICKS = 8;

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

  // A timeline's x tick labels that would run past its element's edges, dropped from `layout` (changed in
  // place) before the draw. Its axes leave their labels as they are (ticklabeloverflow "allow"): Plotly's
  // own rule hides such a label after measuring every label it drew, which made the browser lay the page
  // out again once per chart and axis, a sixth of a zoom's redraw of five charts.
  function ticksInside(element, layout) {
    var axis = layout.xaxis;
    if (!axis || axis.ticklabeloverflow !== "allow" || !axis.tickvals || !axis.ticktext || !axis.range) return;
    var margin = layout.margin || {};
    var left = margin.l === undefined ? 80 : margin.l;
    var width = widthOf(element);
    var plot = width - left - (margin.r === undefined ? 80 : margin.r);
    var span = axis.range[1] - axis.range[0];
    if (!(plot > 0 && span > 0)) return;
    var tickFont = axis.tickfont || {};
    var font = layout.font || {};
    var css = (tickFont.size || font.size || 12) + "px " + (tickFont.family || font.family || "sans-serif");
    var values = [], texts = [];
    axis.tickvals.forEach(function (x, i) {
      var px = left + ((x - axis.range[0]) / span) * plot;
      var half = textWidth(axis.ticktext[i], css) / 2;
      if (px < left - 1 || px > left + plot + 1 || (px - half >= 0 && px + half <= width)) {
        values.push(x);
        texts.push(axis.ticktext[i]);
      }
    });
    layout.xaxis = Object.assign({}, axis, { tickvals: values, ticktext: texts });
  }

  // The x range of a timeline that is not zoomed: its lines' span with a margin either side of 5 % of the
  // plot, as Plotly's autorange pads a line. Set rather than left to Plotly, so that the labels over the
  // chart are placed before its one draw; null when no line has a point (Plotly's autorange then).
  function fullRange(data) {
    var low = Infinity, high = -Infinity;
    (data || []).forEach(function (trace) {
      if (trace.meta || !trace.x) return;
      for (var i = 0; i < trace.x.length; i++) {
        if (trace.x[i] < low) low = trace.x[i];
        if (trace.x[i] > high) high = trace.x[i];
      }
    });
    if (low > high) return null;
    var margin = high > low ? (high - low) / 18 : 1;
    return [low - margin, high + margin];
  }

  // Whether `range` is the chart's whole span (a double-click's reset to its first range is a zoom-out).
  function isFullRange(range, full) {
    if (!full || !Array.isArray(range)) return false;
    var tolerance = (full[1] - full[0]) * 1e-9;
    return Math.abs(range[0] - full[0]) <= tolerance && Math.abs(range[1] - full[1]) <= tolerance;
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

  // A timeline with a label lane (meta.lane: the share of its plot kept free above the lines, where the
  // markers and their labels go) has its y range fitted below the lane, zoomed or not; without one only a
  // zoom fits the range (null: leave it to Plotly's autorange).
  function fitY(traces, yaxis, range, meta) {
    var lane = (meta && meta.lane) || 0;
    if (!range && !lane) return null;
    var fitted = visibleYRange(traces, yaxis, range || [-Infinity, Infinity]);
    if (!fitted || !lane) return fitted;
    return [fitted[0], fitted[0] + (fitted[1] - fitted[0]) / (1 - lane)];
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

  P.zoomFromUrl = zoomFromUrl;
  P.zoomToUrl = zoomToUrl;
  P.ticksFor = ticksFor;
  P.ticksInside = ticksInside;
  P.rangeOf = rangeOf;
  P.fullRange = fullRange;
  P.isFullRange = isFullRange;
  P.visibleYRange = visibleYRange;
  P.fitY = fitY;
  P.firstAtOrAfter = firstAtOrAfter;
})();
