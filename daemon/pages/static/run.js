// The run page's chart: events per second achieved against the rate asked for, redrawn from
// chart.json every two seconds until the run has ended (uPlot, vendored beside this file).
(function () {
  const box = document.getElementById("chart");
  if (!box) return;
  let plot = null;

  function draw(data) {
    const rows = [data.x, data.target, data.achieved];
    if (plot === null) {
      plot = new uPlot({
        width: Math.max(320, box.clientWidth || 800),
        height: 320,
        series: [
          {},
          { label: "asked (events/s)", stroke: "#4a525c", dash: [6, 4], width: 1.5 },
          { label: "achieved (events/s)", stroke: "#0b4f8a", width: 2 },
        ],
        axes: [{}, { label: "events/s", size: 70 }],
      }, rows, box);
    } else {
      plot.setData(rows);
    }
    document.getElementById("state").textContent = data.state;
    document.getElementById("state").className = "state state-" + data.state;
    document.getElementById("confirmed").textContent =
      data.confirmed === null ? "unknown" : data.confirmed.toLocaleString("en");
    box.dataset.points = String(data.x.length);
    box.dataset.state = data.state;
  }

  async function tick() {
    try {
      const answer = await fetch(box.dataset.url, { credentials: "same-origin" });
      if (answer.ok) {
        const data = await answer.json();
        draw(data);
        if (data.terminal) {
          document.getElementById("chart-note").textContent = data.per_second
            ? "Events per second the broker confirmed, against the rate asked for."
            : "The run has ended; its per-second counts were not recorded.";
          return;
        }
      }
    } catch (error) {
      document.getElementById("chart-note").textContent = "Could not reach the service; trying again.";
    }
    setTimeout(tick, 2000);
  }
  tick();
})();
