"""What the registry knows about the loaded checkpoint that changes how to read a masked LM's answers (#30 part 6):
MacBERT's "MLM as correction" pretraining (no [MASK] in its inputs: its answers behind one are not meaningful), and
a checkpoint listed under one family whose code is another's (hfl's Chinese RoBERTa-wwm-ext and RBT3 are BERT
code: their configs say model_type "bert", so they load with the BERT classes). Texts in assets/i18n/fill_mask.toml (zh_hub.*)."""

from __future__ import annotations

import streamlit as st

from app.kit.i18n import t, t_or
from core.models.spec import LoadedModel
from core.registry import FAMILIES, checkpoint_info, family, family_of_model_type


def checkpoint_notes(lm: LoadedModel) -> None:
    """A warning for a checkpoint pretrained without [MASK]; a caption naming the code family and the class a
    checkpoint loaded with when its config's model_type is another family's than the one it is listed under."""
    info = checkpoint_info(lm.spec.checkpoint)
    if info is None:
        return
    listed = family(info.family)
    if info.mlm_as_correction:
        st.warning(
            t("fill_mask.zh_hub.mlm_as_correction", id=info.id, mask=lm.tokenizer.mask_token or "[MASK]"),
            icon=":material/warning:",
        )
    code_key = family_of_model_type(info.model_type or "")
    if code_key and code_key != listed.key:
        st.caption(
            t(
                "fill_mask.zh_hub.other_code",
                id=info.id,
                family=t_or(f"families.{listed.key}.label", listed.label),
                code=t_or(f"families.{code_key}.label", FAMILIES[code_key].label),
                model_type=info.model_type,
                cls=type(lm.model).__name__,
                mask=lm.tokenizer.mask_token or "[MASK]",
            )
        )
