"""Runs of English in text shown to a 中文 session (#46 §1): three or more English words in a row, outside code, model
ids and the names the field writes in English (methods, papers, libraries). Used by the AppTest pass over every
page (tests/app/test_zh_no_english.py) and the e2e pass (tests/e2e/test_foundation_e2e.py)."""

from __future__ import annotations

import re

from core.registry import FAMILIES, official_checkpoints

# A run: 3+ words of Latin letters (an apostrophe or hyphen inside a word), separated by spaces (a comma or colon
# after a word too). "the · a · of" (a list of predictions) is not a run; "loading a fresh copy" is.
WORD = r"[A-Za-z]+(?:['’-][A-Za-z]+)*"
RUN = re.compile(rf"(?<![\w/.\-]){WORD}(?:[,:]? +{WORD}){{2,}}(?![\w/\-])")
CODE = re.compile(r"`[^`]*`")  # markdown code spans: code, commands and file names stay as they are
MODEL_ID = re.compile(r"\b[\w.\-]+/[\w.\-]+\b")  # encoderlab/bert-mini, hfl/chinese-roberta-wwm-ext

# Names that stay English in Chinese text, each with its reason.
ALLOWED = {
    # methods, as captum, the papers and the articles name them
    "Integrated Gradients": "captum's method name",
    "Layer Integrated Gradients": "captum's method name",
    "Input X Gradient": "captum's method name",
    "Guided Backprop": "captum's method name",
    "Feature Ablation": "captum's method name",
    "Masked Language Model": "BERT's objective, named so in the articles",
    "Next Sentence Prediction": "BERT's objective, named so in the articles",
    "Sentence Order Prediction": "ALBERT's objective, named so in the articles",
    "Whole Word Masking": "the articles' name",
    "What does BERT look at": "a paper's title (Clark et al. 2019)",
    "Hugging Face Hub": "a product's name",
    "Hugging Face": "a company's name",
    "Noto Sans CJK": "a font's name",
    "Source Sans Pro": "a font's name",
}


def _names() -> list[str]:
    """ALLOWED, the registry's family names (BERT, RoBERTa, XLM-RoBERTa …) and its checkpoint ids (bert-base-uncased
    …): names, written in English in every language."""
    ids = {c.id for c in official_checkpoints()}
    return sorted({*ALLOWED, *(f.label for f in FAMILIES.values()), *ids}, key=len, reverse=True)


def english_runs(text: str) -> list[str]:
    """The runs of three or more English words in ``text``, outside code spans, model ids and allowed names."""
    text = MODEL_ID.sub(" ", CODE.sub(" ", text or ""))
    for name in _names():
        text = text.replace(name, " ")
    return [m.group(0) for m in RUN.finditer(text)]
