"""The seven steps of the Walkthrough page: one live widget each, on the same core as the page the step points to.

1 embeddings (core.embeddings) · 2 MLM masking and fill-mask (core.pretrain.masking via core.embeddings,
core.fill_mask) · 3 NSP/SOP probe (core.sentence_pair) · 4 ALBERT's factorization and sharing (core.params) ·
5 DistilBERT against its teacher (core.bench, core.fill_mask, core.params) · 6 two short fine-tunes as jobs
(core.finetune) · 7 attention and attributions of the step-6 model (core.attention, core.attribution).
"""
from __future__ import annotations

import html
import json
import math
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app import presenter, state
from app.i18n import t
from app.jobs_ui import job_panel, runner
from app.loaders import get_model, model_or_error
from app.render import bundled_card, pair_card_caption
from app.render_predict import token_strip
from app.walkthrough import TEXT, TEXT_B, K, go_to, record, text_default
from core import attention as A
from core import attribution as AT
from core import bench
from core.datasets_local import load_bundled
from core.embeddings import embedding_parts
from core.masking_view import corrupt, masking_shares
from core.fill_mask import FillMaskConfig, fill_mask, fill_mask_batch, words
from core.finetune import META_FILE, FinetuneConfig, job_fn, job_resource, runs_root
from core.models import ASSETS, FAMILIES, ModelLoadError, ModelSpec, availability, bundled_id
from core.params import albert_factorization, breakdown
from core.sentence_pair import PairConfig, predict_pair

ACTION_COLORS = {"": "#4C78A8", "mask": "#F58518", "random": "#E45756", "keep": "#54A24B"}
PART_COLORS = {"token": "#4C78A8", "segment": "#B279A2", "position": "#72B7B2", "output": "#F58518"}
S5_SEQS, S5_BATCHES, S5_SENTENCES = (8, 16, 32, 64, 128), (1, 2, 4, 8), (4, 8, 16, 32, 64)
LRS = (2e-5, 3e-5, 5e-5)  # the seeds' fine-tuning range; the other run uses 10x
S6_DATA, S6_BATCH, S6_MAX_LEN, S6_TEST_ROWS = "wordnet", 16, 48, 120
S7_SOURCES = ("step6", "step6_high", "session", "sidebar")  # session: fine-tuned on any page
S7_RUNS = {"step6": "good", "step6_high": "high"}
HISTORY = 6  # masks kept in step 2's "same sentence, new mask" table


def _device() -> str:
    return st.session_state.get(state.DEVICE, "auto")


def _chips(tokens, colors, titles=None) -> str:
    """Token chips (the pieces as the tokenizer writes them), one colour each."""
    out = []
    for i, (tok, color) in enumerate(zip(tokens, colors)):
        title = html.escape(titles[i] if titles else f"{i}")
        out.append(f'<span title="{title}" style="display:inline-block;margin:2px;padding:1px 6px;border-radius:6px;'
                   f'border:1px solid {color};color:{color};font-family:monospace;white-space:pre">'
                   f"{html.escape(tok)}</span>")
    return '<div class="encoderlab-tokens">' + "".join(out) + "</div>"


def _spec_for(family: str) -> ModelSpec:
    """The sidebar's model when it is an official or bundled checkpoint of ``family``, else the bundled one."""
    spec = state.current_spec()
    made_here = {m.path for m in state.session_models()}
    if spec is not None and spec.family == family and spec.checkpoint not in made_here \
            and not Path(spec.checkpoint).expanduser().is_dir() \
            and availability(spec.checkpoint).source != "unavailable":
        return spec
    return ModelSpec(family, bundled_id(family), _device())


def _load(spec: ModelSpec, task: str, attentions: bool = False):
    """A cached model, or None after a warning that says what is missing and how to get it."""
    try:
        with st.spinner(t("common.loading", id=spec.checkpoint)):
            return get_model(spec, task, attentions)
    except ModelLoadError as e:
        st.warning(t("walkthrough.missing_model", id=spec.checkpoint, error=str(e)))
        return None


def _labels(tokens) -> list[str]:
    """Unique axis labels: position and piece."""
    return [f"{i}·{A.display_label(tok)}" for i, tok in enumerate(tokens)]


# ---------------------------------------------------------------------------------------------- 1 embeddings
def step1() -> None:
    text_default(TEXT, "example.sentence")
    text_default(TEXT_B, "example.sentence_b")
    c1, c2 = st.columns(2)
    a = c1.text_input(t("walkthrough.sentence_a"), key=TEXT)
    b = c2.text_input(t("walkthrough.sentence_b_optional"), key=TEXT_B)
    lm = model_or_error("mlm")
    if lm is None:
        return
    try:
        r = embedding_parts(lm, a, b or None)
    except ValueError as e:
        st.error(str(e))
        return
    specials = tuple(tok for tok, s in zip(r.tokens, r.special) if s)
    st.markdown(token_strip(r.tokens, (), specials), unsafe_allow_html=True)
    tok = lm.tokenizer
    st.caption(t("walkthrough.s1.specials", cls=tok.cls_token, sep=tok.sep_token, n=len(r.tokens)))
    if r.truncated:
        st.warning(t("walkthrough.s1.truncated", n=len(r.tokens)))
    seg_note = {"ab": "walkthrough.s1.seg_ab", "single": "walkthrough.s1.seg_single", "none": "walkthrough.s1.seg_none"}
    st.info(t(seg_note[r.segments], family=lm.family.label))
    if r.factorized:
        st.info(t("walkthrough.s1.factorized", e=r.embedding_size, h=r.hidden_size))
    x = _labels(r.tokens)
    fig = go.Figure()
    parts = [("token", r.token_norms), ("segment", r.segment_norms), ("position", r.position_norms),
             ("output", r.output_norms)]
    for name, values in parts:
        if values is None:
            continue
        label = t(f"walkthrough.s1.part.{name}")
        hover = "%{x}<br>" + label + ": %{y:.3f}<extra></extra>"
        if name == "output":  # about sqrt(E) times larger: its own axis, so the three parts stay readable
            fig.add_scatter(x=x, y=values, name=label, yaxis="y2", mode="lines+markers",
                            line=dict(color=PART_COLORS[name]), hovertemplate=hover)
        else:
            fig.add_bar(x=x, y=values, name=label, marker_color=PART_COLORS[name], hovertemplate=hover)
    fig.update_layout(barmode="group", height=380, margin=dict(t=40, b=10), title=t("walkthrough.s1.fig_title"),
                      yaxis_title=t("walkthrough.s1.norm"), legend=dict(orientation="h", y=-0.25),
                      yaxis2=dict(title=t("walkthrough.s1.norm_ln"), overlaying="y", side="right", showgrid=False))
    st.plotly_chart(presenter.scale(fig), key=K("s1.fig"), width="stretch")
    none = t("walkthrough.none")
    rows = [{t("walkthrough.s1.col.pos"): i, t("walkthrough.s1.col.token"): tk,
             t("walkthrough.s1.col.segment"): r.token_type_ids[i] if r.segments == "ab" else none,
             t("walkthrough.s1.col.position"): r.position_ids[i],
             t("walkthrough.s1.part.token"): round(float(r.token_norms[i]), 3),
             t("walkthrough.s1.part.segment"): none if r.segment_norms is None else round(float(r.segment_norms[i]), 3),
             t("walkthrough.s1.part.position"): round(float(r.position_norms[i]), 3),
             t("walkthrough.s1.part.output"): round(float(r.output_norms[i]), 3)} for i, tk in enumerate(r.tokens)]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    record(1, {t("walkthrough.in.model"): lm.spec.checkpoint, t("walkthrough.sentence_a"): a,
               t("walkthrough.sentence_b_optional"): b}, rows=rows, figures=[fig])


