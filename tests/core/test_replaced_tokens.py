"""Replaced token detection (core.predict.replaced_tokens) on tiny ELECTRA discriminators and generators saved to folders
with the real bert-base-uncased WordPiece tokenizer: probabilities, word alignment, corruption, bad input, and a
discriminator trained here on the RTD task that flags the words a generator replaced."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.models.loading import ModelSpec, load
from core.models.tiny import example_texts, make_tiny
from core.predict.replaced_tokens import (
    RTD_TASK,
    ReplacedTokensError,
    RtdConfig,
    check_discriminator,
    load_discriminator,
    role,
    score,
)

FAM = "electra"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("rtd")
    return {
        "disc": str(make_tiny(FAM, base / "disc", seed=0, task=RTD_TASK)),
        "gen": str(make_tiny(FAM, base / "gen", seed=1, task="mlm")),
    }


@pytest.fixture(scope="module")
def disc(folders):
    return load_discriminator(ModelSpec(FAM, folders["disc"], "cpu"))


@pytest.fixture(scope="module")
def gen(folders):
    return load(ModelSpec(FAM, folders["gen"], "cpu"), "mlm")


def test_probabilities_are_the_sigmoid_of_a_direct_transformers_forward(disc, folders):
    import transformers

    text = "The embeddings of unbelievable words, he said."
    r = score(disc, RtdConfig(text))
    ref = transformers.ElectraForPreTraining.from_pretrained(folders["disc"]).eval()
    enc = transformers.AutoTokenizer.from_pretrained(folders["disc"])(text, return_tensors="pt")
    with torch.no_grad():
        want = torch.sigmoid(ref(**enc).logits[0]).numpy()
    got = np.array([t.prob for t in r.tokens])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert [t.piece for t in r.tokens] == enc.tokens()
    assert r.tokens[0].word is None and r.tokens[-1].word is None  # [CLS], [SEP]
    assert r.generator is None and not r.replaced_words and r.text == text


def test_words_follow_the_tokenizers_word_ids(disc):
    text = "The embeddings of unbelievable words, he said."
    r = score(disc, RtdConfig(text))
    assert [w.text for w in r.words] == ["The", "embeddings", "of", "unbelievable", "words", ",", "he", "said", "."]
    emb = r.words[1]
    pieces = [r.tokens[p].piece for p in emb.positions]
    # one word, several pieces
    assert len(pieces) > 1 and pieces[0] == "em" and all(p.startswith("##") for p in pieces[1:])
    assert emb.prob == max(r.tokens[p].prob for p in emb.positions)  # a word is as suspicious as its worst piece
    assert all(r.tokens[p].word == i for i, w in enumerate(r.words) for p in w.positions)
    assert sum(len(w.positions) for w in r.words) == len(r.tokens) - 2
    assert set(r.flagged) == {i for i, w in enumerate(r.words) if w.prob >= 0.5}


def test_the_generator_replaces_exactly_the_asked_words_reproducibly(disc, gen):
    text = "The cat slept on the warm mat all afternoon."
    cfg = RtdConfig(text, corrupt=3, seed=7)
    r = score(disc, cfg, generator=gen)
    assert len(r.replaced_words) == 3 and r.generator == gen.spec.checkpoint
    written = text.rstrip(".").split()
    for i in r.replaced_words:
        w = r.words[i]
        assert w.original == written[i] and w.text != w.original
        assert all(r.tokens[p].replaced and r.tokens[p].original for p in w.positions)
    kept = [w for w in r.words if not w.replaced]
    assert all(w.original is None and w.text in text for w in kept)
    assert r.text != r.original_text == text
    again = score(disc, cfg, generator=gen)
    assert [w.text for w in again.words] == [w.text for w in r.words]  # the seed picks words and samples
    other = score(disc, RtdConfig(text, corrupt=3, seed=8), generator=gen)
    assert [w.text for w in other.words] != [w.text for w in r.words]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(text="   "), "empty"),
        (dict(text="The [MASK] sat."), "never a mask"),
        (dict(text="?!"), "no words"),
        (dict(text="A cat.", corrupt=11), "from 0 to 10"),
        (dict(text="A cat.", corrupt=-1), "from 0 to 10"),
        (dict(text="A cat.", seed=-3), "Seed"),
    ],
)
def test_bad_config_says_what_to_do(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        RtdConfig(**kwargs)


def test_bad_models_and_requests_say_why(disc, gen, folders, tmp_path):
    with pytest.raises(ReplacedTokensError, match="no replaced-token-detection head"):
        check_discriminator(gen)  # a generator has an MLM head, not the RTD one
    with pytest.raises(ReplacedTokensError, match="no trained masked-language-model head"):
        score(disc, RtdConfig("The cat slept on the mat.", corrupt=1), generator=disc)
    with pytest.raises(ReplacedTokensError, match="needs a generator"):
        score(disc, RtdConfig("The cat slept on the mat.", corrupt=1))
    with pytest.raises(ReplacedTokensError, match="at most 2"):
        score(disc, RtdConfig("Two words.", corrupt=3), generator=gen)
    with pytest.raises(ReplacedTokensError, match="has no replaced-token-detection head"):
        load_discriminator(ModelSpec("bert", folders["disc"], "cpu"))
    # a generator folder loaded as a discriminator: the RTD head's weights are not in it
    as_disc = load_discriminator(ModelSpec(FAM, folders["gen"], "cpu"))
    with pytest.raises(ReplacedTokensError, match="no trained replaced-token-detection head"):
        score(as_disc, RtdConfig("The cat slept."))


def test_a_generator_on_another_vocabulary_is_refused(disc, tmp_path):
    from core.models.tiny import tiny_config
    from core.models.tokenizer_build import save_tokenizer, train_tokenizer
    from core.registry import build_model

    tok = save_tokenizer("bert", train_tokenizer("bert", example_texts(), vocab_size=150), tmp_path)
    build_model(FAM, "mlm", tiny_config(FAM, len(tok), tok)).save_pretrained(str(tmp_path))
    other = load(ModelSpec(FAM, str(tmp_path), "cpu"), "mlm")
    with pytest.raises(ReplacedTokensError, match="different vocabularies"):
        score(disc, RtdConfig("The cat slept on the mat.", corrupt=1), generator=other)


def test_typed_special_tokens_are_removed_with_a_note(disc):
    r = score(disc, RtdConfig("[CLS] The cat slept. [SEP]"))
    assert [w.text for w in r.words] == ["The", "cat", "slept", "."]
    assert any("Removed [CLS], [SEP]" in n for n in r.notes)


def test_role_from_the_config_without_loading(folders):
    assert role(ModelSpec(FAM, folders["disc"])) == "discriminator"
    assert role(ModelSpec(FAM, folders["gen"])) == "generator"
    # official ids not downloaded here: their shipped configs (assets/configs) say which they are
    assert role(ModelSpec(FAM, "google/electra-small-discriminator")) == "discriminator"
    assert role(ModelSpec(FAM, "google/electra-base-generator")) == "generator"
    assert role(ModelSpec("bert", "bert-base-uncased")) is None
    assert role(None) is None


def _train_rtd(folder: str, steps: int = 60) -> None:
    """ELECTRA's discriminator objective on the bundled example sentences: 15% of the tokens replaced by random
    vocabulary ids (what a random tiny generator samples), binary cross-entropy on "replaced?" at every token."""
    import transformers

    torch.set_num_threads(1)  # a tiny model: one thread is fastest on a busy machine
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.ElectraForPreTraining.from_pretrained(folder)
    enc = tok(example_texts(), padding=True, return_tensors="pt")
    ids, attn = enc["input_ids"], enc["attention_mask"]
    special = torch.isin(ids, torch.tensor(tok.all_special_ids))
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    model.train()
    for _ in range(steps):
        pick = (torch.rand(ids.shape, generator=g) < 0.15) & ~special
        x = torch.where(pick, torch.randint(len(tok), ids.shape, generator=g), ids)
        loss = model(input_ids=x, attention_mask=attn, labels=(x != ids).long()).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval().save_pretrained(folder)


@pytest.mark.slow
def test_a_trained_discriminator_flags_the_generators_replacements(folders, gen, tmp_path):
    folder = str(make_tiny(FAM, tmp_path / "trained", seed=0, task=RTD_TASK))
    untrained = load_discriminator(ModelSpec(FAM, folder, "cpu"))
    _train_rtd(folder)
    trained = load_discriminator(ModelSpec(FAM, folder, "cpu"))
    probs = {"trained": ([], []), "untrained": ([], [])}
    for i, text in enumerate(example_texts()[:8]):
        for name, d in (("trained", trained), ("untrained", untrained)):
            r = score(d, RtdConfig(text, corrupt=2, seed=i), generator=gen)
            for w in r.words:
                probs[name][0 if w.replaced else 1].append(w.prob)
    replaced, kept = (np.array(x) for x in probs["trained"])
    assert replaced.mean() > 0.7 > 0.3 > kept.mean()
    assert (replaced >= 0.5).mean() > 0.8 and (kept < 0.5).mean() > 0.9
    r0, k0 = (np.array(x) for x in probs["untrained"])
    assert abs(r0.mean() - k0.mean()) < 0.1  # before training it could not tell them apart
