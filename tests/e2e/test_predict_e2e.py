"""The real server in Debian's Chromium: fill a mask and see the predictions; score a sentence pair."""

from __future__ import annotations

from tests.e2e.browser import open_page, screenshot, wait_idle


def test_fill_a_mask_and_see_predictions(page):
    open_page(page, "fill-mask")
    main = page.locator('[data-testid="stMain"]')
    box = main.get_by_label("Text with [MASK] (several are fine)")
    box.fill("The cat slept on the warm [MASK] all afternoon.")
    main.get_by_role("button", name="Predict").click()
    main.get_by_text("Joint fill").wait_for(timeout=60_000)
    wait_idle(page)
    strip = main.locator(".encoderlab-tokens").first
    assert "[MASK]" in strip.inner_text() and "afternoon" in strip.inner_text()
    chart = main.locator(".js-plotly-plot").first
    chart.wait_for()
    assert "mask 1" in chart.inner_text() and "probability" in chart.inner_text()
    assert chart.locator("g.point, .bars path").count() >= 5  # the default top-5 bars
    screenshot(page, "fill-mask")


def test_sentence_pair_probe(page):
    open_page(page, "sentence-pair")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_role("button", name="Score with Next Sentence Prediction").click()
    main.get_by_text("Reading the probe").wait_for(timeout=60_000)
    wait_idle(page)
    labels = main.locator('[data-testid="stMetricLabel"]').all_inner_texts()
    assert any("P(IsNext) (A, other topic)" in t for t in labels)
    screenshot(page, "sentence-pair")
