"""Pretraining lab: pretrain a small model with switchable objectives, watch its curves, compare runs.

The family, the objectives, the corpus choice, the size, the steps and the seed are kept in the URL (a link
restores them but never starts a run: only the Pretrain button does); size, steps and seed fold away in
presenter view; each finished run goes into the session report."""
import plotly.graph_objects as go
import streamlit as st

from app import presenter, report, state, urlstate
from app.i18n import t, t_or
from app.jobs_ui import job_panel, runner
from core.jobs import DONE
from core.models import FAMILIES
from core.pretrain.corpus import CorpusError
from core.pretrain.lab import LabRequest, job, limits, prepare, switches
from core.pretrain.train import PretrainError

PAGE = "pretrain"
MASKINGS = ("dynamic", "static")
CORPORA = ("bundled", "upload")


def K(name: str) -> str:
    return state.key(PAGE, name)


lim = limits()
# The family first: which objectives can be switched (and so which keys the next fields bind) depends on it.
restored = urlstate.bind((urlstate.Field(K("family"), choices=tuple(FAMILIES)),))
st.session_state.setdefault(K("family"), "bert")
fam = st.session_state[K("family")]
sw = switches(fam)
# The pair / distillation checkboxes are keyed per family (switching family starts from that family's
# default); in the URL they are one parameter each, read for the family in the link.
restored |= urlstate.bind((
    urlstate.Field(K("corpus"), choices=CORPORA),
    urlstate.Field(K("masking"), choices=MASKINGS),
    urlstate.Field(K("wwm"), "bool"),
    urlstate.Field(K(f"pair.{fam}"), "bool", choices=None if sw["pair"] else (False,), param=K("pair")),
    urlstate.Field(K(f"distill.{fam}"), "bool", choices=None if sw["distill"] else (False,), param=K("distill")),
    urlstate.Field(K("size"), choices=tuple(lim.sizes)),
    urlstate.Field(K("steps"), "int", lo=1, hi=lim.max_steps),
    urlstate.Field(K("seed"), "int", lo=0, hi=2**31 - 1),
))
for name, default in (("corpus", "bundled"), ("masking", "dynamic"), ("wwm", False), (f"pair.{fam}", bool(sw["pair"])),
                      (f"distill.{fam}", False), ("size", lim.sizes[0]), ("steps", min(100, lim.max_steps)),
                      ("seed", 0)):
    st.session_state.setdefault(K(name), default)
if st.session_state[K("size")] not in lim.sizes:  # the server's limits changed since this session chose it
    st.session_state[K("size")] = lim.sizes[0]
steps_now = max(1, min(int(st.session_state[K("steps")]), lim.max_steps))
if steps_now != st.session_state[K("steps")]:
    st.session_state[K("steps")] = steps_now

st.title(t("pretrain.title"))
st.caption(t("pretrain.intro", steps=lim.max_steps, size=lim.max_size))
if restored:
    st.info(t("pretrain.link_restored"))

c1, c2 = st.columns(2)
fam = c1.selectbox(t("pretrain.family"), list(FAMILIES), format_func=lambda k: FAMILIES[k].label, key=K("family"))
corpus = c2.radio(t("pretrain.corpus"), CORPORA, key=K("corpus"), horizontal=True,
                  format_func=lambda c: t(f"pretrain.corpus_opt.{c}"))
