"""core/train/pretrain: the masking function (proportions, loss positions, whole words for three tokenizer kinds),
pair instances (NSP/SOP), bad input, resume + determinism, a few steps of each family, and the bundled zoo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from core.base.paths import zoo_dir
from core.data.corpus import CORPUS_DIR, CorpusError, check_documents, decode_upload, parse_documents
from core.data.masking import IGNORE, mask_tokens, word_index, word_starts
from core.models.loading import ModelSpec, load
from core.models.tokenizer_build import bert_uncased_tokenizer, save_tokenizer, train_tokenizer
from core.train.pretrain.data import Sentence, make_instances, pad, special_mask
from core.train.pretrain.train import PretrainConfig, PretrainError, pretrain

WORDY = (
    "Antidisestablishmentarianism notwithstanding, photosynthesising chloroplasts outmanoeuvred "
    "the unbelievably overcomplicated bureaucracies of Constantinople."
)


# ---------------------------------------------------------------------------------------------- masking
def _mask(ids, special, seed=0, **kw):
    return mask_tokens(ids, special, mask_id=3, vocab_size=1000, generator=torch.Generator().manual_seed(seed), **kw)


def test_mask_proportions_15_and_80_10_10():
    ids = torch.randint(10, 1000, (400, 128))
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    m = _mask(ids, special)
    sel = m.labels != IGNORE
    n_sel = sel.sum().item()
    assert abs(n_sel / (~special).sum().item() - 0.15) < 0.005
    masked = (m.input_ids == 3) & sel
    same = (m.input_ids == ids) & sel
    other = sel & ~masked & ~same
    assert abs(masked.sum().item() / n_sel - 0.80) < 0.01
    # a random replacement can hit the original id (1 in 990): "same" is 10% + a sliver
    assert abs(same.sum().item() / n_sel - 0.10) < 0.01
    assert abs(other.sum().item() / n_sel - 0.10) < 0.01
    assert not sel[special].any()
    assert torch.equal(m.input_ids[~sel], ids[~sel])  # nothing outside the selection changes


def test_labels_only_on_selected_positions():
    ids = torch.randint(10, 1000, (8, 32))
    special = ids < 40
    m = _mask(ids, special)
    sel = m.labels != IGNORE
    assert torch.equal(m.labels[sel], ids[sel])
    logits = torch.randn(8, 32, 1000)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, 1000), m.labels.view(-1), ignore_index=IGNORE)
    logits2 = logits.clone()
    logits2[~sel] = torch.randn_like(logits2[~sel]) * 50  # only unselected positions change
    loss2 = torch.nn.functional.cross_entropy(logits2.view(-1, 1000), m.labels.view(-1), ignore_index=IGNORE)
    assert torch.isclose(loss, loss2)


def test_masking_is_pure_and_seeded():
    ids = torch.randint(10, 1000, (4, 64))
    special = torch.zeros_like(ids, dtype=torch.bool)
    before = ids.clone()
    a, b, c = _mask(ids, special, seed=1), _mask(ids, special, seed=1), _mask(ids, special, seed=2)
    assert torch.equal(ids, before)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.labels, c.labels)


def test_bad_ratios_raise():
    ids = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="mask_ratio"):
        _mask(ids, ids.bool(), mask_ratio=0.9, random_ratio=0.2)


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    texts = [
        line
        for line in (Path(__file__).resolve().parents[2] / "assets" / "examples" / "en.txt").read_text().splitlines()
        if line.strip()
    ] * 3
    base = tmp_path_factory.mktemp("toks")
    out = {"wordpiece": bert_uncased_tokenizer()}
    out["bpe"] = save_tokenizer("roberta", train_tokenizer("roberta", texts, 300), base / "bpe")
    out["unigram"] = save_tokenizer("albert", train_tokenizer("albert", texts, 200), base / "uni")
    return out


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "unigram"])
def test_whole_word_masking_covers_every_subtoken(tokenizers, kind):
    tok = tokenizers[kind]
    ids = tok(WORDY, add_special_tokens=False)["input_ids"]
    tokens = tok.convert_ids_to_tokens(ids)
    starts = word_starts(tokens, kind)
    words = word_index(starts)
    assert len(set(words)) < len(words), "the example must contain words split into several pieces"
    # the word groups, rebuilt as text, are the words of the sentence
    groups: dict[int, list[str]] = {}
    for t, w in zip(tokens, words):
        groups.setdefault(w, []).append(t)
    marker = {"wordpiece": "##", "bpe": "Ġ", "unigram": "▁"}[kind]
    for g in groups.values():
        assert (
            all(marker not in p[: len(marker)] for p in g[1:])
            if kind != "wordpiece"
            else all(p.startswith("##") for p in g[1:])
        )
    n = 300
    ids_t = torch.tensor([ids] * n)
    special = torch.zeros_like(ids_t, dtype=torch.bool)
    m = mask_tokens(
        ids_t,
        special,
        mask_id=tok.mask_token_id,
        vocab_size=len(tok),
        generator=torch.Generator().manual_seed(0),
        word_ids=torch.tensor([words] * n),
    )
    sel = m.labels != IGNORE
    for w in set(words):
        cols = [i for i, x in enumerate(words) if x == w]
        block = sel[:, cols]
        assert torch.equal(block.all(1), block.any(1)), f"word {groups[w]} partly masked"
    # still about 15% of words, and of tokens on average
    firsts = sorted(set(words))
    assert abs(sel[:, firsts].float().mean().item() - 0.15) < 0.03


# ---------------------------------------------------------------------------------------------- instances
def _docs(n_docs=30, n_sents=6):
    """Sentence k of document d is the single token id 1000 + 10*d + k, so order and origin can be read back."""
    return [[Sentence((1000 + 10 * d + k,), (True,)) for k in range(n_sents)] for d in range(n_docs)]


class _Tok:
    cls_token_id, sep_token_id, pad_token_id, mask_token_id = 101, 102, 0, 103
    all_special_ids = [0, 101, 102, 103]


def _segments(x):
    a_end = x.ids.index(102)
    return list(x.ids[1:a_end]), list(x.ids[a_end + 1 : -1])


def test_sop_pairs_are_in_order_or_swapped():
    inst = make_instances(_docs(), _Tok(), pair="sop", max_len=8, seed=0, short_seq_prob=0.0)
    labels = [x.pair_label for x in inst]
    assert 0.35 < sum(labels) / len(labels) < 0.65
    for x in inst:
        a, b = _segments(x)
        assert (a[0] - 1000) // 10 == (b[0] - 1000) // 10  # same document
        assert (a[-1] < b[0]) == (x.pair_label == 0)  # in order, or swapped
        assert x.types == tuple([0] * (len(a) + 2) + [1] * (len(b) + 1))


def test_nsp_pairs_are_next_or_from_another_document():
    inst = make_instances(_docs(), _Tok(), pair="nsp", max_len=8, seed=0, short_seq_prob=0.0)
    labels = [x.pair_label for x in inst]
    assert 0.3 < sum(labels) / len(labels) < 0.7
    for x in inst:
        a, b = _segments(x)
        same_doc = (a[0] - 1000) // 10 == (b[0] - 1000) // 10
        if x.pair_label == 0:
            assert same_doc and b[0] == a[-1] + 1
        else:
            assert not same_doc


def test_special_positions_are_never_masked():
    inst = make_instances(_docs(), _Tok(), pair="nsp", max_len=8, seed=0)
    ids, att, *_ = pad(inst, bert_uncased_tokenizer())  # its [PAD] [CLS] [SEP] [MASK] are _Tok's 0, 101, 102, 103
    sp = special_mask(ids, att, _Tok())
    assert sp[ids == 101].all() and sp[ids == 102].all() and sp[att == 0].all()


# ---------------------------------------------------------------------------------------------- bad input
def test_bad_corpora_give_clear_messages():
    with pytest.raises(CorpusError, match="empty"):
        check_documents(parse_documents("\n\n"), need_pairs=False)
    with pytest.raises(CorpusError, match="binary"):
        decode_upload(b"\x89PNG\r\n\x1a\n\x00\x00\x00", "image.png")
    with pytest.raises(CorpusError) as latin:  # #46: a Latin-1 file was "binary" here, "read as �" in the box
        decode_upload("first line\nun café au lait\n".encode("latin-1"), "latin.txt")
    assert latin.value.kind == "corpus.not_utf8" and latin.value.params["line"] == 2
    assert decode_upload("\ufeffun café\n".encode("utf-8"), "bom.txt") == "un café\n"
    with pytest.raises(CorpusError, match="too small"):
        check_documents(parse_documents("one short line"), need_pairs=False)
    one_doc = " ".join(["word"] * 400)  # one sentence, one document
    with pytest.raises(CorpusError, match="document boundaries"):
        check_documents(parse_documents(one_doc), need_pairs=True)
    check_documents(parse_documents(one_doc), need_pairs=False)


def test_bad_configs_raise_with_the_fix(tmp_path):
    with pytest.raises(PretrainError, match="no sentence-pair head"):
        PretrainConfig(family="roberta", out=str(tmp_path), pair="nsp")
    with pytest.raises(PretrainError, match="Steps must be"):
        PretrainConfig(family="bert", out=str(tmp_path), steps=500, max_steps=100)
    with pytest.raises(PretrainError, match="over the limit"):
        PretrainConfig(family="bert", out=str(tmp_path), size="small", max_size="tiny")


# ---------------------------------------------------------------------------------------------- training
@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    """The first documents of the bundled corpus (train) and of its held-out split."""
    base = tmp_path_factory.mktemp("corpus")
    train = parse_documents((CORPUS_DIR / "train.txt").read_text())[:60]
    held = parse_documents((CORPUS_DIR / "heldout.txt").read_text())[:6]
    (base / "train.txt").write_text("\n\n".join("\n".join(d) for d in train) + "\n")
    (base / "heldout.txt").write_text("\n\n".join("\n".join(d) for d in held) + "\n")
    return base


def _tiny_cfg(family, out, corpus, **kw):
    base = dict(
        family=family,
        out=str(out),
        corpus=str(corpus),
        steps=16,
        batch_size=8,
        max_len=64,
        lr=3e-3,
        size="tiny",
        vocab_size=400,
        log_every=1,
        eval_every=0,
        eval_instances=8,
        checkpoint_every=0,
        threads=1,
        warmup=0.0,
        prior_bias=False,
    )
    return PretrainConfig(**{**base, **kw})


def _mean(xs):
    return sum(xs) / len(xs)


@pytest.mark.parametrize("fam", ["bert", "roberta", "albert", "distilbert"])
def test_each_family_pretrains_and_reloads(fam, tiny_corpus, tmp_path, tiny_models):
    extra = {"teacher": str(tiny_models["bert"])} if fam == "distilbert" else {}
    report = pretrain(_tiny_cfg(fam, tmp_path / fam, tiny_corpus, **extra))
    losses = [h["mlm_loss"] for h in report.history]
    assert len(losses) == 16
    assert _mean(losses[-4:]) < _mean(losses[:4])
    loaded = load(ModelSpec(fam, str(tmp_path / fam), device="cpu"), task="pretraining")
    assert not loaded.head_missing
    log = json.loads((tmp_path / fam / "pretrain_log.json").read_text())
    assert log["final"]["masked_tokens"] > 0 and "mlm_top5" in log["final"]
    if fam in ("bert", "albert"):
        assert "pair_acc" in log["final"]
    if fam == "roberta":
        assert loaded.model.config.type_vocab_size == 1
    if fam == "albert":
        c = loaded.model.config
        assert c.embedding_size < c.hidden_size and c.num_hidden_groups == 1


def test_interrupted_run_resumes_to_the_same_weights(tiny_corpus, tmp_path):
    from safetensors.torch import load_file

    straight = pretrain(_tiny_cfg("roberta", tmp_path / "a", tiny_corpus, steps=8, checkpoint_every=4))
    calls = []
    stopped = pretrain(
        _tiny_cfg("roberta", tmp_path / "b", tiny_corpus, steps=8, checkpoint_every=4),
        should_stop=lambda: calls.append(1) or len(calls) >= 5,
    )
    assert stopped.status == "stopped" and stopped.steps == 5
    resumed = pretrain(_tiny_cfg("roberta", tmp_path / "b", tiny_corpus, steps=8, checkpoint_every=4))
    assert resumed.status == "done" and resumed.steps == 8
    assert json.loads((tmp_path / "b" / "pretrain_log.json").read_text())["resumed_from"] == 5
    a, b = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5), k
    assert [h["loss"] for h in straight.history] == pytest.approx([h["loss"] for h in resumed.history], abs=1e-4)


# ---------------------------------------------------------------------------------------------- the zoo
ZOO = {"bert": "bert-mini", "roberta": "roberta-mini", "albert": "albert-mini", "distilbert": "distilbert-mini"}


@pytest.mark.parametrize("fam", list(ZOO))
def test_bundled_model_loads_and_has_a_card(fam, monkeypatch):
    monkeypatch.delenv("ENCODERLAB_ZOO", raising=False)
    folder = zoo_dir() / ZOO[fam]
    if not (folder / "model.safetensors").exists():
        pytest.skip("bundled zoo not built (make models)")
    loaded = load(ModelSpec(fam, f"encoderlab/{ZOO[fam]}", device="cpu"), task="pretraining")
    assert not loaded.head_missing and loaded.model.dtype == torch.float32
    card = json.loads((folder / "encoderlab_card.json").read_text())
    h = card["heldout"]
    assert h["mlm_top5"] > h["unigram_top5"]
    assert h["mlm_top5"] >= 1.5 * h["unigram_top5"]
    assert (folder / "README.md").read_text().count("%") >= 4
    if fam in ("bert", "albert"):
        assert 0.0 <= h["pair_acc"] <= 1.0
    if fam == "distilbert":
        assert card["vs_teacher"]["params_ratio"] < 1.0


@pytest.mark.timeout(300)  # 15-40 s
def test_albert_from_minilm_keeps_tokens_apart():
    """One MiniLM layer used 6 times at full strength pulls the positions together (with the first zoo's
    8000-piece tokenizer their mean cosine reached 0.98 and MLM stayed at the unigram guess); halving its residual
    branches keeps them further apart. On MiniLM's own WordPiece vocabulary, so every piece is its own MiniLM row
    and only the E -> H projection is random (seeded alike for both): with a trained Unigram tokenizer the rows
    no WordPiece spells add randomness that depends on the tokenizer (on the retrained 16,000-piece one the first
    sentence gave 0.43 against 0.41), and on a 200-piece one the effect drowned in it."""
    from transformers import AutoTokenizer

    from core.models.tokenizer_build import minilm_folder
    from core.train.pretrain.build import albert_from_minilm

    tok = AutoTokenizer.from_pretrained(str(minilm_folder()))
    enc = tok(
        [
            "the lord is my shepherd and the cat sat on the mat",
            "She poured a cup of hot tea and sat by the window to drink it.",
        ],
        padding=True,
        return_tensors="pt",
    )

    def mean_cosine(scale: float, row: int) -> float:
        torch.manual_seed(0)
        model = albert_from_minilm(tok, residual_scale=scale).eval()
        with torch.no_grad():
            h = model.albert(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
        n = int(enc["attention_mask"][row].sum())
        h = torch.nn.functional.normalize(h[row, 1 : n - 1], dim=-1)
        return (h @ h.T).mean().item()

    for row in (0, 1):
        full, halved = mean_cosine(1.0, row), mean_cosine(0.5, row)
        assert full > 0.9 and halved < full - 0.2, (row, full, halved)


def test_albert_fit_to_minilm_moves_toward_minilm_and_lands_on_the_unigram_vocab(tokenizers, tiny_corpus):
    """The fit (build.MiniLMFit) raises the shared ALBERT's cosine to MiniLM's hidden states, is deterministic for
    a seed, and the result is an ALBERT on the Unigram vocabulary, still factorized and shared."""
    from core.data.corpus import load_documents
    from core.train.pretrain.build import MiniLMFit, albert_from_minilm

    tok = tokenizers["unigram"]
    docs = load_documents(tiny_corpus)

    def fitted(seed: int):
        cos: list[float] = []
        torch.manual_seed(0)
        model = albert_from_minilm(
            tok,
            fit=MiniLMFit(docs, steps=16, seed=seed, batch_size=4, max_len=32, on_step=lambda i, n, c: cos.append(c)),
        )
        return model, cos

    model, cos = fitted(0)
    assert len(cos) == 16 and _mean(cos[-4:]) > _mean(cos[:4]) + 0.05, cos
    c = model.config
    assert c.vocab_size == len(tok) and c.embedding_size < c.hidden_size and c.num_hidden_groups == 1
    again, cos2 = fitted(0)
    assert cos2 == cos
    for (n, p), (_, q) in zip(model.named_parameters(), again.named_parameters()):
        assert torch.equal(p, q), n
    unfitted = albert_from_minilm(tok)
    shared = "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"
    assert not torch.equal(dict(model.named_parameters())[shared], dict(unfitted.named_parameters())[shared])


def test_fit_steps_only_for_albert_from_minilm(tmp_path, tiny_corpus):
    with pytest.raises(PretrainError, match="fit_steps"):
        _tiny_cfg("bert", tmp_path / "b", tiny_corpus, fit_steps=10)
    with pytest.raises(PretrainError, match="fit_steps"):
        _tiny_cfg("albert", tmp_path / "a", tiny_corpus, fit_steps=10)  # from scratch: nothing to fit to


def test_pretrain_runs_the_albert_fit_first(tmp_path, tiny_corpus):
    fits: list[int] = []
    report = pretrain(
        _tiny_cfg("albert", tmp_path / "a", tiny_corpus, init="minilm", fit_steps=3, steps=4),
        on_fit=lambda i, n, c: fits.append(i),
    )
    assert fits == [1, 2, 3] and report.status == "done" and report.steps == 4
    assert not load(ModelSpec("albert", str(tmp_path / "a"), device="cpu"), task="pretraining").head_missing