# ---------------------------------------------------------------------------------------------- 2 MLM
def _remask() -> None:
    st.session_state[K("s2.seed")] = st.session_state.get(K("s2.seed"), 1) + 1


def step2() -> None:
    text_default(TEXT, "example.sentence")
    text = st.text_input(t("walkthrough.your_sentence"), key=TEXT)
    lm = model_or_error("mlm")
    if lm is None:
        return
    seed = st.session_state.setdefault(K("s2.seed"), 1)
    st.session_state.setdefault(K("s2.whole_word"), False)
    c1, c2 = st.columns([1, 2])
    c1.button(t("walkthrough.s2.remask"), key=K("s2.remask"), on_click=_remask, type="primary",
              icon=":material/casino:")
    whole = c2.toggle(t("walkthrough.s2.whole_word"), key=K("s2.whole_word"), help=t("walkthrough.s2.whole_word_help"))
    try:
        v = corrupt(lm, text, seed, whole_word=whole)
        shares = masking_shares(lm, text, draws=2000, seed=0, whole_word=whole)
    except ValueError as e:
        st.error(str(e))
        return
    selected = set(v.selected)
    orig_colors = [ACTION_COLORS["mask"] if i in selected else ("#9E9E9E" if s else ACTION_COLORS[""])
                   for i, s in enumerate(v.special)]
    new_colors = [ACTION_COLORS[a] if a else ("#9E9E9E" if s else ACTION_COLORS[""])
                  for a, s in zip(v.actions, v.special)]
    titles = [t(f"walkthrough.s2.action.{a or 'none'}") for a in v.actions]
    st.markdown(t("walkthrough.s2.original", seed=seed))
    st.markdown(_chips(v.tokens, orig_colors, titles), unsafe_allow_html=True)
    st.markdown(t("walkthrough.s2.model_reads"))
    st.markdown(_chips(v.corrupted, new_colors, titles), unsafe_allow_html=True)
    st.caption(t("walkthrough.s2.legend"))
    n_sel = len(v.selected)
    st.markdown(t("walkthrough.s2.counts", n=n_sel, cand=v.candidates, mask=v.count("mask"),
                  random=v.count("random"), keep=v.count("keep")))
    if n_sel == 0:
        st.caption(t("walkthrough.s2.none_selected", p=f"{0.85 ** v.candidates:.0%}", cand=v.candidates))
    hist: list = st.session_state.setdefault(K("s2.history"), [])
    row = (seed, whole, " ".join(v.corrupted))
    if not hist or hist[-1] != row:
        hist.append(row)
        del hist[:-HISTORY]
    st.markdown("**" + t("walkthrough.s2.history") + "**")
    st.dataframe(pd.DataFrame([{t("walkthrough.s2.col.pass"): s, t("walkthrough.s2.col.whole"): "✓" if w else "",
                                t("walkthrough.s2.col.reads"): r} for s, w, r in reversed(hist)]),
                 hide_index=True, width="stretch")
    m = st.columns(4)
    m[0].metric(t("walkthrough.s2.m.selected"), f"{shares.selected:.1%}",
                help=t("walkthrough.s2.m.help", n=shares.draws))
    m[1].metric(t("walkthrough.s2.m.mask"), f"{shares.mask:.1%}")
    m[2].metric(t("walkthrough.s2.m.random"), f"{shares.random:.1%}")
    m[3].metric(t("walkthrough.s2.m.keep"), f"{shares.keep:.1%}")

    st.markdown("#### " + t("walkthrough.s2.fill_title"))
    ws = words(text)
    fig = None
    if ws:
        if st.session_state.get(K("s2.word"), len(ws)) >= len(ws):  # first visit, or a shorter sentence now
            long_words = [i for i, w in enumerate(ws) if w.text.isalpha() and len(w.text) > 3]
            st.session_state[K("s2.word")] = long_words[-1] if long_words else 0
        idx = st.selectbox(t("walkthrough.s2.pick_word"), list(range(len(ws))), key=K("s2.word"),
                           format_func=lambda i: ws[i].text)
        try:
            res = fill_mask(lm, FillMaskConfig(text, top_k=5, word=int(idx)))
        except ValueError as e:
            st.error(str(e))
            res = None
        if res is not None:
            fig = _fill_figure(res)
            st.plotly_chart(presenter.scale(fig), key=K("s2.fill"), width="stretch")
            ranks = [m.original_rank for m in res.masks if m.original_rank is not None]
            st.caption(t("walkthrough.s2.fill_caption", word=res.masked_word, n=len(res.masks),
                         ranks=", ".join(str(r + 1) for r in ranks)))
    record(2, {t("walkthrough.in.model"): lm.spec.checkpoint, t("walkthrough.your_sentence"): text,
               t("walkthrough.s2.col.pass"): seed, t("walkthrough.s2.whole_word"): whole},
           text=t("walkthrough.s2.report", reads=" ".join(v.corrupted), sel=f"{shares.selected:.1%}",
                  mask=f"{shares.mask:.1%}", random=f"{shares.random:.1%}", keep=f"{shares.keep:.1%}"),
           figures=[fig] if fig is not None else [], same=(lm.spec.checkpoint, text))


