"""Sessions kept apart on the hosted demo (#34 §4): a real server with ENCODERLAB_HOSTED=1 and two browser contexts.

A starts a tiny fine-tune and sees it. B opens the Fine-tune page and sees neither A's job nor A's run; B types A's
run folder (read from the server's runs folder on disk) into the custom checkpoint box and gets the hosted refusal,
with no server path in the page; B opens the Fine-tune page with A's whole query (every parameter A's URL has,
A's own model included) and gets nothing of A's."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import unquote_plus, urlparse

import pytest

from tests.e2e.browser import screenshot, set_number, wait_idle
from tests.e2e.conftest import start_streamlit, stop_streamlit
from tests.e2e.test_concurrency_e2e import Session

pytestmark = pytest.mark.timeout(600)
REFUSAL = "never files or folders on the server"


@pytest.fixture(scope="module")
def hosted_server(tiny_zoo, tmp_path_factory):
    runs = tmp_path_factory.mktemp("hosted-runs")
    env = {
        **os.environ,
        "ENCODERLAB_HOSTED": "1",
        "ENCODERLAB_ZOO": str(tiny_zoo),
        "HF_HUB_OFFLINE": "1",
        "ENCODERLAB_RUNS": str(runs),
        "PYTHONUNBUFFERED": "1",
    }
    url, proc = start_streamlit(env, tmp_path_factory.mktemp("hosted-server") / "streamlit.log")
    yield url, runs, tiny_zoo
    stop_streamlit(proc)


def _page_text(pg) -> str:
    """What the page shows (inputs' values are not in it: B's own typing is B's)."""
    return pg.locator("body").inner_text()


def _pick(pg, label: str, option) -> None:
    sidebar = pg.locator('[data-testid="stSidebar"]')
    box = sidebar.get_by_role("combobox", name=label)
    box.evaluate("e => e.scrollIntoView({block: 'center'})")
    box.click()
    pg.get_by_role("option", name=option).click(timeout=60_000)
    wait_idle(pg)


def test_hosted_sessions_see_none_of_each_others_jobs_runs_or_paths(browser, hosted_server):
    url, runs, zoo = hosted_server
    t0 = time.monotonic()
    a, b = Session(browser, url), Session(browser, url)
    try:
        # A starts a tiny fine-tune (one epoch of 16 rows) and sees its job.
        pa, ma = a.page, a.page.locator('[data-testid="stMain"]')
        pa.goto(f"{url}/finetune")
        wait_idle(pa, 90)
        ma.get_by_text("Bundled: WordNet glosses").click()
        wait_idle(pa)
        ma.get_by_text(re.compile(r"\d+.*training and.*\d+.*held-out")).first.wait_for()
        set_number(pa, "Epochs", "1")
        set_number(pa, "Training rows to use (0 = all)", "16")
        set_number(pa, "Held-out rows to use (0 = all)", "8")
        pa.get_by_role("button", name="Start fine-tuning").click()
        ma.get_by_text(re.compile(r"Fine-tune run1-bert")).first.wait_for(timeout=60_000)
        folders = []
        while not folders and time.monotonic() - t0 < 120:  # the job makes its run folder when it starts
            folders = sorted(runs.glob("*/run1-bert-*"))
            time.sleep(0.2)
        assert len(folders) == 1, f"A's run folder on disk: {folders}"
        run_folder, a_session = folders[0], folders[0].parent.name

        # B opens the Fine-tune page: no job, no run of A's.
        pb, mb = b.page, b.page.locator('[data-testid="stMain"]')
        pb.goto(f"{url}/finetune")
        wait_idle(pb, 90)
        mb.get_by_text("No runs yet").wait_for()
        assert "run1-bert" not in _page_text(pb), "B sees A's fine-tune"
        assert str(zoo) not in _page_text(pb), "the sidebar names the bundled models' server folder"

        # B types A's run folder into the custom checkpoint box: the hosted refusal, naming no path.
        _pick(pb, "Checkpoint", re.compile("custom"))
        box = pb.locator('[data-testid="stSidebar"]').get_by_label("Hugging Face id or local folder")
        for typed in (str(run_folder), str(run_folder / "model")):
            box.fill(typed)
            box.press("Enter")
            wait_idle(pb)
            pb.get_by_text(REFUSAL).first.wait_for(timeout=30_000)
            shown = _page_text(pb)
            assert str(runs) not in shown and a_session not in shown, f"a server path in B's page after {typed}"
        screenshot(pb, "hosted-isolation-refusal")

        # A's run finishes; A picks it in the sidebar, so A's URL names it too.
        pa.locator('[data-testid="stMetricLabel"]', has_text="Held-out accuracy").first.wait_for(timeout=300_000)
        wait_idle(pa)
        _pick(pa, "Checkpoint", re.compile("run1-bert"))
        pa.wait_for_function("() => location.search.includes('model=')", timeout=30_000)
        query = urlparse(pa.url).query
        assert str(runs) not in unquote_plus(query) and a_session not in unquote_plus(query), query

        # B opens the page with every parameter A's URL has: B's own default model, a notice, nothing of A's.
        pb.goto(f"{url}/finetune?{query}")
        wait_idle(pb, 90)
        mb.get_by_text("No runs yet").wait_for()
        shown = _page_text(pb)
        assert "run1-bert" not in shown and a_session not in shown and str(runs) not in shown
        checkpoint = pb.locator('[data-testid="stSidebar"]').get_by_role("combobox", name="Checkpoint")
        assert checkpoint.input_value() == "bert-mini (bundled)"
        notice = pb.get_by_text("This link had values that are not valid here").first
        notice.wait_for(timeout=10_000)
        assert "model" in notice.inner_text(), notice.inner_text()
        screenshot(pb, "hosted-isolation-link")
        print(f"\nhosted isolation checked in {time.monotonic() - t0:.1f}s (server start not counted)")
    finally:
        errors = a.close() + b.close()
    assert not errors, errors
