"""Renderers for the Corpus search page: the index line, the neighbours with the matched word highlighted, and the
histogram of which words the neighbours are.

Labels come from assets/i18n/corpus_search.toml. Sentences are user (or corpus) text: every piece of it is
html-escaped before it goes into the HTML list or a plotly label, so it shows as typed. Charts go through
presenter.scale."""

from __future__ import annotations

import hashlib
import html

import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, report, state
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_texts
from app.kit.render import as_text, current_result, run_or_error, shorten
from core.base.text import display_piece
from core.models.spec import LoadedModel
from core.represent.corpus_index import CorpusIndex, SearchResult, query_words, search, searchable_words

PAGE = "corpus_search"
CONTEXT = 90  # characters of a long sentence kept on each side of the match (the rest is "…")
HIT = "#F58518"  # the matched word
SELF = "#9E9E9E"

_CSS = f"""<style>
.cs-list {{ font-size: 0.95rem; line-height: 1.5; }}
.cs-row {{ display: flex; gap: 0.75rem; align-items: baseline; padding: 3px 0; border-bottom: 1px solid #eee; }}
.cs-rank {{ flex: 0 0 2rem; color: #888; text-align: right; font-variant-numeric: tabular-nums; }}
.cs-sim {{ flex: 0 0 4.6rem; font-family: monospace; font-variant-numeric: tabular-nums; }}
.cs-sent {{ flex: 1; overflow-wrap: anywhere; }}
.cs-sent mark {{ background: {HIT}33; color: inherit; border-bottom: 2px solid {HIT}; padding: 0 2px; }}
.cs-piece {{ font-family: monospace; color: #666; white-space: pre; font-size: 0.85rem; }}
.cs-head {{ color: #888; font-size: 0.8rem; border-bottom: 1px solid #ccc; }}
.cs-head .cs-sim, .cs-head .cs-piece {{ font-family: inherit; font-size: 0.8rem; }}
.cs-self {{ color: {SELF}; font-size: 0.8rem; white-space: nowrap; }}
</style>"""


def K(name: str) -> str:
    return state.key(PAGE, name)


def depth_label(d: int) -> str:
    return t("corpus_search.embeddings") if d == 0 else t("corpus_search.layer", n=d)


def kind_label(ci: CorpusIndex) -> str:
    return t(f"corpus_search.kind.{ci.kind}", nlist=ci.nlist, nprobe=ci.nprobe)


def show_index(ci: CorpusIndex) -> None:
    """One line: what the index holds and how it searches."""
    st.success(
        t(
            "corpus_search.ready",
            n=f"{len(ci.sentences):,}",
            rows=f"{len(ci):,}",
            depth=depth_label(ci.depth),
            kind=kind_label(ci),
            seconds=f"{ci.seconds:,.1f}",
        ),
        icon=":material/database:",
    )
    if ci.truncated:
        st.caption(t("corpus_search.truncated", n=ci.truncated, max=ci.max_length))


def _snippet(sentence: str, a: int, b: int) -> str:
    """The sentence as escaped HTML with [a, b) marked; a long one cut to CONTEXT characters around the match."""
    left, mid, right = sentence[:a], sentence[a:b], sentence[b:]
    if len(left) > CONTEXT:
        left = "…" + left[-CONTEXT:]
    if len(right) > CONTEXT:
        right = right[:CONTEXT] + "…"
    esc = lambda s: html.escape(s, quote=False)  # noqa: E731
    return f"{esc(left)}<mark>{esc(mid)}</mark>{esc(right)}"


def neighbours_html(r: SearchResult) -> str:
    """The neighbours as rows: rank, similarity, the sentence with the matched word marked, the matched piece."""
    rows = []
    for n in r.neighbours:
        tag = f'<span class="cs-self">{html.escape(t("corpus_search.self"))}</span>' if n.is_query else ""
        rows.append(
            f'<div class="cs-row" data-testid="cs-neighbour"><span class="cs-rank">{n.rank}</span>'
            f'<span class="cs-sim" title="{html.escape(t("corpus_search.similarity"))}">{n.similarity:.3f}'
            f'</span><span class="cs-sent">{_snippet(n.sentence, n.start, n.end)}</span>'
            f'<span class="cs-piece" title="{html.escape(t("corpus_search.piece") + ": " + n.piece)}">'
            f"{html.escape(display_piece(n.piece), quote=False)}</span>{tag}</div>"
        )
    head = (
        f'<div class="cs-row cs-head"><span class="cs-rank">#</span><span class="cs-sim">'
        f'{html.escape(t("corpus_search.similarity"))}</span><span class="cs-sent">'
        f'{html.escape(t("corpus_search.col_sentence"))}</span><span class="cs-piece">'
        f"{html.escape(t('corpus_search.piece'))}</span></div>"
    )
    return _CSS + '<div class="cs-list">' + head + "".join(rows) + "</div>"


def histogram(r: SearchResult) -> go.Figure:
    """Bars: how many of the neighbours are each word (lower-cased), most frequent first."""
    words = plot_texts(w for w, _ in r.histogram)  # plotly reads <b>, <br> in labels: escape
    counts = [c for _, c in r.histogram]
    fig = go.Figure(
        go.Bar(x=words, y=counts, marker_color=HIT, hovertemplate=t("corpus_search.hist_hover") + "<extra></extra>")
    )
    fig.update_layout(
        title=t("corpus_search.hist_title", n_neighbours=len(r.neighbours), depth=depth_label(r.depth)),
        height=340,
        margin=dict(t=50, b=10),
        xaxis=dict(title=t("corpus_search.hist_x"), type="category"),
        yaxis=dict(title=t("corpus_search.hist_y"), rangemode="tozero", dtick=1 if max(counts or [1]) <= 10 else None),
    )
    return fig


