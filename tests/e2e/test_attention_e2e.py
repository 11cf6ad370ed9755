"""The Attention page in Chromium: bertviz views render offline, user text stays plain text, clicking a head
thumbnail focuses it. The page fixture fails the test on console errors and on requests leaving localhost."""

from __future__ import annotations

import time

from tests.e2e.browser import open_page, screenshot, wait_idle

UNSAFE = '</script><script>alert(1)</script> "quoted" back\\slash é ☃'

GRID_POINT = """(target) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout && g.layout.clickmode === 'event+select');
  if (!gd) return null;
  gd.scrollIntoView({block: 'center'});
  const tr = gd.data[1];
  const i = tr.customdata.findIndex(c => c[0] === target[0] && c[1] === target[1]);
  const fl = gd._fullLayout, r = gd.getBoundingClientRect();
  return [r.left + fl.xaxis._offset + fl.xaxis.l2p(tr.x[i]), r.top + fl.yaxis._offset + fl.yaxis.l2p(tr.y[i])];
}"""


def _show(page, text: str) -> float:
    """Submit ``text``; seconds until the head view has drawn its tokens in the browser."""
    page.get_by_label("Text (sentence A)").fill(text)
    t0 = time.perf_counter()
    page.get_by_role("button", name="Show attention").click()
    wait_idle(page)
    page.frame_locator('iframe[title="bertviz head view"]').locator("svg text").first.wait_for(timeout=60_000)
    return time.perf_counter() - t0


def test_bertviz_views_are_offline_and_text_stays_text(page):
    open_page(page, "attention")
    seconds = _show(page, UNSAFE)
    frame = page.frame_locator('iframe[title="bertviz head view"]')
    texts = frame.locator("svg text").all_text_contents()
    for piece in ("<", "/", "script", ">", "alert", '"', "\\", "quoted"):
        assert piece in texts, (piece, texts)
    # the theme check, d3, jQuery, require.js, the defines, the view: nothing injected by the text
    assert frame.locator("script").count() == 6
    assert not page.watch.dialogs, page.watch.dialogs
    # sized to content: the iframe is at least as tall as the drawing inside it
    svg_h = frame.locator("#vis svg").bounding_box()["height"]
    assert page.locator('iframe[title="bertviz head view"]').bounding_box()["height"] >= svg_h
    print(f"\n[attention e2e] head view, {len(texts) // 2} tokens: {seconds:.2f}s from click to drawn")
    screenshot(page, "attention-head-view")

    # plotly reads HTML-like tags in labels: the heatmap's token ticks must show the characters themselves
    page.get_by_role("tab", name="Heatmaps").click()
    page.get_by_text("layer 0, head 0").first.wait_for()
    ticks = page.locator(".js-plotly-plot .xtick text").all_text_contents()
    assert "<" in ticks and ">" in ticks and "\\" in ticks and "script" in ticks, ticks
    assert not page.watch.dialogs
    page.get_by_role("tab", name="bertviz").click()

    # the standalone download draws with every network request refused
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download this view as standalone HTML").click()
    standalone = open(dl.value.path(), encoding="utf-8").read()
    offline = page.context.new_page()
    refused: list[str] = []
    offline.route("**/*", lambda route: (refused.append(route.request.url), route.abort()))
    offline.on("dialog", lambda d: (page.watch.dialogs.append(d.message), d.dismiss()))
    offline.set_content(standalone)
    offline.locator("svg text").first.wait_for(timeout=30_000)
    assert "quoted" in offline.locator("svg text").all_text_contents() and not refused, refused
    offline.close()

    t0 = time.perf_counter()
    page.get_by_text("Model view", exact=True).click()
    wait_idle(page)
    page.frame_locator('iframe[title="bertviz model view"]').locator("svg text").first.wait_for(timeout=60_000)
    print(f"[attention e2e] model view: {time.perf_counter() - t0:.2f}s from click to drawn")
    assert not page.watch.dialogs
    # bertviz draws a fixed 970 px grid; the view zooms to its frame so the last head column is not cut (issue 14)
    frame_box = page.locator('iframe[title="bertviz model view"]').bounding_box()
    svg_box = page.frame_locator('iframe[title="bertviz model view"]').locator("#vis svg").bounding_box()
    assert svg_box["x"] + svg_box["width"] <= frame_box["x"] + frame_box["width"] + 1, (svg_box, frame_box)
    screenshot(page, "attention-model-view")

    page.get_by_text("Head view", exact=True).click()
    wait_idle(page)
    long_text = " ".join(["attention"] * 100 + ["ends", "here", "."])
    seconds = _show(page, long_text)
    print(f"[attention e2e] head view, {len(long_text.split()) + 2} tokens: {seconds:.2f}s from click to drawn")


def test_clicking_a_thumbnail_focuses_that_head(page):
    open_page(page, "attention")
    page.get_by_role("tab", name="Heatmaps").click()
    page.get_by_text("layer 0, head 0").first.wait_for()
    page.wait_for_timeout(500)
    x, y = page.evaluate(GRID_POINT, [1, 2])
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    wait_idle(page)
    page.locator('[data-testid="stMain"]').get_by_text("layer 1, head 2").first.wait_for(timeout=30_000)
    screenshot(page, "attention-grid-focus")
