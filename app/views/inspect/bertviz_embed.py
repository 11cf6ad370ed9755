"""bertviz's head view and model view as self-contained, offline HTML with a bounded payload.

bertviz (``html_action="return"``) builds the view: its HTML, its d3 code and its parameters. Three things are
then changed, nothing else:

1. The CDN loads go: bertviz's ``<script src=cdnjs…/require.min.js>`` and its ``require.config`` paths for d3
   and jQuery are replaced by the vendored copies in assets/vendor, inlined. d3 and jQuery run first as plain
   globals, then require.js, then two named ``define()``s hand them to bertviz's ``requirejs(['jquery','d3'])``.
2. The parameters are re-serialised: attention weights rounded to ``decimals`` and written without a leading
   zero (``.012`` rather than ``0.012000000104308128``), and every ``<``, ``>`` and ``&`` inside strings
   escaped as ``\\u003c``…, so no token (e.g. ``</script>``) can end the script or become markup. The views
   insert tokens with d3/jQuery ``.text()``, so they show as plain text.
3. Light/dark colours follow the app's theme (see THEME_JS); text is drawn in app.kit.fonts' stack (a CJK face
   for Chinese tokens).

The head view also has a horizontal layout (``layout="horizontal"``, bertviz issue #18), for long CJK sentences:
bertviz 1.4.1 has no such option (its head_view.js lays tokens out in two columns, one row of 22.5 px each), so
bertviz still builds the page, its controls and parameters, and only the drawing code after ``const params``
is swapped for head_view_horizontal.js (next to this file).

No streamlit import here: bench/attention.py builds the same HTML.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.kit.fonts import FONT_STACK
from core.base.paths import ASSETS
from core.base.segment import is_wide

VENDOR = ASSETS / "vendor"
VENDOR_FILES = {"d3": "d3-5.7.0.min.js", "jquery": "jquery-2.1.4.min.js", "require": "require-2.3.6.js"}
VENDOR_SHA256 = {
    "d3-5.7.0.min.js": "bdad5585ef9a965ff25458738309b006058c55f2c78d794d25fbecae35014609",
    "jquery-2.1.4.min.js": "22642f202577f0ba2f22cbe56b6cf291a09374487567cd3563e0d2a29f75c0c5",
    "require-2.3.6.js": "9485f0917f97fcf4f63a5ea365200ffd57f123f451382a2f9a1ad2e2fd51ac9b",
}
# Attention values per view: one whole 12-head layer at 512 tokens (12 x 512^2 = 3.15M), or all 12 layers at 128
# tokens (2.36M). About 5 bytes each at 3 decimals. Beyond it, later layers (then heads) are left out.
PAYLOAD_BUDGET = 3_200_000
DECIMALS = 3
VIEWS = ("head", "model")
LAYOUTS = ("vertical", "horizontal")  # of the head view: bertviz's own, or head_view_horizontal.js
HORIZONTAL_JS = Path(__file__).with_name("head_view_horizontal.js")
# The horizontal head view's sizes (px), shared with its JS so the iframe's height is known here.
H_TEXT, H_TOP, H_GAP, H_MIN_COL, H_MAX_COL, H_MAX_CHARS = 15, 30, 170, 20, 48, 12
LONG_CJK_TOKENS = 24  # a text of at least this many tokens, half of them CJK, opens in the horizontal layout

THEME_CSS = (
    "html,body{margin:0;padding:4px;}"
    "html.light body{background:var(--app-bg,#ffffff);color:#31333f;}"
    "html.dark body{background:var(--app-bg,#0e1117);color:#fafafa;}"
    "html.dark select{background:var(--app-bg,#0e1117);color:#fafafa;}"
    "html.dark svg text{fill:#fafafa;}"
    f"html,body,svg text{{font-family:{FONT_STACK};}}"
)
# The theme is baked in from st.context.theme, which Streamlit reports wrongly on a session's first run
# (streamlit#11920). Embedded in the app (a same-origin iframe), the view checks the app's actual background;
# opened on its own (the standalone download), it keeps the baked one.
THEME_JS = (
    "(function(){var dark=BAKED;try{var d=window.parent!==window&&window.parent.document;"
    "var el=d&&(d.querySelector('.stApp')||d.body);if(el){var m=getComputedStyle(el).backgroundColor"
    ".match(/\\d+/g);if(m&&m.length>=3&&(m.length<4||+m[3]>0)){dark=(0.299*m[0]+0.587*m[1]+0.114*m[2])<128;"
    "document.documentElement.style.setProperty('--app-bg',getComputedStyle(el).backgroundColor);}}}catch(e){}"
    "document.documentElement.className=dark?'dark':'light';"
    "window.ENCODERLAB_MODE=dark?'dark':'light';})();"
)

# bertviz's model view draws a fixed 970 px wide SVG (DIV_WIDTH in model_view.js) plus the body's 2x4 px padding;
# the app's column is narrower (about 940 px at a 1400 px window), which cut off the last head column. The page
# zooms itself to fit its frame instead (zoom keeps d3's mouse positions right, unlike a CSS transform).
MODEL_VIEW_WIDTH = 970 + 2 * 4
FIT_JS = (
    "(function(){function fit(){var w=document.documentElement.clientWidth;"
    "document.body.style.zoom=w>0&&w<NEED?String(w/NEED):'';}"
    "window.addEventListener('resize',fit);fit();})();"
).replace("NEED", str(MODEL_VIEW_WIDTH))


@functools.cache
def vendor_js() -> str:
    """d3, jQuery and require.js inlined, then the two module definitions bertviz's code asks for."""
    parts = []
    for key in ("d3", "jquery", "require"):
        src = (VENDOR / VENDOR_FILES[key]).read_text(encoding="utf-8")
        src = re.sub(r"^//# sourceMappingURL=.*$", "", src, flags=re.M)  # no map is shipped: nothing to fetch
        if "</script" in src.lower():
            raise RuntimeError(f"{VENDOR_FILES[key]} contains '</script' and cannot be inlined as is.")
        parts.append(f"<script>/* {VENDOR_FILES[key]} (assets/vendor) */\n{src}\n</script>")
    parts.append(
        "<script>define('d3', [], function () { return window.d3; });\n"
        "define('jquery', [], function () { return window.jQuery; });</script>"
    )
    return "\n".join(parts)


