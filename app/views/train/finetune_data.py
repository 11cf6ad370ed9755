"""The Fine-tune page's data choice: bundled, uploaded or GLUE labelled data, the token task's data, and how the
model's tokenizer splits words. A picker draws its widgets and says what to load (a DataAsk, a TokenAsk); the page
loads it (app.kit.finetune_work) and hands it back to be described."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app.kit import urlstate
from app.kit.i18n import explain, t, t_or
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
from core.data.token_data import BUNDLED_TOKENS, TokenData, piece_table, read_tokens
from core.models.downloads import hub_reachable
from core.models.spec import ModelSpec

# Data sources: the widget's values (kept in links) are these ids; the labels come from assets/i18n/finetune.toml.
SOURCES = ("drugreview", "wordnet", "upload", "glue")


NO_SECOND_TEXT = "(none)"  # a widget value; its label comes through format_func


@dataclass(frozen=True)
class DataAsk:
    """What the data choice asks for: the source picked (a SOURCES id), the GLUE task to download, or the upload the
    picker has read (``read``)."""

    source: str
    glue: str | None = None
    read: LabelledData | None = None

    @property
    def bundled(self) -> str | None:
        """The bundled data set's key, when one is picked."""
        return BUNDLED[self.source].key if self.source in BUNDLED else None


def data_picker() -> DataAsk | None:
    """Draw the data choice; return what to load, or None after saying what is missing or wrong."""
    source = st.radio(
        t("finetune.data"),
        SOURCES,
        key=K("source"),
        persist_state=KEEP,
        horizontal=True,
        format_func=lambda s: t(f"finetune.source.{s}"),
    )
    if source in BUNDLED:
        return DataAsk(source)
    if source == "glue":
        task = _glue_picker()
        return None if task is None else DataAsk(source, glue=task)
    try:
        read = _upload()
    except DataError as e:
        st.error(explain(e))
        return None
    return None if read is None else DataAsk(source, read=read)


def data_shown(ask: DataAsk | None, loaded: LabelledData | None) -> LabelledData | None:
    """Under the picker: the bundled set's description, the data's notes and its summary. ``loaded``: what the page
    loaded for ``ask`` (None: nothing, or the reason is on the page). Returns the data to train on."""
    if ask is None:
        return None
    data = ask.read if ask.read is not None else loaded
    if data is None:
        return None
    if ask.bundled is not None:
        info = BUNDLED[ask.source]
        description = t_or(f"finetune.data_desc.{info.key}", info.description)
        source_text = t_or(f"finetune.data_source.{info.key}", info.source)  # a citation, in the page's language
        licence = t_or(f"finetune.data_licence.{info.key}", info.licence)
        st.caption(t("finetune.bundled_caption", description=description, source=source_text, licence=licence))
        if info.key == "drugreview":  # why it is not the default
            st.caption(t("finetune.drugreview_note"))
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
    urlstate.relabel((K("text_col_b"),))  # "no second text" is in the session's language
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


def _glue_picker() -> str | None:
    """The GLUE task to download, once the toggle says go; None before (or offline, said so)."""
    if not hub_reachable():
        st.warning(t("finetune.glue_offline"))
        return None
    task = st.selectbox(t("finetune.glue_task"), list(GLUE_TASKS), key=K("glue_task"), persist_state=KEEP)
    if not st.toggle(t("finetune.glue_go"), key=K("glue_go"), persist_state=KEEP):
        return None
    return task


TOKEN_SOURCES = ("sample", "upload")


TOKEN_UPLOAD_KINDS = ["conll", "iob", "bio", "txt", "tsv", "jsonl", "json"]


SPLIT_EXAMPLE = "Anneliese Kowalczyk flew from Reykjavik to Ljubljana on Thursday ."


@dataclass(frozen=True)
class TokenAsk:
    """What the token task's data choice asks for: the bundled sample (``sample``), or the upload the picker has
    read (``read``)."""

    sample: bool
    read: TokenData | None = None


def token_data_picker() -> TokenAsk | None:
    """The token task's data choice: the bundled sample or a CoNLL/IOB/JSONL upload; returns what to load, or None
    after saying what is missing or wrong."""
    source = st.radio(
        t("finetune.tok.data"),
        TOKEN_SOURCES,
        key=K("tok_source"),
        persist_state=KEEP,
        horizontal=True,
        format_func=lambda s: t(f"finetune.tok.source.{s}"),
    )
    if source == "sample":
        return TokenAsk(sample=True)
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
    frac = st.number_input(t("finetune.test_frac"), **TEST_FRAC.widget(), key=K("tok_test_frac"), persist_state=KEEP)
    try:
        return TokenAsk(sample=False, read=read_tokens(up.data, up.name, test_fraction=float(frac)))
    except DataError as e:
        st.error(as_text(explain(e)))  # the message quotes the file's own line: shown as text
        return None


def token_data_shown(ask: TokenAsk | None, loaded: TokenData | None) -> TokenData | None:
    """Under the token picker: the sample's source, the data's notes and its summary. ``loaded``: the sample, as the
    page loaded it (None: not asked for, or the reason is on the page). Returns the data to train on."""
    if ask is None:
        return None
    data = ask.read if ask.read is not None else loaded
    if data is None:
        return None
    if ask.sample:
        st.caption(t("finetune.tok.sample_caption", source=BUNDLED_TOKENS["source"], licence=BUNDLED_TOKENS["licence"]))
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


def split_table(spec: ModelSpec | None, tok) -> None:
    """How the current model's tokenizer splits words into pieces, and which piece carries the word's tag. ``tok``:
    the model's tokenizer for pre-split words, as the page loaded it (None: no model, or the reason is on the page)."""
    if spec is None or tok is None:
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
