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
        // a run of one second has one point: uPlot would stretch that to years
        scales: { x: { time: true, range: (u, min, max) => (min === max ? [min - 2, max + 2] : [min, max]) } },
      }, rows, box);
    } else {
      plot.setData(rows);
    }
    document.getElementById("state").textContent = data.state;
    document.getElementById("state").className = "state state-" + data.state;
    document.getElementById("confirmed").textContent =
      data.confirmed === null ? "unknown" : data.confirmed.toLocaleString("en");
    showPartitions(data.partitions, data.partitions_final);
    box.dataset.points = String(data.x.length);
    box.dataset.state = data.state;
  }

  // Each partition's line: [partition, rows, confirmed, tries, state] (rows null: not said).
  function showPartitions(lines, final) {
    const body = document.querySelector("#partitions tbody");
    if (!body || !lines || lines.length === 0) return;
    const number = (value) => (value === null ? "unknown" : value.toLocaleString("en"));
    body.replaceChildren(...lines.map(([partition, rows, confirmed, tries, state]) => {
      const share = rows === null ? null : rows === 0 ? 1 : Math.min(1, confirmed / rows);
      const row = document.createElement("tr");
      const meter = document.createElement("meter");
      meter.min = 0; meter.max = 1; meter.value = share === null ? 0 : share;
      meter.setAttribute("aria-label", "partition " + partition + " done");
      const done = document.createElement("td");
      done.append(meter, " " + (share === null ? "—" : Math.round(share * 100) + "%"));
      const cells = [partition, number(confirmed), number(rows)].map((text) => {
        const cell = document.createElement("td");
        cell.textContent = String(text);
        return cell;
      });
      const after = [tries, state].map((text) => {
        const cell = document.createElement("td");
        cell.textContent = String(text);
        return cell;
      });
      row.append(...cells, done, ...after);
      return row;
    }));
    document.getElementById("partitions-note").textContent = final
      ? "As the job reported them at its end."
      : "As their beacons said; updates with the chart.";
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