def js_string_safe(text: str) -> str:
    """JSON text that is safe inside an HTML <script>: <, >, & become \\u escapes (only strings contain them)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _number_table(decimals: int) -> np.ndarray:
    scale = 10**decimals
    out = []
    for i in range(scale + 1):
        s = f"{i / scale:.{decimals}f}".rstrip("0").rstrip(".")
        out.append("0" if s in ("", "0") else s[1:] if s.startswith("0.") else s)
    return np.array(out, dtype=object)


def encode_weights(arr: np.ndarray, decimals: int = DECIMALS) -> str:
    """A nested JS array literal of ``arr`` (any rank) with weights in [0, 1] rounded to ``decimals``."""
    scale = 10**decimals
    ints = np.clip(np.rint(np.asarray(arr, dtype=np.float64) * scale), 0, scale).astype(np.int64)
    table = _number_table(decimals)
    shape = ints.shape
    rows = ["[" + ",".join(r) + "]" for r in table[ints.reshape(-1, shape[-1])]]
    for size in reversed(shape[:-1]):
        rows = ["[" + ",".join(rows[i : i + size]) + "]" for i in range(0, len(rows), size)]
    return rows[0] if len(shape) > 1 else "[" + ",".join(table[ints]) + "]"


def fit_payload(
    layers: list[int], heads: list[int], n_tokens: int, pair: bool, budget: int = PAYLOAD_BUDGET
) -> tuple[list[int], list[int]]:
    """The leading layers (and, if one layer is already too big, the leading heads) whose attention fits the
    payload budget; never less than one layer and one head. A pair ships about twice the values: bertviz adds
    the A->A, B->B, A->B and B->A slices."""
    per_head = n_tokens * n_tokens * (2 if pair else 1)
    if len(heads) * per_head > budget:
        return list(layers[:1]), list(heads[: max(1, budget // per_head)])
    return list(layers[: max(1, budget // (len(heads) * per_head))]), list(heads)


@dataclass(frozen=True)
class ViewHTML:
    """A built view: the full HTML page, its size, and what it holds."""

    html: str
    kind: str
    layers: tuple[int, ...]
    heads: tuple[int, ...]
    n_tokens: int
    height: int  # px the view needs (for the iframe)
    layout: str = "vertical"  # the head view's: bertviz's own, or "horizontal" (head_view_horizontal.js)

    @property
    def size_bytes(self) -> int:
        return len(self.html.encode("utf-8"))


def _split_bertviz(html: str) -> tuple[str, str]:
    """bertviz's returned HTML -> (its view <div>, its view JS), with the CDN require.js tag removed."""
    m = re.match(
        r'\s*<script src="https://cdnjs[^"]*require[^"]*"></script>(.*?)<script type="text/javascript">'
        r"(.*)</script>\s*$",
        html,
        flags=re.S,
    )
    if not m:
        raise RuntimeError("bertviz's HTML has an unexpected shape: the offline embed needs bertviz 1.4.x.")
    div, js = m.group(1), m.group(2)
    js = re.sub(r"require\.config\(\{.*?\}\);", "", js, count=1, flags=re.S)  # no CDN paths: modules are defined
    return div, js