with st.form("pretrain.form"):
    c1, c2 = st.columns(2)
    masking = c1.radio(t("pretrain.masking"), MASKINGS, key=K("masking"), help=t("pretrain.masking_help"),
                       format_func=lambda m: t(f"pretrain.masking_opt.{m}"))
    whole_word = c1.checkbox(t("pretrain.wwm"), key=K("wwm"))
    pair_label = t_or(f"pretrain.pair_label.{str(sw['pair']).lower()}", sw["pair_label"])
    pair = c2.checkbox(t("pretrain.pair", head=sw["pair"], label=pair_label) if sw["pair"]
                       else t("pretrain.pair_none"), disabled=not sw["pair"], key=K(f"pair.{fam}"),
                       help=t_or(f"pretrain.pair_note.{fam}", sw["pair_note"]))
    distill = c2.checkbox(t("pretrain.distill"), disabled=not sw["distill"], key=K(f"distill.{fam}"))
    with presenter.settings():
        c1, c2, c3 = st.columns(3)
        size = c1.selectbox(t("pretrain.size"), lim.sizes, key=K("size"))
        steps = c2.number_input(t("pretrain.steps"), 1, lim.max_steps, key=K("steps"))
        seed = c3.number_input(t("pretrain.seed"), 0, 2**31 - 1, key=K("seed"))
    upload = None
    if corpus == "upload":
        upload = st.file_uploader(t("pretrain.upload"), type=None, key=K("upload"))
    go_btn = st.form_submit_button(t("pretrain.go"), type="primary")

if go_btn:
    try:
        if corpus == "upload" and upload is None:
            raise CorpusError(t("pretrain.need_upload"))
        req = LabRequest(family=fam, steps=int(steps), size=size, masking=masking, whole_word=whole_word,
                         pair=pair, distill=distill, upload=upload.getvalue() if upload else None,
                         upload_name=upload.name if upload else "upload.txt", seed=int(seed))
        cfg = prepare(req)
        n = len(state.job_ids(PAGE)) + 1
        name = t("pretrain.job_name", n=n, family=FAMILIES[fam].label, size=size, steps=steps)
        j = runner().submit(name, job(cfg), resource="gpu" if cfg.device == "cuda" else "cpu",
                            owner=state.session_id())
        state.job_ids(PAGE).append(j.id)
        st.session_state.setdefault(K("corpus_names"), {})[j.id] = upload.name if upload else None
    except (PretrainError, CorpusError) as e:
        st.error(str(e))

CURVES = ("mlm_loss", "mlm_acc", "heldout_top5", "nsp_acc", "sop_acc")


def curves(jobs, metric: str) -> go.Figure:
    """One line per run for ``metric`` against the step."""
    fig = go.Figure()
    for j in jobs:
        pts = [(m["step"], m[metric]) for m in j.metrics if metric in m]
        if pts:
            fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=j.name)
    fig.update_layout(title=t(f"pretrain.curve.{metric}") if metric in CURVES else metric,
                      xaxis_title=t("pretrain.step"), height=300, margin=dict(t=40, b=10),
                      legend=dict(orientation="h"))
    return fig


def _pair_metric(j) -> str:
    return next((k for k in ("nsp_acc", "sop_acc") if any(k in m for m in j.metrics)), "mlm_acc")


def live(j) -> None:
    a, b = st.columns(2)
    a.plotly_chart(curves([j], "mlm_loss"), width="stretch", key=f"pretrain.loss.{j.id}.{len(j.metrics)}")
    b.plotly_chart(curves([j], _pair_metric(j)), width="stretch", key=f"pretrain.pair.{j.id}.{len(j.metrics)}")
    samples = next((m["samples"] for m in reversed(j.metrics) if m.get("samples")), None)
    if samples:
        st.caption(t("pretrain.samples_caption"))
        st.dataframe([{t("pretrain.col.text"): s["text"], t("pretrain.col.gold"): " ".join(s["gold"]),
                       t("pretrain.col.guess"): " ".join(s["pred"])} for s in samples],
                     hide_index=True, width="stretch")


def _summary(j) -> str:
    f = j.result.final
    msg = t("pretrain.summary", name=j.name, top1=f"{f['mlm_top1']:.1%}", top5=f"{f['mlm_top5']:.1%}",
            unigram=f"{f['unigram_top5']:.1%}")
    if "pair_acc" in f:
        msg += t("pretrain.summary_pair", acc=f"{f['pair_acc']:.1%}")
    return msg


def done(j) -> None:
    r = j.result
    state.register_session_model(j.name, r.family, r.out, "pretrained")  # the job's name: fixed at submit
    st.success(_summary(j) + t("pretrain.summary_end", s=f"{r.wall_s:,.0f}", label=j.name))
    live(j)


