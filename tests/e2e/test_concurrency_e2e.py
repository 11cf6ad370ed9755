"""Many people, one server: six browser sessions predict at once while a seventh fine-tunes; and watching a
fine-tune (its page open, polling its live curves) does not slow it against the same run left alone."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import quote, urlparse

import pytest

from tests.e2e.browser import screenshot, set_number, wait_idle
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, LOCAL_HOSTS

pytestmark = pytest.mark.timeout(1800)  # a shared 2-core machine can take minutes per page

TEXTS = [
    "The cat slept on the warm [MASK] all afternoon.",
    "Paris is the [MASK] of France.",
    "She drank a cup of [MASK] before work.",
    "The [MASK] barked at the mailman.",
    "He plays the [MASK] in a band.",
    "Rain fell on the [MASK] roof all night.",
]


class Session:
    """One browser context (its own Streamlit session) with the console and network checks of the page fixture."""

    def __init__(self, browser, base_url: str):
        self.ctx = browser.new_context(viewport={"width": 1300, "height": 1000})
        self.page = self.ctx.new_page()
        self.page.base_url = base_url
        self.errors: list[str] = []
        self.page.on("console", self._console)
        self.page.on("request", self._request)
        self.page.on("response", self._response)

    def _console(self, msg):
        if msg.type == "error":
            self.errors.append(f"{msg.text} ({(msg.location or {}).get('url', '')})")

    def _request(self, req):
        host = urlparse(req.url).hostname or ""
        if urlparse(req.url).scheme in ("http", "https", "ws", "wss") and host not in LOCAL_HOSTS:
            self.errors.append(f"request left localhost: {req.url}")

    def _response(self, resp):
        if resp.status >= 400:
            self.errors.append(f"HTTP {resp.status} {resp.url}")

    def close(self) -> list[str]:
        self.ctx.close()
        return self.errors


def _start_finetune(page, epochs: str, rows: str, source: str = "Bundled: WordNet glosses") -> None:
    main = page.locator('[data-testid="stMain"]')
    page.goto(f"{page.base_url}/finetune")
    wait_idle(page, 90)
    main.get_by_text(source).click()
    wait_idle(page)
    main.get_by_text(re.compile(r"\d+.*training and.*\d+.*held-out")).first.wait_for()
    set_number(page, "Epochs", epochs)
    set_number(page, "Training rows to use (0 = all)", rows)
    set_number(page, "Held-out rows to use (0 = all)", "24")
    set_number(page, "Early-stopping patience (0 = off)", "0")  # a random tiny model would stop early
    page.get_by_role("button", name="Start fine-tuning").click()


def _expected_fills(tiny_zoo) -> dict[str, str]:
    from core.models.loading import ModelSpec, load
    from core.predict.fill_mask import FillMaskConfig, fill_mask

    lm = load(ModelSpec("bert", str(tiny_zoo / "bert-mini")), "mlm")
    return {t: fill_mask(lm, FillMaskConfig(t)).filled_text for t in TEXTS}


def test_six_sessions_predict_at_once_while_a_finetune_runs(browser, server, tiny_zoo):
    expected = _expected_fills(tiny_zoo)
    trainer = Session(browser, server)
    people = [Session(browser, server) for _ in TEXTS]
    try:
        # long enough to outlast six page loads on a busy 2-core machine; cancelled at the end
        _start_finetune(trainer.page, epochs="50", rows="0", source="Bundled: UCI drug reviews")
        main = trainer.page.locator('[data-testid="stMain"]')
        main.get_by_text(re.compile(r"Fine-tune run1-bert: step \d+/")).first.wait_for(timeout=300_000)
        # Six people open a shared link at the same moment: each link reruns its prediction.
        t0 = time.time()
        for s, text in zip(people, TEXTS):
            s.page.goto(f"{server}/fill-mask?fill_mask.text={quote(text)}", wait_until="commit")
        for s, text in zip(people, TEXTS):
            m = s.page.locator('[data-testid="stMain"]')
            m.get_by_text("Joint fill").wait_for(timeout=600_000)
            wait_idle(s.page, 300)
            shown = " ".join(m.inner_text().split())
            assert " ".join(expected[text].split()) in shown, f"{text!r}: expected fill {expected[text]!r} not shown"
            print(f"  {text!r} shown after {time.time() - t0:.1f}s")
        elapsed = time.time() - t0
        assert main.locator('[data-testid="stProgress"]').count(), "the fine-tune ended before the predictions"
        screenshot(people[0].page, "concurrency-fill-mask")
        screenshot(trainer.page, "concurrency-finetune")
        print(f"\n6 sessions predicted at once in {elapsed:.1f}s while a fine-tune ran")
        trainer.page.get_by_role("button", name="Cancel").first.click()
        main.get_by_text(re.compile(r"run1-bert was cancelled after")).first.wait_for(timeout=180_000)
    finally:
        errors = [e for s in people + [trainer] for e in s.close()]
    assert not errors, errors


def _samples_per_s(page, run: str) -> float:
    """The Samples/s metric of the finished run ``run`` (its expander)."""
    main = page.locator('[data-testid="stMain"]')
    exp = main.locator('[data-testid="stExpander"]', has_text=run).first
    metric = exp.locator('[data-testid="stMetric"]', has_text="Samples/s").first
    metric.wait_for(timeout=600_000)
    return float(metric.locator('[data-testid="stMetricValue"]').inner_text().replace(",", ""))


def _chromium_pids() -> set[int]:
    """Every running Chromium process (browser, renderers, utility processes)."""
    pids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"chrom" in f.read().split(b"\0")[0]:
                    pids.add(int(pid))
        except OSError:
            pass
    return pids


@pytest.fixture
def far_browser(browser):
    """A browser of its own at the lowest CPU priority, as if it ran on the user's machine rather than the server's.

    On a 2-core test machine the browser shares the cores with the server and with the CPU job it watches, and jobs
    run at nice 19 (core/runtime/jobs.py), so a browser at the default priority takes what it spends redrawing the page
    from the job: measured here, Chromium used 0.2-0.5 CPU-s per second watching a run, the Streamlit server 0.03.
    That is a cost of where the test runs the browser, not of watching; what watching costs the server (polling,
    building the live view) still falls on the job. Child processes inherit the priority, so the browser's later
    renderers get it too."""
    before = _chromium_pids()
    b = browser.browser_type.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    for pid in _chromium_pids() - before:
        try:
            os.setpriority(os.PRIO_PROCESS, pid, 19)
        except OSError:  # gone already (a short-lived helper process)
            pass
    yield b
    b.close()


WATCH_ENV = "ENCODERLAB_BENCH_WATCH"  # set by `bench/concurrency.py --watch`, the one place this measurement runs


@pytest.mark.skipif(
    os.environ.get(WATCH_ENV) != "1",
    reason=(
        "a speed ratio, so a benchmark and not a test: `python bench/concurrency.py --watch` runs it (a bound inside the "
        "suite is a timing threshold, which the project keeps out of tests)"
    ),
)
def test_watching_a_finetune_does_not_slow_it(far_browser, server):
    """A run watched (the page open, polling the progress and the live curves to the end) and the same run left
    alone (the user on another page, nothing polling, until the run is surely done) both finish and report their
    samples/s; watched >= 0.4x alone. The bound is wide on purpose: on a shared 2-core machine the same run left
    alone gave 888 and 691 samples/s in two back-to-back tries (0.78x from noise alone), and a ratio near 0.8 failed
    CI once, so only a real regression (the page's polling blocking the job) crosses 0.4x. The ratio itself is
    printed (`bench/concurrency.py --watch` runs this test and shows it)."""
    s = Session(far_browser, server)
    try:
        page = s.page
        main = page.locator('[data-testid="stMain"]')
        # about 10 s of training each, so that the page's redraw after Start is a small part of a run
        _start_finetune(page, epochs="12", rows="600")
        main.get_by_text(re.compile(r"Fine-tune run1-bert: step \d+/")).first.wait_for(timeout=180_000)
        t0 = time.time()
        watched = _samples_per_s(page, "run1-bert")
        took = time.time() - t0
        wait_idle(page)
        page.get_by_role("button", name="Start fine-tuning").click()
        main.get_by_text(re.compile(r"Fine-tune run2-bert: (step \d+/|starting|loading)")).first.wait_for(
            timeout=180_000
        )
        page.get_by_role("link", name="Home").first.click()  # the user goes elsewhere: nothing polls the job
        wait_idle(page)
        page.wait_for_timeout(int(max(20.0, 2.5 * took) * 1000))
        page.get_by_role("link", name="Fine-tune").first.click()
        wait_idle(page)
        alone = _samples_per_s(page, "run2-bert")
        ratio = watched / alone
        screenshot(page, "concurrency-watching")
        print(
            f"\nfine-tune samples/s: watched (page open, polling) {watched:.1f}; on another page {alone:.1f}: "
            f"{ratio:.2f}x (bound >= 0.4x)"
        )
        assert ratio >= 0.4, f"watching slowed the fine-tune: {watched:.1f} vs {alone:.1f} samples/s"
    finally:
        errors = s.close()
    assert not errors, errors
