/*
 * The timelines of a page share one legend. On the timeline page only the first chart draws it; a click
 * on an entry hides or shows that level (or tracking issue, release tags, alerts) in every timeline of
 * the page, a double-click shows it alone, and what is hidden stays hidden through zooms and views. Each
 * chart's y axis fits the lines still shown, so a level hidden no longer squeezes the others.
 * Each chart used to draw a legend of its own again on every zoom, a tenth of a zoom's redraw of five
 * charts, and each hid a level on its own chart only.
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
  var S = P.state;
  var hidden = new Set(); // legend keys hidden in every timeline

  function keyOf(trace) {
    return (trace && (trace.legendgroup || trace.name)) || null;
  }

  function shownAs(trace) {
    var key = keyOf(trace);
    return key === null ? trace.visible : hidden.has(key) ? "legendonly" : true;
  }

  // The entries hidden in the legend hidden in `data` (copies of the traces about to be drawn, or a
  // figure's own before its y axis is fitted: a hidden level never stretches the axis).
  function legendHidden(data) {
    (data || []).forEach(function (trace) {
      if (keyOf(trace) !== null) trace.visible = shownAs(trace);
    });
  }

  // Before a timeline is drawn: its legend kept only on the timeline page's first chart, and the
  // entries hidden there hidden in `data`.
  function shareLegend(element, data, layout) {
    if (S.group && S.group.first && element !== S.group.first) layout.showlegend = false;
    legendHidden(data);
  }

  // Every timeline's traces shown or hidden as `hidden` says, and its y axis fitted again to the lines
  // still shown over the range in view, in one update per chart. Small multiples keep their panels.
  function restyleAll() {
    var range = P.zoomFromUrl();
    S.timelines.forEach(function (gd) {
      var indexes = [], visible = [];
      gd.data.forEach(function (trace, index) {
        if (keyOf(trace) === null) return;
        indexes.push(index);
        visible.push(shownAs(trace));
      });
      if (!indexes.length) return;
      var relayout = {};
      if (gd.layout.yaxis && !gd.layout.yaxis3) {
        var shown = gd.data.map(function (trace) {
          return { x: trace.x, y: trace.y, meta: trace.meta, yaxis: trace.yaxis, visible: shownAs(trace) };
        });
        var fitted = P.fitY(shown, gd.layout.yaxis, range, gd.layout.meta);
        if (fitted) relayout = { "yaxis.range": fitted, "yaxis.autorange": false };
      }
      window.Plotly.update(gd, { visible: visible }, relayout, indexes);
    });
  }

  function everyKey() {
    var keys = new Set();
    S.timelines.forEach(function (gd) {
      gd.data.forEach(function (trace) {
        var key = keyOf(trace);
        if (key !== null) keys.add(key);
      });
    });
    return keys;
  }

  // Two clicks on one entry this close together are a double-click. Plotly's own double-click event comes
  // before or after the second click's event as timing has it, and follows two clicks on different
  // entries too: the clicks are read here instead.
  var DOUBLE_CLICK_MS = 300;
  var lastClick = null; // {key, time, before: the hidden keys before that click}

  // A drawn timeline's legend acting on every timeline: a click hides or shows the entry, a double-click
  // shows the entry alone (or everything again, when it was alone already).
  function legendClicks(gd) {
    gd.on("plotly_legendclick", function (event) {
      var key = keyOf(event.data[event.curveNumber]);
      if (key === null) return true;
      // When the click happened, not when it is handled: the first click's redraw of a long history can
      // hold the second one back past the double-click's window.
      var now = event.event && event.event.timeStamp ? event.event.timeStamp : window.performance.now();
      if (lastClick && lastClick.key === key && now - lastClick.time < DOUBLE_CLICK_MS) {
        var keys = everyKey();
        var before = lastClick.before;
        var alone = !before.has(key) && Array.from(keys).every(function (other) {
          return other === key || before.has(other);
        });
        hidden.clear();
        if (!alone) keys.forEach(function (other) { if (other !== key) hidden.add(other); });
        lastClick = null;
      } else {
        lastClick = { key: key, time: now, before: new Set(hidden) };
        if (hidden.has(key)) hidden.delete(key);
        else hidden.add(key);
      }
      restyleAll();
      return false;
    });
    gd.on("plotly_legenddoubleclick", function () { return false; });
  }

  P.shareLegend = shareLegend;
  P.legendHidden = legendHidden;
  P.legendClicks = legendClicks;
})();
