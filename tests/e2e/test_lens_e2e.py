"""The real server in Debian's Chromium: look at a mask through every layer and see the layers x top-k table."""

from __future__ import annotations

from tests.e2e.browser import open_page, screenshot, wait_idle


def test_layer_lens_table(page):
    open_page(page, "lens")
    main = page.locator('[data-testid="stMain"]')
    box = main.get_by_label("Text with [MASK] (several are fine)")
    box.wait_for(timeout=90_000)  # the first visit loads the model
    box.fill("The cat slept on the warm [MASK] all afternoon.")
    main.get_by_role("button", name="Look through the layers").click()
    table = main.locator(".js-plotly-plot").first
    table.wait_for(timeout=60_000)
    wait_idle(page)
    text = table.inner_text()
    # the title may be wrapped into lines (app.kit.presenter.scale): compare without the spaces between them
    assert "atthemaskaftereachlayer(rawlens)" in "".join(text.split())
    assert "embeddings" in text and "layer 2" in text  # the tiny models: embeddings + 2 layers
    assert table.locator(".hm, .heatmaplayer image, g.heatmaplayer").count() >= 1
    assert main.locator(".js-plotly-plot").count() == 2  # and the answer across depth
    assert "rank (1 = first choice)" in main.locator(".js-plotly-plot").nth(1).inner_text()
    table.scroll_into_view_if_needed()
    screenshot(page, "lens")