def show_result(r: SearchResult) -> None:
    summary = t(
        "corpus_search.summary",
        n_neighbours=len(r.neighbours),
        word=as_text(r.word),
        piece=as_text(display_piece(r.piece)),
        depth=depth_label(r.depth),
        rows=f"{r.corpus_rows:,}",
        n=f"{r.corpus_sentences:,}",
        kind=t(f"corpus_search.kind_short.{r.kind}"),
        ms=f"{r.latency_ms:,.0f}",
    )
    st.caption(summary)
    st.html(neighbours_html(r))
    fig = histogram(r)
    st.plotly_chart(presenter.scale(fig), width="stretch", key=K("hist"))
    report.record_view(
        "corpus_search",
        t("nav.corpus_search"),
        t("report.corpus_title", word=r.word),
        {
            t("report.in.model"): r.checkpoint,
            t("report.in.query"): r.query,
            t("report.in.word"): r.word,
            t("report.in.depth"): depth_label(r.depth),
        },
        (r.checkpoint, r.index_key, r.query, r.word_number, r.k),
        text=summary,
        figures=[fig],
        rows=[
            {
                t("report.col.rank"): n.rank,
                t("report.col.similarity"): f"{n.similarity:.3f}",
                t("report.col.word"): n.word,
                t("report.col.sentence"): n.sentence,
            }
            for n in r.neighbours
        ],
    )


# ---------------------------------------------------------------------------------------------- the query
MAX_NEIGHBOURS = 50
FOUND_SHOWN = 200  # sentences with the looked-up word offered at most


def word_key(query: str) -> str:
    """The word picker's key for one query text: another text starts with no word picked."""
    return K("word." + hashlib.sha1(query.encode("utf-8")).hexdigest()[:12])


def use_sentence(lm: LoadedModel, ci: CorpusIndex, sentence: str, word: str) -> None:
    """``sentence`` becomes the query, with ``word`` picked: its first occurrence that has a token of its own."""
    st.session_state[K("query")] = sentence
    words, offered = query_words(sentence), searchable_words(lm, ci, sentence)
    want = word.strip().lower()
    st.session_state[word_key(sentence)] = next((i for i in offered if words[i][2].lower() == want), None)


def on_find(lm: LoadedModel, ci: CorpusIndex) -> None:
    """A new word to look up: its first sentence becomes the query, with the word picked."""
    word = st.session_state.get(K("find"), "")
    try:
        use_sentence(lm, ci, ci.sentences[ci.sentences_with(word)[0]], word)
    except ValueError:
        pass  # the message is shown below the box


def on_found(lm: LoadedModel, ci: CorpusIndex, sel_key: str, word: str) -> None:
    if st.session_state.get(sel_key) is not None:
        use_sentence(lm, ci, ci.sentences[st.session_state[sel_key]], word)


def query_section(lm: LoadedModel, ci: CorpusIndex) -> None:
    """The query: find a word in the corpus or type a sentence, pick one of its words, see its neighbours."""
    st.subheader(t("corpus_search.query_head"))
    st.session_state.setdefault(K("query"), ci.sentences[0])
    c1, c2 = st.columns([1, 2])
    find = c1.text_input(
        t("corpus_search.find"),
        key=K("find"),
        placeholder=t("corpus_search.find_placeholder"),
        on_change=on_find,
        args=(lm, ci),
    )
    if find.strip():
        try:
            found = ci.sentences_with(find)
        except ValueError as e:  # a word absent from the corpus
            c2.error(explain(e))
        else:
            sel = K(f"found.{ci.key}.{find.strip().lower()}")
            c2.selectbox(
                t("corpus_search.found", word=as_text(find.strip()), n=f"{len(found):,}"),
                list(found[:FOUND_SHOWN]),
                key=sel,
                format_func=lambda i: shorten(ci.sentences[i], 120),
                on_change=on_found,
                args=(lm, ci, sel, find),
            )
    query = st.text_input(t("corpus_search.query"), key=K("query"))
    words = query_words(query)
    try:  # only the words search accepts (one check: core.represent.corpus_index.searchable_words)
        offered = searchable_words(lm, ci, query) if words else ()
    except ValueError as e:  # a tokenizer without offsets: search would refuse every word
        st.error(explain(e))
        return
    pick = None
    if not words:
        st.info(t("corpus_search.no_words"))
    else:
        if st.session_state.get(word_key(query)) not in (None, *offered):
            st.session_state[word_key(query)] = None
        pick = st.pills(
            t("corpus_search.pick"),
            list(offered),
            key=word_key(query),
            selection_mode="single",
            format_func=lambda i: as_text(words[i][2]),
        )
        left_out = [words[i][2] for i in range(len(words)) if i not in offered]
        if left_out:
            st.caption(
                t(
                    "corpus_search.not_offered",
                    words=", ".join(as_text(w) for w in dict.fromkeys(left_out)),
                    max=ci.max_length,
                )
            )
        with presenter.settings():
            k = st.slider(t("corpus_search.k"), 1, MAX_NEIGHBOURS, 10, key=K("k"))
        if pick is None:
            st.caption(t("corpus_search.pick_prompt"))
    if pick is not None:
        asked = (lm.spec, ci.key, query, int(pick), int(k))  # model, corpus, depth (in the key), query, word, k
        if current_result(K("result"), asked) is None:
            run_or_error(K("result"), lambda: search(lm, ci, query, int(pick), k=int(k)), made_from=asked)
        res = current_result(K("result"), asked)
        if res is not None:
            show_result(res)
