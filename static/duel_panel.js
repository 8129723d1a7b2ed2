// The Duel's side panel keeps up: after each pick, and as a pairs job writes pairs, the panel
// (the queue's figures and the map's counts) is fetched again and swapped in by htmx (its
// hx-get, on the "duel-refresh" event). It follows what the page already shows rather than
// the API: duel.js marks a pick on #duel (data-picked="true"), jobs.js updates the rows under
// #pairs-jobs as the job's progress arrives over the websocket.
(function () {
  "use strict";

  const duel = document.getElementById("duel");
  const panel = document.getElementById("duel-panel");
  if (!duel || !panel || !window.htmx) return;

  let timer = null;
  function refresh() {
    // One fetch for a burst of changes (a job's progress comes twice a second at most).
    clearTimeout(timer);
    timer = setTimeout(() => window.htmx.trigger(panel, "duel-refresh"), 300);
  }

  new MutationObserver((changes) => {
    if (changes.some((change) => change.oldValue !== "true" && duel.dataset.picked === "true")) {
      refresh();
    }
  }).observe(duel, { attributes: true, attributeFilter: ["data-picked"], attributeOldValue: true });

  const jobs = document.getElementById("pairs-jobs");
  if (jobs) {
    new MutationObserver(refresh).observe(jobs, {
      subtree: true,
      childList: true,
      characterData: true,
    });
  }
})();
