"""The Fine-tune page's data choice: bundled, uploaded or GLUE labelled data, the token task's data, and how the
model's tokenizer splits words."""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from app.kit.i18n import explain, t, t_or
from app.kit.loaders import bundled_data, get_model, glue_data, token_sample
from app.kit.render import as_text
from app.kit.uploads import upload_box
from app.views.train.finetune import KEEP, TEST_FRAC, K, number
from core import registry
from core.data.datasets_local import (
    BUNDLED,
    GLUE_TASKS,
    MAX_UPLOAD_MB,
    UPLOAD_KINDS,
    DataError,
    LabelledData,
    from_table,
    guess_columns,
    read_table,
)
from core.data.token_data import BUNDLED_TOKENS, TokenData, piece_table, read_tokens, words_tokenizer
from core.models.downloads import hub_reachable
from core.registry import ModelLoadError

# Data sources: the widget's values (kept in links) are these ids; the labels come from assets/i18n/finetune.toml.
SOURCES = ("drugreview", "wordnet", "upload", "glue")


NO_SECOND_TEXT = "(none)"  # a widget value; its label comes through format_func


def _glue(task: str) -> LabelledData:
    with st.spinner(t("finetune.glue_downloading")):
        return glue_data(task)


def data_picker() -> LabelledData | None:
    """Draw the data choice; return the labelled data, or None after saying what is missing or wrong."""
    source = st.radio(
        t("finetune.data"),
        SOURCES,
        key=K("source"),
        persist_state=KEEP,
        horizontal=True,
        format_func=lambda s: t(f"finetune.source.{s}"),
    )
    try:
        if source in BUNDLED:
            info = BUNDLED[source]
            data = bundled_data(info.key)
            description = t_or(f"finetune.data_desc.{info.key}", info.description)
            source_text = t_or(f"finetune.data_source.{info.key}", info.source)  # a citation, in the page's language
            licence = t_or(f"finetune.data_licence.{info.key}", info.licence)
            st.caption(t("finetune.bundled_caption", description=description, source=source_text, licence=licence))
            if info.key == "drugreview":  # why it is not the default
                st.caption(t("finetune.drugreview_note"))
        elif source == "upload":
            data = _upload()
        else:
            data = _glue_picker()
    except DataError as e:
        st.error(explain(e))
        return None
    if data is None:
        return None
    for note in data.notes:
        st.info(explain(note))
    counts = ", ".join(f"{k}: {v}" for k, v in data.counts().items())
    st.caption(
        t(
            "finetune.data_summary",
            train=len(data.train),
            test=len(data.test),
            counts=counts,
            majority=f"{data.majority_rate():.1%}",
        )
    )
    return data


def _upload() -> LabelledData | None:
    # Any file is taken and refused here, under the box (app.kit.uploads); the caption says the app's limit.
    up = upload_box(
        t("finetune.upload"),
        K("upload"),
        kinds=[*UPLOAD_KINDS, "json"],
        expect=t("uploads.expect.table"),
        limit=MAX_UPLOAD_MB,
        help=t("finetune.upload_help"),
        note=t("finetune.upload_limit", mb=f"{MAX_UPLOAD_MB:.0f}"),
    )
    if up is None:
        st.info(t("finetune.upload_info"))
        return None
    if not up.ok:  # the reason is under the box
        return None
    data = up.data
    df = read_table(data, up.name)
    cols = [str(c) for c in df.columns]
    guess = guess_columns(df)
    signature = hashlib.sha1(up.name.encode() + data).hexdigest()
    if st.session_state.get(K("upload_sig")) != signature:  # a new file: start from the guess, then the user decides
        st.session_state[K("upload_sig")] = signature
        st.session_state[K("text_col")] = guess.text
        st.session_state[K("text_col_b")] = guess.text_b or NO_SECOND_TEXT
        st.session_state[K("label_col")] = guess.label
    c1, c2, c3, c4 = st.columns(4)
    text = c1.selectbox(t("finetune.text_col"), cols, key=K("text_col"), persist_state=KEEP)
    text_b = c2.selectbox(
        t("finetune.text_col_b"),
        [NO_SECOND_TEXT] + cols,
        key=K("text_col_b"),
        persist_state=KEEP,
        format_func=lambda c: t("finetune.no_second_text") if c == NO_SECOND_TEXT else c,
    )
    label = c3.selectbox(t("finetune.label_col"), cols, key=K("label_col"), persist_state=KEEP)
    why = {role: t(f"finetune.guess.{code}") for role, code in guess.why.items()}
    st.caption(
        t(
            "finetune.guess.caption",
            text=guess.text,
            why_text=why["text"],
            label=guess.label,
            why_label=why["label"],
            why_b=why["text_b"],
            text_b=guess.text_b or t("finetune.no_second_text"),
        )
    )
    st.session_state.setdefault(K("test_frac"), TEST_FRAC.default)
    frac = number(c4, "test_frac")
    return from_table(df, text, label, None if text_b == NO_SECOND_TEXT else text_b, test_fraction=frac, name=up.name)


