"""AppTest helpers: the entry script by absolute path (AppTest resolves relative paths against the caller)."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")


def page_path(name: str) -> str:
    """Absolute path of pages/<name>.py, for AppTest.switch_page."""
    return str(ROOT / "pages" / f"{name}.py")


def new_app(timeout: float = 120) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=timeout)
    at.run()
    assert not at.exception, at.exception
    return at
