"""The real server in Debian's Chromium: explain a masked word and see the tokens coloured by attribution."""

from __future__ import annotations

from tests.e2e.browser import SHOTS, open_page, screenshot, wait_idle


def test_explain_a_masked_word_and_see_coloured_tokens(page):
    open_page(page, "attribution")
    main = page.locator('[data-testid="stMain"]')
    box = main.get_by_label("Text", exact=True)
    box.wait_for(timeout=120_000)  # the first visit loads the model
    box.fill("The cat slept on the warm [MASK] all <b>afternoon</b>.")
    main.get_by_role("button", name="Explain", exact=True).click()
    main.get_by_text("Explaining:").wait_for(timeout=120_000)
    wait_idle(page)
    tokens = main.locator(".attr-tok")
    tokens.first.wait_for()
    n_methods = 4  # the default methods: Integrated Gradients, Saliency, Input x Gradient, Occlusion
    assert tokens.count() >= n_methods * 10
    texts = tokens.all_inner_texts()
    assert "[MASK]" in texts and "<" in texts  # the user's markup is shown as text, not rendered
    assert main.locator(".attr-line b").count() == 0
    colours = {tokens.nth(i).evaluate("e => getComputedStyle(e).backgroundColor") for i in range(tokens.count())}
    assert len(colours) > 5  # a real diverging colouring, not one flat colour
    assert main.locator(".js-plotly-plot").count() >= 3  # bar chart, methods side by side, rank correlations
    screenshot(page, "attribution")
    SHOTS.mkdir(parents=True, exist_ok=True)
    main.locator(".attr-line").first.screenshot(path=str(SHOTS / "attribution-tokens.png"))


def test_batch_csv_upload_and_export(page):
    open_page(page, "attribution")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_role("tab", name="Batch (CSV)").click()
    csv = b"text,word\nThe cat sat on the [MASK].,mat\nno mask in this row,\nParis is the [MASK] of France.,\n"
    main.locator('input[type="file"]').set_input_files(
        files=[{"name": "rows.csv", "mimeType": "text/csv", "buffer": csv}]
    )
    wait_idle(page)
    main.get_by_role("button", name="Explain all rows").click()
    main.get_by_text("2 of 3 rows explained").wait_for(timeout=120_000)
    wait_idle(page)
    assert main.get_by_text("Row 2 (no mask in this row)").count() == 1
    assert main.get_by_role("button", name="Download standalone HTML").count() == 1
    panel = main.get_by_role("tabpanel", name="Batch (CSV)")
    assert panel.locator(".attr-tok").count() >= 10
    screenshot(page, "attribution-batch")


def test_a_result_goes_when_the_target_changes_or_an_error_comes(page):
    """Issue 14: after switching the target, or after "The input is empty", the previous result stayed."""
    open_page(page, "attribution")
    main = page.locator('[data-testid="stMain"]')
    box = main.get_by_label("Text", exact=True)
    box.wait_for(timeout=120_000)
    box.fill("Paris is the [MASK] of France.")
    main.get_by_role("button", name="Explain", exact=True).click()
    main.get_by_text("Explaining:").wait_for(timeout=120_000)
    wait_idle(page)
    main.get_by_text("Sentence pair (NSP/SOP)").click()
    main.get_by_text("so it is not shown").wait_for(timeout=120_000)  # the pair model loads first
    wait_idle(page)
    assert main.get_by_text("Explaining:").count() == 0
    screenshot(page, "attribution-stale")
    main.get_by_text("Masked word", exact=True).click()
    wait_idle(page)
    main.get_by_text("Explaining:").wait_for()  # the same inputs again: their result is back
    box = main.get_by_label("Text", exact=True)
    box.fill("")
    main.get_by_role("button", name="Explain", exact=True).click()
    wait_idle(page)
    # The reason is on screen: the page's error under the button, or the estimate's caption "Explain would stop here:
    # The input is empty…" when the text box's own rerun (its blur) lands after the click's (both orders happen).
    # Either way the earlier result is gone.
    main.get_by_text("The input is empty").first.wait_for()
    wait_idle(page)
    assert main.get_by_text("Explaining:").count() == 0
    assert "DeepLift is not offered for this model" in main.inner_text()
    screenshot(page, "attribution-error")