def _glue_picker() -> LabelledData | None:
    if not hub_reachable():
        st.warning(t("finetune.glue_offline"))
        return None
    task = st.selectbox(t("finetune.glue_task"), list(GLUE_TASKS), key=K("glue_task"), persist_state=KEEP)
    if not st.toggle(t("finetune.glue_go"), key=K("glue_go"), persist_state=KEEP):
        return None
    return _glue(task)


TOKEN_SOURCES = ("sample", "upload")


TOKEN_UPLOAD_KINDS = ["conll", "iob", "bio", "txt", "tsv", "jsonl", "json"]


SPLIT_EXAMPLE = "Anneliese Kowalczyk flew from Reykjavik to Ljubljana on Thursday ."


def token_data_picker() -> TokenData | None:
    """The token task's data: the bundled sample or a CoNLL/IOB/JSONL upload; None after saying what is wrong."""
    source = st.radio(
        t("finetune.tok.data"),
        TOKEN_SOURCES,
        key=K("tok_source"),
        persist_state=KEEP,
        horizontal=True,
        format_func=lambda s: t(f"finetune.tok.source.{s}"),
    )
    try:
        if source == "sample":
            data = token_sample()
            st.caption(
                t("finetune.tok.sample_caption", source=BUNDLED_TOKENS["source"], licence=BUNDLED_TOKENS["licence"])
            )
        else:
            up = upload_box(
                t("finetune.tok.upload"),
                K("tok_upload"),
                kinds=TOKEN_UPLOAD_KINDS,
                limit=MAX_UPLOAD_MB,
                expect=t("uploads.expect.tokens"),
                help=t("finetune.tok.upload_help"),
                note=t("finetune.upload_limit", mb=f"{MAX_UPLOAD_MB:.0f}"),
            )
            if up is None:
                st.info(t("finetune.tok.upload_info"))
                return None
            if not up.ok:  # the reason is under the box
                return None
            st.session_state.setdefault(K("tok_test_frac"), TEST_FRAC.default)
            frac = st.number_input(
                t("finetune.test_frac"), **TEST_FRAC.widget(), key=K("tok_test_frac"), persist_state=KEEP
            )
            data = read_tokens(up.data, up.name, test_fraction=float(frac))
    except DataError as e:
        st.error(as_text(explain(e)))  # the message quotes the file's own line: shown as text
        return None
    for note in data.notes:
        st.info(as_text(explain(note)))
    st.caption(
        t(
            "finetune.tok.summary",
            train=len(data.train),
            test=len(data.test),
            words=f"{data.train.n_words:,}",
            tags=", ".join(data.label_names),
            majority_tag=data.majority_tag(),
            majority=f"{data.majority_rate():.1%}",
        )
    )
    return data


def split_table(spec, data: TokenData | None) -> None:
    """How the current model's tokenizer splits words into pieces, and which piece carries the word's tag."""
    if spec is None:
        return
    try:
        tok = words_tokenizer(get_model(spec, "base").tokenizer)
    except (ModelLoadError, ValueError) as e:
        st.error(explain(e))
        return
    fam = registry.family(spec.family)
    st.markdown(t("finetune.tok.split_title", family=fam.label, kind=fam.tokenizer_kind))
    st.session_state.setdefault(K("tok_split_text"), SPLIT_EXAMPLE)
    text = st.text_input(
        t("finetune.tok.split_input"), key=K("tok_split_text"), max_chars=400, help=t("finetune.tok.split_help")
    )
    words = text.split()
    if not words:
        st.info(t("finetune.type_first"))
        return
    rows = piece_table(tok, words[:60])
    c = {k: t(f"finetune.tok.col.{k}") for k in ("word", "pieces", "n", "labelled", "ignored")}
    df = pd.DataFrame(
        [
            {
                c["word"]: r["word"],
                c["pieces"]: " · ".join(r["pieces"]),
                c["n"]: len(r["pieces"]),
                c["labelled"]: r["labelled"] or "",
                c["ignored"]: " · ".join(r["pieces"][1:]),
            }
            for r in rows
        ]
    )
    st.dataframe(df, hide_index=True, key=K("tok_split_table"))
    split = sum(len(r["pieces"]) > 1 for r in rows)
    st.caption(
        t("finetune.tok.split_caption", split=split, words=len(rows), pieces=sum(len(r["pieces"]) for r in rows))
    )
