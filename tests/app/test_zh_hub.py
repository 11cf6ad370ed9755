"""#30 part 6 in the app: the Chinese Hub checkpoints picked from the sidebar and downloaded from a local server
speaking the Hub's protocol (tiny stand-ins, tests/zh_hub_standins.py). Fill-mask warns that MacBERT's answers are
not meaningful (it was pretrained without [MASK]) and says why hfl's RoBERTa loads as BERT; the sidebar in 中文
offers the Chinese checkpoints only when the Hub answers."""

from __future__ import annotations

import pytest

from app.kit.i18n import catalog
from core.models import downloads
from core.registry import checkpoint_info, official_checkpoints
from tests.app.conftest import open_page
from tests.hub_server import HubServer, go_online
from tests.zh_hub_standins import IDS, make_standin

MACBERT = "hfl/chinese-macbert-base"
HFL_ROBERTA = "hfl/chinese-roberta-wwm-ext"
SERVED = ("bert-base-chinese", HFL_ROBERTA, MACBERT)
# the warning's opening words, in each language (its bold first sentence, as the catalog has it)
OPENING = {
    lang: catalog()["fill_mask.zh_hub.mlm_as_correction"][lang].split("`{mask}`")[0].replace("**{id}", "")
    for lang in ("en", "zh")
}


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    base = tmp_path_factory.mktemp("zh-hub-app")
    return {cid: make_standin(cid, base / cid.replace("/", "__"), seed=i) for i, cid in enumerate(SERVED)}


@pytest.fixture()
def hub(standins, monkeypatch, tmp_path, use_tiny_zoo):
    go_online(monkeypatch, tmp_path / "hf-cache")
    with HubServer(standins) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        downloads.forget_reachability()
        yield server
    downloads.forget_reachability()


def _warnings(at) -> str:
    return " ".join(w.value for w in at.warning)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_macbert_on_fill_mask_warns_its_answers_are_not_meaningful(hub, lang):
    at = open_page("fill_mask", {"family": "bert", "model": MACBERT, "lang": lang})
    assert any("model.safetensors" in r[1] for r in hub.requests), "nothing was downloaded"
    text = _warnings(at)
    assert f"{MACBERT}{OPENING[lang]}`[MASK]`" in text, text  # "hfl/chinese-macbert-base was never pretrained..."
    assert ("MLM as correction" if lang == "en" else "纠错式 MLM") in text, text
    assert at.text_area(key="fill_mask.text").value  # the page still works: a Chinese example to predict
    assert not at.exception


def test_no_such_warning_for_a_checkpoint_pretrained_with_mask(hub):
    at = open_page("fill_mask", {"family": "bert", "model": "bert-base-chinese", "lang": "zh"})
    assert OPENING["zh"].strip() not in _warnings(at)
    assert not any("BertForMaskedLM" in c.value for c in at.caption)  # BERT listed as BERT: nothing to explain


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_hfl_roberta_is_shown_as_roberta_and_explained_as_bert_code(hub, lang):
    at = open_page("fill_mask", {"family": "roberta", "model": HFL_ROBERTA, "lang": lang})
    captions = [c.value for c in at.caption]
    assert any(HFL_ROBERTA in c and "RoBERTa" in c for c in captions), captions  # the source banner's family
    (note,) = [c for c in captions if "BertForMaskedLM" in c]
    assert "model_type `bert`" in note and "`[MASK]`" in note and HFL_ROBERTA in note, note
    assert ("as its model card says" if lang == "en" else "按模型卡的说明") in note
    assert not _warnings(at).count(OPENING[lang].strip())  # pretrained with [MASK]: no MacBERT warning


def _zh_buttons(at) -> list[str]:
    return [b.label for b in at.sidebar.button if b.key.startswith("sidebar.zh.")]


def test_in_chinese_the_sidebar_offers_the_four_when_the_hub_answers(hub):
    at = open_page(None, state={"ui.lang": "zh"})
    hub_ids = [c.id for c in official_checkpoints() if c.language == "zh"]
    offered = _zh_buttons(at)
    assert [b for b in offered if b in hub_ids] == hub_ids and set(IDS) <= set(offered), offered
    bundled = [b for b in offered if b.startswith("encoderlab/")]  # a bundled Chinese-capable model comes first
    assert offered[: len(bundled)] == bundled, offered
    at.sidebar.button(key=f"sidebar.zh.{MACBERT}").click().run()  # picking one selects it under its family
    assert at.session_state["sidebar.checkpoint"] == MACBERT
    assert at.session_state["sidebar.family"] == checkpoint_info(MACBERT).family


def test_in_chinese_without_the_hub_none_is_offered(use_tiny_zoo, monkeypatch, tmp_path):
    go_online(monkeypatch, tmp_path / "hf-cache")
    monkeypatch.setattr(downloads, "reachable", lambda *a, **k: False)
    downloads.forget_reachability()
    try:
        at = open_page(None, state={"ui.lang": "zh"})
    finally:
        downloads.forget_reachability()
    assert not [b for b in _zh_buttons(at) if not b.startswith("encoderlab/")]
    said = " ".join(c.value for c in at.sidebar.caption)
    assert all(cid in said for cid in IDS), said  # named, with why they cannot be had here
