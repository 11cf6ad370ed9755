"""Shareable links: every page keeps its state (model, text, options) in the URL's query parameters.

A page declares its fields and calls ``bind(fields)`` before drawing its widgets::

    FIELDS = (urlstate.Field(k("text"), max_len=4000), urlstate.Field(k("top_k"), "int", lo=1, hi=50))
    restored = urlstate.bind(FIELDS)

``bind`` does two things:
1. **Restore.** Parameters in the URL that this session did not itself write (a link someone shared, a
   bookmark) are checked and copied into session state, so the widgets open with them. Bad or stale values
   (an unknown model, a number out of range, a choice that no longer exists) fall back to the default and a
   notice in the page names them. It returns the keys it restored, so a page can redo the shared view
   (e.g. run the prediction the link was made from).
2. **Publish.** The current values (widget state is already updated when a rerun starts) are written back to
   the URL, so the address bar is always a link to what is on screen.

A choice widget whose labels are in the session's language is sent again in the run after a switch of language
(the browser keeps the labels it drew): ``bind`` does it for its fields, ``relabel(keys)`` for widgets the URL does
not carry.

The URL parameter is the session-state key (``fill_mask.text``), or ``Field.param`` when given. A numeric field
whose range is declared on a config dataclass takes it from there: ``Field.of(key, bounds(FinetuneConfig,
"warmup_ratio"))`` (core/base/fields.py), so the URL refuses exactly what the config refuses.

Why not Streamlit's own binding (``bind="query-params"`` on a widget, Streamlit 1.67)? It was tried
(tests/app/test_urlstate_bind.py pins what it does) and serves none of this app's widgets:
- A bad value is dropped without a word: a number out of range or not a number, an unknown choice, a list with
  an unknown item fall back to the default, a text over ``max_chars`` is cut, 2.5 for a whole number becomes 2,
  and the parameter leaves the URL before the page runs. There is no hook to learn which parameter was bad, so
  the notice naming it ("this link's `finetune.lr` was not valid") would need this module's check anyway.
- It seeds a widget only on the session's first run of that widget. A room follower (app/room/banners.py) is already
  on the page when the presenter changes a value; it must take the new value the way a link is taken.
- A bound parameter cannot be written through ``st.query_params``: ``st.switch_page(page, query_params=...)``
  raises StreamlitAPIException when one is bound, which is how a follower moves to the presenter's page and
  values, and ``st.query_params.from_dict`` drops it from the URL.
- It leaves a value equal to the widget's own default out of the URL. Here defaults depend on the model
  (Fine-tune's learning rate for a mini model) and are set in session state, so the widget's default is its
  minimum, and a link would open another default than the one it was made from.
- The URL parameter must be the widget's key: the Pretraining lab keeps one ``pretrain.pair`` parameter for
  checkboxes keyed per family.
So this module restores (with the notice), publishes, and lets rooms replay a URL; widgets carry no ``bind``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from app.kit import live
from app.kit.i18n import lang, t
from core.base.fields import Bounds

_PUBLISHED = "url.published"  # what this session last wrote to the URL: {param: value}
_RUN = "url.run"  # the current run: the URL it started with, what was published before, fields bound
_DRAWN_LANG = "url.drawn_lang"  # the language this session's widgets were last drawn in
MAX_TEXT = 4000


@dataclass(frozen=True)
class Field:
    """One value kept in the URL. ``kind``: str, int, float, bool, ints or strs (comma-separated lists)."""

    key: str
    kind: str = "str"
    choices: Sequence[Any] | Callable[[], Sequence[Any]] | None = None
    lo: float | None = None
    hi: float | None = None
    max_len: int = MAX_TEXT
    param: str | None = None
    bounds: Bounds | None = None  # a range declared on a config field (core.base.fields); checked besides lo/hi

    @classmethod
    def of(cls, key: str, bounds: Bounds, **kw) -> Field:
        """A numeric field with the range (and kind) of a config field: ``Field.of(k, bounds(Cfg, "seed"))``."""
        return cls(key, "int" if bounds.kind is int else "float", lo=bounds.low, hi=bounds.high, bounds=bounds, **kw)

    @property
    def name(self) -> str:
        return self.param or self.key

    def options(self) -> Sequence[Any] | None:
        return self.choices() if callable(self.choices) else self.choices

    def parse(self, raw: str) -> Any:
        """The value ``raw`` stands for; raises ValueError when it is not a valid value for this field."""
        if self.kind in ("ints", "strs"):
            parts = [p for p in raw.split(",") if p != ""]
            value = [self._one(p, "int" if self.kind == "ints" else "str") for p in parts]
            opts = self.options()
            if opts is not None and any(v not in opts for v in value):
                raise self.refused(raw)
            return value
        value = self._one(raw, self.kind)
        opts = self.options()
        if opts is not None and value not in opts:
            raise self.refused(raw)
        return value

    def refused(self, raw: str) -> ValueError:
        """The error for a value this field does not take: never an empty message (the value may be "" or spaces);
        bind names the parameter in the page's notice, this text is for logs and tests."""
        return ValueError(f"{self.name}: {raw[:80]!r} is not a valid value")

    def _one(self, raw: str, kind: str) -> Any:
        if kind == "str":
            if len(raw) > self.max_len:
                raise self.refused(raw)
            return raw
        if kind == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise self.refused(raw)
        value = int(raw) if kind == "int" else float(raw)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise self.refused(raw)
        if value != value or (self.bounds is not None and self.bounds.problem(value)):  # NaN; an open bound
            raise self.refused(raw)
        return value

    def render(self, value: Any) -> str | None:
        if value is None:
            return None
        if self.kind == "bool":
            return "1" if value else "0"
        if self.kind in ("ints", "strs"):
            return ",".join(str(v) for v in value)
        return str(value)


