"""EncoderLab's server: ``streamlit run app/serve.py`` serves app/main.py behind one redirect (app/deeplinks.py),
so a shared link to /<page> opens without the client's base-path probes failing in the console."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402

from app.deeplinks import DeepLinkRedirect  # noqa: E402

app = st.App("main.py", middleware=[Middleware(DeepLinkRedirect)])