def _rewrite_params(js: str, layers: list[int], heads: list[int], decimals: int) -> str:
    # bertviz substitutes PYTHON_PARAMS twice on this line: in the code and in the comment after it
    # ("// HACK: PYTHON_PARAMS is a template marker"). The whole line is replaced, so the raw copy goes too.
    a = js.index("const params = ") + len("const params = ")
    params, b = json.JSONDecoder().raw_decode(js, a)
    line_end = js.find("\n", b)
    line_end = len(js) if line_end < 0 else line_end
    blocks = []
    for d in params.pop("attention"):
        weights = encode_weights(np.asarray(d["attn"], dtype=np.float64), decimals)
        meta = js_string_safe(
            json.dumps(
                {"name": d["name"], "left_text": d["left_text"], "right_text": d["right_text"]}, separators=(",", ":")
            )
        )
        blocks.append(meta[:-1] + ',"attn":' + weights + "}")
    params["include_layers"] = layers  # bertviz numbered the layers it was given 0..k-1; show the real ones
    if "include_heads" in params:
        params["include_heads"] = heads
    rest = js_string_safe(json.dumps(params, separators=(",", ":")))
    rest = re.sub(r'"display_mode":"(dark|light)"', '"display_mode":window.ENCODERLAB_MODE', rest)
    return js[:a] + rest[:-1] + ',"attention":[' + ",".join(blocks) + "]};" + js[line_end:]


def default_layout(labels: list[str], text: str = "") -> str:
    """The head view's layout for these tokens (of ``text``): horizontal for a long CJK text, where bertviz's
    vertical one would be one tall strip: at least LONG_CJK_TOKENS tokens, and half of them with a CJK character
    or half of the text's characters CJK (a tokenizer that lacks them writes [UNK]); vertical otherwise."""
    cjk = sum(any(is_wide(c) for c in label) for label in labels)
    chars = [c for c in text if not c.isspace()]
    cjk_text = bool(chars) and 2 * sum(is_wide(c) for c in chars) >= len(chars)
    return "horizontal" if len(labels) >= LONG_CJK_TOKENS and (2 * cjk >= len(labels) or cjk_text) else "vertical"


def _label_px(labels: list[str]) -> int:
    """Height of a row of labels written top to bottom: the longest (cut at H_MAX_CHARS), a CJK character one em,
    a Latin one (turned sideways) at most 0.7 em."""

    def one(label: str) -> float:
        shown = label if len(label) <= H_MAX_CHARS else label[: H_MAX_CHARS - 1] + "…"
        return sum(H_TEXT if is_wide(c) else 0.7 * H_TEXT for c in shown)

    return int(max([2 * H_TEXT] + [one(x) for x in labels])) + 10


def _rows(labels: list[str], b: int | None) -> list[tuple[list[str], list[str]]]:
    """(top row, bottom row) of each of bertviz's attention filters, in its order (all; with a pair also A->A,
    B->B, A->B, B->A)."""
    if b is None:
        return [(labels, labels)]
    a_, b_ = labels[:b], labels[b:]
    return [(labels, labels), (a_, a_), (b_, b_), (a_, b_), (b_, a_)]


def _horizontal(js: str, labels: list[str], b: int | None) -> str:
    """bertviz's head-view JS with its drawing code (everything after the ``const params`` line, inside its
    ``requirejs`` callback) replaced by head_view_horizontal.js."""
    cut = js.index("\n", js.index("const params = "))
    layout = {
        "text_size": H_TEXT,
        "top": H_TOP,
        "gap": H_GAP,
        "min_col": H_MIN_COL,
        "max_col": H_MAX_COL,
        "max_chars": H_MAX_CHARS,
        "label_px": [[_label_px(t), _label_px(u)] for t, u in _rows(labels, b)],
    }
    return (
        js[: cut + 1]
        + f"    const HLAYOUT = {json.dumps(layout)};\n"
        + HORIZONTAL_JS.read_text(encoding="utf-8")
        + "\n});\n"
    )


# bertviz's own control text in the view's <div> (its layer and attention-filter selects), which the page writes in
# the session's language: "Layer:" and "Attention:" before the selects, the filter's options after.
CONTROLS = (
    "Layer",
    "Attention",
    "All",
    "Sentence A -> Sentence A",
    "Sentence B -> Sentence B",
    "Sentence A -> Sentence B",
    "Sentence B -> Sentence A",
)


