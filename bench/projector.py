"""The Projector's map at 50k points: payload bytes, time to first paint and a pan/zoom relayout in Chromium.

What is measured, exactly:
1. Two real projections of the bundled corpus with the bundled bert-mini (sample mode: every word of a random
   sample of sentences, PCA, 2-D): BENCH_POINTS (default 50,000) points and the baseline, BENCH_BASE (5,000).
2. The figure the page draws for each (app/views/represent/projector.map_figure, colour by next word, the last depth) and
   its payload: ``plotly.io.to_json(fig, validate=False)``, which is exactly the spec st.plotly_chart sends. Also
   the same 50k figure with every trace as SVG ``go.Scatter`` instead of ``go.Scattergl`` (the second baseline).
3. Each figure in a static HTML page (the plotly.js bundled with the plotly package, the figure's JSON inline; not
   the Streamlit page: a Streamlit rerun adds a websocket round trip and its own React render, which would hide
   what the plot costs) in Debian's Chromium, headless, with the flags the e2e tests use (--disable-gpu: WebGL runs
   on SwiftShader, on the CPU, so a browser with a GPU does better). "First paint": from before
   ``Plotly.newPlot`` to two animation frames after its promise resolves (the frame with the plot painted);
   "relayout": ``Plotly.relayout`` to a zoomed-in x/y range and back, the same two frames after, median of
   BENCH_ROUNDS. Each page is loaded fresh.
Prints the numbers and the ratios against the 5k Scattergl figure, and 50k Scatter against 50k Scattergl.

Run: .venv/bin/python bench/projector.py  [BENCH_POINTS=n] [BENCH_BASE=n] [BENCH_ROUNDS=n] [--quick]
``--quick``: 2,000 points against 500, 1 relayout round (seconds; tests/test_bench_quick.py runs it). Without
Chromium or playwright the bench says so and stops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import plotly.graph_objects as go  # noqa: E402
import plotly.io as pio  # noqa: E402
from plotly.io.json import to_json_plotly  # noqa: E402
from plotly.offline import get_plotlyjs  # noqa: E402

from core.models.loading import ModelSpec, load  # noqa: E402
from core.represent.projector import ProjectorConfig, project  # noqa: E402

POINTS = int(os.environ.get("BENCH_POINTS", "50000"))
BASE = int(os.environ.get("BENCH_BASE", "5000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
CHROMIUM = os.environ.get("ENCODERLAB_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

PAGE = """<!doctype html><html><head><meta charset="utf-8"><script>{js}</script></head>
<body style="margin:0"><div id="plot" style="width:1200px;height:620px"></div>
<script>window.FIG = {fig};</script></body></html>"""

TWO_FRAMES = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
PAINT = (
    """async () => { const t0 = performance.now();
  await Plotly.newPlot('plot', FIG.data, FIG.layout, {displaylogo: false});
  await """
    + TWO_FRAMES
    + """; return performance.now() - t0; }"""
)
RELAYOUT = (
    """async (zoom) => { const t0 = performance.now();
  await Plotly.relayout('plot', zoom ? {'xaxis.range': [-0.5, 0.5], 'yaxis.range': [-0.5, 0.5]}
                                     : {'xaxis.range': [-3, 3], 'yaxis.range': [-3, 3]});
  await """
    + TWO_FRAMES
    + """; return performance.now() - t0; }"""
)


def figure(n: int, lm) -> go.Figure:
    """The page's figure (render_projector.map_figure) of a real n-point projection, outside Streamlit."""
    from app.views.represent.projector import map_figure  # t() outside a script run: English (app.kit.i18n)

    t0 = time.perf_counter()
    p = project(lm, ProjectorConfig(what="sample", max_points=n, color="next_word"))
    print(f"  projected {len(p):,} points from {p.sentences_read:,} sentences in {time.perf_counter() - t0:,.1f} s")
    return map_figure(p, p.depths[-1], "next_word")


def as_svg(fig: go.Figure) -> go.Figure:
    out = go.Figure(layout=fig.layout)
    for tr in fig.data:
        out.add_trace(
            go.Scatter(
                x=tr.x,
                y=tr.y,
                mode="markers",
                name=tr.name,
                text=tr.text,
                hovertemplate=tr.hovertemplate,
                marker=tr.marker.to_plotly_json(),
            )
        )
    return out


