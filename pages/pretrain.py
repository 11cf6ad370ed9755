"""Pretraining lab: pretrain a small model with switchable objectives, watch its curves, compare runs.

The family, the objectives, the corpus choice, the size, the steps and the seed are kept in the URL (a link
restores them but never starts a run: only the Pretrain button does); size, steps and seed fold away in
presenter view; each finished run goes into the session report."""

import time
from dataclasses import replace

import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.i18n import explain, t, t_or
from app.kit.jobs_panel import job_panel, session_job, submit_job
from app.kit.render import record_once
from app.kit.uploads import upload_box
from app.views.train.pretrain import MASKINGS, PAGE, K, curves, done, live, report_entry
from core.base.fields import bounds, default_of
from core.data.corpus import CorpusError
from core.registry import FAMILIES
from core.runtime.jobs import DONE
from core.train.finetune import runs_root
from core.train.pretrain.lab import MAX_UPLOAD_MB, LabRequest, job, limits, prepare, switches
from core.train.pretrain.train import PretrainConfig

CORPORA = ("bundled", "upload")

lim = limits()
# Steps and seed: PretrainConfig's ranges (core.base.fields), steps capped by this server's limit as prepare() caps them.
STEPS = replace(bounds(PretrainConfig, "steps"), hi=lim.max_steps)
SEED = bounds(PretrainConfig, "seed")
# The family first: which objectives can be switched (and so which keys the next fields bind) depends on it.
restored = urlstate.bind((urlstate.Field(K("family"), choices=tuple(FAMILIES)),))
st.session_state.setdefault(K("family"), next(iter(FAMILIES)))
fam = st.session_state[K("family")]
sw = switches(fam)
# The pair / distillation checkboxes are keyed per family (switching family starts from that family's
# default); in the URL they are one parameter each, read for the family in the link.
restored |= urlstate.bind(
    (
        urlstate.Field(K("corpus"), choices=CORPORA),
        urlstate.Field(K("masking"), choices=MASKINGS),
        urlstate.Field(K("wwm"), "bool"),
        urlstate.Field(K(f"pair.{fam}"), "bool", choices=None if sw["pair"] else (False,), param=K("pair")),
        urlstate.Field(K(f"distill.{fam}"), "bool", choices=None if sw["distill"] else (False,), param=K("distill")),
        urlstate.Field(K("size"), choices=tuple(lim.sizes)),
        urlstate.Field.of(K("steps"), STEPS),
        urlstate.Field.of(K("seed"), SEED),
    )
)
lab = lambda f: default_of(LabRequest, f)  # noqa: E731 (the lab's defaults)
for name, default in (
    ("corpus", "bundled"),
    ("masking", lab("masking")),
    ("wwm", lab("whole_word")),
    (f"pair.{fam}", bool(sw["pair"])),
    (f"distill.{fam}", False),
    ("size", lim.sizes[0]),
    ("steps", min(lab("steps"), lim.max_steps)),
    ("seed", lab("seed")),
):
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
corpus = c2.radio(
    t("pretrain.corpus"), CORPORA, key=K("corpus"), horizontal=True, format_func=lambda c: t(f"pretrain.corpus_opt.{c}")
)
with st.form("pretrain.form"):
    c1, c2 = st.columns(2)
    masking = c1.radio(
        t("pretrain.masking"),
        MASKINGS,
        key=K("masking"),
        help=t("pretrain.masking_help"),
        format_func=lambda m: t(f"pretrain.masking_opt.{m}"),
    )
    whole_word = c1.checkbox(t("pretrain.wwm"), key=K("wwm"))
    pair_label = t_or(f"pretrain.pair_label.{str(sw['pair']).lower()}", sw["pair_label"])
    pair = c2.checkbox(
        t("pretrain.pair", head=sw["pair"], label=pair_label) if sw["pair"] else t("pretrain.pair_none"),
        disabled=not sw["pair"],
        key=K(f"pair.{fam}"),
        help=t_or(f"pretrain.pair_note.{fam}", sw["pair_note"]),
    )
    distill = c2.checkbox(t("pretrain.distill"), disabled=not sw["distill"], key=K(f"distill.{fam}"))
    with presenter.settings():
        c1, c2, c3 = st.columns(3)
        size = c1.selectbox(t("pretrain.size"), lim.sizes, key=K("size"))
        steps = c2.number_input(t("pretrain.steps"), **STEPS.widget(), key=K("steps"))
        seed = c3.number_input(t("pretrain.seed"), **SEED.widget(), key=K("seed"))
    upload = None
    if corpus == "upload":
        upload = upload_box(
            t("pretrain.upload"),
            K("upload"),
            kinds=None,
            expect=t("uploads.expect.corpus"),
            limit=MAX_UPLOAD_MB,
        )  # UTF-8 only, as every box: a Latin-1 file gets the one "not UTF-8 (line, byte)" message
    go_btn = st.form_submit_button(t("pretrain.go"), type="primary")

if go_btn and (upload is None or upload.ok):  # a refused file: its reason is under the box
    try:
        if corpus == "upload" and upload is None:
            raise CorpusError(t("pretrain.need_upload"))
        req = LabRequest(
            family=fam,
            steps=int(steps),
            size=size,
            masking=masking,
            whole_word=whole_word,
            pair=pair,
            distill=distill,
            upload=upload.data if upload else None,
            upload_name=upload.name if upload else "upload.txt",
            seed=int(seed),
        )
        n = len(state.job_ids(PAGE)) + 1
        # under the session's runs folder, so its size and age bounds (core.runtime.run_folders.evict_run_folders) apply
        cfg = prepare(req, workdir=runs_root(state.session_id()) / f"pretrain{n}-{fam}-{time.strftime('%H%M%S')}")
        name = t("pretrain.job_name", n=n, family=FAMILIES[fam].label, size=size, steps=steps)
        # the resource follows the device the run really uses ("auto" is CUDA on a GPU server)
        j = submit_job(PAGE, name, job(cfg), device=cfg.device)
        st.session_state.setdefault(K("corpus_names"), {})[j.id] = upload.name if upload else None
    except ValueError as e:  # PretrainError, CorpusError, and QuotaError when this session has too many jobs
        st.error(explain(e))

ids = state.job_ids(PAGE)
if not ids:
    st.info(t("pretrain.no_runs"))
for jid in reversed(ids[-3:]):
    with st.container(border=True):
        job_panel(jid, done, live, key=f"pretrain.{jid}")

finished = [j for j in (session_job(i) for i in ids) if j is not None and j.status == DONE]
for j in finished:  # once per job: a cleared report stays cleared
    record_once(K("recorded"), f"pretrain:{j.id}", lambda j=j: report_entry(j))
if len(finished) > 1:
    st.subheader(t("pretrain.side_by_side"))
    st.caption(t("pretrain.side_by_side_caption"))
    c = st.columns(2)
    for k, metric in enumerate(("heldout_top5", "nsp_acc", "sop_acc", "mlm_acc")):
        if any(metric in m for j in finished for m in j.metrics):
            c[k % 2].plotly_chart(
                presenter.scale(curves(finished, metric)), width="stretch", key=f"pretrain.cmp.{metric}"
            )
urlstate.publish()  # the defaults set above, on the first visit, too
