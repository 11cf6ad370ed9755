"""What every walkthrough step shares: the Step record a step module exports, session keys, and small drawing
helpers. Imports nothing else from the package, so each step module imports only this one. A step's render is a flow
(app.kit.walkthrough_work): it yields what it needs loaded or started, and the page fulfils it."""

from __future__ import annotations

import hashlib
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from app.kit import report, state, urlstate
from app.kit.cache import param_breakdown
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_texts
from app.kit.render import pair_card_caption
from app.kit.walkthrough_work import Flow, Load
from app.kit.zh_examples import fill_default
from app.views.predict.results import token_strip
from core.base.text import display_piece
from core.models.spec import LoadedModel, ModelSpec
from core.registry import Family, ModelLoadError
from core.walkthrough.checks import UnlearnedPairHead, pick_spec, unlearned_pair_head
from core.walkthrough.embeddings import EmbeddingParts, embedding_parts

PAGE = "walkthrough"


def K(name: str) -> str:
    return state.key(PAGE, name)


STEP, DONE, REVEAL = K("step"), K("done"), K("reveal")
TEXT, TEXT_B = K("text"), K("text_b")  # the sentences steps 1 and 2 share


@dataclass(frozen=True)
class Step:
    """One step of the walkthrough. Its texts are ``walkthrough.s<number>.*`` in assets/i18n/walkthrough.toml
    (short, title, explain, try, and the check question: q, opt0..opt2, answer)."""

    number: int
    render: Callable[[], Flow[None]]  # the live widget, drawn between the explanation and "try this" (its flow)
    correct: int  # the right option (0-based) of the check question
    links: tuple[str, ...] = ()  # urls (app/nav.py) of the pages this step calls the same core as
    # links to one view of a page: (page url, label key in the catalogue, the query that opens that view)
    deep_links: tuple[tuple[str, str, dict[str, str]], ...] = ()
    fields: tuple[urlstate.Field, ...] = ()  # what a link keeps of this step's inputs
    keep: tuple[str, ...] = ()  # widget keys whose value must outlive the steps where the widget is not drawn
    hint: Callable[[], str] | None = None  # the "try this" text when it depends on the models (default: s<n>.try)
    quiz: Callable[[str], str] | None = None  # the check question's text of a part (q, opt0.., answer) when it
    # depends on the model (default: walkthrough.s<n>.<part>)


def text_default(key: str, entry: str, spec: ModelSpec | None = None) -> None:
    """Fill a text box with the example sentence ``walkthrough.<entry>``, or its Chinese one (common.example.<entry>) in
    中文 with a Chinese-capable model (``spec``, default the sidebar's); an example still untouched follows a change
    of model or language."""
    fill_default(key, t(f"walkthrough.{entry}"), entry.removeprefix("example."), spec)


def go_to(step: int) -> None:
    st.session_state[STEP] = step


def device() -> str:
    return st.session_state.get(state.DEVICE, "auto")


def record(
    step: int,
    inputs: dict[str, Any],
    *,
    rows: Sequence[dict] = (),
    text: str = "",
    figures: Sequence = (),
    same: Sequence | None = None,
) -> None:
    """Put a step's live result into the session report. A later result with the same ``same`` values (default:
    the same inputs) replaces the earlier entry, so sliding through options does not flood the report."""
    basis = same if same is not None else sorted((str(k), str(v)) for k, v in inputs.items())
    digest = hashlib.sha1(repr(basis).encode()).hexdigest()[:10]
    report.record(
        f"walkthrough:s{step}:{digest}",
        page=t("nav.walkthrough"),
        title=f"{step}. {t(f'walkthrough.s{step}.title')}",
        inputs=inputs,
        rows=rows,
        text=text,
        figures=figures,
    )


def chips(tokens, colors, titles=None) -> str:
    """Token chips (the pieces as the tokenizer writes them), one colour each."""
    out = []
    for i, (tok, color) in enumerate(zip(tokens, colors)):
        title = html.escape(titles[i] if titles else f"{i}")
        out.append(
            f'<span title="{title}" style="display:inline-block;margin:2px;padding:1px 6px;border-radius:6px;'
            f'border:1px solid {color};color:{color};font-family:monospace;white-space:pre">'
            f"{html.escape(tok)}</span>"
        )
    return '<div class="encoderlab-tokens">' + "".join(out) + "</div>"


def axis_labels(tokens) -> list[str]:
    """Unique axis labels: position and piece (shown as typed in a chart: app.kit.plot_text)."""
    return plot_texts(f"{i}·{display_piece(tok)}" for i, tok in enumerate(tokens))


def family_spec(family: Family) -> ModelSpec:
    """The spec load_family loads (ModelLoadError when the family ships no bundled model and the sidebar holds
    none of it): a step's hint can ask which checkpoint the step shows without loading it."""
    return pick_spec(family.key, state.current_spec(), [m.path for m in state.session_models()], device())


def load_family(family: Family, task: str) -> Flow[LoadedModel | None]:
    """``family``'s model for a step that explains its head (``lm = yield from load_family(...)``): the sidebar's
    when it is an official or bundled checkpoint of that family, else its bundled one; None after a warning when
    there is neither."""
    try:
        spec = family_spec(family)
    except ModelLoadError as e:  # the family ships no bundled model and the sidebar holds none of it
        st.warning(t("walkthrough.missing_model", id=family.label, error=explain(e)))
        return None
    return (yield Load(spec, task))


def breakdowns(ids: tuple[str, ...]) -> list:
    """core.models.params.breakdown of official checkpoints, from their shipped configs (steps 4 and 5), through
    the app's cache."""
    return [param_breakdown(c) for c in ids]


def noise_hint(note: UnlearnedPairHead) -> str:
    """What to do about a pair head that did not learn: pick the family's full checkpoint (once it can be had)."""
    if note.full is None:
        return t("common.mini_get_full", checkpoint=t("sidebar.checkpoint"), custom=t("sidebar.custom_short"))
    return t(
        "walkthrough.noise_full_here" if note.full_here else "walkthrough.noise_full_get",
        id=note.full,
        label=t("sidebar.checkpoint"),
    )  # the list as the sidebar names it in this language


def noise_numbers(note: UnlearnedPairHead) -> dict[str, str]:
    return dict(
        id=note.checkpoint,
        head=note.head.upper(),
        acc=f"{note.acc:.1%}",
        majority=f"{note.majority:.1%}",
        pairs=f"{note.pairs:,}" if note.pairs else "?",
    )


def pair_head_note(checkpoint: str, head: str) -> UnlearnedPairHead | None:
    """Next to a pair head's scores: when it is a bundled mini's head that did not learn (its card's accuracy is not
    above its majority guess), a warning with the card's numbers and what to do, returning that note; else the
    card's caption (if any) and None."""
    note = unlearned_pair_head(checkpoint, head)
    if note is None:
        pair_card_caption(checkpoint, head)
        return None
    st.warning(t("walkthrough.pair_noise", **noise_numbers(note), hint=noise_hint(note)), icon=":material/warning:")
    return note


def pair_strip(lm, a: str, b: str | None) -> EmbeddingParts | None:
    """The text (or pair) as ``lm`` reads it, drawn as a token strip with its special tokens marked (steps 1 and
    3); None after showing the error of a text the model refuses."""
    try:
        r = embedding_parts(lm, a, b)
    except ValueError as e:
        st.error(explain(e))
        return None
    st.markdown(
        token_strip(r.tokens, (), tuple(tok for tok, sp in zip(r.tokens, r.special) if sp)), unsafe_allow_html=True
    )
    return r
