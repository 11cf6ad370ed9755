"""Deep links (issue 14): opened fresh at /<page>, Streamlit's client probed /<page>/_stcore/health and
/<page>/_stcore/host-config (two 404s in the console). app/serve.py sends such a load to / with the page named in
the query, and app/main.py opens that page with the rest of the link."""

from __future__ import annotations

import asyncio

from app.deeplinks import DeepLinkRedirect
from app.nav import PAGE_PARAM
from tests.app.conftest import open_page


def _call(path: str, query: bytes = b"", accept: bytes = b"text/html,application/xhtml+xml", root: str = ""):
    seen = {}

    async def inner(scope, receive, send):
        seen["passed"] = scope["path"]

    async def receive():
        return {"type": "http.request"}

    sent = []

    async def send(msg):
        sent.append(msg)

    scope = {
        "type": "http",
        "method": "GET",
        "path": root + path,
        "root_path": root,
        "query_string": query,
        "headers": [(b"accept", accept)],
    }
    asyncio.run(DeepLinkRedirect(inner)(scope, receive, send))
    if "passed" in seen:
        return None
    start = sent[0]
    return start["status"], dict(start["headers"])[b"location"].decode()


def test_a_page_url_opened_fresh_goes_to_the_root_with_its_query():
    assert _call("/attention", b"attention.text=a+b&lang=zh") == (
        307,
        f"/?{PAGE_PARAM}=attention&attention.text=a+b&lang=zh",
    )
    assert _call("/models") == (307, f"/?{PAGE_PARAM}=models")
    assert _call("/models", root="/lab") == (307, f"/lab/?{PAGE_PARAM}=models")  # server.baseUrlPath kept


def test_everything_else_passes_through():
    assert _call("/") is None
    assert _call("/attention/_stcore/health") is None and _call("/_stcore/host-config") is None
    assert _call("/static/js/index.js") is None
    assert _call("/no-such-page") is None  # Streamlit's own "page not found" stays
    assert _call("/attention", accept=b"application/json") is None  # not a browser opening a page


def test_the_page_named_in_the_link_opens_with_the_rest_of_it(use_tiny_zoo):
    at = open_page(None, params={PAGE_PARAM: "speed", "speed.seq": "32", "speed.families": "bert,albert"})
    assert at.title[0].value == "Speed"
    assert at.select_slider(key="speed.seq").value == 32
    assert at.multiselect(key="speed.families").value == ["bert", "albert"]
    assert PAGE_PARAM not in at.query_params and not at.warning
    unknown = open_page(None, params={PAGE_PARAM: "nope"})
    assert unknown.title[0].value == "EncoderLab" and PAGE_PARAM not in unknown.query_params
