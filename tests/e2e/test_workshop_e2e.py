"""Workshop mode in the real browser: a shared link reproduces the prediction in a fresh session; 中文; presenter."""

from __future__ import annotations

import pytest

from app.kit.i18n import catalog
from tests.e2e.browser import SHOTS, open_page, screenshot, wait_idle


def _joint_fill(pg) -> str:
    main = pg.locator('[data-testid="stMain"]')
    line = main.get_by_text("Joint fill").first
    line.wait_for(timeout=60_000)
    wait_idle(pg)
    return line.inner_text()


def _top_pieces(pg) -> list[str]:
    chart = pg.locator('[data-testid="stMain"] .js-plotly-plot').first
    chart.wait_for()
    return [t.strip() for t in chart.locator(".ytick text").evaluate_all("els => els.map(e => e.textContent)")]


def test_a_shared_link_shows_the_same_prediction(page, browser):
    open_page(page, "fill-mask")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_label("Text with [MASK] (several are fine)").fill("A shared link keeps the [MASK] of the room.")
    main.get_by_role("button", name="Predict").click()
    made = _joint_fill(page)
    made_pieces = _top_pieces(page)
    page.wait_for_function("() => window.location.search.includes('fill_mask.text')", timeout=10_000)
    link = page.url
    assert "family=" in link and "model=" in link

    # the room opens the link: a new browser context is a new Streamlit session
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        other = ctx.new_page()
        errors = []
        other.on(
            "console",
            lambda m: (
                errors.append(m.text)
                if m.type == "error" and "_stcore" not in (m.location or {}).get("url", "")
                else None
            ),
        )
        other.goto(link)
        wait_idle(other, 90)
        assert _joint_fill(other) == made
        assert _top_pieces(other) == made_pieces
        box = other.locator('[data-testid="stMain"]').get_by_label("Text with [MASK] (several are fine)")
        assert box.input_value() == "A shared link keeps the [MASK] of the room."
        screenshot(other, "shared-link")
        assert not errors, errors
    finally:
        ctx.close()


# Each Han character of an element's text drawn on a canvas in the element's own font, compared with the missing-glyph
# box (U+10FFFD, a private-use code point no font draws) and with each other: where no font has the characters,
# they all come out as that same box (#30: "Chinese glyphs show as empty boxes").
GLYPHS_JS = """el => {
  const cs = getComputedStyle(el);
  const canvas = document.createElement('canvas');
  canvas.width = 64; canvas.height = 64;
  const ctx = canvas.getContext('2d');
  const draw = s => {
    ctx.clearRect(0, 0, 64, 64);
    ctx.font = `${cs.fontWeight} 40px ${cs.fontFamily}`;
    ctx.textBaseline = 'top';
    ctx.fillText(s, 4, 4);
    return ctx.getImageData(0, 0, 64, 64).data.join(',');
  };
  const han = [...new Set([...el.textContent].filter(c => /\\p{Script=Han}/u.test(c)))].slice(0, 8);
  const box = draw('\\u{10FFFD}');
  const drawn = han.map(draw);
  return {font: cs.fontFamily, han: han.join(''), boxes: han.filter((c, i) => drawn[i] === box).join(''),
          distinct: new Set(drawn).size};
}"""


def test_chinese_interface(page):
    open_page(page, "fill-mask?lang=zh")
    nav = page.locator('[data-testid="stSidebarNav"]')
    assert catalog()["nav.fill_mask"]["zh"] in nav.inner_text()
    assert catalog()["sidebar.family"]["zh"] in page.locator('[data-testid="stSidebar"]').inner_text()
    # the Chinese labels are drawn with real glyphs, not the missing-glyph box (a CJK font is installed and reached)
    for where in ('[data-testid="stSidebarNav"]', '[data-testid="stMain"] h1'):
        got = page.locator(where).first.evaluate(GLYPHS_JS)
        assert len(got["han"]) >= 2, got
        assert not got["boxes"] and got["distinct"] == len(got["han"]), f"Chinese drawn as boxes in {where}: {got}"
    screenshot(page, "zh")


def test_presenter_view_has_large_fonts(page):
    open_page(page, "fill-mask?present=1")
    h1 = page.locator('[data-testid="stMain"] h1').first
    size = float(h1.evaluate("e => parseFloat(getComputedStyle(e).fontSize)"))
    assert size >= 48, size  # 3.2rem at 22px
    screenshot(page, "presenter")


# Every button's and metric's text that Streamlit cut to fit ("← P", "Follo…"): its box narrower than its text.
CLIPPED_JS = """() => [...document.querySelectorAll(
    '[data-testid=stMain] button p, [data-testid=stSidebar] button p, [data-testid=stMetricLabel] *,'
    + ' [data-testid=stCheckbox] label *, [data-testid=stWidgetLabel] *, .st-key-room-presenter p')]
  .filter(e => e.offsetParent !== null && (e.textContent || '').trim() && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent)"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_presenter_view_fits_a_1280x720_projector(page, lang):
    """#46, third walk: at 1280x720 in the presenter view the walkthrough's buttons read "← P" / "→ N", the room's
    count read "Follo…", and the room box filled about half the screen. Screenshots: presenter-1280x720-<lang>."""
    page.set_viewport_size({"width": 1280, "height": 720})
    open_page(page, f"walkthrough?present=1&lang={lang}", 120)
    main = page.locator('[data-testid="stMain"]')
    for key in ("walkthrough.prev", "walkthrough.next"):
        label = catalog()[key][lang]
        button = main.get_by_role("button", name=label).first
        button.scroll_into_view_if_needed()
        assert label in button.inner_text()
    assert page.evaluate(CLIPPED_JS) == []
    page.get_by_role("button", name=catalog()["room.start"][lang]).click()
    box = page.locator(".st-key-room-presenter")
    box.wait_for(timeout=60_000)
    wait_idle(page, 60)
    page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
    assert page.evaluate(CLIPPED_JS) == []
    page.screenshot(path=str(SHOTS / f"presenter-1280x720-{lang}-code.png"))  # the join code, as the room opens
    page.locator('[data-testid="stSidebar"]').get_by_text(catalog()["room.show_qr"][lang], exact=True).click()
    box.locator("img").wait_for(state="detached")
    wait_idle(page, 60)
    assert page.evaluate(CLIPPED_JS) == []
    height = box.bounding_box()["height"]
    assert height < 0.3 * 720, height  # with the join code hidden the box is two lines, not half the screen
    page.screenshot(path=str(SHOTS / f"presenter-1280x720-{lang}.png"))
