"""The font stack of every figure and embedded view: Latin text keeps the app's face, Chinese text gets a CJK face.

Without a CJK family named, Chromium (the browser, and kaleido drawing the session report's PNGs) falls back to
whatever fontconfig offers for a Han character: the Japanese cut of Noto Sans CJK on a Debian server (other glyph
shapes for 直, 骨, 说 …), or empty boxes where no CJK font is installed at all (the Dockerfile and
scripts/install_chromium.sh install fonts-noto-cjk). Naming the Simplified Chinese cut first among the CJK faces
picks it wherever it is installed; the families after it are what other systems have.
"""

from __future__ import annotations

# the app's own face first (Streamlit's theme: "Source Sans"), then the CJK faces, then the generic family
CJK_FAMILIES = ("Noto Sans CJK SC", "Source Han Sans SC", "Noto Sans SC", "PingFang SC", "Microsoft YaHei")
LATIN_FAMILIES = ("Source Sans", "Source Sans Pro", "Open Sans", "Arial")
FONT_STACK = ", ".join(f'"{f}"' if " " in f else f for f in (*LATIN_FAMILIES, *CJK_FAMILIES)) + ", sans-serif"


def font_updates(fig) -> dict:
    """Layout updates that give ``fig`` the font stack where it names no family of its own: the layout's font, and
    the title's and hover label's, which Streamlit's chart theme sets to its own family otherwise."""
    layout = fig.layout
    out: dict = {}
    if not layout.font.family:
        out["font_family"] = FONT_STACK
    if not layout.title.font.family:
        out["title_font_family"] = FONT_STACK
    if not layout.hoverlabel.font.family:
        out["hoverlabel_font_family"] = FONT_STACK
    return out
