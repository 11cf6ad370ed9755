"""The Walkthrough page: the seed articles' arc in seven steps, one module per step.

- ``common``: the ``Step`` record each step module exports, session keys, and helpers the steps share;
- ``step_inputs`` (1, embeddings), ``step_mlm`` (2, masking and fill-mask), ``step_pair`` (3, NSP / SOP),
  ``step_sharing`` (4, factorized embeddings and shared layers), ``step_distil`` (5, a distilled student against
  its teacher), ``step_finetune`` (6, two short fine-tunes), ``step_inside`` (7, attention and attributions):
  each exports ``STEP`` (its renderer, check-question answer, links, URL fields and kept widget keys);
- ``frame``: the step list, navigation and progress, the check question, links, and the URL fields of all steps.

Imports run one way, common <- step_* <- frame <- pages/walkthrough.py, so any module imports on its own. What
the steps compute is in core/walkthrough/checks.py; every text is in assets/i18n/walkthrough.toml. A step's renderer
is a flow: it yields the models it needs and the jobs it starts (app.kit.walkthrough_work), which the page loads and
starts.
"""