def payload(fig: go.Figure) -> tuple[str, dict]:
    spec = pio.to_json(fig, validate=False)  # what st.plotly_chart puts in its proto
    d = json.loads(spec)
    coords = sum(len(json.dumps(tr.get(a))) for tr in d["data"] for a in ("x", "y", "z") if a in tr)
    text = sum(len(to_json_plotly(tr.get(a, []))) for tr in d["data"] for a in ("text", "customdata"))  # as sent
    return spec, {
        "bytes": len(spec.encode()),
        "coords": coords,
        "text": text,
        "points": sum(len(tr.get("text", [])) for tr in d["data"]),
    }


def browser_times(browser, spec: str) -> tuple[float, float]:
    """(first paint ms, median relayout ms) of one figure in a fresh page."""
    with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False, encoding="utf-8") as f:
        f.write(PAGE.format(js=get_plotlyjs(), fig=spec))
        path = f.name
    try:
        pg = browser.new_page(viewport={"width": 1250, "height": 700})
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(f"file://{path}")
        first = pg.evaluate(PAINT)
        gl = pg.evaluate("() => document.querySelectorAll('#plot canvas').length")
        relayouts = [pg.evaluate(RELAYOUT, i % 2 == 0) for i in range(2 * ROUNDS)]
        pg.close()
        if errors:
            raise RuntimeError(f"the page failed: {errors}")
        return first, statistics.median(relayouts), gl
    finally:
        os.unlink(path)


def k(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else f"{n:,}"


def main() -> None:
    global POINTS, BASE, ROUNDS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2,000 points against 500, 1 round: seconds")
    if ap.parse_args().quick:
        POINTS, BASE, ROUNDS = 2000, 500, 1
    try:
        from playwright.sync_api import sync_playwright  # lazy: only this bench drives a browser
    except ImportError:
        print("bench/projector.py skipped: playwright is not installed here (requirements-test.txt)")
        return
    if not Path(CHROMIUM).is_file():
        print(
            f"bench/projector.py skipped: no Chromium at {CHROMIUM} (ENCODERLAB_CHROMIUM; scripts/install_chromium.sh)"
        )
        return

    lm = load(ModelSpec("bert", "encoderlab/bert-mini", "cpu"), "base")
    print(f"bert-mini, bundled corpus, sample mode, PCA 2-D, colour by next word, last depth; {ROUNDS} relayout rounds")
    figs = {}
    for label, n in ((f"{k(BASE)} Scattergl (baseline)", BASE), (f"{k(POINTS)} Scattergl", POINTS)):
        print(label)
        figs[label] = figure(n, lm)
    big = f"{k(POINTS)} Scattergl"
    figs[f"{k(POINTS)} Scatter (SVG)"] = as_svg(figs[big])
    rows = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        for label, fig in figs.items():
            spec, size = payload(fig)
            paint, relayout, canvases = browser_times(browser, spec)
            rows[label] = dict(size, paint=paint, relayout=relayout, canvases=canvases)
        browser.close()
    base = rows[next(iter(rows))]
    print(
        f"\n{'figure':26s} {'points':>7s} {'payload':>10s} {'coords':>9s} {'hover':>9s} {'paint':>9s} "
        f"{'relayout':>9s}  canvases"
    )
    for label, r in rows.items():
        print(
            f"{label:26s} {r['points']:7,d} {r['bytes'] / 1e6:8.2f}MB {r['coords'] / 1e6:7.2f}MB "
            f"{r['text'] / 1e6:7.2f}MB {r['paint']:7.0f}ms {r['relayout']:7.0f}ms  {r['canvases']}"
        )
    gl, svg = rows[big], rows[f"{k(POINTS)} Scatter (SVG)"]
    print(
        f"\n{big} / {next(iter(rows))}: payload {gl['bytes'] / base['bytes']:.1f}x, first paint "
        f"{gl['paint'] / base['paint']:.1f}x, relayout {gl['relayout'] / base['relayout']:.1f}x "
        f"(points {gl['points'] / base['points']:.1f}x)"
    )
    print(
        f"Scatter (SVG) / Scattergl at {k(POINTS)}: first paint {svg['paint'] / gl['paint']:.1f}x, "
        f"relayout {svg['relayout'] / gl['relayout']:.1f}x"
    )


if __name__ == "__main__":
    main()
