"""The Fill-mask page's pieces: its session keys and URL fields, the option widgets, the compare-tab model list,
the report entries, the compare columns, and the "Which words look replaced?" tab (replaced token detection, for
a family with a discriminator). The page (pages/fill_mask.py) keeps the layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.i18n import lang, t
from app.kit.model_choice import available, known_checkpoints
from app.kit.render import current_result, entry_id, mini_short, minis_caption, shorten, yes_no
from app.kit.zh_examples import chinese_examples
from app.views.predict.results import record_fill, record_rtd, show_fill_result, show_replaced, strategy_label
from core import registry
from core.base.fields import bounds
from core.base.segment import has_han
from core.models.spec import ModelSpec
from core.predict.fill_mask import MAX_TOP_K, STRATEGIES, CompareResult, FillMaskResult, examples, words
from core.predict.replaced_tokens import ReplacedTokensResult, RtdConfig, rtd_class
from core.predict.replaced_tokens import role as rtd_role
from core.registry import FAMILIES

P = "fill_mask"
DEFAULT_TEXT = "The capital of France is [MASK]."
DEFAULT_PLAIN = "The scientists measured the temperature of the ocean."
DEFAULT_TOP_K = 5
DEFAULT_RTD_TEXT = "The chef cooked a wonderful meal for the guests."
TITLE_CHARS = 70  # report titles quote this much of the text


def k(name: str) -> str:
    return state.key(P, name)


def example_list(spec) -> list[str]:
    """Example sentences in the checkpoint's language first: Chinese ones for a Chinese checkpoint, and for a
    multilingual one (the bundled XLM-R) in 中文."""
    lang = (registry.language_of(spec.checkpoint) if spec else None) or "en"
    if lang == "multi":
        lang = "zh" if chinese_examples(spec) else "en"
    return examples(lang) + examples("zh" if lang == "en" else "en")


def example_default(key: str, ex: Sequence[str], fallback: str = DEFAULT_TEXT) -> None:
    """Give a text box its first example; an untouched example in the other language (the model or the language
    changed since) follows, a typed text stays."""
    first = ex[0] if ex else fallback
    cur = st.session_state.get(key)
    if cur is None or (cur in (fallback, *ex) and has_han(cur) != has_han(first)):
        st.session_state[key] = first


def use_example(src: str, dst: str) -> None:
    if st.session_state.get(src):
        st.session_state[dst] = st.session_state[src]


def options_row(prefix: str) -> tuple[int, str]:
    """Top-k and the several-masks strategy, side by side."""
    st.session_state.setdefault(k(f"{prefix}.top_k"), DEFAULT_TOP_K)
    c1, c2 = st.columns(2)
    top_k = c1.slider(t("fill_mask.top_k"), 1, MAX_TOP_K, key=k(f"{prefix}.top_k"))
    strategy = c2.radio(
        t("fill_mask.strategy"), STRATEGIES, format_func=strategy_label, key=k(f"{prefix}.strategy"), horizontal=True
    )
    return top_k, strategy


def compare_options() -> list[str]:
    """ "family|checkpoint" for every model the picker lists that can be had here."""
    # a discriminator (replaced token detection) has no MLM head: it cannot be compared on filling masks
    opts = [
        f"{fam}|{c}"
        for fam in FAMILIES
        for c in known_checkpoints(fam)
        if available(c) and rtd_role(ModelSpec(fam, c)) != "discriminator"
    ]
    # the bundled models once more in int8 (core.compare.int8), last, so fp32 and int8 can be compared side by side
    return opts + [f"{o}|int8" for o in opts if o.split("|", 1)[1].startswith("encoderlab/")]


def spec_of(o: str, device: str):
    """The ModelSpec of a compare option "family|checkpoint" or "family|checkpoint|int8"."""
    fam, rest = o.split("|", 1)
    ckpt, _, quant = rest.partition("|")
    return ModelSpec(fam, ckpt, device, quant)


def fmt_option(o: str) -> str:
    fam, ckpt = o.split("|", 1)
    ckpt, _, quant = ckpt.partition("|")
    return f"{registry.family(fam).label} · {ckpt}" + (f" · {t('sidebar.int8')}" if quant else "")


def wants_chinese(spec: ModelSpec | None, text: str | None) -> bool:
    """Whether the compare tab should start from models that read Chinese: the sidebar's model reads it, 中文 is
    chosen, or the text to compare on is Chinese (an English-only mini answers Chinese with byte pieces)."""
    return lang() == "zh" or (spec is not None and registry.reads_chinese(spec.checkpoint)) or has_han(text or "")


def compare_default(opts: Sequence[str], chinese: bool = False) -> list[str]:
    """The two options the compare tab starts from: two bundled models; with ``chinese``, two that read Chinese
    (core.registry.reads_chinese: fp32 ones first, then int8 ones, so the bundled Chinese-capable model alone is
    compared with its int8 copy), or the bundled pair when none here does."""
    if chinese:
        readers = [o for o in opts if registry.reads_chinese(o.split("|")[1])]
        readers = [o for o in readers if not o.endswith("|int8")] + [o for o in readers if o.endswith("|int8")]
        if readers:
            return readers[:2]
    return [o for o in opts if o.split("|", 1)[1].startswith("encoderlab/")][:2] or list(opts[:2])


def default_compare_models(opts: Sequence[str], chinese: bool = False) -> None:
    """Two models to start with (compare_default); an untouched default follows when it changes (the sidebar's
    model or the language changed since), a picked selection stays; drop any this session no longer has (at most
    four)."""
    want = compare_default(opts, chinese)
    cur = st.session_state.get(k("cmp_models"))
    if cur is None or (cur == st.session_state.get(k("cmp_models.default")) and cur != want):
        st.session_state[k("cmp_models")] = want
    st.session_state[k("cmp_models.default")] = want if st.session_state[k("cmp_models")] == want else None
    kept = [o for o in st.session_state[k("cmp_models")] if o in opts][:4]
    if kept != st.session_state[k("cmp_models")]:
        st.session_state[k("cmp_models")] = kept


def _word_choices() -> range:
    """The word indices a link may name: those of the sentence (restored just before, or the current one)."""
    return range(len(words(st.session_state.get(k("plain")) or DEFAULT_PLAIN)))


# Everything on the page is in the URL, so the address bar is a link to this view (app/kit/urlstate.py).
TYPE_FIELDS = (
    urlstate.Field(k("text")),
    urlstate.Field(k("per_line"), "bool"),
    urlstate.Field(k("type.top_k"), "int", lo=1, hi=MAX_TOP_K),
    urlstate.Field(k("type.strategy"), choices=STRATEGIES),
)
WORD_FIELDS = (
    urlstate.Field(k("plain")),
    urlstate.Field(k("word"), "int", choices=_word_choices),
    urlstate.Field(k("word.top_k"), "int", lo=1, hi=MAX_TOP_K),
    urlstate.Field(k("word.strategy"), choices=STRATEGIES),
)
CMP_FIELDS = (
    urlstate.Field(k("cmp_models"), "strs", choices=compare_options),
    urlstate.Field(k("cmp_text")),
    urlstate.Field(k("cmp.top_k"), "int", lo=1, hi=MAX_TOP_K),
)


# ---------------------------------------------------------------------------------------------- replaced tokens
def rtd_partners(spec: ModelSpec | None, want: str) -> list[str]:
    """The other checkpoints of the sidebar model's family whose role is ``want`` ("generator" or "discriminator")
    and that can be had here (the picker's list: official ids, this session's models)."""
    if spec is None or rtd_class(spec.family) is None:
        return []
    return [
        c
        for c in known_checkpoints(spec.family)
        if c != spec.checkpoint and available(c) and rtd_role(ModelSpec(spec.family, c, spec.device)) == want
    ]


def _generator_choices() -> list[str]:
    """ "" (no generator: score the text as written) and the generators the replaced-token tab can use."""
    spec = state.current_spec()
    if rtd_role(spec) == "generator":
        return ["", spec.checkpoint]
    return ["", *rtd_partners(spec, "generator")]


def _discriminator_choices() -> list[str]:
    spec = state.current_spec()
    return [spec.checkpoint] if rtd_role(spec) == "discriminator" else rtd_partners(spec, "discriminator")


RTD_FIELDS = (
    urlstate.Field(k("rtd.text")),
    urlstate.Field.of(k("rtd.corrupt"), bounds(RtdConfig, "corrupt")),
    urlstate.Field.of(k("rtd.seed"), bounds(RtdConfig, "seed")),
    urlstate.Field(k("rtd.generator"), choices=_generator_choices),
    urlstate.Field(k("rtd.discriminator"), choices=_discriminator_choices),
)


def tab_set(kind: str | None) -> dict:
    """The page's tabs by name; a family with a discriminator adds "rtd", first when the sidebar model is one."""
    names = ["type", "word", "compare"]
    if kind == "discriminator":
        names.insert(0, "rtd")
    elif kind == "generator":
        names.append("rtd")
    labels = {
        "type": t("fill_mask.tab_type"),
        "word": t("fill_mask.tab_word"),
        "compare": t("fill_mask.tab_compare"),
        "rtd": t("replaced_tokens.tab"),
    }
    return dict(zip(names, st.tabs([labels[n] for n in names])))


