"""The real server in Chromium: a tiny token-classification fine-tune on the bundled sample, started from the
task switch, shows the split table, its entity metrics, the per-type table, the held-out sentences with their
predicted entities, and the scalar mix's learned layer weights."""

from __future__ import annotations

import pytest

from tests.e2e.browser import open_page, screenshot, set_number, wait_idle

pytestmark = pytest.mark.timeout(600)


def test_token_finetune_started_in_the_browser_shows_its_result(page):
    open_page(page, "finetune")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_text("No runs yet").wait_for()
    main.get_by_text("Token classification (one tag per word: NER, POS)").click()
    wait_idle(page)
    main.get_by_text("240").first.wait_for()
    main.get_by_text("which piece carries the tag").first.wait_for()  # the split table's expander
    main.locator('[data-testid="stDataFrame"]').first.wait_for()
    main.get_by_text("scalar mix of all layers").click()
    set_number(page, "Max steps (0 = all epochs)", "3")
    set_number(page, "Training rows to use (0 = all)", "32")
    set_number(page, "Held-out rows to use (0 = all)", "8")
    page.get_by_role("button", name="Start fine-tuning").click()
    page.locator('[data-testid="stMetricLabel"]', has_text="Entity F1").first.wait_for(timeout=300_000)
    wait_idle(page)
    main.get_by_text("Per entity type").wait_for()
    assert main.locator(".tk-s").count() == 8  # the held-out sentences, entities highlighted
    assert main.get_by_text("Learned layer weights").count() == 1
    assert page.locator("text=held-out entity F1").count() >= 1
    main.get_by_text("Per entity type").scroll_into_view_if_needed()
    screenshot(page, "token-finetune")
