"""The real server in Debian's Chromium: run a small layer probe as a job and see accuracy against depth."""

from __future__ import annotations

from tests.e2e.browser import open_page, screenshot, set_number, wait_idle


def test_layer_probes_chart(page):
    open_page(page, "probes")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_role("button", name="Run the probes").wait_for(timeout=90_000)  # the first visit loads the model
    set_number(page, "Sentences per task", "40")
    main.get_by_role("button", name="Run the probes").click()
    chart = main.locator(".js-plotly-plot").first
    chart.wait_for(timeout=180_000)  # a worker process, the bundled corpus's tasks, five tiny-model probes
    wait_idle(page)
    text = chart.inner_text()
    assert "Probe accuracy per depth" in text and "embeddings" in text and "layer 2" in text
    assert "Bigram shift" in text and "Suffix class (word)" in text  # the legend
    assert main.locator(".js-plotly-plot").count() == 2  # and the word task's selectivity
    assert "Best depth per task" in main.inner_text()
    assert main.get_by_role("button", name="Download the table (CSV)").count() == 1
    chart.scroll_into_view_if_needed()
    screenshot(page, "probes")
