"""The redirect app/serve.py puts in front of Streamlit: a page's own URL opened fresh goes to the root first.

Why: opened at /<page>, Streamlit's client does not know the server's base path, so it probes
/<page>/_stcore/health and /<page>/_stcore/host-config, gets 404 twice (logged in the browser console), and only
then tries / (streamlit#7074; the client's candidates are the page's path and its parent). Loaded at /, it asks /
alone. The redirect keeps the link's query, and app/main.py then switches to the page it named
(``nav.PAGE_PARAM``, see nav.follow_deep_link), so the view and the address bar end up exactly as the link was.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.responses import RedirectResponse

from app.nav import PAGE_PARAM, PAGES

PAGE_URLS = frozenset(p.url for p in PAGES)


class DeepLinkRedirect:
    """ASGI middleware: a browser's GET of /<page> (HTML) becomes a 307 to /?<PAGE_PARAM>=<page>&<its query>."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            root = scope.get("root_path", "").rstrip("/")
            path = scope["path"][len(root) :] if root and scope["path"].startswith(root) else scope["path"]
            name = path.strip("/")
            accept = dict(scope.get("headers", ())).get(b"accept", b"")
            if name in PAGE_URLS and b"text/html" in accept:
                query = scope.get("query_string", b"").decode("latin-1")
                target = f"{root}/?{urlencode({PAGE_PARAM: name})}" + (f"&{query}" if query else "")
                await RedirectResponse(target, status_code=307)(scope, receive, send)
                return
        await self.app(scope, receive, send)
