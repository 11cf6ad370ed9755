"""Sentence pair: BERT's NSP and ALBERT's SOP heads on (A, B), (B, A) and (A, other topic); batch CSV scoring."""
import streamlit as st

from app import state
from app.jobs_ui import job_panel, runner
from app.loaders import model_or_error
from app.render_predict import batch_table, confusion_fig, pair_bars, token_strip
from core.models import ASSETS, FAMILIES
from core.sentence_pair import (MAX_ROWS, PairConfig, PairError, check_pair, pair_head, parse_pairs_csv,
                                predict_pair, score_batch)

P = "sentence_pair"
EXAMPLE_CSVS = {"NSP: next vs random sentence": "pairs_nsp_en.csv", "SOP: in order vs swapped": "pairs_sop_en.csv"}


def k(name: str) -> str:
    return state.key(P, name)


def _run(result_key: str, fn) -> None:
    try:
        st.session_state[result_key] = fn()
    except ValueError as e:  # PairConfig, PairError and CSV problems all say what to do
        st.session_state[result_key] = None
        st.error(str(e))


def _load_example_csv() -> None:
    name = st.session_state.get(k("example_csv"))
    if name:
        st.session_state[k("csv")] = (ASSETS / "examples" / EXAMPLE_CSVS[name]).read_text(encoding="utf-8")


st.title("Sentence pair (NSP / SOP)")
st.caption("BERT was pretrained to say whether B is the **next sentence** after A (NSP); ALBERT whether A and B "
           "are **in order** (SOP). RoBERTa and DistilBERT have no such head.")
with st.expander("What each family shows"):
    for f in FAMILIES.values():
        st.markdown(f"- **{f.label}**: {f.pair_head_note}")

spec = state.current_spec()
head = pair_head(spec.family) if spec else None
lm = None
if spec is None:
    st.error(st.session_state.get(state.SPEC_ERROR) or "Pick a model in the sidebar.")
elif head.kind is None:
    st.info(f"**{FAMILIES[spec.family].label} has no sentence-pair head.** {head.note} "
            "Pick BERT (NSP) or ALBERT (SOP) in the sidebar to score sentence pairs.")
else:
    lm = model_or_error("pretraining")
    if lm is not None:
        try:
            check_pair(lm)
        except PairError as e:
            st.error(str(e))
            lm = None

if lm is not None:
    tab_one, tab_batch = st.tabs(["Pair and probe", "Batch (CSV)"])
    with tab_one:
        st.session_state.setdefault(k("a"), "She poured a cup of hot tea.")
        st.session_state.setdefault(k("b"), "Then she sat by the window to drink it.")
        with st.form(k("form")):
            c1, c2 = st.columns(2)
            a = c1.text_area("Sentence A", key=k("a"), height=80)
            b = c2.text_area("Sentence B", key=k("b"), height=80)
            probe = st.checkbox("Probe: also score (A, a sentence on another topic)", value=True, key=k("probe"))
            seed = st.number_input("Seed for the other-topic sentence", 0, 10_000, 0, key=k("seed"))
            go = st.form_submit_button(f"Score with {head.name}", type="primary")
        if go:
            _run(k("result"), lambda: predict_pair(lm, PairConfig(a, b, seed=int(seed)), probe=probe))
        res = st.session_state.get(k("result"))
        if res is not None and res.checkpoint == lm.spec.checkpoint:
            for n in res.notes:
                st.warning(n)
            st.plotly_chart(pair_bars(res), key=k("bars"), width="stretch")
            cols = st.columns(len(res.scores))
            for col, s in zip(cols, res.scores):
                col.metric(f"{res.prob_label} {s.label}", f"{s.prob:.1%}")
                col.caption(f"{s.first} ‖ {s.second}")
            st.markdown(token_strip(res.scores[0].tokens, specials=tuple(lm.tokenizer.all_special_tokens)),
                        unsafe_allow_html=True)
            st.caption(f"{res.latency_ms:,.1f} ms for {len(res.scores)} pairs in one batch.")
            st.markdown(
                "**Reading the probe.** NSP's negatives were random sentences from other documents, so a BERT "
                "can score (A, B) and (B, A) alike (same topic) and only the other-topic pair low: NSP mostly "
                "detects topic. SOP's negatives are the same two sentences swapped, so ALBERT has to tell "
                "(A, B) from (B, A): SOP needs order. A tiny or undertrained model shows neither.")

    with tab_batch:
        st.markdown(f"Paste or upload a CSV with the header `a,b,label` (label 1 = B follows A in order, "
                    f"0 = it does not), at most {MAX_ROWS} rows.")
        st.selectbox("Example file", list(EXAMPLE_CSVS), index=None, placeholder="Load an example CSV…",
                     key=k("example_csv"), on_change=_load_example_csv)
        with st.form(k("batch_form")):
            pasted = st.text_area("CSV", key=k("csv"), height=160, placeholder="a,b,label\nFirst.,Second.,1")
            upload = st.file_uploader("…or upload a CSV file", type=["csv"], key=k("upload"))
            threshold = st.slider(f"Call it positive when {head.prob_label} ≥", 0.05, 0.95, 0.5, 0.05,
                                  key=k("threshold"))
            go_batch = st.form_submit_button("Score all rows", type="primary")
        if go_batch:
            try:
                text = upload.getvalue().decode("utf-8", errors="replace") if upload is not None else pasted
                rows = parse_pairs_csv(text)
                job = runner().submit(f"{head.name} on {len(rows)} pairs",
                                      lambda ctx: score_batch(lm, rows, threshold=threshold, progress=ctx.progress),
                                      resource="gpu" if lm.device.startswith("cuda") else "cpu",
                                      owner=state.session_id())
                state.job_ids(P).append(job.id)
            except ValueError as e:  # missing columns, too many rows, bad labels: say which and how to fix
                st.error(str(e))

        def show_batch(job) -> None:
            bres = job.result
            c1, c2, c3 = st.columns(3)
            c1.metric("accuracy", f"{bres.accuracy:.1%}")
            c2.metric("rows", len(bres.rows))
            c3.metric("time", f"{bres.latency_ms / 1000:,.2f} s")
            st.caption(f"{bres.checkpoint} · {bres.prob_label} ≥ {bres.threshold:.2f} counts as 1")
            if bres.truncated_rows:
                st.warning(f"{bres.truncated_rows} row(s) were longer than the model reads and were cut "
                           "(longest-first).")
            st.plotly_chart(confusion_fig(bres), key=k(f"confusion.{job.id}"), width="stretch")
            st.dataframe(batch_table(bres), hide_index=True, key=k(f"table.{job.id}"))

        if state.job_ids(P):
            job_panel(state.job_ids(P)[-1], show_batch, key=k("batch"))
