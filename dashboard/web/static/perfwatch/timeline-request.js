/*
 * Asks for a timeline page's chart data as soon as its charts are laid out: loaded right after the chart
 * grid, not deferred (so after the stylesheets, whose layout gives the charts' width), while the rest of
 * the page and its deferred scripts, plotly.js among them, still load and run. The request is the one
 * charts.js makes (the same address, the width of the widest chart); charts.js takes its answer through
 * PerfWatch.early, or asks again where the address came out otherwise.
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
  var group = document.querySelector("[data-timeline-url]");
  if (!group || !window.fetch) return;
  var charts = Array.prototype.slice.call(group.querySelectorAll("[data-metric]"));
  var width = Math.max.apply(null, charts.map(function (chart) { return chart.clientWidth; }).concat([300]));
  var url = new URL(group.dataset.timelineUrl, window.location.href);
  url.searchParams.set("width", String(Math.round(width)));
  P.early = { url: url.toString(), response: fetch(url.toString(), { headers: { Accept: "application/json" } }) };
})();
