/*
 * Labels over a timeline: alert markers' PR labels and the PR and tag labels beside the markers, placed
 * by pixel distance so that none overlaps another. A timeline's x range is known before it is drawn
 * (chart-axes.js), so they are placed into the figure before its one draw (labelFigure), and placed
 * again after every zoom or resize from the drawn axis, which changes nothing when they already fit.
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
  var widthOf = P.widthOf;
  var textWidth = P.textWidth;
  var decode = P.decode;
  // Alert markers labelled with their PR ("#51830") right above them, in the lane over the lines. Labels
  // never overlap: one that would touch its neighbour goes a row higher, and where LABEL_ROWS rows are
  // full it is left to the marker's hover (which names the PR too).
  // One row: the lane above the lines holds the alert labels' row under the PR and tag markers' rows.
  var LABEL_ROWS = 1;
  var LABEL_FONT_PX = 11;

  function labelWidth(text, family) {
    return textWidth(text, LABEL_FONT_PX + "px " + family) + 8; // Plotly's padding and border around the text
  }

  // Where x values fall in pixels across the plot: {range, width (px), right (px the text may run past
  // the plot), px(x), family}. From the drawn chart, or predicted from its element and layout before
  // the draw (a linear x axis over layout.xaxis.range, the plot the element's width less the margins).
  function drawnGeometry(gd) {
    var full = gd._fullLayout;
    if (!full || !full.xaxis || !full._size) return null;
    return { range: full.xaxis.range, width: full._size.w, right: full._size.r,
      px: function (x) { return full.xaxis.l2p(x); }, family: (full.font && full.font.family) || "sans-serif" };
  }

  function predictedGeometry(element, layout) {
    var range = layout.xaxis && layout.xaxis.range;
    var margin = layout.margin || {};
    if (!range || layout.xaxis.type === "log") return null;
    var width = widthOf(element) - (margin.l === undefined ? 80 : margin.l) - (margin.r === undefined ? 80 : margin.r);
    var scale = width / (range[1] - range[0]);
    return { range: range, width: width, right: margin.r || 0,
      px: function (x) { return (x - range[0]) * scale; }, family: (layout.font && layout.font.family) || "sans-serif" };
  }

  var LABEL_RANK = { regression: 0, trade_off: 1, improvement: 2 };

  function alertLabels(data, geometry) {
    var trace = (data || []).filter(function (item) { return item.meta && item.meta.kind === "alerts"; })[0];
    if (!trace || !geometry) return [];
    var range = geometry.range;
    var placed = Array.prototype.map.call(trace.x, function (x, i) {
      var text = trace.customdata[i][2];
      var color = Array.isArray(trace.marker.color) ? trace.marker.color[i] : trace.marker.color;
      var rank = LABEL_RANK[trace.customdata[i][3]];
      return { x: x, y: trace.y[i], text: text, color: color, px: geometry.px(x),
               width: text ? labelWidth(text, geometry.family) : 0,
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
            name: "pr-label", text: label.text, x: label.x, xref: "x", y: label.y, yref: "y2",
            yanchor: "bottom", yshift: 7 + row * (LABEL_FONT_PX + 7), showarrow: false,
            font: { size: LABEL_FONT_PX, color: label.color }, bgcolor: "rgba(255, 255, 255, 0.85)",
          });
          return;
        }
      }
    });
    return shown;
  }

  function annotationsKey(notes) {
    return JSON.stringify(notes.map(function (note) { return [note.text, note.x, note.yshift]; }));
  }

  // The layout's annotations with the alert labels placed for `geometry`, or null when they are already so.
  function annotationsWith(data, layout, geometry) {
    var labels = alertLabels(data, geometry);
    var current = layout.annotations || [];
    var mine = current.filter(function (note) { return note.name === "pr-label"; });
    if (annotationsKey(mine) === annotationsKey(labels)) return null;
    return current.filter(function (note) { return note.name !== "pr-label"; }).concat(labels);
  }

  // The PR and tag labels beside the markers at the top: the server spreads them over rows; here a label
  // that would run into another label, the next marker or the edge of the chart is left to its marker's
  // hover.
  // A markers trace's meta -> every label, as the server sent them (a trace copied for a redraw shares
  // its meta).
  var markerTexts = new WeakMap();

  // {index: texts} of the marker traces whose shown labels change for `geometry`.
  function markerTextChanges(data, geometry) {
    var changes = {};
    if (!geometry) return changes;
    var wanted = [];
    (data || []).forEach(function (trace, index) {
      if (!trace.meta || trace.meta.kind !== "markers" || !Array.isArray(trace.text)) return;
      if (!markerTexts.has(trace.meta)) markerTexts.set(trace.meta, trace.text.slice());
      wanted.push({ trace: trace, index: index, texts: markerTexts.get(trace.meta).slice() });
    });
    var points = [];
    wanted.forEach(function (item) {
      Array.prototype.forEach.call(item.trace.x, function (x, i) { points.push({ item: item, i: i, px: geometry.px(x) }); });
    });
    points.sort(function (a, b) { return a.px - b.px; });
    // The marker rows sit closer than a label is tall, so a label must end before the next marker of any
    // row and start after the previous label of any row.
    var labelEnd;
    var edge = geometry.width + geometry.right;
    points.forEach(function (point, order) {
      var text = point.item.texts[point.i];
      if (!text) return;
      var left = point.px + 6; // beside the marker
      var right = left + labelWidth(text, geometry.family) - 6;
      var next = points[order + 1];
      if ((labelEnd !== undefined && left < labelEnd + 2) || (next !== undefined && right > next.px - 6) ||
          right > edge) {
        point.item.texts[point.i] = "";
      } else {
        labelEnd = right;
      }
    });
    wanted.forEach(function (item) {
      if (JSON.stringify(item.texts) !== JSON.stringify(item.trace.text)) changes[item.index] = item.texts;
    });
    return changes;
  }

  // A timeline's whole x range `range` widened on the right until the label beside each marker fits on
  // the chart, as Plotly's autorange makes room for text (by a fifth of the span at most).
  function roomForLabels(element, data, layout, range) {
    var margin = layout.margin || {};
    var width = widthOf(element) - (margin.l || 0) - (margin.r || 0);
    var right = range[1];
    var family = (layout.font && layout.font.family) || "sans-serif";
    (data || []).forEach(function (trace) {
      if (!trace.meta || trace.meta.kind !== "markers" || !Array.isArray(trace.text)) return;
      var texts = markerTexts.get(trace.meta) || trace.text;
      Array.prototype.forEach.call(trace.x, function (x, i) {
        var room = width + (margin.r || 0) - labelWidth(texts[i] || "", family);
        if (texts[i] && room > 0) right = Math.max(right, range[0] + (x - range[0]) * width / room);
      });
    });
    return [range[0], Math.min(right, range[1] + (range[1] - range[0]) / 5)];
  }

  // The bars of a spread trace (meta.kind "spread"): {x, low, high}, kept in its meta once drawn, or read
  // from the trace as the server sends it (x and y in threes: a commit's x twice with its lowest and
  // highest run, then a gap).
  function barsOf(trace) {
    if (trace.meta.bars) return trace.meta.bars;
    var xs = decode(trace.x), ys = decode(trace.y);
    var bars = { x: [], low: [], high: [] };
    for (var i = 0; i + 1 < xs.length; i += 3) {
      bars.x.push(xs[i]);
      bars.low.push(ys[i]);
      bars.high.push(ys[i + 1]);
    }
    return bars;
  }

  // The spread bars of repeated commits drawn as one filled outline of SPREAD_BAR_PX-wide bars, their
  // width in x units set for the x range in view: as a line broken at every gap, Plotly draws a path per
  // bar and styles each one, which was a sixth of a zoom's redraw of five charts.
  var SPREAD_BAR_PX = 1.5;

  function spreadBars(data, geometry) {
    var half = (SPREAD_BAR_PX / 2) * (geometry.range[1] - geometry.range[0]) / geometry.width;
    data.forEach(function (trace, index) {
      if (!trace.meta || trace.meta.kind !== "spread" || !trace.x) return;
      var bars = barsOf(trace);
      var x = [], y = [];
      for (var i = 0; i < bars.x.length; i += 1) {
        x.push(bars.x[i] - half, bars.x[i] - half, bars.x[i] + half, bars.x[i] + half, NaN);
        y.push(bars.low[i], bars.high[i], bars.high[i], bars.low[i], NaN);
      }
      data[index] = Object.assign({}, trace, {
        x: x, y: y, mode: "none", fill: "toself", fillcolor: trace.fillcolor || (trace.line && trace.line.color),
        meta: Object.assign({}, trace.meta, { bars: bars }),
      });
    });
  }

  // Before a timeline is drawn: its labels placed for the x range its layout sets, into `layout` and the
  // marker traces of `data` (copies of those drawn now, for Plotly.react to see the change), and its
  // spread bars sized for that range.
  function labelFigure(element, data, layout) {
    var geometry = predictedGeometry(element, layout);
    if (!geometry) return;
    spreadBars(data, geometry);
    var annotations = annotationsWith(data, layout, geometry);
    if (annotations) layout.annotations = annotations;
    var changes = markerTextChanges(data, geometry);
    Object.keys(changes).forEach(function (index) { data[index].text = changes[index]; });
  }

  // A drawn timeline's labels placed again from its drawn axis, in one update when any changed.
  function placeLabels(gd) {
    var geometry = drawnGeometry(gd);
    if (!geometry) return;
    var annotations = annotationsWith(gd.data, gd.layout, geometry);
    var changes = markerTextChanges(gd.data, geometry);
    var indexes = Object.keys(changes).map(Number);
    if (!annotations && !indexes.length) return;
    window.Plotly.update(
      gd,
      indexes.length ? { text: indexes.map(function (index) { return changes[index]; }) } : {},
      annotations ? { annotations: annotations } : {},
      indexes.length ? indexes : undefined
    );
  }

  // Labels placed again after every draw or resize of `gd`, but for the relayouts `redrawn(event)` says
  // its caller draws again itself (a zoom, which every timeline follows with its labels placed): the
  // placing that the relayout's own draw asked for is dropped too.
  function labelAlerts(gd, redrawn) {
    var later = null;
    var place = function (event) {
      window.clearTimeout(later);
      if (redrawn && event && redrawn(event)) return;
      later = window.setTimeout(function () { placeLabels(gd); }, 0);
    };
    gd.on("plotly_afterplot", place);
    gd.on("plotly_relayout", place);
    placeLabels(gd);
  }

  P.labelFigure = labelFigure;
  P.roomForLabels = roomForLabels;
  P.labelAlerts = labelAlerts;
})();
