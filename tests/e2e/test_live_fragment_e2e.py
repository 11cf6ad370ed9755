"""A timed fragment's run that names a page the session has left must not blank the page (app/kit/live.py).

The race, made to happen every time: the follower's browser gets nothing from the server for a few seconds while
the presenter moves to Fill-mask. Meanwhile its banner's timer (every second) keeps asking for fragment runs on the
walkthrough, the page it still shows; the server switches the follower to Fill-mask, and the timer's runs, queued
behind that switch, announce the walkthrough. When the held messages arrive, the browser draws Fill-mask, then
clears it all for the old page's fragment run: the banner over nothing (what CI's Ray e2e test caught). With
``live.keep_page`` that run switches back to Fill-mask, and the page is drawn again, its widgets showing the session's
values (the text, top-k 5), not their defaults (an empty box, top-k 1)."""

from __future__ import annotations

import re

from tests.e2e.browser import screenshot, start_room, step_is, wait_idle

HOLD_MS = 6_000  # several of the banner's 1 s polls go out naming the old page while the switch is held back
BOX = "Text with [MASK] (several are fine)"


class HeldSocket:
    """Route the page's Streamlit websocket through the test: while ``held``, the server's messages wait here and
    then go to the browser in their order (the browser's own messages always go straight through)."""

    def __init__(self) -> None:
        self.held = False
        self.queue: list = []
        self.client = None

    def route(self, ws) -> None:
        self.client = ws
        server = ws.connect_to_server()
        server.on_message(self._from_server)

    def _from_server(self, message) -> None:
        if self.held:
            self.queue.append(message)
        else:
            self.client.send(message)

    def release(self) -> int:
        n = 0
        while self.queue:  # a message that arrives while these go out joins the end of the queue
            self.client.send(self.queue.pop(0))
            n += 1
        self.held = False
        return n


def test_a_follower_whose_poll_names_the_old_page_still_shows_the_new_one(page, browser):
    pres = page
    code = start_room(pres, pres.base_url)

    ctx = browser.new_context(viewport={"width": 1300, "height": 900})
    fol = ctx.new_page()
    sock = HeldSocket()
    fol.route_web_socket(re.compile(r".*/_stcore/stream"), sock.route)
    try:
        fol.goto(f"{pres.base_url}/?room={code}", wait_until="commit", timeout=60_000)
        fol.wait_for_function(step_is(1), timeout=90_000)
        fol.locator(".st-key-room-banner").get_by_text("Following the presenter").wait_for(timeout=30_000)
        wait_idle(fol, 60)

        sock.held = True
        pres.locator('[data-testid="stSidebarNav"]').get_by_text("Fill-mask").click()
        pres.locator('[data-testid="stMain"]').get_by_label(BOX).wait_for(timeout=60_000)
        fol.wait_for_timeout(HOLD_MS)
        held = sock.release()
        assert held, "no server message was held: the follower's session did not move"

        main = fol.locator('[data-testid="stMain"]')
        main.get_by_label(BOX).wait_for(timeout=60_000)
        fol.wait_for_timeout(3_000)  # the old page's fragment runs have come and gone: the page is still there
        wait_idle(fol, 60)
        assert main.get_by_label(BOX).is_visible(), main.inner_text()[:800]
        assert main.get_by_role("heading", name="Fill-mask").first.is_visible()
        assert fol.url.split("?")[0].endswith("/fill-mask"), fol.url
        # the widgets show the session's values, not their defaults (the browser dropped its values with the page)
        shown = main.get_by_label(BOX).input_value()
        assert shown and shown == pres.locator('[data-testid="stMain"]').get_by_label(BOX).input_value(), shown
        assert main.get_by_test_id("stSliderThumbValue").first.inner_text() == "5"
        screenshot(fol, "live-fragment-follower-after-held-switch")
    except Exception:
        screenshot(fol, "live-fragment-fail-follower")
        print("follower:", fol.url, "\n", fol.locator('[data-testid="stMain"]').inner_text(timeout=5_000)[:1500])
        raise
    finally:
        ctx.close()