def _run() -> dict:
    """This run's view of the URL: the query as the run found it, and what the session had written before."""
    ctx = st.runtime.scriptrunner.get_script_run_ctx()
    run_id = id(ctx.cursors) if ctx is not None else 0  # a fresh cursors dict each run
    run = st.session_state.get(_RUN)
    if run is None or run["id"] != run_id:
        run = {
            "id": run_id,
            "url": st.query_params.to_dict(),
            "published": dict(st.session_state.get(_PUBLISHED, {})),
            "fields": {},
        }
        st.session_state[_RUN] = run
    return run


def bind(fields: Sequence[Field]) -> set[str]:
    """Restore ``fields`` from the URL (with a notice for bad values), then publish them; returns restored keys."""
    run = _run()
    restored, bad = set(), []
    for f in fields:
        run["fields"][f.name] = f
        raw = run["url"].get(f.name)
        if raw is None or run["published"].get(f.name) == raw:
            continue  # not in the link, or this session wrote it itself
        try:
            value = f.parse(raw)
        except (ValueError, TypeError):
            bad.append(f.name)
            continue
        if st.session_state.get(f.key) != value:
            st.session_state[f.key] = value
            restored.add(f.key)
    _send_again([f.key for f in fields], run)
    if bad:
        st.warning(t("url.fallback", params=", ".join(f"`{b}`" for b in bad)))
    publish()
    return restored


def relabel(keys: Iterable[str]) -> None:
    """Send the choice widgets ``keys`` (their session-state keys) again in this run's language, as ``bind`` does for
    the widgets it binds: for a selectbox, radio, multiselect, pills, segmented control or select slider the URL does
    not carry and whose labels depend on the language. Call it before they are drawn. Without it, the browser kept
    the labels it drew before a switch of language, and the run after the switch matched them against the new ones,
    found none and lost the choice (a radio or selectbox fell back to its default, a multiselect emptied). Never a button's,
    a form's submit button's, a file uploader's or a data editor's key: Streamlit refuses a value set for those."""
    _send_again(keys, _run())


def _send_again(keys: Iterable[str], run: dict) -> None:
    """The browser cleared the page and its widgets' values, or holds them in the other language: set ``keys`` again
    (those in session state), so their widgets are sent the value the session holds, in this run's language."""
    if not (live.redrawing() or _relabelled(run)):
        return
    for key in keys:
        if key in st.session_state:
            try:
                st.session_state[key] = st.session_state[key]
            except StreamlitAPIException:  # its widget is already drawn in this run (with the value it holds)
                pass


def _relabelled(run: dict) -> bool:
    """Whether the language changed since this session's widgets were last drawn (once per run).

    A choice widget (selectbox, radio, multiselect) travels between browser and server as its option's label, not its
    value, and the browser keeps the label it drew: after a switch to 中文 the Attributions page still showed its
    methods in English, and the run after that read those English labels against the Chinese ones, matched none and
    emptied the picker ("pick at least one method", tests/e2e/test_zh_e2e.py). Setting a bound widget's value again
    makes Streamlit send it in the new labels."""
    if "relabel" not in run:
        now = lang()
        run["relabel"] = st.session_state.get(_DRAWN_LANG, now) != now
        st.session_state[_DRAWN_LANG] = now
    return run["relabel"]


def publish() -> None:
    """Write the value of every field bound in this run to the URL; parameters of fields not bound (yet) in
    this run stay as the run found them (the page may bind them later in the run)."""
    run = _run()
    values = {k: v for k, v in run["url"].items() if k not in run["fields"]}
    written = {}
    for name, f in run["fields"].items():
        text = f.render(st.session_state.get(f.key))
        if text is not None and (f.kind != "str" or len(text) <= f.max_len):
            values[name] = written[name] = text
    if values != st.query_params.to_dict():
        st.query_params.from_dict(values)
    # Only what this session wrote: a parameter it merely carried along is still restored by the page that binds it.
    # One it wrote in an earlier run and carries unchanged (a run that stopped before binding it: an error, an empty
    # filter) stays its own, so the next run does not mistake it for a link's value and warn about "this link".
    for name, value in run["published"].items():
        if name not in run["fields"] and values.get(name) == value:
            written[name] = value
    st.session_state[_PUBLISHED] = written
