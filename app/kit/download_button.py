"""The app's one download button (``download``): its file is made when it is clicked, in the language the page was drawn in. The only st.download_button of app/ and pages/ (tests/test_house.py:
test_every_download_is_made_on_click).

Its own module, apart from the files it serves (app.kit.exports), so that drawing one costs no imports: the sidebar's session
report uses it on every page, and app.kit.exports's result types import torch (about 1.5 s and 200 MB that a page
which runs no model skips).
"""

from __future__ import annotations

from collections.abc import Callable

from app.kit.i18n import lang, language


def in_this_language(make: Callable[[], str | bytes]) -> Callable[[], str | bytes]:
    """``make`` to be run later, outside this script run (a download button's click), in the session's language of
    now: there the session's language is not known (app.kit.i18n.lang)."""
    code = lang()

    def run() -> str | bytes:
        with language(code):
            return make()

    return run


def download(
    where,
    label: str,
    make: Callable[[], str | bytes],
    file_name: str,
    mime: str,
    key: str,
    *,
    help: str | None = None,
    icon: str | None = None,
) -> None:
    """A download button in ``where`` (``st`` or a container) whose file ``make()`` builds when it is clicked (in the
    session's language), and whose click does not rerun the page; ``help`` and ``icon`` as st.download_button's.

    Not a file made while drawing: Streamlit's browser fetches such a file the moment the button is drawn, and the
    server forgets a session's files at the start of its next full run and drops a forgotten one at the second end
    of any session's run after that. A session whose page ran on (a result drawn by a job's polling fragment and
    drawn again by the full run after it, a new text, a page switch) while other sessions ran had the browser's fetch
    answered 404 ("Download Button source error", bench/soak.py); a button with nothing to fetch cannot be, and
    nothing is built until someone asks (tests/e2e/test_attribution_downloads_e2e.py)."""
    where.download_button(
        label, in_this_language(make), file_name, mime, key=key, help=help, on_click="ignore", icon=icon
    )
