"""core.predict.sentence_pair on tiny random models: NSP (BERT), SOP (ALBERT), and the reasons the others have none."""

from __future__ import annotations

import pytest
import torch

from core.base.paths import ASSETS
from core.models.loading import ModelSpec, load
from core.predict.sentence_pair import (
    MAX_ROWS,
    PairConfig,
    PairError,
    PairRow,
    _content_words,
    other_topic,
    pair_head,
    parse_pairs_csv,
    predict_pair,
    score_batch,
)
from core.registry import FAMILIES

A = "She poured a cup of hot tea."
B = "Then she sat by the window to drink it."


@pytest.fixture(scope="module")
def pre(tiny_models):
    """family -> LoadedModel with the pretraining heads (NSP for BERT, SOP for ALBERT)."""
    return {f: load(ModelSpec(f, str(tiny_models[f]), "cpu"), "pretraining") for f in FAMILIES}


def test_registry_heads(family):
    h = pair_head(family)
    assert h.kind == {"bert": "nsp", "albert": "sop"}.get(family)
    assert h.note == FAMILIES[family].pair_head_note
    if h.kind:
        assert h.prob_label in ("P(IsNext)", "P(in order)")


@pytest.mark.parametrize("fam, logits_name", [("bert", "seq_relationship_logits"), ("albert", "sop_logits")])
def test_pair_probability_matches_the_full_model(pre, fam, logits_name):
    lm = pre[fam]
    r = predict_pair(lm, PairConfig(A, B))
    assert [s.label for s in r.scores] == ["(A, B)", "(B, A)", "(A, other topic)"]
    assert (r.scores[1].first, r.scores[1].second) == (B, A)
    for s in r.scores:
        enc = lm.tokenizer(s.first, s.second, return_tensors="pt")
        with torch.inference_mode():
            logits = getattr(lm.model(**enc), logits_name)[0].float()
        assert s.prob == pytest.approx(float(logits.softmax(-1)[0]), rel=1e-4)
        assert 0 <= s.prob <= 1 and s.tokens[0] == lm.tokenizer.cls_token
        assert s.tokens.count(lm.tokenizer.sep_token) == 2
    assert r.head == pair_head(fam).kind


@pytest.mark.parametrize("fam, why", [("roberta", "dropped NSP"), ("distilbert", "distilled")])
def test_families_without_a_pair_head_explain_why(pre, fam, why):
    with pytest.raises(PairError, match=why) as e:
        predict_pair(pre[fam], PairConfig(A, B))
    assert "Pick BERT (NSP) or ALBERT (SOP)" in str(e.value)


def test_pair_head_missing_from_checkpoint_is_refused():
    from core.models.tokenizer_build import minilm_folder

    lm = load(ModelSpec("bert", str(minilm_folder()), "cpu"), "pretraining")
    with pytest.raises(PairError, match="without its Next Sentence Prediction head"):
        predict_pair(lm, PairConfig(A, B))


def test_other_topic_sentence_shares_no_topic_words():
    for seed in range(5):
        s = other_topic(A, B, seed)
        assert s not in (A, B) and not (_content_words(s) & (_content_words(A) | _content_words(B)))
    zh = other_topic("北京是中国的首都。", "今天天气很好。", 0)
    assert any("\u4e00" <= c <= "\u9fff" for c in zh)


@pytest.mark.parametrize(
    "a, b, fragment", [("", B, "Sentence A is empty"), (A, "  ", "Sentence B is empty"), ("x" * 6000, B, "limit")]
)
def test_bad_pair_input(a, b, fragment):
    with pytest.raises(ValueError, match=fragment):
        PairConfig(a, b)


def test_long_pair_is_truncated_with_a_note(pre):
    long = " ".join(["the river flows slowly through the old town"] * 80)
    r = predict_pair(pre["bert"], PairConfig(long, B), probe=False)
    assert r.scores[0].truncated and any("longest-first" in n for n in r.notes)
    assert len(r.scores[0].tokens) <= 128


def test_weird_scripts_do_not_crash(pre):
    r = predict_pair(pre["albert"], PairConfig("😀 שלום café\u0301", "北京 [CLS] <s>"))
    assert len(r.scores) == 3


def test_csv_parsing_and_errors():
    rows = parse_pairs_csv((ASSETS / "examples" / "pairs_nsp_en.csv").read_text())
    assert len(rows) == 20 and {r.label for r in rows} == {0, 1}
    assert parse_pairs_csv("A,B,Label\nx,y,IsNext\np,q,0\n") == (PairRow("x", "y", 1), PairRow("p", "q", 0))
    with pytest.raises(ValueError, match="lacks the column.*label.*found: a, b"):
        parse_pairs_csv("a,b\nx,y\n")
    with pytest.raises(ValueError, match="lacks the column"):
        parse_pairs_csv("first,second,label\nx,y,1\n")
    with pytest.raises(ValueError, match=f"limit is {MAX_ROWS}"):
        parse_pairs_csv("a,b,label\n" + "x,y,1\n" * (MAX_ROWS + 1))
    with pytest.raises(ValueError, match="Line 3: label 'maybe'"):
        parse_pairs_csv("a,b,label\nx,y,1\nx,y,maybe\n")
    with pytest.raises(ValueError, match="Line 2: sentence B is empty"):
        parse_pairs_csv("a,b,label\nx,,1\n")
    with pytest.raises(ValueError, match="empty"):
        parse_pairs_csv("  ")


@pytest.mark.parametrize("fam", ["bert", "albert"])
def test_batch_accuracy_and_confusion(pre, fam):
    rows = parse_pairs_csv((ASSETS / "examples" / f"pairs_{pair_head(fam).kind}_en.csv").read_text())
    res = score_batch(pre[fam], rows, threshold=0.5)
    (tn, fp), (fn, tp) = res.confusion
    assert tn + fp + fn + tp == len(rows) == len(res.probs)
    assert tn + fp == sum(r.label == 0 for r in rows)
    assert res.accuracy == pytest.approx((tn + tp) / len(rows))
    assert res.preds == tuple(int(p >= 0.5) for p in res.probs)
    single = predict_pair(pre[fam], PairConfig(rows[0].a, rows[0].b), probe=False).scores[0].prob
    assert res.probs[0] == pytest.approx(single, rel=1e-4)  # padding in the batch does not change a score
    with pytest.raises(ValueError, match="between 0 and 1"):
        score_batch(pre[fam], rows, threshold=1.5)


def test_batch_reports_progress_and_stops_when_the_callback_raises(pre):
    rows = [PairRow(A, B, 1)] * 70  # three chunks of at most 32
    seen: list[float] = []
    score_batch(pre["bert"], rows, progress=lambda f, msg: seen.append(f))
    assert seen == pytest.approx([32 / 70, 64 / 70, 1.0])

    class Stop(Exception):
        pass

    def cancel(f, msg):
        raise Stop()

    with pytest.raises(Stop):
        score_batch(pre["bert"], rows, progress=cancel)
