"""The real server in Debian's Chromium: switch attention heads off under a Fill-mask result and see the prediction
change (core.inspect.ablation through app/views/inspect/ablation.py)."""

from __future__ import annotations

import re

from tests.e2e.browser import open_page, screenshot, wait_idle


def test_switch_off_heads_and_see_the_prediction_change(page):
    open_page(page, "fill-mask")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_label("Text with [MASK] (several are fine)").fill("The cat slept on the warm [MASK] all afternoon.")
    main.get_by_role("button", name="Predict").click()
    main.get_by_text("Joint fill").wait_for(timeout=60_000)
    wait_idle(page)
    main.get_by_text("Switch off heads").click()
    box = main.get_by_role("textbox", name="Heads to switch off")
    box.wait_for()
    # one click in the grid (layer 0, head 0) ...
    main.locator('[data-testid="stExpander"]').get_by_role("button", name="H0", exact=True).first.click()
    main.get_by_text("Top answer with the heads off").wait_for(timeout=60_000)
    wait_idle(page)
    assert box.input_value() == "L0H0"  # the text box follows the grid
    # ... then every head of both layers by text, so the change is plain to see
    box.fill("L0*, L1*")
    main.get_by_role("button", name="Apply").click()
    main.get_by_text("Switched off (8): L0*, L1*").wait_for(timeout=60_000)
    wait_idle(page)
    deltas = main.locator('[data-testid="stMetricDelta"]').all_inner_texts()
    m = re.search(r"([+-][\d.e+-]+) points \(was ([\d.]+%)\)", " ".join(deltas))
    assert m, deltas
    assert float(m.group(1)) != 0.0  # the answer's probability moved
    value = main.locator('[data-testid="stMetricValue"]').first.inner_text()
    assert value.endswith("%") and value != m.group(2)  # after != before
    chart = main.locator(".st-key-fill_mask-ab-fig .js-plotly-plot")
    chart.wait_for()
    assert "all heads on" in chart.inner_text() and "heads off" in chart.inner_text()
    main.locator('[data-testid="stExpander"]').filter(has_text="Switch off heads").scroll_into_view_if_needed()
    screenshot(page, "ablation")