def _fill_figure(res) -> go.Figure:
    """Top-5 of each masked piece, side by side; the original piece in green."""
    n = len(res.masks)
    fig = make_subplots(rows=1, cols=n, subplot_titles=[
        t("walkthrough.s2.piece", i=i + 1, piece=m.original.piece if m.original else "?")
        for i, m in enumerate(res.masks)])
    for c, m in enumerate(res.masks, start=1):
        colors = ["#54A24B" if m.original and x.token_id == m.original.token_id else "#4C78A8" for x in m.candidates]
        fig.add_trace(go.Bar(x=[x.prob for x in m.candidates], y=[x.piece for x in m.candidates], orientation="h",
                             marker_color=colors, showlegend=False,
                             hovertemplate="%{y}: %{x:.3f}<extra></extra>"), row=1, col=c)
        fig.update_yaxes(autorange="reversed", type="category", row=1, col=c)
    fig.update_xaxes(title_text=t("walkthrough.probability"))
    fig.update_layout(height=280, margin=dict(t=40, b=10))
    return fig


# ---------------------------------------------------------------------------------------------- 3 NSP / SOP
def step3() -> None:
    text_default(K("s3.a"), "example.pair_a")
    text_default(K("s3.b"), "example.pair_b")
    c1, c2 = st.columns(2)
    a = c1.text_input(t("walkthrough.sentence_a"), key=K("s3.a"))
    b = c2.text_input(t("walkthrough.sentence_b"), key=K("s3.b"))
    try:
        cfg = PairConfig(a, b)
    except ValueError as e:
        st.error(str(e))
        return
    results = []
    for fam in ("bert", "albert"):
        lm = _load(_spec_for(fam), "pretraining")
        if lm is None:
            continue
        try:
            results.append(predict_pair(lm, cfg, probe=True))
        except ValueError as e:
            st.error(str(e))
    st.caption(t("walkthrough.s3.no_head", families=t("walkthrough.list_sep").join(
        FAMILIES[f].label for f in FAMILIES if FAMILIES[f].pair_head is None)))
    if not results:
        return
    pair_names = [t("walkthrough.s3.pair_ab"), t("walkthrough.s3.pair_ba"), t("walkthrough.s3.pair_other")]
    fig = go.Figure()
    for r, color in zip(results, ("#4C78A8", "#F58518")):
        name = t(f"walkthrough.s3.head.{r.head}", id=r.checkpoint)
        fig.add_bar(x=pair_names[:len(r.scores)], y=[s.prob for s in r.scores], name=name, marker_color=color,
                    text=[f"{s.prob:.0%}" for s in r.scores], textposition="outside",
                    hovertemplate="%{x}: %{y:.3f}<extra>" + html.escape(name) + "</extra>")
    fig.add_hline(y=0.5, line_dash="dot", line_color="grey")
    fig.update_layout(barmode="group", height=360, yaxis=dict(range=[0, 1.1], title=t("walkthrough.s3.y")),
                      margin=dict(t=30, b=10), legend=dict(orientation="h", y=-0.2))
    st.plotly_chart(presenter.scale(fig), key=K("s3.fig"), width="stretch")
    for r in results:
        pair_card_caption(r.checkpoint, r.head)
    other = results[0].scores[2].second if len(results[0].scores) > 2 else ""
    if other:
        st.caption(t("walkthrough.s3.other", sentence=other))
    rows = [{t("walkthrough.in.model"): r.checkpoint, t("walkthrough.s3.col.head"): r.head.upper(),
             **{n: round(s.prob, 3) for n, s in zip(pair_names, r.scores)}} for r in results]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    record(3, {t("walkthrough.sentence_a"): a, t("walkthrough.sentence_b"): b}, rows=rows, figures=[fig])


# ---------------------------------------------------------------------------------------------- 4 ALBERT
@st.cache_data(show_spinner=False)
def _breakdowns(ids: tuple[str, ...]) -> list:
    return [breakdown(c) for c in ids]


