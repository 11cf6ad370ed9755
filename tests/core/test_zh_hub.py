"""#30 part 6: the Chinese checkpoints from the Hub, each served as a tiny stand-in (tests/zh_hub_standins.py) by a
local server speaking the Hub's protocol, downloaded on huggingface_hub's real path and loaded the way every page
loads a model (core.models.loading)."""

from __future__ import annotations

import pytest

from core.models.loading import ModelSpec, load, resolve
from core.predict.fill_mask import FillMaskConfig, fill_mask
from core.registry import checkpoint_info, family, family_of_model, model_class, official_checkpoints, piece_kind
from tests.hub_server import HubServer, go_online
from tests.zh_hub_standins import IDS, make_standins

MACBERT = "hfl/chinese-macbert-base"
TEXT = "中国的首都是北京。我们明天去公园散步，好吗？"


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    return make_standins(tmp_path_factory.mktemp("zh-hub"))


@pytest.fixture()
def hub(standins, monkeypatch, tmp_path):
    go_online(monkeypatch, tmp_path / "hf-cache")
    with HubServer(standins) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def test_the_registry_lists_the_four_and_flags_macbert_alone():
    zh = {c.id: c for c in official_checkpoints() if c.language == "zh"}
    assert set(IDS) <= set(zh), sorted(zh)
    assert [cid for cid in IDS if zh[cid].mlm_as_correction] == [MACBERT]
    for cid in IDS:  # every one is BERT code: its masked LM is BertForMaskedLM, whatever family lists it
        info = zh[cid]
        assert (
            model_class(info.family, "mlm", info.model_type or family(info.family).model_type).__name__
            == "BertForMaskedLM"
        ), cid
    # hfl's RoBERTa-wwm-ext and RBT3 are listed as RoBERTa (their training), with the BERT code their configs name
    assert {cid: (zh[cid].family, zh[cid].model_type) for cid in ("hfl/chinese-roberta-wwm-ext", "hfl/rbt3")} == {
        "hfl/chinese-roberta-wwm-ext": ("roberta", "bert"),
        "hfl/rbt3": ("roberta", "bert"),
    }


@pytest.mark.parametrize("cid", IDS)
def test_downloaded_then_loaded_with_the_bert_classes_reading_chinese(hub, standins, cid):
    info = checkpoint_info(cid)
    assert resolve(cid).source == "Hub download"
    lm = load(ModelSpec(info.family, cid), "mlm")
    assert lm.source == "Hub download"
    assert any(
        m == "GET" and p.startswith(f"/{cid}/resolve/") and p.endswith("/model.safetensors") for m, p in hub.requests
    ), hub.requests
    assert type(lm.model).__name__ == "BertForMaskedLM"  # hfl's RoBERTa too, as its card says
    assert type(lm.tokenizer).__name__.startswith("BertTokenizer")
    assert lm.family.key == info.family  # the family shown is the one it is listed under...
    assert family_of_model(lm.model).key == "bert"  # ...and the code that runs it is BERT's
    assert lm.model.config.num_hidden_layers == (3 if cid == "hfl/rbt3" else 2)
    assert piece_kind(lm.tokenizer, info.family) == "wordpiece" and lm.tokenizer.mask_token == "[MASK]"

    pieces = lm.tokenizer.tokenize(TEXT)
    assert lm.tokenizer.unk_token not in pieces
    assert pieces == list(TEXT)  # WordPiece of Chinese: one token per character (punctuation included)

    res = fill_mask(lm, FillMaskConfig("中国的首都是北[MASK]。", top_k=5))
    assert res.tokens == ("[CLS]", *"中国的首都是北", "[MASK]", "。", "[SEP]")
    (pred,) = res.masks
    assert len(pred.candidates) == 5 and all(c.piece for c in pred.candidates)
    assert all(0 < c.prob <= 1 for c in pred.candidates)
    assert resolve(cid).source == "HF cache"  # the next load reads the cache
