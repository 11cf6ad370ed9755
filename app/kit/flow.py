"""Ending a page's script early without ending the frame around it.

``st.stop()`` asks the script runner to stop, and from then on every Streamlit call raises again: the frame's
``finally`` in app/main.py (the sidebar's session-report panel, the room's publishing of the presenter's page) drew
nothing after a page stopped early, so the report panel vanished from the sidebar whenever a page had nothing to show
yet (Corpus search before a word is picked, Attention after a refused text). A page calls ``end_page()`` instead:
its own exception, which main.py catches around ``page.run()``, so the frame still draws.
"""

from __future__ import annotations

from typing import NoReturn


class PageEnd(Exception):
    """The page has drawn all it has to show for this run (caught by app/main.py around the page)."""


def end_page() -> NoReturn:
    """End this page's script here; the sidebar and the room, drawn after the page, still draw."""
    raise PageEnd