def translate_controls(div: str, names: dict[str, str]) -> str:
    """bertviz's view <div> with the text of its controls (CONTROLS) replaced by ``names`` (escaped)."""
    for old, new in names.items():
        safe = new.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        if old in ("Layer", "Attention"):
            div = div.replace(f"{old}: <select", f"{safe} <select", 1)
        else:
            div = div.replace(f">{old}</option>", f">{safe}</option>", 1)
    return div


def _height(kind: str, n_tokens: int, n_layers: int, total_heads: int, horizontal_rows=None) -> int:
    if horizontal_rows is not None:  # controls, then head boxes, labels, lines, labels, and a scroll bar
        return max(H_TOP + _label_px(t) + H_GAP + _label_px(u) for t, u in horizontal_rows) + 6 + 40 + 30
    # bertviz's own layout constants (head_view.js / model_view.js)
    if kind == "head":
        return int(n_tokens * 22.5 + 30 + 70)
    thumb = n_tokens * 7 * (12 / total_heads) + 10
    axis = 15 + 5 + 13 + 5
    detail = n_tokens * 18 + 30 + 25
    return int(max(n_layers * thumb + axis, detail) + 50)


def build_view(
    kind: str,
    attentions: np.ndarray,
    labels: list[str],
    sentence_b_start: int | None = None,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    dark: bool = False,
    decimals: int = DECIMALS,
    title: str = "Attention",
    layout: str = "vertical",
    controls: tuple[tuple[str, str], ...] = (),
) -> ViewHTML:
    """The bertviz ``kind`` view ("head" or "model") of ``attentions`` (layers, heads, seq, seq) as one offline
    HTML page. ``labels`` are the display tokens; ``layers``/``heads`` filter what is shipped (default all);
    ``layout`` ("vertical" or "horizontal") is the head view's; ``controls`` are (bertviz's English, the session's
    language) pairs for the text of its controls (CONTROLS). Raises ValueError on an unknown view or layout or a
    mismatch between tokens and attention."""
    import torch  # lazy: torch loads in ~2 s, only a bertviz view needs it here
    from bertviz import head_view, model_view  # lazy: optional, only the Attention page's view

    if kind not in VIEWS:
        raise ValueError(f"Unknown view {kind!r}: use 'head' or 'model'.")
    if layout not in LAYOUTS:
        raise ValueError(f"Unknown layout {layout!r}: use 'vertical' or 'horizontal'.")
    horizontal = kind == "head" and layout == "horizontal"
    n_layers, n_heads, n, _ = attentions.shape
    if len(labels) != n:
        raise ValueError(f"{len(labels)} tokens for attention over {n} positions.")
    layers = list(range(n_layers)) if layers is None else [int(x) for x in layers]
    heads = list(range(n_heads)) if heads is None else [int(x) for x in heads]
    if not layers or not heads:
        raise ValueError("Pick at least one layer and one head to show.")
    scale = 10**decimals
    sel = np.round(np.asarray(attentions[layers][:, heads], dtype=np.float64) * scale) / scale
    tensors = [torch.from_numpy(sel[i : i + 1]) for i in range(len(layers))]  # bertviz wants (1, heads, n, n) each
    mode = "dark" if dark else "light"
    if kind == "head":
        out = head_view(
            tensors, list(labels), sentence_b_start=sentence_b_start, prettify_tokens=False, html_action="return"
        )
    else:
        out = model_view(
            tensors,
            list(labels),
            sentence_b_start=sentence_b_start,
            prettify_tokens=False,
            display_mode=mode,
            html_action="return",
        )
    div, js = _split_bertviz(out.data)
    div = translate_controls(div, dict(controls))
    js = _rewrite_params(js, layers, heads, decimals)
    if horizontal:
        js = _horizontal(js, list(labels), sentence_b_start)
    safe_title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    html = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{safe_title}</title><style>{THEME_CSS}</style>"
        f"<script>{THEME_JS.replace('BAKED', 'true' if dark else 'false')}</script></head><body>\n"
        + vendor_js()
        + "\n"
        + div
        + "\n<script>\n"
        + js
        + "\n</script>\n"
        + (f"<script>{FIT_JS}</script>\n" if kind == "model" else "")
        + "</body></html>\n"
    )
    if "cdnjs" in html or re.search(r"<script[^>]+src=", html):
        raise RuntimeError("the offline view still loads a script from elsewhere")
    return ViewHTML(
        html=html,
        kind=kind,
        layers=tuple(layers),
        heads=tuple(heads),
        n_tokens=n,
        height=_height(kind, n, len(layers), len(heads), _rows(list(labels), sentence_b_start) if horizontal else None),
        layout=layout if kind == "head" else "vertical",
    )
