"""The Fill-mask page's pieces: its session keys and URL fields, the option widgets, the compare-tab model list,
the report entries, and the compare columns. The page (pages/fill_mask.py) keeps the layout."""
from __future__ import annotations

from typing import Sequence

import streamlit as st

from app import state, urlstate
from app.i18n import t
from app.render import entry_id, mini_short, minis_caption, shorten, yes_no
from app.render_predict import record_fill, show_fill_result, strategy_label
from app.sidebar import known_checkpoints
from core.fill_mask import MAX_TOP_K, STRATEGIES, CompareResult, FillMaskResult, examples, words
from core.models import FAMILIES, availability, checkpoint_info

P = "fill_mask"
DEFAULT_TEXT = "The capital of France is [MASK]."
DEFAULT_PLAIN = "The scientists measured the temperature of the ocean."
DEFAULT_TOP_K = 5
TITLE_CHARS = 70  # report titles quote this much of the text


def k(name: str) -> str:
    return state.key(P, name)


def example_list(spec) -> list[str]:
    """Example sentences in the checkpoint's language first (Chinese ones for a Chinese checkpoint)."""
    info = checkpoint_info(spec.checkpoint) if spec else None
    lang = info.language if info else "en"
    return examples(lang) + examples("zh" if lang == "en" else "en")


def use_example(src: str, dst: str) -> None:
    if st.session_state.get(src):
        st.session_state[dst] = st.session_state[src]


def options_row(prefix: str) -> tuple[int, str]:
    """Top-k and the several-masks strategy, side by side."""
    st.session_state.setdefault(k(f"{prefix}.top_k"), DEFAULT_TOP_K)
    c1, c2 = st.columns(2)
    top_k = c1.slider(t("fill_mask.top_k"), 1, MAX_TOP_K, key=k(f"{prefix}.top_k"))
    strategy = c2.radio(t("fill_mask.strategy"), STRATEGIES, format_func=strategy_label,
                        key=k(f"{prefix}.strategy"), horizontal=True)
    return top_k, strategy


def compare_options() -> list[str]:
    """"family|checkpoint" for every model the picker lists that can be had here."""
    opts = [f"{fam}|{c}" for fam in FAMILIES for c in known_checkpoints(fam) if availability(c).source != "unavailable"]
    # the bundled models once more in int8 (core.quantize), last, so fp32 and int8 can be compared side by side
    return opts + [f"{o}|int8" for o in opts if o.split("|", 1)[1].startswith("encoderlab/")]


def spec_of(o: str, device: str):
    """The ModelSpec of a compare option "family|checkpoint" or "family|checkpoint|int8"."""
    from core.models import ModelSpec

    fam, rest = o.split("|", 1)
    ckpt, _, quant = rest.partition("|")
    return ModelSpec(fam, ckpt, device, quant)


def fmt_option(o: str) -> str:
    fam, ckpt = o.split("|", 1)
    ckpt, _, quant = ckpt.partition("|")
    return f"{FAMILIES[fam].label} · {ckpt}" + (f" · {t('sidebar.int8')}" if quant else "")


def default_compare_models(opts: Sequence[str]) -> None:
    """Two bundled models to start with; drop any this session no longer has (at most four)."""
    st.session_state.setdefault(
        k("cmp_models"), [o for o in opts if o.split("|", 1)[1].startswith("encoderlab/")][:2] or list(opts[:2]))
    kept = [o for o in st.session_state[k("cmp_models")] if o in opts][:4]
    if kept != st.session_state[k("cmp_models")]:
        st.session_state[k("cmp_models")] = kept


def _word_choices() -> range:
    """The word indices a link may name: those of the sentence (restored just before, or the current one)."""
    return range(len(words(st.session_state.get(k("plain")) or DEFAULT_PLAIN)))


# Everything on the page is in the URL, so the address bar is a link to this view (app/urlstate.py).
TYPE_FIELDS = (urlstate.Field(k("text")), urlstate.Field(k("per_line"), "bool"),
               urlstate.Field(k("type.top_k"), "int", lo=1, hi=MAX_TOP_K),
               urlstate.Field(k("type.strategy"), choices=STRATEGIES))
WORD_FIELDS = (urlstate.Field(k("plain")), urlstate.Field(k("word"), "int", choices=_word_choices),
               urlstate.Field(k("word.top_k"), "int", lo=1, hi=MAX_TOP_K),
               urlstate.Field(k("word.strategy"), choices=STRATEGIES))
CMP_FIELDS = (urlstate.Field(k("cmp_models"), "strs", choices=compare_options), urlstate.Field(k("cmp_text")),
              urlstate.Field(k("cmp.top_k"), "int", lo=1, hi=MAX_TOP_K))


def _inputs(model: str, **fields) -> dict:
    """Report inputs under translated field names (the values stay as the user wrote them)."""
    return {t("fill_mask.in.model"): model, **{t(f"fill_mask.in.{name}"): v for name, v in fields.items()}}


def record_typed(checkpoint: str, text: str, top_k: int, strategy: str, per_line: bool,
                 results: Sequence[FillMaskResult]) -> None:
    record_fill(entry_id(f"{P}:type", checkpoint, text, top_k, strategy, per_line),
                t("fill_mask.report_type", text=shorten(text.replace("\n", " / "), TITLE_CHARS)),
                _inputs(checkpoint, text=text, top_k=top_k, strategy=strategy_label(strategy),
                        per_line=yes_no(per_line)),
                results, by="text" if len(results) > 1 else None)


def record_word(checkpoint: str, plain: str, idx: int, word: str, top_k: int, strategy: str,
                res: FillMaskResult) -> None:
    record_fill(entry_id(f"{P}:word", checkpoint, plain, idx, top_k, strategy),
                t("fill_mask.report_word", word=word, text=shorten(plain, TITLE_CHARS)),
                _inputs(checkpoint, plain=plain, word=f"{word} ({idx + 1})", top_k=top_k,
                        strategy=strategy_label(strategy)),
                [res])


def record_compare(chosen: Sequence[str], text: str, top_k: int, cres: CompareResult) -> None:
    record_fill(entry_id(f"{P}:compare", tuple(chosen), text, top_k),
                t("fill_mask.report_compare", n=len(chosen), text=shorten(text, TITLE_CHARS)),
                _inputs(", ".join(o.split("|", 1)[1] for o in chosen), text=text, top_k=top_k),
                cres.results, by="model")


def show_compare(cres: CompareResult, chosen: Sequence[str] = ()) -> None:
    """One column per model: its name, latency and predictions (``chosen``: the options, to mark int8 ones)."""
    for i, (col, r) in enumerate(zip(st.columns(len(cres.results)), cres.results)):
        with col:
            int8 = i < len(chosen) and chosen[i].endswith("|int8")
            st.markdown(f"**{FAMILIES[r.family].label}** · `{r.checkpoint}`" + (f" · {t('sidebar.int8')}" if int8 else ""))
            st.metric(t("fill_mask.latency"), f"{r.latency_ms:,.1f} ms")
            mini_short(r.checkpoint)
            show_fill_result(r, key=k(f"cmp.{i}"), narrow=True)
    minis_caption([r.checkpoint for r in cres.results])
