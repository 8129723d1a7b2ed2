// Evaluate: the World select that reloads for its world, the radar of an evaluation's results,
// the lead-to-order lens, and a reload when a followed evaluation ends (its row's state pill is
// kept live by jobs.js).
(function () {
  const config = { displayModeBar: false, responsive: true };
  const colours = ["#3b5bdb", "#868e96", "#2b8a3e"];

  function data(id) {
    const element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  }

  const radar = data("radar-data");
  if (radar && window.Plotly && document.getElementById("radar")) {
    const labels = radar.dimensions.concat(radar.dimensions.slice(0, 1));  // close the shape
    Plotly.newPlot("radar", radar.series.map((series, index) => ({
      type: "scatterpolar",
      r: series.values.concat(series.values.slice(0, 1)),
      theta: labels,
      name: series.name,
      fill: index < 2 ? "toself" : "none",
      opacity: index < 2 ? 0.55 : 0.9,
      line: { color: colours[index % colours.length], dash: index < 2 ? "solid" : "dot" },
    })), {
      margin: { t: 20, r: 40, b: 20, l: 40 },
      polar: { radialaxis: { range: [0, 1], tickformat: ".1f" } },
      legend: { orientation: "h" },
    }, config);
  }

  const lens = data("lens-data");
  if (lens && lens.bands.length && window.Plotly && document.getElementById("lens-chart")) {
    // The bands are drawn on the world's own score distribution (evaluation.scoring): each
    // spans its share of the world's calls, so equal-count bands are equally wide however
    // their scores bunch, and each is labelled with its score range on two short lines, so
    // neighbouring labels never overlap. The versions stand at their share of the calls
    // scoring below them.
    const bands = lens.bands;
    const range = (b) => b.low.toFixed(3) + "–<br>" + b.high.toFixed(3);
    const bars = {
      type: "bar",
      x: bands.map((b) => (b.share_low + b.share_high) / 2),
      width: bands.map((b) => b.share_high - b.share_low),
      y: bands.map((b) => b.won_rate),
      text: bands.map((b) => b.calls + " calls, score " + b.low.toFixed(3) + "–" + b.high.toFixed(3)),
      textposition: "none",
      hovertemplate: "won rate %{y:.3f}<br>%{text}<extra></extra>",
      error_y: {
        type: "data", symmetric: false,
        array: bands.map((b) => (b.ci_high ?? b.won_rate) - b.won_rate),
        arrayminus: bands.map((b) => b.won_rate - (b.ci_low ?? b.won_rate)),
      },
      marker: { color: "#bac8ff", line: { color: "#3b5bdb", width: 1 } },
      name: "won rate of recorded calls",
    };
    const shapes = [], annotations = [];
    lens.versions.forEach((version, index) => {
      if (version.share === null || version.share === undefined) return;
      shapes.push({ type: "line", x0: version.share, x1: version.share, yref: "paper", y0: 0, y1: 1,
        line: { color: index ? "#868e96" : "#c92a2a", dash: "dash", width: 2 } });
      annotations.push({ x: version.share, yref: "paper", y: index ? 0.9 : 1.0, text: version.label,
        showarrow: false, xanchor: version.share > 0.7 ? "right" : "left", font: { size: 11 } });
    });
    Plotly.newPlot("lens-chart", [bars], {
      margin: { t: 20, r: 20, b: 70, l: 55 },
      xaxis: {
        title: { text: "judge score of the call's opening (band)", standoff: 4 },
        range: [0, 1], tickmode: "array",
        tickvals: bands.map((b) => (b.share_low + b.share_high) / 2),
        ticktext: bands.map(range), tickangle: 0, tickfont: { size: 10 },
      },
      yaxis: { title: "won rate", range: [0, 1] },
      shapes, annotations, showlegend: false, bargap: 0,
    }, config);
  }

  // The World select reloads the page for its world (a plain GET), so the version lists are
  // that world's; without this script its button does the same.
  document.querySelectorAll("select[data-reload-on-change]").forEach((select) => {
    const button = select.form && select.form.querySelector("[data-reload-button]");
    if (button) button.hidden = true;
    select.addEventListener("change", () => select.form.submit());
  });

  // Reload when an evaluation followed on this page ends, to show its results.
  const ended = ["state-done", "state-failed", "state-cancelled"];
  document.querySelectorAll("tr[data-evaluation]").forEach((row) => {
    if (["done", "failed", "cancelled"].includes(row.dataset.state)) return;
    const pill = row.querySelector('[data-field="state"]');
    if (!pill) return;
    new MutationObserver(() => {
      if (ended.some((name) => pill.classList.contains(name))) location.reload();
    }).observe(pill, { attributes: true, attributeFilter: ["class"] });
  });
})();
