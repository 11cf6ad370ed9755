"""Sentence pair: BERT's NSP and ALBERT's SOP heads on (A, B), (B, A) and (A, other topic); batch CSV scoring.

The pair and the options live in the URL; a link with sentences A and B shows their scores at once."""

import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.i18n import explain, t, t_or
from app.kit.jobs_panel import job_section, start_job, submit_job
from app.kit.loaders import model_or_error
from app.kit.render import current_result, entry_id, run_or_error, yes_no
from app.kit.uploads import upload_box
from app.views.predict.results import prob_label, record_pair
from app.views.predict.sentence_pair import P, show_batch, show_pair
from core.base.paths import ASSETS
from core.predict.sentence_pair import (
    MAX_CHARS,
    MAX_ROWS,
    PairConfig,
    PairError,
    check_pair,
    pair_head,
    parse_pairs_csv,
    predict_pair,
    score_batch,
)
from core.registry import FAMILIES
from core.runtime.jobs import resource_for

# option value (kept as it always was, so old links and tests still name it) -> file
EXAMPLE_CSVS = {"NSP: next vs random sentence": "pairs_nsp_en.csv", "SOP: in order vs swapped": "pairs_sop_en.csv"}
SEED_MAX = 10_000
THRESHOLD_STEP = 0.05


def k(name: str) -> str:
    return state.key(P, name)


def _load_example_csv() -> None:
    name = st.session_state.get(k("example_csv"))
    if name:
        st.session_state[k("csv")] = (ASSETS / "examples" / EXAMPLE_CSVS[name]).read_text(encoding="utf-8")


def _example_label(name: str) -> str:
    return t(f"sentence_pair.example_csv.{EXAMPLE_CSVS[name].removesuffix('.csv')}")


PAIR_FIELDS = (
    urlstate.Field(k("a"), max_len=MAX_CHARS),
    urlstate.Field(k("b"), max_len=MAX_CHARS),
    urlstate.Field(k("probe"), "bool"),
    urlstate.Field(k("seed"), "int", lo=0, hi=SEED_MAX),
)
FIELDS = PAIR_FIELDS + (urlstate.Field(k("threshold"), "float", lo=0.05, hi=0.95),)

st.title(t("sentence_pair.title"))
st.caption(t("sentence_pair.intro"))
restored = urlstate.bind(FIELDS)
from_link = bool(restored & {f.key for f in PAIR_FIELDS})
if k("threshold") in restored:  # the slider moves in steps of 0.05
    st.session_state[k("threshold")] = round(
        round(st.session_state[k("threshold")] / THRESHOLD_STEP) * THRESHOLD_STEP, 2
    )
with st.expander(t("sentence_pair.each_family")):
    for f in FAMILIES.values():
        st.markdown(f"- **{f.label}**: {t_or(f'families.{f.key}.pair_head_note', f.pair_head_note)}")

spec = state.current_spec()
head = pair_head(spec.family) if spec else None
lm = None
if spec is None:
    st.error(explain(st.session_state.get(state.SPEC_ERROR) or t("common.pick_model")))
elif head.kind is None:
    st.info(t("sentence_pair.no_head", note=t_or(f"families.{spec.family}.pair_head_note", head.note)))
else:
    lm = model_or_error("pretraining")
    if lm is not None:
        try:
            check_pair(lm)
        except PairError as e:
            st.error(explain(e))
            lm = None

if lm is not None:
    head_name = t_or(f"families.{spec.family}.pair_head", head.name)
    head_prob = prob_label(head.kind, head.prob_label)
    tab_one, tab_batch = st.tabs([t("sentence_pair.tab_pair"), t("sentence_pair.tab_batch")])
    with tab_one:
        st.session_state.setdefault(k("a"), "She poured a cup of hot tea.")
        st.session_state.setdefault(k("b"), "Then she sat by the window to drink it.")
        st.session_state.setdefault(k("probe"), True)
        st.session_state.setdefault(k("seed"), 0)
        with st.form(k("form")):
            c1, c2 = st.columns(2)
            a = c1.text_area(t("sentence_pair.a"), key=k("a"), height=80)
            b = c2.text_area(t("sentence_pair.b"), key=k("b"), height=80)
            with presenter.settings():
                probe = st.checkbox(t("sentence_pair.probe"), key=k("probe"))
                seed = st.number_input(t("sentence_pair.seed"), min_value=0, max_value=SEED_MAX, key=k("seed"))
            go = st.form_submit_button(t("sentence_pair.score_with", head=head_name), type="primary")
        asked = (lm.spec, a, b, probe, int(seed))
        if go or from_link:  # a shared link shows its scores without a click
            res = run_or_error(
                k("result"), lambda: predict_pair(lm, PairConfig(a, b, seed=int(seed)), probe=probe), made_from=asked
            )
            if res is not None:
                record_pair(
                    entry_id(f"{P}:pair", lm.spec.checkpoint, a, b, probe, int(seed)),
                    {
                        t("sentence_pair.in.model"): lm.spec.checkpoint,
                        t("sentence_pair.in.a"): a,
                        t("sentence_pair.in.b"): b,
                        t("sentence_pair.in.probe"): yes_no(probe),
                        t("sentence_pair.in.seed"): int(seed),
                    },
                    res,
                )
        show_pair(current_result(k("result"), asked), lm, a, b, int(seed), k)

    with tab_batch:
        st.markdown(t("sentence_pair.batch_intro", max_rows=MAX_ROWS))
        urlstate.relabel((k("example_csv"),))  # its labels are in the session's language
        st.selectbox(
            t("sentence_pair.example_file"),
            list(EXAMPLE_CSVS),
            index=None,
            placeholder=t("sentence_pair.example_placeholder"),
            key=k("example_csv"),
            on_change=_load_example_csv,
            format_func=_example_label,
        )
        st.session_state.setdefault(k("threshold"), 0.5)
        with st.form(k("batch_form")):
            pasted = st.text_area(
                t("sentence_pair.csv"), key=k("csv"), height=160, placeholder=t("sentence_pair.csv_placeholder")
            )
            upload = upload_box(
                t("sentence_pair.upload"), k("upload"), kinds=["csv"], expect=t("uploads.expect.pairs_csv")
            )
            with presenter.settings():
                threshold = st.slider(
                    t("sentence_pair.threshold", label=head_prob), 0.05, 0.95, step=THRESHOLD_STEP, key=k("threshold")
                )
            go_batch = st.form_submit_button(t("sentence_pair.score_all"), type="primary")
        text = upload.text if upload is not None else pasted  # a refused file: None, and its reason under the box
        batch_asked = (lm.spec, text, threshold)
        if go_batch and text is not None:

            def _submit():  # missing columns, too many rows, bad labels: start_job says which and how to fix
                rows = parse_pairs_csv(text)
                return submit_job(
                    P,
                    t("sentence_pair.job_name", head=head_name, n=len(rows)),
                    lambda ctx: score_batch(lm, rows, threshold=threshold, progress=ctx.progress),
                    resource=resource_for(lm.spec.device),
                    jobs_key=k("batch_for"),
                    asked=batch_asked,
                    interactive=True,
                )

            start_job(k("batch_for"), _submit)

        job_section(k("batch_for"), batch_asked, lambda job: show_batch(job, k), key=k("batch"))

urlstate.publish()  # values first created in this run (the defaults) join the link too
