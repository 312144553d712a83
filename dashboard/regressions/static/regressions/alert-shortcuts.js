// Keyboard shortcuts on the alerts list, as Perfherder has: j/k move between groups, o or Enter opens the
// focused one, a status key sets its status (staff only, saved at once), ? shows the keys.
(() => {
  "use strict";
  const list = document.querySelector("[data-shortcuts]");
  const help = document.getElementById("shortcuts-help");
  if (!list || !help) return;
  const rows = Array.from(list.querySelectorAll("tr[data-group-id]"));
  const statusKeys = new Map(
    Array.from(help.querySelectorAll("[data-status-key]")).map((row) => [row.dataset.statusKey, row.dataset.status]),
  );
  const notice = document.querySelector("[data-shortcut-notice]");
  let focused = -1;

  function say(text, isError) {
    notice.textContent = text;
    notice.classList.toggle("error", Boolean(isError));
    notice.classList.toggle("success", !isError);
    notice.hidden = false;
  }

  function focusRow(index) {
    if (!rows.length) return;
    focused = Math.max(0, Math.min(rows.length - 1, index));
    rows.forEach((row, i) => row.classList.toggle("focused", i === focused));
    rows[focused].focus({ preventScroll: true });
    rows[focused].scrollIntoView({ block: "nearest" });
  }

  async function setStatus(status) {
    const row = rows[focused];
    if (!row) return say("Press j to pick a group first.", true);
    if (!list.hasAttribute("data-can-triage")) return say("Setting a status needs a staff sign-in.", true);
    let response;
    try {
      response = await fetch(row.dataset.statusUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": list.dataset.csrfToken },
        body: new URLSearchParams({ status }),
      });
    } catch (error) {
      return say(`Group #${row.dataset.groupId} not saved: ${error.message}`, true);
    }
    const result = await response.json().catch(() => ({}));
    if (!response.ok) return say(`Group #${row.dataset.groupId} not saved: ${result.error || response.status}`, true);
    const badge = row.querySelector("[data-status]");
    badge.className = `triage triage-${result.status}`;
    badge.textContent = result.label;
    say(`Group #${row.dataset.groupId}: ${result.label}.`);
  }

  document.querySelector("[data-shortcuts-open]")?.addEventListener("click", () => help.showModal());
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest("input, select, textarea, [contenteditable]")) return;
    if (event.key === "?") {
      if (help.open) help.close();
      else help.showModal();
    } else if (help.open) {
      return;
    } else if (event.key === "j") {
      focusRow(focused + 1);
    } else if (event.key === "k") {
      focusRow(focused < 0 ? 0 : focused - 1);
    } else if ((event.key === "o" || event.key === "Enter") && focused >= 0 && event.target === rows[focused]) {
      window.location.assign(rows[focused].dataset.groupUrl);
    } else if (statusKeys.has(event.key)) {
      setStatus(statusKeys.get(event.key));
    } else {
      return;
    }
    event.preventDefault();
  });
})();
