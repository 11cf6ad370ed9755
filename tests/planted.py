"""A classifier trained inside the tests so that one planted word decides its label: class 1 means "the sentence
contains PLANT". Attributions (tests/core/test_attribution.py), faithfulness and counterfactuals test against it,
because there the right answer is known."""

from __future__ import annotations

import numpy as np
import torch

from core.models.loading import LoadedModel, ModelSpec

PLANT = "excellent"
FILLER = (
    "the movie was long and the actors were there with some music in a room on time for "
    "people who came to see it after dinner"
).split()


def planted_classifier() -> LoadedModel:
    """A tiny ReLU BERT classifier trained here so that class 1 means 'the sentence contains PLANT'."""
    import transformers

    from core.models.tiny import tiny_config
    from core.models.tokenizer_build import bert_uncased_tokenizer

    tok = bert_uncased_tokenizer()
    cfg = tiny_config("bert", len(tok), tok)
    cfg.hidden_act = "relu"  # so that DeepLift's rules apply
    cfg.num_labels = 2
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(cfg)
    rng = np.random.default_rng(0)

    def batch(n: int = 32):
        texts, labels = [], []
        for _ in range(n):
            words = list(rng.choice(FILLER, size=int(rng.integers(5, 9))))
            y = int(rng.integers(0, 2))
            # both classes get one word more, PLANT or a filler: otherwise the longest sentences are all class 1 and
            # the model learns their length as a second trigger (a [MASK] in PLANT's place then kept class 1)
            words.insert(int(rng.integers(0, len(words) + 1)), PLANT if y else str(rng.choice(FILLER)))
            texts.append(" ".join(words))
            labels.append(y)
        enc = tok(texts, padding=True, return_tensors="pt")
        return enc, torch.tensor(labels)

    # random word vectors are distinct enough; freezing them skips updating 30522 rows every step
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    model.train()
    for _ in range(250):
        enc, y = batch()
        loss = model(**enc, labels=y).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.zero_grad(set_to_none=True)  # a shared model carries no gradient (tests check that none is left)
    enc, y = batch(200)
    with torch.no_grad():
        acc = float((model(**enc).logits.argmax(-1) == y).float().mean())
    assert acc > 0.95, f"the planted classifier did not learn its rule (accuracy {acc:.2f})"
    return LoadedModel(
        model=model,
        tokenizer=tok,
        spec=ModelSpec("bert", "planted-test-model", "cpu"),
        task="seqcls",
        source="test",
        path="",
        device="cpu",
    )


def planted_sentences(n: int, seed: int) -> list[str]:
    """Class 1 sentences from the planted classifier's own distribution (5 to 8 filler words, PLANT somewhere)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = list(rng.choice(FILLER, size=int(rng.integers(5, 9))))
        words.insert(int(rng.integers(0, len(words) + 1)), PLANT)
        out.append(" ".join(words))
    return out
