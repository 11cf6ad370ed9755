"""Features (SAE): train a TopK sparse autoencoder on one layer of the sidebar's model in the background (saved per
model, layer and settings: a second visit loads it at once), its quality against the issue's targets, and the feature
browser. Logic in core/inspect/sae.py, sae_store.py and sae_features.py; drawing in app/views/inspect/sae.py."""

import streamlit as st

from app.kit import urlstate
from app.kit.flow import end_page
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_panel, session_job, submit_job
from app.kit.loaders import mlm_model_or_error
from app.kit.render import job_for
from app.kit.zh_examples import chinese_examples, fill_default
from app.views.inspect import sae as sv
from core.inspect.patching_sites import sites
from core.inspect.sae import SAEError
from core.inspect.sae_store import load_sae, sae_job
from core.registry import language_of
from core.runtime.jobs import CANCELLED, DONE, ERROR

K = sv.K
restored = urlstate.bind(sv.FIELDS)

st.title(t("features.title"))
st.caption(t("features.intro"))
lm = mlm_model_or_error()  # None: it said why (no model, or no trained MLM head)
if lm is None:
    urlstate.publish()
    end_page()

mask = lm.tokenizer.mask_token or "[MASK]"
fill_default(K("sentence"), "The river bank was flooded after the storm.", "plain", lm.spec)
fill_default(K("steer_text"), f"The river bank was flooded after the {mask}.", "attr_mask", lm.spec, mask=mask)
# the corpus in the model's language: Chinese for a Chinese model, or for a multilingual one in 中文
lang = "zh" if language_of(lm.spec.checkpoint) == "zh" or chinese_examples(lm.spec) else "en"
ask = sv.settings(sites(lm.model).n_layers, lang)
if ask.cfg is None:
    st.error(ask.error)
    urlstate.publish()
    end_page()
cfg = ask.cfg
try:
    found = load_sae(lm, cfg)
except SAEError as e:  # a damaged one, now set aside: say so, and offer to train it again below
    st.error(explain(e))
    found = None
if found is None:
    asked = (lm.spec, cfg)
    jid = job_for(K("jobs"), asked)
    job = session_job(jid) if jid is not None else None
    if job is not None and job.status == DONE:  # finished, yet nothing to load: say so and offer it again
        st.warning(t("features.job_lost"))
        job = jid = None
    if job is None or job.status in (ERROR, CANCELLED):
        st.info(t("features.not_trained"))
        if sv.train_button():
            try:
                name = t("features.job_name", checkpoint=lm.spec.checkpoint, layer=cfg.layer)
                fn = sae_job(lm.spec, cfg)
                jid = submit_job("features", name, fn, device=lm.spec.device, jobs_key=K("jobs"), asked=asked).id
            except ValueError as e:  # QuotaError: too many jobs for this session
                st.error(explain(e))
    if jid is not None:
        st.caption(t("features.still_training"))
        job_panel(jid, lambda j: st.rerun(scope="app"), key=K("job"))  # trained: the page loads it
    urlstate.publish()
    end_page()

sae, report, browse = found
sv.quality(report)
sv.image_format()
tab_browse, tab_sentence, tab_steer = st.tabs(
    [t("features.tab.browse"), t("features.tab.sentence"), t("features.tab.steer")]
)
with tab_browse:
    sv.browse_tab(lm, sae, browse)
with tab_sentence:
    sv.sentence_tab(lm, sae, cfg.layer)
with tab_steer:
    sv.steer_tab(lm, sae, cfg.layer, browse)
urlstate.publish()
