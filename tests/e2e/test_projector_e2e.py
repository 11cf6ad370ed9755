"""The real server in Debian's Chromium: project "bank" on the bundled corpus and see the WebGL point map."""

from __future__ import annotations

from tests.e2e.browser import open_page, screenshot, wait_idle


def test_project_bank_on_the_bundled_corpus(page):
    open_page(page, "projector")
    main = page.locator('[data-testid="stMain"]')
    word = main.get_by_label("Word", exact=True)
    word.wait_for(timeout=90_000)  # the first visit loads the model
    assert word.input_value() == "bank"
    main.get_by_role("button", name="Project").click()
    plot = main.locator(".js-plotly-plot").first
    plot.wait_for(timeout=90_000)
    wait_idle(page)
    assert "“bank” at layer 2 (PCA)" in plot.inner_text()  # tiny models: 2 layers, the last shown first
    assert plot.locator("canvas").count() >= 1  # scattergl draws on WebGL canvases, not SVG points
    assert plot.locator("g.trace.scatter .point").count() == 0
    assert main.locator(".js-plotly-plot").count() == 2  # and the separation per depth
    assert "Do the contexts separate with depth?" in main.locator(".js-plotly-plot").nth(1).inner_text()
    plot.scroll_into_view_if_needed()
    screenshot(page, "projector")