def discriminator_note(spec: ModelSpec) -> None:
    """Where the MLM tabs would be: a discriminator cannot fill masks, and what to do instead."""
    st.info(t("replaced_tokens.discriminator_only", id=spec.checkpoint))


@dataclass(frozen=True)
class RtdAsk:
    """What the replaced-token tab asks for: a discriminator and a generator ("": none) of the sidebar model's
    family, on its device, and the text and settings to score them on. ``go``: score now (Score was pressed, or a
    shared link names a text); the page loads the two models and scores (replaced_result draws what came of it)."""

    spec: ModelSpec  # the sidebar's model: family, device and quantisation of both
    discriminator: str
    generator: str
    text: str
    corrupt: int
    seed: int
    go: bool

    @property
    def made_from(self) -> tuple:
        """What a shown result must have been made from (app/kit/render.current_result)."""
        s = self.spec
        return (s.family, self.discriminator, self.generator, s.device, s.quant, self.text, self.corrupt, self.seed)

    def config(self) -> RtdConfig:
        """The text and settings, checked (ValueError with a message: bad input, before any model loads)."""
        return RtdConfig(self.text, corrupt=self.corrupt, seed=self.seed)

    def model_spec(self, checkpoint: str) -> ModelSpec:
        return ModelSpec(self.spec.family, checkpoint, self.spec.device, self.spec.quant)


