"""The Attributions page's download buttons in Chromium: a session that explains again (its job polled by a timed
fragment) never fetches a media file that is gone (bench/soak.py saw `HTTP 404 /media/<hash>.csv` and "Download
Button source error - 404").

Streamlit's browser fetches a download button's file (a GET of the whole file) as soon as the button is drawn, to check
it exists. The server forgets a session's files at the start of each of its full runs and drops a forgotten
downloadable file at the second end of any session's run after that. So a fetch that comes late (a busy browser)
asks for a file the session's next runs have already dropped: here the browser's fetches are held until the page has
run on (new text, Explain, the job's polls) and then let go. The page draws its buttons with their files made on a
click instead (app.kit.download_button.download), so drawing one fetches nothing; a click still downloads the file."""

from __future__ import annotations

import re

from tests.e2e.browser import open_page, wait_idle

DOWNLOADS = re.compile(r"^https?://[^/]+/media/\w+\.(csv|html)$")  # the buttons' files (not the page's icon)


def _explain(main, text: str, word: str) -> None:
    main.get_by_label("Text", exact=True).fill(text)
    main.get_by_role("button", name="Explain", exact=True).click()
    main.locator(".attr-tok", has_text=re.compile(f"^{word}$")).first.wait_for(timeout=120_000)  # the fresh result


def test_explaining_again_while_polling_fetches_no_media_file_that_is_gone(page):
    held = []  # the browser's requests for the buttons' files, answered only once the page has run on

    def hold(route) -> None:
        held.append(route)

    page.route(DOWNLOADS, hold)
    open_page(page, "attribution")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_label("Text", exact=True).wait_for(timeout=120_000)  # the first visit loads the model
    _explain(main, "the cat slept on the warm [MASK].", "cat")
    wait_idle(page)
    first = len(held)
    _explain(main, "the dog ran to the [MASK].", "dog")  # the job runs in the background, polled every 2 s
    wait_idle(page)
    for route in held:
        route.continue_()
    page.unroute(DOWNLOADS)
    page.wait_for_timeout(1500)  # their answers (a 404 fails the test in the page fixture)
    assert not held, f"drawing the result's buttons fetched {len(held)} media files ({first} for the first result)"
    # the files are made when a button is clicked, in the page's words
    with page.expect_download() as got:
        main.get_by_role("button", name="Download CSV", exact=True).click()
    csv = open(got.value.path(), encoding="utf-8").read()
    assert csv.startswith("row,text,target,method,token_index,token,special,score,error") and "dog" in csv
    with page.expect_download() as got:
        main.get_by_role("button", name="Download HTML", exact=True).click()
    assert "<html lang='en'>" in open(got.value.path(), encoding="utf-8").read()
    wait_idle(page)
