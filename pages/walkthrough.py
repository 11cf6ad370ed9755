"""Walkthrough: the arc of the seed articles in seven steps, each with an explanation, a live widget on the same core
as the page it points to, a "try this" prompt and a check question. Progress is kept per browser session; the
step and each step's inputs are in the URL."""
import streamlit as st

from app import urlstate
from app import walkthrough as wt
from app import walkthrough_steps as steps
from app.i18n import t

RENDER = {1: steps.step1, 2: steps.step2, 3: steps.step3, 4: steps.step4, 5: steps.step5, 6: steps.step6,
          7: steps.step7}

wt.init()
# Steps compute from their inputs on every run, so a link shows the same view; measurements and training wait
# for their button (a link never starts them).
urlstate.bind(wt.fields())
wt.keep_widget_state()

st.title(t("walkthrough.title"))
st.caption(t("walkthrough.intro"))
step = wt.navigation()

st.header(f"{step}. {t(f'walkthrough.s{step}.title')}" + (" ✓" if step in st.session_state[wt.DONE] else ""))
wt.explain(step)
wt.links(step)
st.divider()
RENDER[step]()
st.divider()
wt.try_this(step)
wt.question(step)
st.divider()
wt.mark_done(step)