def replaced_form(spec: ModelSpec, kind: str, from_link: bool) -> RtdAsk | None:
    """Replaced token detection's form: a discriminator scores every word of a sentence, optionally after a
    generator of the same family replaced some of them (``kind``: the sidebar model's role). None, after saying
    why, when the family offers no discriminator here. The page shows the intro and, for a discriminator in the
    sidebar, loads it first (its source banner, or why it cannot load)."""
    if kind != "discriminator" and not _discriminator_choices():
        st.info(t("replaced_tokens.no_discriminator", family=registry.family(spec.family).label))
        return None
    st.session_state.setdefault(k("rtd.text"), DEFAULT_RTD_TEXT)
    for name in ("corrupt", "seed"):
        st.session_state.setdefault(k(f"rtd.{name}"), bounds(RtdConfig, name).default)
    with st.form(k("rtd_form")):
        disc = st.selectbox(
            t("replaced_tokens.discriminator"),
            _discriminator_choices(),
            key=k("rtd.discriminator"),
            disabled=kind == "discriminator",
        )
        gen = st.selectbox(
            t("replaced_tokens.generator"),
            _generator_choices(),
            key=k("rtd.generator"),
            format_func=lambda c: c or t("replaced_tokens.no_generator"),
            help=t("replaced_tokens.generator_help"),
        )
        text = st.text_input(t("replaced_tokens.text"), key=k("rtd.text"))
        with presenter.settings():
            c1, c2 = st.columns(2)
            corrupt = c1.number_input(
                t("replaced_tokens.corrupt"),
                key=k("rtd.corrupt"),
                help=t("replaced_tokens.corrupt_help"),
                **bounds(RtdConfig, "corrupt").widget(),
            )
            seed = c2.number_input(t("replaced_tokens.seed"), key=k("rtd.seed"), **bounds(RtdConfig, "seed").widget())
        go = st.form_submit_button(t("replaced_tokens.score"), type="primary")
    # a shared link shows its scores without a click
    return RtdAsk(spec, disc, gen, text, int(corrupt), int(seed), go=bool(go or (from_link and text.strip())))


