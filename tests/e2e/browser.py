"""Helpers for e2e tests: wait for the app, open a page, take a screenshot."""

from __future__ import annotations

import time
from pathlib import Path

from app.nav import PAGE_PARAM

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "tests" / "e2e" / "screenshots"


def wait_idle(pg, timeout: float = 60.0) -> None:
    """Wait until the Streamlit script has finished: no "Running…" status, skeleton or spinner, for 0.75 s."""
    pg.wait_for_selector('[data-testid="stApp"]', timeout=timeout * 1000)
    end = time.time() + timeout
    quiet = 0
    while time.time() < end:
        busy = pg.locator(
            '[data-testid="stStatusWidget"], [data-testid="stSkeleton"], [data-testid="stSpinner"]'
        ).count()
        # a deep link sent to the root first (app/deeplinks.py) is busy until the app has switched to its page
        busy = busy or f"?{PAGE_PARAM}=" in pg.url
        quiet = 0 if busy else quiet + 1
        if quiet >= 3:
            return
        pg.wait_for_timeout(250)
    raise TimeoutError(f"the app kept running for {timeout:.0f}s")


def open_page(pg, url_path: str, timeout: float = 90.0) -> None:
    pg.goto(f"{pg.base_url}/{url_path}")
    wait_idle(pg, timeout)


def screenshot(pg, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    pg.screenshot(path=str(path), full_page=True)
    return path


def wait_text(scope, text: str, timeout_s: float) -> None:
    """Wait until ``text`` shows inside ``scope`` (a locator); on a timeout, fail with what the scope shows instead
    (a CI log then says whether the page showed an error, an out-of-date note or a queue place)."""
    try:
        scope.get_by_text(text).first.wait_for(timeout=timeout_s * 1000)
    except Exception as e:  # playwright's TimeoutError
        shown = scope.inner_text(timeout=5000)[-3000:]
        shot = screenshot(scope.page, "timed-out")
        raise AssertionError(
            f"{text!r} did not show within {timeout_s:.0f}s at {scope.page.url} ({shot}); the page showed:\n{shown}"
        ) from e


def set_number(pg, label: str, value: str) -> None:
    """Type ``value`` into the number box labelled ``label`` and leave it, so Streamlit takes the value."""
    box = pg.get_by_label(label, exact=True)
    if box.count() > 1:  # a stale copy from the previous script run can linger for a moment
        wait_idle(pg)
        pg.wait_for_timeout(1000)
        box = pg.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Tab")


def step_is(n: int) -> str:
    """A page.wait_for_function script: the walkthrough shows step ``n`` (its heading, "n. title")."""
    return (
        f"() => [...document.querySelectorAll('[data-testid=stMain] h2')].some(h => h.textContent.trim()"
        f".startsWith('{n}.'))"
    )


def start_room(pres, base_url: str, idle_s: float = 90) -> str:
    """The presenter opens the walkthrough in presenter mode and starts a room; returns the room's code."""
    pres.goto(f"{base_url}/walkthrough?present=1")
    wait_idle(pres, idle_s)
    pres.get_by_role("button", name="Start a room").click()
    pres.wait_for_function("() => location.search.includes('key=')", timeout=60_000)
    return pres.url.split("room=")[1].split("&")[0]
