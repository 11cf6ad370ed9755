"""Walkthrough: the arc of the seed articles in seven steps, each with an explanation, a live widget on the same core
as the page it points to, a "try this" prompt and a check question. Progress is kept per browser session; the
step and each step's inputs are in the URL. The steps are app/views/start/walkthrough/step_*.py: they draw, and
this page loads the models they ask for and starts their jobs (app.kit.walkthrough_work)."""

import streamlit as st

from app.kit import urlstate
from app.kit.i18n import t
from app.kit.walkthrough_work import drive
from app.views.start.walkthrough import frame as wt

wt.init()
# Steps compute from their inputs on every run, so a link shows the same view; measurements and training wait
# for their button (a link never starts them).
urlstate.bind(wt.fields())
wt.keep_widget_state()

st.title(t("walkthrough.title"))
st.caption(t("walkthrough.intro"))
step = wt.navigation()

wt.header(step)
wt.explain(step)
wt.links(step)
st.divider()
drive(wt.render(step))  # the step draws; what it asks for (a model, a job) is loaded or started here
st.divider()
wt.try_this(step)
wt.question(step)
st.divider()
wt.mark_done(step)
