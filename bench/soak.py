"""A workshop day, shortened: a real Streamlit server driven by real browser sessions, sampled every minute.

    .venv/bin/python bench/soak.py [--minutes 20] [--sessions 6] [--sample-s 60] [--out FOLDER] [--quick]

The sessions are real browser contexts (Debian's Chromium through Playwright's async API, one browser, one context
per session), not Streamlit's websocket client: a context is exactly what a person's tab is (its own Streamlit
session, the page's own scripts, the charts drawn), and the server cannot tell it from a person. Roles:
- session 1 presents a workshop room (the walkthrough in presenter mode) and moves one step every ~20 s;
- session 2 follows the room; every few minutes it leaves (its context closed) and a new follower joins;
- every other session loops, inside its own session (the sidebar's links, no reloads): a fill-mask prediction, a
  sentence-pair prediction, the attention view, an attribution, a corpus search (the first search builds the index);
  the first of them starts a fine-tune every few minutes and cancels it at its next turn; every few rounds a
  looping session leaves and a new one joins.

Each minute (``--sample-s``) the server process and its workers (its child processes: job workers) are read from
/proc: resident memory, open file descriptors, threads; with the run folder's bytes and the job table's size (the
server writes its tables to ENCODERLAB_STATS_FILE: core.runtime.server_stats). Targets, printed met or missed:
- after the first 5 minutes (``--warm-min``), the server's RSS grows <= 10%, and the other counts stay flat: the last
  sample (taken 20 s after every session has left, once the server has noticed) <= the one at the warm-up mark plus
  10% or a small slack (8 fds, 4 threads, 4 jobs, 1 MiB);
- no exception shown to any session (a Streamlit exception box, an error alert, a console error, an HTTP error, an
  action that timed out), and no traceback in the server's log;
- p95 of the prediction actions (fill-mask and sentence pair: click to the fresh result drawn) in the last 5
  minutes (``--window-min``) <= 1.2x the first 5. The baseline is the same run's first window.
The exit status is 1 when any session saw an exception (growth and timing are measurements: printed, not enforced).

``--quick``: 2 minutes, 3 sessions (presenter, follower, one looping session that also fine-tunes), a sample every
20 s, a warm-up of 30 s and windows of 45 s (tests/test_bench_quick.py runs it in `make test`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.async_api import TimeoutError as PlaywrightTimeout  # noqa: E402
from playwright.async_api import async_playwright  # noqa: E402

from core.runtime.server_stats import STATS_ENV, process_counts  # noqa: E402
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, LOCAL_HOSTS, start_streamlit, stop_streamlit  # noqa: E402

# a script is done and drawn: no element from the previous run waits to be redrawn, no "Running..." widget
IDLE = "() => !document.querySelector('[data-stale=true]') && !document.querySelector('[data-testid=stStatusWidget]')"
SHOWS = "t => " + IDLE[len("() => ") :] + " && document.querySelector('[data-testid=stMain]').innerText.includes(t)"
STEP_IS = (
    "n => [...document.querySelectorAll('[data-testid=stMain] h2')].some(h => h.textContent.trim().startsWith(n + '.'))"
)
TIMEOUT_MS = 180_000  # a 2-core machine running six browsers, a server and a fine-tune can take minutes per page
FILLS = ["the cat slept on the warm [MASK].", "paris is the [MASK] of france.", "she drank a cup of [MASK]."]
PAIRS = [("It began to rain at noon.", "Everyone went inside."), ("He bought a new bike.", "It was red and fast.")]
CORPUS = ["The bank of the river was muddy.", "I put money in the bank.", "A cat sat on the mat.", "Dogs bark."]
SEARCHES = [(CORPUS[0], "bank"), (CORPUS[2], "cat"), (CORPUS[3], "Dogs")]
PREDICTIONS = ("fill-mask", "pair")
AFTER_S = 20.0  # the last sample waits this long after the sessions have left (the sweeper looks every 5 s, twice)


@dataclass
class Record:
    """What every session did: (seconds since start, action, seconds taken), and every fault it saw."""

    t0: float
    actions: list[tuple[float, str, float]] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    joins: int = 0
    left: int = 0

    def note(self, action: str, started: float) -> None:
        self.actions.append((started - self.t0, action, time.monotonic() - started))


class Tab:
    """One person: a browser context (its own Streamlit session) with its console, HTTP and exception checks."""

    def __init__(self, rec: Record, name: str):
        self.rec, self.name, self.ctx, self.pg = rec, name, None, None
        self.browser = None
        self.doing = "joining"  # the action under way, named in a fault
        self.shots: Path | None = None  # where a failed action's screenshot goes (--out)
        self.step, self.stepped = 1, time.monotonic()  # a presenter's step, and when it moved there

    async def open(self, browser, url: str) -> None:
        self.ctx = await browser.new_context(viewport={"width": 1300, "height": 1000})
        self.pg = await self.ctx.new_page()
        self.pg.on("console", lambda m: m.type == "error" and self.fault(f"console: {m.text}"))
        self.pg.on("response", lambda r: r.status >= 400 and self.fault(f"HTTP {r.status} {r.url}"))
        self.pg.on("request", self._request)
        self.rec.joins += 1
        await self.pg.goto(url, timeout=TIMEOUT_MS)

    def _request(self, req) -> None:
        url = urlparse(req.url)  # as tests/e2e/conftest.py's page fixture reads it ([::1] included)
        if url.scheme in ("http", "https", "ws", "wss") and (url.hostname or "") not in LOCAL_HOSTS:
            self.fault(f"request left localhost: {req.url}")

    def fault(self, what: str) -> None:
        self.rec.faults.append(f"{self.name}, {self.doing}: {what}")

    async def close(self) -> None:
        if self.ctx is not None:
            await self.ctx.close()
            self.rec.left += 1

    @property
    def main(self):
        return self.pg.locator('[data-testid="stMain"]')

    async def until(self, js: str, arg=None) -> None:
        await self.pg.wait_for_function(js, arg=arg, timeout=TIMEOUT_MS)

    async def shown(self, text: str) -> None:
        """Wait until the page has finished running and shows ``text``; then look for exceptions and errors."""
        await self.until(SHOWS, text)
        await self.check()

    async def fresh(self, loc, what: str) -> None:
        """Wait for ``loc`` (the action's fresh result) to be visible; on a timeout, fail saying how many matching
        elements the page holds and how many are visible, and what its main area says: a result that came late, one
        drawn but never visible, and one never drawn read apart (the fourth 20-minute run's one attribution timeout
        could not be told apart)."""
        try:
            await loc.first.wait_for(timeout=TIMEOUT_MS)
        except PlaywrightTimeout:
            n = await loc.count()
            visible = sum([await loc.nth(i).is_visible() for i in range(n)])
            text = " ".join((await self.main.inner_text()).split())[-150:]
            raise PlaywrightTimeout(
                f"{what} not seen within {TIMEOUT_MS // 1000} s; now {n} on the page, {visible} visible; the page "
                f"ends: {text}"
            ) from None

    async def check(self) -> None:
        for sel, what in (
            ('[data-testid="stException"]', "exception"),
            ('[data-testid="stAlertContentError"]', "error"),
        ):
            boxes = self.pg.locator(sel)
            for i in range(await boxes.count()):
                self.fault(f"{what} shown: {(await boxes.nth(i).inner_text())[:300]}")

    async def go(self, page_title: str) -> None:
        self.doing = page_title
        await self.pg.locator('[data-testid="stSidebarNav"]').get_by_text(page_title, exact=True).click()
        await self.until(IDLE)


# ------------------------------------------------------------------------------------------------- the roles
async def presenter(tab: Tab, base: str, end: float, room: asyncio.Future) -> None:
    await tab.open(tab.browser, f"{base}/walkthrough?present=1")
    await tab.pg.get_by_role("button", name="Start a room").click(timeout=TIMEOUT_MS)
    await tab.until("() => location.search.includes('key=')")
    room.set_result(tab.pg.url.split("room=")[1].split("&")[0])
    step, way = 1, 1
    while time.monotonic() < end:
        await asyncio.sleep(20)
        if not 1 <= step + way <= 7:
            way = -way
        started = time.monotonic()
        await tab.pg.get_by_role("button", name="Next" if way > 0 else "Previous").first.click(timeout=TIMEOUT_MS)
        step += way
        await tab.until(STEP_IS, step)
        tab.step, tab.stepped = step, time.monotonic()
        await tab.until(IDLE)
        await tab.check()
        tab.rec.note("room step", started)


async def follower(tab: Tab, base: str, end: float, room: asyncio.Future, lead: Tab, stay_s: float) -> None:
    code = await room
    while time.monotonic() < end:
        joined = time.monotonic()
        await tab.open(tab.browser, f"{base}/?room={code}")
        await tab.until("() => !!document.querySelector('.st-key-room-banner')")
        seen = 0
        while time.monotonic() < min(end, joined + stay_s):
            want, since = lead.step, lead.stepped
            if want != seen and await tab.pg.evaluate(STEP_IS, want):  # it shows the presenter's new step
                if seen:  # the delay from the presenter's click (the first step is the join, not a follow)
                    tab.rec.actions.append((since - tab.rec.t0, "room follow", time.monotonic() - since))
                seen = want
                await tab.check()
            elif want == seen or time.monotonic() - since < 60:
                await asyncio.sleep(0.25)
            else:
                tab.fault(f"did not follow the presenter to step {want} in 60 s")
                seen = want
        await tab.close()


async def looper(tab: Tab, base: str, end: float, k: int, finetunes: bool, ft_every_s: float, churn: int) -> None:
    rnd, ft_at, ft_on = 0, time.monotonic(), False
    while time.monotonic() < end:
        await tab.open(tab.browser, f"{base}/fill-mask")
        await tab.main.get_by_label("Text with [MASK] (several are fine)").wait_for(timeout=TIMEOUT_MS)
        for _ in range(churn):
            if time.monotonic() >= end:
                break
            rnd += 1
            marker = f"round {rnd} of session {k}"
            # fill-mask: the joint fill repeats the typed text, so the marker shows the fresh result
            await tab.go("Fill-mask")
            await tab.main.get_by_label("Text with [MASK] (several are fine)").fill(f"{marker} : {FILLS[rnd % 3]}")
            started = time.monotonic()
            await tab.main.get_by_role("button", name="Predict").click()
            await tab.shown(f"{marker} :")
            tab.rec.note("fill-mask", started)
            a, b = PAIRS[rnd % 2]
            await tab.go("Sentence pair (NSP/SOP)")
            await tab.main.get_by_label("Sentence A").fill(f"{a} ({marker})")
            await tab.main.get_by_label("Sentence B").fill(b)
            started = time.monotonic()
            await tab.main.get_by_role("button", name="Score with Next Sentence Prediction").click()
            await tab.shown(f"{a} ({marker}) ‖ {b}")
            tab.rec.note("pair", started)
            year = str(1900 + (7 * rnd + k) % 120)  # one token, never the previous round's: the fresh view shows it
            await tab.go("Attention")
            await tab.main.get_by_label("Text (sentence A)").fill(f"{a} It was {year}.")
            started = time.monotonic()
            await tab.main.get_by_role("button", name="Show attention").click()
            head_view = tab.pg.frame_locator('iframe[title="bertviz head view"]')
            await tab.fresh(head_view.get_by_text(year, exact=True), f"the head view of {year}")
            await tab.until(IDLE)
            await tab.check()
            tab.rec.note("attention", started)
            await tab.go("Attributions")
            await tab.main.get_by_label("Text", exact=True).fill(f"in {year} {FILLS[rnd % 3]}")
            started = time.monotonic()
            await tab.main.get_by_role("button", name="Explain", exact=True).click()
            await tab.fresh(tab.main.locator(".attr-tok", has_text=year), f"the attribution of {year}")
            await tab.shown("Explaining:")
            tab.rec.note("attribution", started)
            await corpus_search(tab, rnd)
            if finetunes and time.monotonic() >= ft_at:
                ft_on = await finetune(tab, ft_on)
                ft_at = time.monotonic() + ft_every_s
        if finetunes and ft_on:  # it leaves only once its fine-tune is cancelled
            ft_on = await finetune(tab, ft_on)
        await tab.close()


async def settle(tab: Tab) -> None:
    """Idle twice, half a second apart: the script run a key press started has begun and ended."""
    await tab.until(IDLE)
    await asyncio.sleep(0.5)
    await tab.until(IDLE)


async def corpus_search(tab: Tab, rnd: int) -> None:
    await tab.go("Corpus search")
    started = time.monotonic()
    if not await tab.main.get_by_text(re.compile(r"^Index: \d+ sentences")).count():
        await tab.main.get_by_text("Paste text", exact=True).click()
        await tab.until(IDLE)
        await tab.main.get_by_label(re.compile("^Your corpus: one sentence per line")).last.fill("\n".join(CORPUS))
        await tab.main.get_by_role("button", name="Build index").click()  # built once; a later session loads it
        await tab.main.get_by_text(re.compile(r"^Index: \d+ sentences")).first.wait_for(timeout=TIMEOUT_MS)
        await tab.until(IDLE)
        tab.rec.note("index build", started)
        started = time.monotonic()
    sentence, word = SEARCHES[rnd % len(SEARCHES)]  # a word of its own each round: the fresh neighbours mark it
    query = tab.main.get_by_label(re.compile("^Query sentence")).last
    await query.fill(sentence)
    await query.press("Enter")
    button = tab.main.locator('[data-testid="stButtonGroup"] button', has_text=re.compile(f"^{word}$"))
    await button.first.wait_for(timeout=TIMEOUT_MS)
    await settle(tab)  # a click on the words of the run before is lost when the new run redraws them
    await button.first.click()
    marked = tab.main.locator('[data-testid="cs-neighbour"] mark', has_text=re.compile(f"^{word}$", re.I))
    await marked.first.wait_for(timeout=TIMEOUT_MS)
    await tab.until(IDLE)
    await tab.check()
    tab.rec.note("corpus search", started)


async def finetune(tab: Tab, running: bool) -> bool:
    """Start a fine-tune (``running`` False) or cancel the one running; returns whether one runs now."""
    await tab.go("Fine-tune")
    started = time.monotonic()
    if running:
        cancel = tab.main.get_by_role("button", name="Cancel")
        try:  # the run's panel is a fragment: it may draw a moment after the page
            await cancel.first.wait_for(timeout=30_000)
        except PlaywrightTimeout:  # it finished before its turn to be cancelled
            tab.rec.note("fine-tune finished", started)
            return False
        await cancel.first.click()
        await tab.main.get_by_text(re.compile(r"was cancelled after")).first.wait_for(timeout=TIMEOUT_MS)
        await tab.until(IDLE)
        await tab.check()
        tab.rec.note("fine-tune cancel", started)
        return False
    await tab.main.get_by_text("Bundled: UCI drug reviews").click()
    await tab.until(IDLE)
    for label, value in (("Epochs", "3"), ("Early-stopping patience (0 = off)", "0")):
        box = tab.pg.get_by_label(label, exact=True)
        await box.fill(value)
        await box.press("Tab")
        await tab.until(IDLE)
    await tab.pg.get_by_role("button", name="Start fine-tuning").click()
    await tab.main.get_by_text(re.compile(r"Fine-tune run\d+-\w+: (step \d+/|starting|loading)")).first.wait_for(
        timeout=TIMEOUT_MS
    )
    await tab.check()
    tab.rec.note("fine-tune start", started)
    return True


# ------------------------------------------------------------------------------------------------- sampling
def descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(p))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def folder_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def sample(pid: int, runs: Path, stats: Path, t0: float) -> dict:
    server = process_counts(pid)
    workers = [c for c in (process_counts(w) for w in descendants(pid)) if c]
    try:
        jobs = json.loads(stats.read_text()).get("jobs")
    except (OSError, ValueError):
        jobs = None  # the job runner starts with the first job
    return {
        "min": round((time.monotonic() - t0) / 60, 2),
        "rss_mb": round(server.get("rss_bytes", 0) / 2**20, 1),
        "fds": server.get("fds"),
        "threads": server.get("threads"),
        "workers": len(workers),
        "workers_rss_mb": round(sum(w["rss_bytes"] for w in workers) / 2**20, 1),
        "runs_mb": round(folder_bytes(runs) / 2**20, 2),
        "jobs": jobs,
    }


async def sampler(samples: list, pid: int, runs: Path, stats: Path, t0: float, end: float, every: float) -> None:
    while True:
        samples.append(sample(pid, runs, stats, t0))
        if time.monotonic() >= end:
            return
        await asyncio.sleep(min(every, max(0.0, end - time.monotonic())))


# ------------------------------------------------------------------------------------------------- report
def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))] if xs else float("nan")


SLACK = {"fds": 8, "threads": 4, "jobs": 4, "runs_mb": 1.0, "workers": 2}


def targets(samples: list[dict], rec: Record, server_log: str, minutes: float, warm: float, window: float) -> list:
    """(target, figure, met) rows."""
    rows = []
    base = next((s for s in samples if s["min"] >= warm), samples[-1])
    last = samples[-1]
    growth = last["rss_mb"] / base["rss_mb"] - 1 if base["rss_mb"] else float("nan")
    rows.append(
        (
            f"server RSS growth after minute {warm:g} <= 10%",
            f"{base['rss_mb']} -> {last['rss_mb']} MB ({growth:+.1%})",
            growth <= 0.10,
        )
    )
    for k, slack in SLACK.items():
        if base.get(k) is None or last.get(k) is None:
            rows.append((f"{k} flat after minute {warm:g}", "not sampled", False))
            continue
        bound = max(base[k] * 1.10, base[k] + slack)
        rows.append((f"{k} flat after minute {warm:g} (<= {bound:g})", f"{base[k]} -> {last[k]}", last[k] <= bound))
    tracebacks = server_log.count("Traceback (most recent call last)")
    rows.append(("no exception shown to any session", f"{len(rec.faults)} faults", not rec.faults))
    rows.append(("no traceback in the server's log", f"{tracebacks}", tracebacks == 0))
    first = [s for t, a, s in rec.actions if a in PREDICTIONS and t < window * 60]
    final = [s for t, a, s in rec.actions if a in PREDICTIONS and t >= (minutes - window) * 60]
    ratio = p95(final) / p95(first) if first and final else float("nan")
    rows.append(
        (
            f"prediction p95, last {window:g} min <= 1.2x the first {window:g} min",
            f"{p95(first):.2f} s ({len(first)}) -> {p95(final):.2f} s ({len(final)}): p95 last/first = {ratio:.2f}x",
            ratio <= 1.2,
        )
    )
    return rows


def report(samples: list, rec: Record, rows: list, args) -> str:
    cols = list(samples[0])
    lines = [f"## Soak: {args.sessions} sessions, {args.minutes:g} minutes, real Chromium contexts", ""]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(s[c]) for c in cols) + " |" for s in samples]
    lines += ["", "| action | count | p50 s | p95 s |", "|---|---|---|---|"]
    for a in sorted({a for _, a, _ in rec.actions}):
        xs = [s for _, b, s in rec.actions if b == a]
        lines.append(f"| {a} | {len(xs)} | {sorted(xs)[len(xs) // 2]:.2f} | {p95(xs):.2f} |")
    window = 60 * args.window_min
    n = max(1, int(round(args.minutes * 60 / window)))
    lines += ["", f"prediction actions (fill-mask and pair) per {args.window_min:g}-minute window:", ""]
    lines += ["| window (min) | count | p50 s | p95 s |", "|---|---|---|---|"]
    for w in range(n):
        xs = [s for t, a, s in rec.actions if a in PREDICTIONS and w * window <= t < (w + 1) * window]
        if xs:
            lines.append(
                f"| {w * args.window_min:g}-{(w + 1) * args.window_min:g} | {len(xs)} | "
                f"{sorted(xs)[len(xs) // 2]:.2f} | {p95(xs):.2f} |"
            )
    lines += ["", f"sessions joined {rec.joins}, left {rec.left}", "", "| target | figure | |", "|---|---|---|"]
    lines += [f"| {t} | {f} | {'met' if ok else 'MISSED'} |" for t, f, ok in rows]
    if rec.faults:
        lines += ["", "faults:"] + [f"- {f}" for f in rec.faults[:50]]
    return "\n".join(lines)


async def drive(args, base: str, pid: int, runs: Path, stats: Path) -> tuple[list, Record]:

    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    rec, samples = Record(t0), []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        tabs = [Tab(rec, f"session {k + 1}") for k in range(args.sessions)]
        for tab in tabs:
            tab.browser, tab.shots = browser, args.out
        room = asyncio.get_running_loop().create_future()
        stay = 60.0 if args.quick else 240.0
        roles = [presenter(tabs[0], base, end, room), follower(tabs[1], base, end, room, tabs[0], stay)]
        roles += [
            looper(tab, base, end, k, k == 2, 45.0 if args.quick else 180.0, 2 if args.quick else 3)
            for k, tab in enumerate(tabs[2:], start=2)
        ]
        tasks = [asyncio.create_task(guard(r, tab)) for r, tab in zip(roles, tabs)]
        await sampler(samples, pid, runs, stats, t0, end, args.sample_s)
        await asyncio.gather(*tasks)
        await browser.close()
    # once every session has left and the server has noticed (two sweeps of closed tabs, app/kit/jobs_panel.py):
    # what a day of tabs coming and going leaves behind
    await asyncio.sleep(AFTER_S)
    samples.append(sample(pid, runs, stats, t0))
    return samples, rec


async def guard(role, tab: Tab) -> None:
    """Run a role; an action that fails (a timeout, a missing element) is a fault, not the end of the soak."""
    try:
        await role
    except Exception as e:  # noqa: BLE001 - every failure is reported in the table
        tab.fault(f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        if tab.shots is not None and tab.pg is not None:
            tab.shots.mkdir(parents=True, exist_ok=True)
            await tab.pg.screenshot(path=str(tab.shots / f"{tab.name.replace(' ', '-')}.png"), full_page=True)
        await tab.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--sample-s", type=float, default=60.0)
    ap.add_argument("--warm-min", type=float, default=5.0)
    ap.add_argument("--window-min", type=float, default=5.0)
    ap.add_argument("--out", type=Path, default=None, help="a folder for soak.md and soak.json")
    ap.add_argument("--quick", action="store_true", help="2 minutes, 3 sessions, samples every 20 s (make test)")
    args = ap.parse_args()
    if args.quick:
        args.minutes, args.sessions, args.sample_s, args.warm_min, args.window_min = 2.0, 3, 20.0, 0.5, 0.75
    if args.sessions < 3:
        ap.error("--sessions must be at least 3 (a presenter, a follower, one looping session)")
    if not Path(CHROMIUM).exists():
        print(f"bench/soak.py skipped: {CHROMIUM} is missing (make test installs Debian's chromium)")
        return
    work = Path(tempfile.mkdtemp(prefix="encoderlab-soak-"))
    runs, stats = work / "runs", work / "stats.json"
    env = {
        **os.environ,
        "ENCODERLAB_RUNS": str(runs),
        STATS_ENV: str(stats),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("OMP_NUM_THREADS", None)  # the server sizes its own thread pools, as `make run` does
    log = work / "streamlit.log"
    base, proc = start_streamlit(env, log)
    try:
        samples, rec = asyncio.run(drive(args, base, proc.pid, runs, stats))
    finally:
        stop_streamlit(proc)
    rows = targets(samples, rec, log.read_text(), args.minutes, args.warm_min, args.window_min)
    text = report(samples, rec, rows, args)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        shutil.copy(log, args.out / "streamlit.log")
        (args.out / "soak.md").write_text(text + "\n")
        (args.out / "soak.json").write_text(
            json.dumps({"samples": samples, "actions": rec.actions, "faults": rec.faults})
        )
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if rec.faults else 0)


if __name__ == "__main__":
    main()
