/*
 * Labels over a timeline: alert markers' PR labels and the PR and tag labels beside the markers, placed
 * by pixel distance so that none overlaps another, again after every zoom or resize.
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
  // Alert markers labelled with their PR ("#51830") right above them, in the lane over the lines. Labels
  // never overlap: one that would touch its neighbour goes a row higher, and where LABEL_ROWS rows are
  // full it is left to the marker's hover (which names the PR too). Placed by pixel distance, so again after every zoom or resize.
  // One row: the lane above the lines holds the alert labels' row under the PR and tag markers' rows.
  var LABEL_ROWS = 1;
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
      return { x: x, y: trace.y[i], text: text, color: color, px: full.xaxis.l2p(x), width: text ? labelWidth(text, family) : 0,
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

  P.labelAlerts = labelAlerts;
})();
