"""EncoderLab entry point: `streamlit run app/main.py`."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app.kit import live, page_style, presenter, state  # noqa: E402
from app.kit.flow import PageEnd  # noqa: E402
from app.kit.uploads import apply_uploader_language  # noqa: E402
from app.nav import build_navigation, follow_deep_link  # noqa: E402
from app.room import lifecycle as room  # noqa: E402
from app.sidebar import model_picker, report_panel  # noqa: E402
from core.models.loading import BUILD_LOCK  # noqa: E402

# A local favicon: a :material/...: icon here would be fetched from a font CDN, which a workshop room lacks.
st.set_page_config(
    page_title="EncoderLab", page_icon=str(ROOT / "assets" / "icon.png"), layout="wide"
)  # i18n: ok (the name)
state.init()
state.init_language()


@st.cache_resource(show_spinner=False)
def _transformers_imported() -> bool:
    """transformers' lazy imports, done once by one thread: two sessions' first model loads resolving them at the
    same time could meet a half-imported module ("module 'transformers' has no attribute 'AutoTokenizer'")."""
    with BUILD_LOCK:
        import transformers  # lazy: under BUILD_LOCK, so one thread resolves its lazy imports

        for name in (
            "AutoConfig",
            "AutoTokenizer",
            "AutoModel",
            "AutoModelForMaskedLM",
            "AutoModelForSequenceClassification",
            "AutoModelForTokenClassification",
        ):
            getattr(transformers, name)
    return True


_transformers_imported()

page = st.navigation(
    build_navigation(), expanded=True
)  # all pages listed: collapsed, the last sections hid behind "View N more"
follow_deep_link()  # a link to /<page> that app/serve.py sent to the root first: open that page, with its query
room.begin(page)  # ?room=CODE: join, and the room's banner (a follower's poll follows the presenter)
model_picker()
page_style.apply()  # metric labels wrap instead of ending in …
presenter.apply_style()
apply_uploader_language()  # 中文: Streamlit's own upload-box texts, from the catalogue
try:
    page.run()
except PageEnd:  # the page ended early (app.kit.flow.end_page, never st.stop(): that would stop the frame too)
    pass
finally:  # the sidebar keeps its report download, and the room hears from the presenter
    live.note_full_run(page)  # the page a timed fragment's run must find the browser on (app/kit/live.py)
    report_panel()
    room.end(page)  # the presenter publishes its page and inputs; a follower who changed something breaks away
