"""One pass over every page that takes free text (issue 14): Markdown, HTML and typed special tokens are shown as
the characters typed, never as code, bold or tags, and the special tokens are taken out with a note saying so.
Pages without free text (Home, Models, Speed) are covered by the sidebar's custom-checkpoint box, which every
page shows. The page fixture also fails on console errors (the deep-link probe included) and on off-host requests."""

from __future__ import annotations

from tests.e2e.browser import open_page, screenshot, wait_idle

MARKUP = "Keep `tick` **loud** <b>tagged</b> _slant_ [CLS] [SEP] [PAD]"
REMOVED = "Removed [CLS], [SEP], [PAD]"


def _no_markup(area) -> None:
    """The words of MARKUP are never turned into code, bold, emphasis or an HTML tag inside ``area``."""
    for tag, word in (("code", "tick"), ("strong", "loud"), ("b", "tagged"), ("em", "slant")):
        assert area.locator(tag, has_text=word).count() == 0, (tag, word)


def test_fill_mask_shows_user_text_as_text(page):
    open_page(page, "fill-mask")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_label("Text with [MASK] (several are fine)").fill(MARKUP + " [MASK].")
    main.get_by_role("button", name="Predict").click()
    main.get_by_text("Joint fill").wait_for(timeout=60_000)
    wait_idle(page)
    main.get_by_text(REMOVED).first.wait_for()
    joint = main.locator('[data-testid="stMarkdownContainer"]', has_text="Joint fill").first
    assert "`" in joint.inner_text() and "*" in joint.inner_text() and "<" in joint.inner_text()
    _no_markup(main)
    assert "[SEP]" not in main.locator(".encoderlab-tokens").first.inner_text()[:-6]  # only the closing one
    # one text per line: each line's expander title is the user's text too
    main.get_by_text("Each line is a separate text").click()
    main.get_by_label("Text with [MASK] (several are fine)").fill(f"{MARKUP} [MASK].\nA `b` **[MASK]**.")
    main.get_by_role("button", name="Predict").click()
    main.locator('[data-testid="stExpander"]').nth(1).wait_for(timeout=60_000)
    wait_idle(page)
    _no_markup(main)
    assert main.locator('[data-testid="stExpander"] summary code').count() == 0
    screenshot(page, "user-text-fill-mask")


def test_sentence_pair_shows_user_text_as_text(page):
    open_page(page, "sentence-pair")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_label("Sentence A").fill(MARKUP)
    main.get_by_label("Sentence B").fill("Then `it` **rained** <i>hard</i> [SEP] again.")
    main.get_by_role("button", name="Score with Next Sentence Prediction").click()
    main.get_by_text("Reading the probe").wait_for(timeout=60_000)
    wait_idle(page)
    main.get_by_text(REMOVED).first.wait_for()
    captions = " ".join(main.locator('[data-testid="stCaptionContainer"]').all_inner_texts())
    assert "`it` **rained** <i>hard</i>" in captions and "[SEP]" not in captions.split("‖")[1]
    _no_markup(main)
    assert main.locator("i", has_text="hard").count() == 0
    screenshot(page, "user-text-sentence-pair")


def test_attention_shows_user_text_as_text(page):
    open_page(page, "attention")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_label("Text (sentence A)").fill(MARKUP)
    main.get_by_role("button", name="Show attention").click()
    main.get_by_text(REMOVED).first.wait_for(timeout=60_000)
    wait_idle(page)
    frame = page.frame_locator('iframe[title="bertviz head view"]')
    frame.locator("svg text").first.wait_for(timeout=60_000)
    texts = frame.locator("svg text").all_text_contents()
    assert "`" in texts and "<" in texts and texts.count("[SEP]") == 2  # left and right columns: its own only
    _no_markup(main)
    screenshot(page, "user-text-attention")


def test_attributions_show_user_text_as_text(page):
    open_page(page, "attribution")
    main = page.locator('[data-testid="stMain"]')
    box = main.get_by_label("Text", exact=True)
    box.wait_for(timeout=120_000)
    box.fill("Keep `tick` **loud** <b>tagged</b> _slant_ [MASK] here.")
    main.get_by_role("button", name="Explain", exact=True).click()
    main.get_by_text("Explaining:").wait_for(timeout=120_000)
    wait_idle(page)
    main.locator(".attr-tok").first.wait_for()
    _no_markup(main)
    screenshot(page, "user-text-attribution")


def test_sidebar_custom_checkpoint_shows_as_text_on_every_page(page):
    open_page(page, "models")
    sidebar = page.locator('[data-testid="stSidebar"]')
    wait_idle(page)
    box = sidebar.get_by_role("combobox", name="Checkpoint")
    box.evaluate("e => e.scrollIntoView({block: 'center'})")  # its list opens inside the viewport
    box.click()
    page.get_by_role("option", name="custom (Hub id or local folder)…").click(timeout=60_000)
    wait_idle(page)
    box = sidebar.get_by_label("Hugging Face id or local folder")
    box.fill("`tick`/**loud**<b>tagged</b>")
    box.press("Enter")
    wait_idle(page)
    sidebar.get_by_text("Not available here").wait_for()
    assert "`tick`/**loud**<b>tagged</b>" in sidebar.inner_text()
    _no_markup(sidebar)
    for url in ("", "speed"):  # the other pages without free text of their own keep the same sidebar
        page.locator('[data-testid="stSidebarNav"]').get_by_text("Speed" if url else "Home", exact=True).click()
        wait_idle(page)
        sidebar.get_by_text("Not available here").wait_for()
        _no_markup(sidebar)
    screenshot(page, "user-text-sidebar")
