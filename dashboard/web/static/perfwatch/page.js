/*
 * What a page does besides charts:
 *   form[data-autosubmit]                      submits itself when a choice (select, checkbox) changes
 *   <div data-live-url="/api/..." data-live-signature="s" data-live-interval="10">
 *                                              polls the URL; reloads the page when its signature moves
 *   <span data-elapsed-base="42">              seconds at render; counts on every second
 *   <button data-copy-target="element-id">     copies that element's text
 *   <pre data-scroll-end>                      shows its end (a log's tail), also when its <details> opens
 *   <details data-fragment-url="/...">         fetched when first opened, into its [data-fragment-slot]
 */
(function () {
  "use strict";

  var P = (window.PerfWatch = window.PerfWatch || {});
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

  // A folded part of a long page: this site's own HTML, asked for when the reader opens it.
  function fragment(details) {
    var asked = false;
    details.addEventListener("toggle", function () {
      if (!details.open || asked) return;
      asked = true;
      var slot = details.querySelector("[data-fragment-slot]");
      fetch(details.dataset.fragmentUrl, { headers: { Accept: "text/html" } })
        .then(function (response) {
          if (!response.ok) throw new Error(response.statusText);
          return response.text();
        })
        .then(function (html) {
          slot.innerHTML = html;
          details.dataset.loaded = "true";
        })
        .catch(function (error) {
          asked = false;
          slot.textContent = "Could not load this part: " + error.message;
        });
    });
  }

  function start() {
    document.querySelectorAll("details[data-fragment-url]").forEach(fragment);
    document.querySelectorAll("form[data-autosubmit]").forEach(autosubmit);
    document.querySelectorAll("[data-live-url]").forEach(follow);
    document.querySelectorAll("button[data-copy-target]").forEach(copyButton);
    document.querySelectorAll("[data-scroll-end]").forEach(scrollToEnd);
    var elapsed = document.querySelectorAll("[data-elapsed-base]");
    if (elapsed.length) tickElapsed(Array.prototype.slice.call(elapsed));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
