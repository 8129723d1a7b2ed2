// Live job progress: rows with data-job="<id>" follow the workspace's "jobs" websocket topic.
function levers9FollowJobs() {
  const status = document.getElementById("live-status");

  function formatSeconds(seconds) {
    if (seconds === null || seconds === undefined) return "";
    if (seconds < 90) return Math.round(seconds) + " s";
    return Math.round(seconds / 60) + " min";
  }

  function describe(job) {
    const parts = [];
    if (job.total) parts.push(job.step + " / " + job.total);
    if (job.eta_seconds) parts.push("ETA " + formatSeconds(job.eta_seconds));
    const metrics = job.metrics || {};
    // Where a waiting job stands in its pool's line and why, as the server says it.
    if (metrics.waiting_why) {
      parts.push(metrics.waiting_why);
    } else if (metrics.waiting_for_cards !== undefined) {
      parts.push(metrics.waiting_for_cards === 0 ? "next for the cards" :
        "waiting for cards: " + metrics.waiting_for_cards + " ahead");
    }
    for (const [name, value] of Object.entries(metrics)) {
      if (name === "waiting_for_cards" || name === "waiting_why") continue;
      parts.push(name + " " + (typeof value === "number" ? Number(value.toFixed(3)) : value));
    }
    if (job.error) parts.push(job.error);
    return parts.join(" · ");
  }

  function update(job) {
    const row = document.querySelector('[data-job="' + job.id + '"]');
    if (!row) return false;
    const state = row.querySelector('[data-field="state"]');
    state.textContent = job.state_label;
    state.className = "pill state-" + job.state;
    row.querySelector('[data-field="bar"]').style.width = Math.round(job.fraction * 100) + "%";
    row.querySelector('[data-field="detail"]').textContent = describe(job);
    if (job.produced_version) row.querySelector('[data-field="version"]').textContent = job.produced_version;
    // An ended job has nothing left to cancel: its Cancel goes with it.
    const cancel = row.querySelector('[data-field="cancel"]');
    if (cancel && ["done", "failed", "cancelled"].includes(job.state)) cancel.remove();
    return true;
  }

  for (const id of ["job-payloads", "job-payload"]) {
    const element = document.getElementById(id);
    if (!element) continue;
    const data = JSON.parse(element.textContent);
    (Array.isArray(data) ? data : [data]).forEach(update);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + "/ws/events/jobs/");
    socket.onopen = () => { if (status) status.textContent = "Live updates: on"; };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.type !== "job") return;
      if (!update(event.job) && document.querySelector("#jobs tbody") && !document.getElementById("job-payload")) {
        location.reload();  // a job started elsewhere: show its row
      }
    };
    socket.onclose = (closed) => {
      if (status) status.textContent = closed.code === 4403 ? "Live updates: refused (sign in again)" : "Live updates: reconnecting…";
      if (closed.code !== 4403) setTimeout(connect, 2000);
    };
  }
  connect();
}
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", levers9FollowJobs);
} else {
  levers9FollowJobs();
}