def step4() -> None:
    st.markdown("#### " + t("walkthrough.s4.calc_title"))
    for key, value in (("s4.v", 30000), ("s4.h", 768), ("s4.e", 128)):
        st.session_state.setdefault(K(key), value)
    c = st.columns(3)
    v = c[0].number_input(t("walkthrough.s4.v"), 1, 1_000_000, key=K("s4.v"), step=1000)
    h = c[1].number_input(t("walkthrough.s4.h"), 1, 65_536, key=K("s4.h"), step=64)
    e = c[2].number_input(t("walkthrough.s4.e"), 1, 65_536, key=K("s4.e"), step=16)
    f = None
    try:
        f = albert_factorization(int(v), int(h), int(e))
    except ValueError as err:
        st.error(str(err))
    if f is not None:
        m = st.columns(3)
        m[0].metric(t("walkthrough.s4.full"), f"{f.full / 1e6:,.2f}M")
        m[1].metric(t("walkthrough.s4.fact"), f"{f.factorized / 1e6:,.2f}M", f"-{f.saved / 1e6:,.2f}M",
                    delta_color="inverse")
        m[2].metric(t("walkthrough.s4.ratio"), f"{f.ratio:,.1f}×")
        st.caption(t("walkthrough.s4.parts", ve=f"{f.vocab * f.embedding / 1e6:,.2f}M",
                     eh=f"{f.embedding * f.hidden / 1e6:,.3f}M"))

    st.markdown("#### " + t("walkthrough.s4.share_title"))
    ids = ("bert-base-uncased", "albert-base-v2", "bert-large-uncased", "albert-large-v2")
    try:
        rows_b = _breakdowns(ids)
    except (ValueError, ModelLoadError) as err:
        st.error(str(err))
        rows_b = []
    fig = None
    rows = []
    if rows_b:
        stored = [r.backbone / 1e6 for r in rows_b]
        applied = [r.encoder * (r.layers if r.shared_layers else 1) / 1e6 for r in rows_b]  # one shared layer, L passes
        fig = go.Figure()
        for name, ys, color in ((t("walkthrough.s4.stored"), stored, "#4C78A8"),
                                (t("walkthrough.s4.applied"), applied, "#F58518")):
            fig.add_bar(x=list(ids), y=ys, name=name, marker_color=color, text=[f"{y:,.0f}M" for y in ys],
                        textposition="outside",
                        hovertemplate="%{x}: %{y:,.1f}M<extra>" + html.escape(name) + "</extra>")
        fig.update_layout(barmode="group", height=380, yaxis_title=t("walkthrough.s4.y"), margin=dict(t=30, b=10),
                          legend=dict(orientation="h", y=-0.2))
        st.plotly_chart(presenter.scale(fig), key=K("s4.fig"), width="stretch")
        rows = [{t("walkthrough.in.model"): r.checkpoint, t("walkthrough.s4.col.layers"): r.layers,
                 t("walkthrough.s4.col.hidden"): r.hidden, t("walkthrough.s4.col.e"): r.embedding_size,
                 t("walkthrough.s4.col.stored"): round(s, 1),
                 t("walkthrough.s4.col.claim"): r.claim_m if r.claim_m is not None else t("walkthrough.none"),
                 t("walkthrough.s4.col.applied"): round(a, 1)} for r, s, a in zip(rows_b, stored, applied)]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        st.caption(t("walkthrough.s4.share_caption"))

    st.markdown("#### " + t("walkthrough.s4.sop_title"))
    sop_rows = []
    lm = _load(_spec_for("albert"), "pretraining")
    if lm is not None:
        sa, sb = t("walkthrough.example.sop_a"), t("walkthrough.example.sop_b")
        try:
            r = predict_pair(lm, PairConfig(sa, sb), probe=False)
        except ValueError as err:
            st.error(str(err))
        else:
            m = st.columns(2)
            m[0].metric(t("walkthrough.s4.sop_ab", a=sa, b=sb), f"{r.scores[0].prob:.1%}")
            m[1].metric(t("walkthrough.s4.sop_ba", a=sb, b=sa), f"{r.scores[1].prob:.1%}")
            st.caption(t("walkthrough.s4.sop_caption", id=r.checkpoint))
            pair_card_caption(r.checkpoint, r.head)
            sop_rows = [{t("walkthrough.s3.col.pair"): f"{s.first} ‖ {s.second}",
                         t("walkthrough.s3.y"): round(s.prob, 3)} for s in r.scores]
    inputs = {"V": v, "H": h, "E": e}
    record(4, inputs, rows=rows + sop_rows, figures=[fig] if fig is not None else [], same=("calculator",),
           text=t("walkthrough.s4.report", full=f"{f.full:,}", fact=f"{f.factorized:,}", ratio=f"{f.ratio:.1f}")
           if f is not None else "")


