"""The real server in Debian's Chromium: index a pasted corpus (a background job in a worker process), click a
word, see the neighbours with the matched word highlighted and the histogram."""

from __future__ import annotations

import re
import time

from tests.e2e.browser import open_page, screenshot, wait_idle

CORPUS = [
    "The bank of the river was muddy.",
    "I put money in the bank.",
    "A cat sat on the mat.",
    "Dogs bark at night, loudly!",
    "The river <b>flows</b> past the old mill.",
]


def test_index_search_and_see_the_neighbours(page):
    open_page(page, "corpus-search")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("Paste text", exact=True).click()
    wait_idle(page)
    box = main.get_by_label(re.compile("^Your corpus: one sentence per line")).last  # a stale copy may linger
    box.wait_for(timeout=90_000)
    box.fill("\n".join(CORPUS))
    main.get_by_role("button", name="Build index").click()
    t0 = time.time()
    main.get_by_text(re.compile(r"^Index: 5 sentences")).wait_for(timeout=120_000)  # the job has run and saved it
    wait_idle(page)
    print(f"index job: {time.time() - t0:.1f}s")  # a worker process: its start is most of it
    query = main.get_by_label(re.compile("^Query sentence")).last
    query.fill(CORPUS[-1])
    query.press("Enter")
    wait_idle(page)
    main.locator('[data-testid="stButtonGroup"] button', has_text=re.compile("^river$")).click()
    rows = main.locator('[data-testid="cs-neighbour"]')
    rows.first.wait_for(timeout=60_000)
    wait_idle(page)
    assert rows.count() == 10
    first = rows.first
    assert first.locator("mark").inner_text() == "river" and "the query itself" in first.inner_text()
    assert "<b>flows</b>" in first.inner_text()  # user text shown as typed, not as HTML
    assert first.locator("b").count() == 0
    chart = main.locator(".js-plotly-plot").first
    chart.wait_for(timeout=30_000)
    assert "Which words are the neighbours" in chart.inner_text() and "river" in chart.inner_text()
    first.scroll_into_view_if_needed()
    screenshot(page, "corpus-search")
