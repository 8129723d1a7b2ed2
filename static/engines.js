// Charts of an Engines run: learning curve, returns against the optimum, off-line comparison.
(function () {
  const data = JSON.parse(document.getElementById("chart-data").textContent);
  const layout = (title) => ({ margin: { t: 10, r: 10, b: 40, l: 50 }, yaxis: { title }, legend: { orientation: "h" } });
  const config = { displayModeBar: false, responsive: true };
  if (data.curve.length) {
    Plotly.newPlot("chart-curve", [{
      x: data.curve.map((p) => p.episode ?? p.iteration ?? p.epoch),
      y: data.curve.map((p) => p.mean_return ?? p.held_out_loss ?? p.train_loss),
      mode: "lines", name: "mean return",
    }], layout("return"), config);
  }
  if (data.scenarios.length) {
    const slugs = data.scenarios.map((s) => s.slug);
    Plotly.newPlot("chart-returns", ["optimal_return", "learned_return", "parent_return"].map((key) => ({
      type: "bar", x: slugs, y: data.scenarios.map((s) => s[key]), name: key.replace("_return", ""),
    })), layout("expected return"), config);
  }
  if (data.comparison) {
    const rows = ["learned", "parent"];
    Plotly.newPlot("chart-offline", ["won", "lost"].map((outcome) => ({
      type: "bar", x: rows, y: rows.map((r) => data.comparison[r][outcome].rate), name: outcome + " calls",
    })), layout("agreement with the real agent"), config);
  }
})();