# ---------------------------------------------------------------------------------------------- 5 DistilBERT
def heldout_sentences(n: int) -> list[str]:
    """``n`` held-out corpus lines of a readable length, spread over the file (the same ones every time)."""
    path = ASSETS / "corpus" / "heldout.txt"
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if 60 <= len(ln.strip()) <= 200]
    step = max(1, len(lines) // n)
    return lines[::step][:n]


def _heldout_top5(lm, sentences: list[str], seed: int = 0) -> dict:
    """Mask one word per sentence (the same words for every model) and count pieces whose original is in the top 5."""
    rng = random.Random(seed)
    configs = []
    for s in sentences:
        ws = [i for i, w in enumerate(words(s)) if w.text.isalpha() and len(w.text) > 3]
        if ws:
            configs.append(FillMaskConfig(s, top_k=5, word=rng.choice(ws)))
    fill_mask_batch(lm, configs[:1])  # warm-up, untimed
    t0 = time.perf_counter()
    res = fill_mask_batch(lm, configs)
    ms = (time.perf_counter() - t0) * 1000
    pieces = [m for r in res for m in r.masks if m.original_rank is not None]
    hits = sum(1 for m in pieces if m.original_rank < 5)
    return dict(top5=hits / max(1, len(pieces)), pieces=len(pieces), sentences=len(configs), ms=ms)


def _pair_for_step5() -> tuple[str | None, str | None, list[str]]:
    """(student family, teacher family or a stand-in, missing bundled ids)."""
    have = {f: availability(bundled_id(f)).source != "unavailable" for f in FAMILIES}
    missing = [bundled_id(f) for f, ok in have.items() if not ok]
    student = "distilbert" if have["distilbert"] else None
    teacher = next((f for f in ("bert", "roberta", "albert") if have[f]), None)
    return student, teacher, missing


def _measure(seq: int, batch: int, reps: int, n_sent: int) -> dict:
    out: dict = {"at": time.strftime("%H:%M:%S")}
    speed = bench.measure_speed(bench.SpeedConfig(families=("bert", "distilbert"), seq_len=seq, batch=batch,
                                                  repeats=reps, device=_device()))
    out["speed"] = speed
    student, teacher, _ = _pair_for_step5()
    sentences = heldout_sentences(n_sent)
    out["models"] = []
    for fam in (teacher, student):
        if fam is None:
            continue
        spec = ModelSpec(fam, bundled_id(fam), _device())
        try:
            lm = get_model(spec, "mlm")
            cfg = lm.model.config.to_dict()
            out["models"].append(dict(family=fam, id=spec.checkpoint,
                                      params=sum(p.numel() for p in lm.model.parameters()),
                                      layers=cfg.get("num_hidden_layers", cfg.get("n_layers")),
                                      **_heldout_top5(lm, sentences)))
        except ValueError as e:
            out.setdefault("errors", []).append(str(e))
    return out


def step5() -> None:
    student, teacher, missing = _pair_for_step5()
    for mid in missing:
        st.warning(t("walkthrough.s5.missing", id=mid))
    if teacher is not None and teacher != "bert" and student is not None:
        st.info(t("walkthrough.s5.stand_in", teacher=FAMILIES[teacher].label))
    try:
        bb, db = _breakdowns(("bert-base-uncased", "distilbert-base-uncased"))
        c = st.columns(3)
        c[0].metric(t("walkthrough.s5.bert_params"), f"{bb.backbone / 1e6:,.1f}M", t("walkthrough.s5.claim", m=110),
                    delta_color="off")
        c[1].metric(t("walkthrough.s5.distil_params"), f"{db.backbone / 1e6:,.1f}M", t("walkthrough.s5.claim", m=66),
                    delta_color="off")
        c[2].metric(t("walkthrough.s5.smaller"), f"{1 - db.backbone / bb.backbone:.0%}", t("walkthrough.s5.claim_pct"),
                    delta_color="off")
    except (ValueError, ModelLoadError) as e:
        st.error(str(e))
    for key, value in (("s5.seq", 32), ("s5.batch", 4), ("s5.reps", 3), ("s5.sentences", 32)):
        st.session_state.setdefault(K(key), value)
    with presenter.settings():
        c = st.columns(4)
        seq = c[0].select_slider(t("walkthrough.s5.seq"), S5_SEQS, key=K("s5.seq"))
        batch = c[1].select_slider(t("walkthrough.s5.batch"), S5_BATCHES, key=K("s5.batch"))
        reps = c[2].number_input(t("walkthrough.s5.reps"), 1, 10, key=K("s5.reps"))
        n_sent = c[3].select_slider(t("walkthrough.s5.sentences"), S5_SENTENCES, key=K("s5.sentences"))
    if st.button(t("walkthrough.s5.measure"), key=K("s5.run"), type="primary", icon=":material/speed:"):
        with st.spinner(t("walkthrough.s5.measuring")):
            try:
                st.session_state[K("s5.result")] = _measure(int(seq), int(batch), int(reps), int(n_sent))
            except ValueError as e:
                st.error(str(e))
    res = st.session_state.get(K("s5.result"))
    if res is None:
        st.caption(t("walkthrough.s5.not_yet"))
        return
    sp = res["speed"]
    speedup = sp.speedup("distilbert", "bert")
    st.success(t("walkthrough.s5.speed", device=sp.device_name, batch=sp.batch, seq=sp.seq_len, reps=sp.repeats,
                 bert=f"{sp.row('bert').latency_ms:,.1f}", distil=f"{sp.row('distilbert').latency_ms:,.1f}",
                 x=f"{speedup:.2f}", at=res["at"]))
    for err in res.get("errors", []):
        st.error(err)
    rows = []
    for m in res["models"]:
        card = bundled_card(m["id"]).get("heldout", {})
        rows.append({t("walkthrough.in.model"): m["id"], t("walkthrough.s5.col.layers"): m["layers"],
                     t("walkthrough.s5.col.params"): round(m["params"] / 1e6, 1),
                     t("walkthrough.s5.col.top5"): f"{m['top5']:.1%}", t("walkthrough.s5.col.pieces"): m["pieces"],
                     t("walkthrough.s5.col.ms"): round(m["ms"], 1),
                     t("walkthrough.s5.col.card"): f"{card['mlm_top5']:.1%}" if "mlm_top5" in card
                     else t("walkthrough.none")})
    fig = None
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        st.caption(t("walkthrough.s5.top5_caption", n=res["models"][0]["sentences"]))
        fig = make_subplots(rows=1, cols=3, subplot_titles=(t("walkthrough.s5.col.params"), t("walkthrough.s5.col.ms"),
                                                            t("walkthrough.s5.col.top5")))
        names = [m["id"] for m in res["models"]]
        for col, ys in enumerate(([m["params"] / 1e6 for m in res["models"]], [m["ms"] for m in res["models"]],
                                  [m["top5"] for m in res["models"]]), start=1):
            fig.add_trace(go.Bar(x=names, y=ys, marker_color=["#4C78A8", "#F58518"][:len(ys)], showlegend=False),
                          row=1, col=col)
        fig.update_layout(height=320, margin=dict(t=40, b=10))
        st.plotly_chart(presenter.scale(fig), key=K("s5.fig"), width="stretch")
        if len(res["models"]) == 2:
            tm, sm = res["models"]
            st.markdown(t("walkthrough.s5.verdict", teacher=tm["id"], student=sm["id"],
                          size=f"{1 - sm['params'] / tm['params']:.0%}", x=f"{tm['ms'] / max(sm['ms'], 1e-9):.2f}",
                          kept=f"{sm['top5'] / tm['top5']:.0%}" if tm["top5"] > 0 else "–"))
        vs = bundled_card(res["models"][-1]["id"]).get("vs_teacher", {})
        if "top5_kept" in vs:
            st.caption(t("walkthrough.s5.card_kept", teacher=vs.get("teacher", "?"), kept=f"{vs['top5_kept']:.1%}",
                         x=f"{vs.get('speedup', 0):.2f}", enc=f"{vs.get('encoder_speedup', 0):.2f}"))
    record(5, {t("walkthrough.s5.seq"): sp.seq_len, t("walkthrough.s5.batch"): sp.batch,
               t("walkthrough.s5.reps"): sp.repeats, t("walkthrough.s5.sentences"): n_sent,
               t("walkthrough.in.device"): sp.device_name},
           rows=rows, figures=[fig] if fig is not None else [],
           text=t("walkthrough.s5.report", x=f"{speedup:.2f}", device=sp.device_name))


# ---------------------------------------------------------------------------------------------- 6 fine-tuning
def _s6_options() -> list[str]:
    opts = [f"{f}|{bundled_id(f)}" for f in ("distilbert", "bert", "albert", "roberta")
            if availability(bundled_id(f)).source != "unavailable"]
    spec = state.current_spec()
    if spec is not None and f"{spec.family}|{spec.checkpoint}" not in opts:
        opts.append(f"{spec.family}|{spec.checkpoint}")
    return opts


def _s6_label(opt: str) -> str:
    fam, ckpt = opt.split("|", 1)
    return f"{FAMILIES[fam].label} · {ckpt}"


def _s6_start(opt: str, lr: float, steps: int) -> None:
    fam, ckpt = opt.split("|", 1)
    data = load_bundled(S6_DATA)
    rows = min(len(data.train), steps * S6_BATCH)
    data = data.subset(rows, S6_TEST_ROWS)
    epochs = max(1, math.ceil(steps * S6_BATCH / len(data.train)))
    runs: dict = {}
    stamp = time.strftime("%H%M%S")
    r = runner()
    for kind, rate in (("good", lr), ("high", lr * 10)):
        cfg = FinetuneConfig(fam, ckpt, epochs=epochs, max_steps=steps, lr=rate, batch_size=S6_BATCH,
                             max_length=S6_MAX_LEN, warmup_ratio=0.1, weight_decay=0.01, grad_clip=1.0,
                             patience=0, device=_device())
        out = runs_root(state.session_id()) / f"walkthrough-{kind}-{fam}-{stamp}"
        fn = job_fn(cfg, data, out)  # two runs at once are safe: model loads take core.models.BUILD_LOCK
        try:
            job = r.submit(t(f"walkthrough.s6.job.{kind}", lr=f"{rate:.0e}"), fn, resource=job_resource(cfg),
                           owner=state.session_id())
        except ValueError:  # QuotaError on the second run: the pair is the experiment, so drop the first too
            for run in runs.values():
                r.cancel(run["job_id"])
            raise
        runs[kind] = dict(job_id=job.id, lr=rate, steps=steps, family=fam, checkpoint=ckpt, result=None, error=None)
    st.session_state[K("s6.runs")] = runs


def _loss_figure(runs: dict) -> go.Figure:
    """Training loss of both runs side by side, on one y-scale."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=[
        t(f"walkthrough.s6.col.{k}", lr=f"{runs[k]['lr']:.0e}") for k in ("good", "high")])
    for col, (kind, color) in enumerate((("good", "#4C78A8"), ("high", "#E45756")), start=1):
        run = runs[kind]
        hist = [h for h in (run["result"].history if run["result"] is not None else ()) if h.get("loss") is not None]
        fig.add_trace(go.Scatter(x=[h["step"] for h in hist], y=[h["loss"] for h in hist], mode="lines+markers",
                                 line=dict(color=color), showlegend=False,
                                 hovertemplate=t("walkthrough.s6.hover") + "<extra></extra>"), row=1, col=col)
    fig.update_xaxes(title_text=t("walkthrough.s6.step"))
    fig.update_yaxes(title_text=t("walkthrough.s6.loss"), row=1, col=1)
    fig.update_layout(height=340, margin=dict(t=40, b=10))
    return fig


def _live(job, kind: str) -> None:
    """The loss so far, while a run goes (from the job's metrics)."""
    hist = [m for m in list(job.metrics) if m.get("loss") is not None]
    if len(hist) < 2:
        return
    fig = go.Figure(go.Scatter(x=[m["step"] for m in hist], y=[m["loss"] for m in hist], mode="lines",
                               hovertemplate=t("walkthrough.s6.hover") + "<extra></extra>"))
    fig.update_layout(height=200, margin=dict(t=10, b=10), xaxis_title=t("walkthrough.s6.step"),
                      yaxis_title=t("walkthrough.s6.loss"))
    st.plotly_chart(presenter.scale(fig), key=K(f"s6.live.{kind}.{job.id}"), width="stretch")


def jitter(history) -> float | None:
    """Mean absolute change of the training loss from one step to the next: how much the curve jumps."""
    losses = [h["loss"] for h in history if h.get("loss") is not None]
    if len(losses) < 3:
        return None
    return float(np.mean(np.abs(np.diff(losses))))


def step6() -> None:
    opts = _s6_options()
    if not opts:
        st.warning(t("walkthrough.s6.no_model"))
        return
    default = next((o for o in opts if o.startswith("distilbert|")), opts[0])
    if st.session_state.get(K("s6.model")) not in opts:
        st.session_state[K("s6.model")] = default
    st.session_state.setdefault(K("s6.lr"), 5e-5)
    st.session_state.setdefault(K("s6.steps"), 30)
    model = st.selectbox(t("walkthrough.s6.model"), opts, key=K("s6.model"), format_func=_s6_label,
                         help=t("walkthrough.s6.model_help"))
    with presenter.settings():
        c1, c2 = st.columns(2)
        lr = c1.select_slider(t("walkthrough.s6.lr"), LRS, key=K("s6.lr"), format_func=lambda x: f"{x:.0e}")
        steps = c2.number_input(t("walkthrough.s6.steps"), 2, 200, key=K("s6.steps"))
    st.caption(t("walkthrough.s6.settings", lr=f"{lr:.0e}", high=f"{lr * 10:.0e}", steps=int(steps), batch=S6_BATCH,
                 max_len=S6_MAX_LEN))
    runs = st.session_state.get(K("s6.runs"))
    busy = runs is not None and any(runner().get(r["job_id"]) is not None and not runner().get(r["job_id"]).done
                                    for r in runs.values())
    if st.button(t("walkthrough.s6.start"), key=K("s6.start"), type="primary", disabled=busy,
                 icon=":material/play_arrow:"):
        try:
            _s6_start(model, float(lr), int(steps))
        except ValueError as e:
            st.error(str(e))
        runs = st.session_state.get(K("s6.runs"))
    if not runs:
        st.caption(t("walkthrough.s6.not_yet"))
        return
    for run in runs.values():  # pick up finished jobs (kept in the session: a later error cannot lose them)
        job = runner().get(run["job_id"])
        if job is not None and job.done and run["result"] is None and run["error"] is None:
            if job.status == "done":
                run["result"] = job.result
            else:
                run["error"] = job.error or job.status
    good = runs["good"]
    registered: set = st.session_state.setdefault(K("s6.registered"), set())
    fresh = [r for r in runs.values() if r["result"] is not None and r["result"].model_dir not in registered]
    for run in fresh:  # the seeds' run for step 7 and every page; the 10x one too, to compare them
        state.register_session_model(f"walkthrough {run['family']} lr={run['lr']:.0e}", run["family"],
                                     run["result"].model_dir, kind="fine-tuned")
        registered.add(run["result"].model_dir)
    if fresh:
        st.session_state[K("s7.source")] = "step6"  # step 7 looks inside the new model
        st.rerun()  # once, so the sidebar picker (drawn before this page) lists the new models
    cols = st.columns(2)
    for col, kind in zip(cols, ("good", "high")):
        run = runs[kind]
        with col:
            st.markdown("**" + t(f"walkthrough.s6.col.{kind}", lr=f"{run['lr']:.0e}") + "**")
            if run["result"] is None and run["error"] is None:
                job_panel(run["job_id"], on_done=lambda j: st.rerun(), on_running=lambda j, k=kind: _live(j, k),
                          key=K(f"s6.job.{kind}"))
            elif run["error"] is not None:
                st.error(t("walkthrough.s6.failed", error=run["error"]))
            else:
                r = run["result"]
                st.metric(t("walkthrough.s6.acc"), f"{r.accuracy:.1%}", t("walkthrough.s6.vs_majority",
                          d=f"{r.accuracy - r.majority_rate:+.1%}"))
                j = jitter(r.history)
                st.caption(t("walkthrough.s6.run_caption", steps=r.steps, s=f"{r.train_seconds:,.1f}",
                             loss=f"{r.history[-1]['loss']:.3f}" if r.history else "–",
                             jitter=f"{j:.3f}" if j is not None else "–"))
    done = all(r["result"] is not None or r["error"] is not None for r in runs.values())
    if not done:
        return
    fig = _loss_figure(runs)
    st.plotly_chart(presenter.scale(fig), key=K("s6.fig"), width="stretch")
    st.markdown(_s6_verdict(runs))
    if any(r["result"] is not None for r in runs.values()):
        st.success(t("walkthrough.s6.registered", family=FAMILIES[good["family"]].label), icon=":material/check:")
    record(6, {t("walkthrough.in.model"): good["checkpoint"], t("walkthrough.s6.lr"): f"{good['lr']:.0e}",
               t("walkthrough.s6.steps"): good["steps"], t("walkthrough.s6.data"): S6_DATA},
           rows=[{t("walkthrough.s6.col.run"): t(f"walkthrough.s6.col.{k}", lr=f"{r['lr']:.0e}"),
                  t("walkthrough.s6.acc"): f"{r['result'].accuracy:.1%}" if r["result"] is not None else r["error"],
                  t("walkthrough.s6.jitter"): round(jitter(r["result"].history) or 0.0, 4)
                  if r["result"] is not None else ""}
                 for k, r in runs.items()],
           text=_s6_verdict(runs).replace("**", ""), figures=[fig])


def _s6_verdict(runs: dict) -> str:
    good, high = runs["good"], runs["high"]
    if good["result"] is None:
        return t("walkthrough.s6.verdict.good_failed")
    if high["result"] is None:
        return t("walkthrough.s6.verdict.diverged")
    g, h = good["result"], high["result"]
    jg, jh = jitter(g.history) or 0.0, jitter(h.history) or 0.0
    fmt = dict(good=f"{g.accuracy:.1%}", high=f"{h.accuracy:.1%}", jg=f"{jg:.3f}", jh=f"{jh:.3f}",
               majority=f"{g.majority_rate:.1%}")
    if h.accuracy <= g.majority_rate + 0.02 < g.accuracy:
        return t("walkthrough.s6.verdict.collapsed", **fmt)
    if h.accuracy < g.accuracy:
        return t("walkthrough.s6.verdict.worse", **fmt)
    return t("walkthrough.s6.verdict.short_run", **fmt)


# ---------------------------------------------------------------------------------------------- 7 look inside
def _is_classifier(checkpoint: str) -> bool:
    """A folder fine-tuned with the family's own [CLS] head (it loads as *ForSequenceClassification)."""
    try:
        meta = json.loads((Path(checkpoint).expanduser() / META_FILE).read_text())
    except (OSError, ValueError):
        return False
    return meta.get("config", {}).get("pooling") == "cls"


def _s7_spec() -> ModelSpec | None:
    runs = st.session_state.get(K("s6.runs")) or {}
    tuned = [m for m in state.session_models() if m.kind == "fine-tuned"]  # the Fine-tune page's too
    step6_done = (runs.get("good") or {}).get("result") is not None
    st.session_state.setdefault(K("s7.source"), "session" if tuned and not step6_done else "step6")
    source = st.radio(t("walkthrough.s7.source"), S7_SOURCES, key=K("s7.source"), horizontal=True,
                      format_func=lambda s: t(f"walkthrough.s7.src.{s}"))
    if source == "session":
        if not tuned:
            st.info(t("walkthrough.s7.need_any"))
            st.button(t("walkthrough.s7.go_step6"), key=K("s7.go6"), on_click=go_to, args=(6,))
            return None
        labels = [m.label for m in tuned]
        if st.session_state.get(K("s7.tuned")) not in labels:
            st.session_state[K("s7.tuned")] = labels[-1]  # the newest
        pick = st.selectbox(t("walkthrough.s7.tuned"), labels, key=K("s7.tuned"))
        m = next(m for m in tuned if m.label == pick)
        return ModelSpec(m.family, m.path, _device())
    if source in S7_RUNS:
        run = runs.get(S7_RUNS[source]) or {}
        if run.get("result") is None:
            if tuned:
                st.info(t("walkthrough.s7.step6_not_run_but_tuned", n=len(tuned)))
                st.button(t("walkthrough.s7.use_session"), key=K("s7.use_session"), on_click=_s7_use_session)
            else:
                st.info(t("walkthrough.s7.need_step6"))
            st.button(t("walkthrough.s7.go_step6"), key=K("s7.go6"), on_click=go_to, args=(6,))
            return None
        return ModelSpec(run["family"], run["result"].model_dir, _device())
    spec = state.current_spec()
    if spec is None:
        st.error(st.session_state.get(state.SPEC_ERROR) or t("common.pick_model"))
    return spec


def _s7_use_session() -> None:
    st.session_state[K("s7.source")] = "session"


def step7() -> None:
    spec = _s7_spec()
    if spec is None:
        return
    classifier = _is_classifier(spec.checkpoint)
    lm = _load(spec, "seqcls" if classifier else "base", attentions=True)
    if lm is None:
        return
    name = next((m.label for m in state.session_models() if m.path == spec.checkpoint), spec.checkpoint)
    st.caption(t("walkthrough.s7.model", id=name, family=lm.family.label))
    text_default(K("s7.text"), "example.gloss")
    text = st.text_input(t("walkthrough.s7.text"), key=K("s7.text"))
    try:
        att = A.compute_attention(lm, A.AttentionConfig(text, capture_qk=False))
    except ValueError as e:
        st.error(str(e))
        return
    n_layers, n_heads = att.n_layers, att.n_heads
    if not 1 <= int(st.session_state.get(K("s7.layer"), n_layers)) <= n_layers:
        st.session_state[K("s7.layer")] = n_layers
    st.session_state.setdefault(K("s7.layer"), n_layers)
    if st.session_state.get(K("s7.head"), -1) not in range(-1, n_heads):
        st.session_state[K("s7.head")] = -1
    st.session_state.setdefault(K("s7.head"), -1)
    with presenter.settings():
        c1, c2 = st.columns(2)
        layer = c1.slider(t("walkthrough.s7.layer"), 1, n_layers, key=K("s7.layer")) if n_layers > 1 else 1
        head = c2.selectbox(t("walkthrough.s7.head"), list(range(-1, n_heads)), key=K("s7.head"),
                            format_func=lambda h: t("walkthrough.s7.mean_heads") if h < 0 else str(h + 1))
    z = att.attentions[layer - 1].astype(np.float32)  # (heads, seq, seq)
    z = z.mean(0) if head < 0 else z[head]
    labels = _labels(att.tokens)
    heat = go.Figure(go.Heatmap(z=z, x=labels, y=labels, colorscale="Blues", zmin=0,
                                hovertemplate=t("walkthrough.s7.hover") + "<extra></extra>"))
    which = t("walkthrough.s7.mean_heads") if head < 0 else str(head + 1)
    heat.update_layout(title=t("walkthrough.s7.heat_title", layer=layer, head=which), height=460,
                       yaxis=dict(autorange="reversed"), margin=dict(t=40, b=10),
                       xaxis_title=t("walkthrough.s7.keys"), yaxis_title=t("walkthrough.s7.queries"))
    st.plotly_chart(presenter.scale(heat), key=K("s7.heat"), width="stretch")
    figs, rows = [heat], []
    if not classifier:
        st.info(t("walkthrough.s7.not_classifier"))
    else:
        figs, rows = _s7_attributions(lm, text, figs)
    record(7, {t("walkthrough.in.model"): spec.checkpoint, t("walkthrough.s7.text"): text,
               t("walkthrough.s7.layer"): layer, t("walkthrough.s7.head"): which}, rows=rows, figures=figs,
           same=(spec.checkpoint, text))


def _s7_attributions(lm, text: str, figs: list) -> tuple[list, list]:
    try:
        probs = AT.prepare(lm, AT.AttributionConfig(target="class", text=text)).candidates  # ((class, p), ...)
    except ValueError as e:
        st.error(str(e))
        return figs, []
    names = [n for n, _ in probs]
    pred = int(np.argmax([p for _, p in probs]))
    st.markdown(t("walkthrough.s7.prediction", label=names[pred], p=f"{probs[pred][1]:.1%}"))
    if st.session_state.get(K("s7.class"), pred) not in range(len(names)):
        st.session_state[K("s7.class")] = pred
    st.session_state.setdefault(K("s7.class"), pred)
    st.session_state.setdefault(K("s7.n_steps"), 20)
    c1, c2 = st.columns([2, 1])
    cls = c1.selectbox(t("walkthrough.s7.class"), list(range(len(names))), key=K("s7.class"),
                       format_func=lambda i: names[i])
    with c2, presenter.settings():
        n_steps = st.number_input(t("walkthrough.s7.n_steps"), 2, 200, key=K("s7.n_steps"))
    key = (lm.spec.checkpoint, text, int(cls), int(n_steps))
    if st.button(t("walkthrough.s7.run_attr"), key=K("s7.run"), type="primary", icon=":material/insights:"):
        with st.spinner(t("walkthrough.s7.explaining")):
            try:
                res = AT.attribute(lm, AT.AttributionConfig(target="class", text=text, class_index=int(cls),
                                                            methods=("lig",), n_steps=int(n_steps),
                                                            internal_batch_size=int(n_steps)))
                st.session_state[K("s7.result")] = (key, res)
            except ValueError as e:
                st.error(str(e))
    held = st.session_state.get(K("s7.result"))
    if held is None or held[0] != key:
        st.caption(t("walkthrough.s7.not_yet"))
        return figs, []
    res = held[1]
    scores = res.methods[0].scores
    labels = _labels(res.tokens)
    bars = go.Figure(go.Bar(x=labels, y=scores, marker_color=["#54A24B" if s >= 0 else "#E45756" for s in scores],
                            hovertemplate="%{x}: %{y:+.4f}<extra></extra>"))
    bars.update_layout(title=t("walkthrough.s7.bars_title", label=names[int(cls)]), height=340,
                       yaxis_title=t("walkthrough.s7.attr_y"), margin=dict(t=40, b=10))
    st.plotly_chart(presenter.scale(bars), key=K("s7.bars"), width="stretch")
    if res.delta_warning:
        st.warning(res.delta_warning)
    rows = [{t("walkthrough.s1.col.token"): tok, t("walkthrough.s7.attr_y"): round(float(s), 4)}
            for tok, s in zip(res.tokens, scores)]
    return figs + [bars], rows
