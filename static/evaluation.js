// Evaluate: the radar of an evaluation's results, the lead-to-order lens, and a reload when
// a followed evaluation ends (its row's state pill is kept live by jobs.js).
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
    // Bars over the score axis, as wide as their band; the versions as vertical lines.
    const bands = lens.bands;
    const bars = {
      type: "bar",
      x: bands.map((b) => (b.low + b.high) / 2),
      width: bands.map((b) => Math.max(b.high - b.low, 0.002)),
      y: bands.map((b) => b.won_rate),
      text: bands.map((b) => b.calls + " calls"),
      hovertemplate: "score %{x:.3f}<br>won rate %{y:.3f}<br>%{text}<extra></extra>",
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
      shapes.push({ type: "line", x0: version.score, x1: version.score, yref: "paper", y0: 0, y1: 1,
        line: { color: index ? "#868e96" : "#c92a2a", dash: "dash", width: 2 } });
      annotations.push({ x: version.score, yref: "paper", y: index ? 0.9 : 1.0, text: version.label,
        showarrow: false, xanchor: "left", font: { size: 11 } });
    });
    Plotly.newPlot("lens-chart", [bars], {
      margin: { t: 20, r: 20, b: 45, l: 55 },
      xaxis: { title: "judge score of the call's opening (band)" },
      yaxis: { title: "won rate", range: [0, 1] },
      shapes, annotations, showlegend: false, bargap: 0,
    }, config);
  }

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
