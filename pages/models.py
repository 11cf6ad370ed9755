"""Models: parameter anatomy from the official configs (meta device, no weights) and ALBERT's factorization.

The calculator's V, H and E live in the URL; the breakdown and each computed factorization go to the report."""

import pandas as pd
import streamlit as st

from app.kit import presenter, report, urlstate
from app.kit.cache import param_breakdown
from app.kit.i18n import explain, t, t_or
from app.kit.render import entry_id, params_bar, record_once
from app.views.compare.practice import glue_section
from core.models.params import albert_factorization
from core.registry import family, official_checkpoints

P = "models"
NO_FIGURE = "–"  # i18n: ok (a dash, the same in every language)
SIZE_MAX = 10_000_000
DEFAULTS = {"models.V": 30000, "models.H": 768, "models.E": 128}
FIELDS = tuple(urlstate.Field(key, "int", lo=1, hi=SIZE_MAX) for key in DEFAULTS)


def _all_breakdowns():
    """Every official checkpoint's breakdown, one cached count each, with a progress bar while they are counted
    (the first visit builds each model on the meta device: half a minute in all on a small CPU)."""
    ids = [c.id for c in official_checkpoints()]
    bar = st.progress(0.0, text=t("models.counting", n=len(ids)))
    rows = []
    for i, cid in enumerate(ids):  # the one being counted now
        bar.progress(i / len(ids), text=t("models.counting_one", n=len(ids), done=i + 1, id=cid))
        rows.append(param_breakdown(cid))
    bar.empty()
    return rows


def _claims_table(rows) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                t("models.col.checkpoint"): r.checkpoint,
                t("models.col.family"): family(r.family).label,
                t("models.col.embeddings"): round(r.embeddings / 1e6, 2),
                t("models.col.encoder"): round(r.encoder / 1e6, 2),
                t("models.col.pooler"): round(r.pooler / 1e6, 2),
                t("models.col.backbone"): round(r.backbone / 1e6, 2),
                # A checkpoint the articles give no figure for reads "–", not "None" (the columns are text for that reason).
                t("models.col.heads"): round(r.heads / 1e6, 2),
                t("models.col.claim_m"): NO_FIGURE if r.claim_m is None else f"{r.claim_m:g}",
                t("models.col.diff"): NO_FIGURE if r.diff_m is None else f"{r.diff_m:+.2f}",
                t("models.col.claim"): t_or(f"families.{r.family}.claims.{r.checkpoint}", r.claim_note or NO_FIGURE),
            }
            for r in rows
        ]
    )


st.title(t("models.title"))
st.caption(t("models.intro"))
restored = urlstate.bind(FIELDS)
rows = _all_breakdowns()
st.plotly_chart(presenter.scale(params_bar(rows)), width="stretch", key="models.bar")

st.subheader(t("models.against_seeds"))
claims = _claims_table(rows)
st.dataframe(
    claims,
    hide_index=True,
    width="stretch",
    column_config={  # figures read as figures, the note in full
        t("models.col.claim_m"): st.column_config.TextColumn(alignment="right"),  # text: "–" where there is no figure
        t("models.col.diff"): st.column_config.TextColumn(alignment="right"),
        t("models.col.claim"): st.column_config.TextColumn(width="large"),
    },
)
record_once(
    "models.recorded",
    "models:breakdown",
    lambda: dict(
        page=t("nav.models"),
        title=t("models.report_breakdown"),
        inputs={t("models.in.source"): t("models.in.configs")},
        rows=claims.to_dict("records"),
        figures=[params_bar(rows)],
    ),
)

st.subheader(t("models.architecture"))
st.dataframe(
    pd.DataFrame(
        [
            {
                t("models.col.checkpoint"): r.checkpoint,
                t("models.col.layers"): r.layers,
                t("models.col.hidden"): r.hidden,
                t("models.col.heads_n"): r.heads_n,
                t("models.col.ffn"): r.ffn,
                t("models.col.vocab"): r.vocab,
                t("models.col.embedding_size"): r.embedding_size,
                t("models.col.shared"): t("models.shared_yes") if r.shared_layers else t("models.shared_no"),
                t("models.col.tokenizer"): family(r.family).tokenizer_kind,
                t("models.col.positions"): t_or(
                    f"families.{r.family}.position_embeddings", family(r.family).position_embeddings
                ),
                t("models.col.pretraining"): t_or(
                    f"families.{r.family}.objectives", " + ".join(family(r.family).objectives)
                ),
                # what the family's registry entry asks the config for (ModernBERT's context and local/global attention, ...)
                t("models.col.facts"): "; ".join(
                    f"{t_or(f'families.{r.family}.facts.{key}', label)}: {value}" for label, key, value in r.facts
                )
                or NO_FIGURE,
            }
            for r in rows
        ]
    ),
    hide_index=True,
    width="stretch",
    column_config={  # the longer texts are not cut
        t("models.col.shared"): st.column_config.TextColumn(width="medium"),
        t("models.col.tokenizer"): st.column_config.TextColumn(width="medium"),
        t("models.col.positions"): st.column_config.TextColumn(width="medium"),
        t("models.col.pretraining"): st.column_config.TextColumn(width="medium"),
        t("models.col.facts"): st.column_config.TextColumn(width="large"),
    },
)

st.subheader(t("models.factorization"))
st.markdown(t("models.factorization_intro"))
for key, value in DEFAULTS.items():
    st.session_state.setdefault(key, value)
with st.form("models.factorization"):
    c1, c2, c3 = st.columns(3)
    v = c1.number_input(t("models.V"), min_value=1, max_value=SIZE_MAX, step=1000, key="models.V")
    h = c2.number_input(t("models.H"), min_value=1, max_value=SIZE_MAX, step=64, key="models.H")
    e = c3.number_input(t("models.E"), min_value=1, max_value=SIZE_MAX, step=16, key="models.E")
    computed = st.form_submit_button(t("models.compute"))
try:
    f = albert_factorization(int(v), int(h), int(e))
    a, b, c = st.columns(3)
    a.metric("V×H", f"{f.full / 1e6:,.2f}M")
    b.metric("V×E + E×H", f"{f.factorized / 1e6:,.2f}M", delta=f"-{f.saved / 1e6:,.2f}M", delta_color="inverse")
    c.metric(t("models.saving"), t("models.fewer", ratio=f"{f.ratio:,.1f}"))
    st.caption(t("models.seed_example"))
    if computed or restored:
        report.record(
            entry_id("models:factorization", f.vocab, f.hidden, f.embedding),
            t("nav.models"),
            t("models.report_factorization"),
            {t("models.V"): f.vocab, t("models.H"): f.hidden, t("models.E"): f.embedding},
            rows=[
                {
                    "V×H": f"{f.full / 1e6:,.2f}M",
                    "V×E + E×H": f"{f.factorized / 1e6:,.2f}M",
                    t("models.saving"): t("models.fewer", ratio=f"{f.ratio:,.1f}"),
                }
            ],
        )
except ValueError as err:
    st.error(explain(err))

glue_section()  # the article's GLUE table as claims, beside this installation's own fine-tunes

urlstate.publish()  # values first created in this run (the defaults) join the link too
