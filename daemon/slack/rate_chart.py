"""The rate chart: events the broker confirmed per second against the target rate, as a PNG.

The one module that imports matplotlib, through its object API (a `Figure` on an Agg canvas): no
pyplot state shared between threads, no display needed. The bot never imports it (an import-linter
contract), so the bot's slim install stays without matplotlib. The series is the job's own count per
wall-clock second of its delivery reports, so a burst or a stall shows as it happened.
"""

from __future__ import annotations

from io import BytesIO

from daemon.contract.models import RateSeriesOut, RunOut
from daemon.slack.run_report import chart_title

MAX_TITLE = 110  # one line at the chart's width
SIZE_INCHES = (9.0, 4.0)
DPI = 100


def _drawable(char: str) -> bool:
    """Latin text and punctuation (`·`, `—`, `…`): what the bundled font draws without a warning."""
    return char.isprintable() and (ord(char) < 0x250 or 0x2000 <= ord(char) < 0x2070)


def _plain(text: str) -> str:
    """A title as text: clipped, glyphs the font lacks as `?`, and `$` not read as math."""
    clipped = text if len(text) <= MAX_TITLE else text[: MAX_TITLE - 1] + "…"
    return "".join(c if _drawable(c) else "?" for c in clipped).replace("$", r"\$")


def _shaped(series: RateSeriesOut) -> bool:
    """The target moved during the run: it is drawn as the run's own curve, not one line."""
    return any(abs(target - series.target_tps) > 1e-6 for target in series.targets)


def rate_chart_png(series: RateSeriesOut, *, title: str, achieved: float | None = None) -> bytes:
    """A PNG of `series.counts` (events per second) with the target as a dashed line (the run's own
    curve when a ramp, a rate change or a pause shaped it), and the achieved
    rate (confirmed over the first-to-last delivery span; the first and last seconds are partial, so a
    mean of the buckets would understate it) when known."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # on first use: a second off every
    from matplotlib.figure import Figure  # daemon start, which draws no chart

    figure = Figure(figsize=SIZE_INCHES, dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    counts = series.counts
    if counts:
        seconds = list(range(len(counts) + 1))
        axes.stairs(counts, seconds, fill=True, alpha=0.35, color="tab:blue")
        axes.stairs(counts, seconds, color="tab:blue", label="confirmed per second")
        if achieved is not None:
            axes.axhline(achieved, color="tab:green", linewidth=1, label=f"achieved {achieved:,.0f}/s")
    else:
        axes.text(0.5, 0.5, "no confirmed deliveries", transform=axes.transAxes, ha="center", va="center")
    asked = series.target_tps
    if counts and _shaped(series):  # a ramp, a rate change or a pause: the line the run was to follow
        edges = list(range(len(series.targets) + 1))
        label = f"target (asked {asked:,}/s)"
        axes.stairs(series.targets, edges, color="tab:red", linestyle="--", label=label)
    else:
        axes.axhline(asked, color="tab:red", linestyle="--", label=f"target {asked:,}/s")
    axes.set_xlim(0, max(len(counts), 1))
    axes.set_ylim(0, max([series.target_tps, *series.targets, *counts, 1]) * 1.15)
    axes.set_xlabel(f"wall-clock seconds from {series.start:%Y-%m-%d %H:%M:%S} UTC (first and last partial)")
    axes.set_ylabel("events per second")
    axes.set_title(_plain(title), fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    figure.tight_layout()
    out = BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def render_run_chart(run: RunOut, series: RateSeriesOut) -> bytes:
    """A run's chart, titled with its reconcile verdict: what its thread gets and the API serves."""
    return rate_chart_png(series, title=chart_title(run.id, run.reconcile), achieved=run.achieved_tps)