def replaced_result(ask: RtdAsk, fresh: ReplacedTokensResult | None = None) -> None:
    """Record ``fresh`` (what the page just scored for ``ask``, if anything) in the session report, then draw the
    result made from what the form holds now, if there is one."""
    if fresh is not None:
        record_rtd(
            entry_id(f"{P}:rtd", *ask.made_from),
            {
                t("replaced_tokens.in_discriminator"): ask.discriminator,
                t("replaced_tokens.in_generator"): ask.generator or "–",
                t("replaced_tokens.in_text"): ask.text,
                t("replaced_tokens.in_corrupt"): ask.corrupt,
                t("replaced_tokens.in_seed"): ask.seed,
            },
            fresh,
        )
    res = current_result(k("rtd_result"), ask.made_from)
    if res is not None:
        show_replaced(res, key=k("rtd"))


def _inputs(model: str, **fields) -> dict:
    """Report inputs under translated field names (the values stay as the user wrote them)."""
    return {t("fill_mask.in.model"): model, **{t(f"fill_mask.in.{name}"): v for name, v in fields.items()}}


def record_typed(
    checkpoint: str, text: str, top_k: int, strategy: str, per_line: bool, results: Sequence[FillMaskResult]
) -> None:
    record_fill(
        entry_id(f"{P}:type", checkpoint, text, top_k, strategy, per_line),
        t("fill_mask.report_type", text=shorten(text.replace("\n", " / "), TITLE_CHARS)),
        _inputs(checkpoint, text=text, top_k=top_k, strategy=strategy_label(strategy), per_line=yes_no(per_line)),
        results,
        by="text" if len(results) > 1 else None,
    )


def record_word(
    checkpoint: str, plain: str, idx: int, word: str, top_k: int, strategy: str, res: FillMaskResult
) -> None:
    record_fill(
        entry_id(f"{P}:word", checkpoint, plain, idx, top_k, strategy),
        t("fill_mask.report_word", word=word, text=shorten(plain, TITLE_CHARS)),
        _inputs(checkpoint, plain=plain, word=f"{word} ({idx + 1})", top_k=top_k, strategy=strategy_label(strategy)),
        [res],
    )


def record_compare(chosen: Sequence[str], text: str, top_k: int, cres: CompareResult) -> None:
    record_fill(
        entry_id(f"{P}:compare", tuple(chosen), text, top_k),
        t("fill_mask.report_compare", n=len(chosen), text=shorten(text, TITLE_CHARS)),
        _inputs(", ".join(o.split("|", 1)[1] for o in chosen), text=text, top_k=top_k),
        cres.results,
        by="model",
    )


def show_compare(cres: CompareResult, chosen: Sequence[str] = ()) -> None:
    """One column per model: its name, latency and predictions (``chosen``: the options, to mark int8 ones)."""
    for i, (col, r) in enumerate(zip(st.columns(len(cres.results)), cres.results)):
        with col:
            int8 = i < len(chosen) and chosen[i].endswith("|int8")
            st.markdown(
                f"**{registry.family(r.family).label}** · `{r.checkpoint}`"
                + (f" · {t('sidebar.int8')}" if int8 else "")
            )
            st.metric(t("fill_mask.latency"), f"{r.latency_ms:,.1f} ms")
            mini_short(r.checkpoint)
            show_fill_result(r, key=k(f"cmp.{i}"), narrow=True)
    if cres.first_ms:  # the latencies are warm: say so, and what the left-out first runs took
        st.caption(
            t(
                "fill_mask.cmp_timing",
                n=cres.repeats,
                first=", ".join(f"{r.checkpoint} {ms:,.1f} ms" for r, ms in zip(cres.results, cres.first_ms)),
            )
        )
    minis_caption([r.checkpoint for r in cres.results])