def record(j) -> None:
    """One report entry per finished job (its id keys the entry): the config, final held-out metrics, curves."""
    r, cfg, f = j.result, j.result.config, j.result.final
    yes_no = lambda v: t("pretrain.yes") if v else t("pretrain.no")  # noqa: E731
    upload_name = st.session_state.get(K("corpus_names"), {}).get(j.id)
    inputs = {
        t("pretrain.family"): FAMILIES[r.family].label,
        t("pretrain.corpus"): upload_name or t("pretrain.corpus_opt.bundled"),
        t("pretrain.masking"): t_masking(cfg.get("masking", "dynamic")),
        t("pretrain.wwm"): yes_no(cfg.get("whole_word")),
        t("pretrain.rep.pair"): (cfg.get("pair_objective") or "").upper() or t("pretrain.no"),
        t("pretrain.distill"): yes_no(cfg.get("teacher")),
        t("pretrain.size"): cfg.get("size", ""),
        t("pretrain.steps"): f"{r.steps} / {cfg.get('steps', r.steps)}",
        t("pretrain.seed"): cfg.get("seed", 0),
        t("pretrain.rep.batch"): cfg.get("batch_size", ""),
        t("pretrain.rep.max_len"): cfg.get("max_len", ""),
        t("pretrain.rep.lr"): cfg.get("lr", ""),
        t("pretrain.rep.params"): f"{r.params:,}",
    }
    metric, value = t("pretrain.rep.metric"), t("pretrain.rep.value")
    pct = lambda k: f"{f[k]:.1%}"  # noqa: E731
    rows = [(t("pretrain.rep.top1"), pct("mlm_top1")), (t("pretrain.rep.top5"), pct("mlm_top5")),
            (t("pretrain.rep.unigram_top1"), pct("unigram_top1")),
            (t("pretrain.rep.unigram_top5"), pct("unigram_top5"))]
    if "mlm_loss" in f:
        rows.append((t("pretrain.rep.mlm_loss"), f"{f['mlm_loss']:.3f}"))
    if "pair_acc" in f:
        rows += [(t("pretrain.rep.pair_acc"), pct("pair_acc")), (t("pretrain.rep.pair_majority"), pct("pair_majority"))]
    rows.append((t("pretrain.rep.wall"), t("pretrain.seconds", s=f"{r.wall_s:,.0f}")))
    figs = [curves([j], "mlm_loss"), curves([j], "heldout_top5")]
    if _pair_metric(j) != "mlm_acc":
        figs.append(curves([j], _pair_metric(j)))
    report.record(f"pretrain:{j.id}", t("nav.pretrain"), t("pretrain.rep.title", name=j.name), inputs,
                  rows=[{metric: a, value: b} for a, b in rows], figures=figs)


def t_masking(m: str) -> str:
    return t(f"pretrain.masking_opt.{m}") if m in MASKINGS else m


ids = state.job_ids(PAGE)
if not ids:
    st.info(t("pretrain.no_runs"))
for jid in reversed(ids[-3:]):
    with st.container(border=True):
        job_panel(jid, done, live, key=f"pretrain.{jid}")

finished = [j for j in (runner().get(i) for i in ids) if j is not None and j.status == DONE]
recorded: set = st.session_state.setdefault(K("recorded"), set())
for j in finished:
    if j.id not in recorded:  # once per job: a cleared report stays cleared
        record(j)
        recorded.add(j.id)
if len(finished) > 1:
    st.subheader(t("pretrain.side_by_side"))
    st.caption(t("pretrain.side_by_side_caption"))
    c = st.columns(2)
    for k, metric in enumerate(("heldout_top5", "nsp_acc", "sop_acc", "mlm_acc")):
        if any(metric in m for j in finished for m in j.metrics):
            c[k % 2].plotly_chart(curves(finished, metric), width="stretch", key=f"pretrain.cmp.{metric}")
urlstate.publish()  # the defaults set above, on the first visit, too
