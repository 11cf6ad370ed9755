"""Parameter breakdowns, checked exactly against published counts for the official configs."""

import pytest

from core.models.params import albert_factorization, breakdown

# transformers' AutoModel (backbone with pooler) parameter counts for the official configs.
EXACT_BACKBONE = {
    "bert-base-uncased": 109_482_240,
    "bert-large-uncased": 335_141_888,
    "roberta-base": 124_645_632,
    "roberta-large": 355_359_744,
    "albert-base-v2": 11_683_584,
    "albert-large-v2": 17_683_968,
    "albert-xlarge-v2": 58_724_864,
    "distilbert-base-uncased": 66_362_880,
    "bert-base-chinese": 102_267_648,
    "hfl/chinese-roberta-wwm-ext": 102_267_648,
}


@pytest.mark.parametrize("ckpt,expected", EXACT_BACKBONE.items())
def test_backbone_counts_are_exact(ckpt, expected):
    assert breakdown(ckpt).backbone == expected


def test_bert_base_parts_by_hand():
    b = breakdown("bert-base-uncased")
    V, H, P, T, L, F = 30522, 768, 512, 2, 12, 3072
    assert b.embeddings == (V + P + T) * H + 2 * H
    layer = 4 * (H * H + H) + 2 * H + (H * F + F) + (F * H + H) + 2 * H
    assert b.encoder == L * layer
    assert b.pooler == H * H + H
    # MLM transform (dense + LayerNorm) + decoder bias (weights tied) + NSP classifier
    assert b.heads == (H * H + H + 2 * H + V) + (2 * H + 2)


def test_albert_shares_one_layer_and_factorizes():
    b = breakdown("albert-base-v2")
    assert b.shared_layers and b.embedding_size == 128
    V, E, H = 30000, 128, 768
    assert b.embeddings == (V + 512 + 2) * E + 2 * E + (E * H + H)
    # One shared layer: the encoder costs the same at 12 and 24 layers of the same width.
    assert breakdown("albert-large-v2").encoder < 2 * breakdown("bert-base-uncased").encoder / 12


def test_claims_and_differences():
    assert breakdown("distilbert-base-uncased").claim_m == 66
    assert abs(breakdown("bert-base-uncased").diff_m) < 1
    assert abs(breakdown("albert-base-v2").diff_m) < 0.5


def test_factorization_seed_example():
    f = albert_factorization(30000, 768, 128)
    assert f.full == 23_040_000 and f.factorized == 3_840_000 + 98_304
    assert f.ratio == pytest.approx(23_040_000 / 3_938_304)


@pytest.mark.parametrize("args,msg", [((0, 768, 128), "V must be"), ((30000, 768, 1024), "larger than H")])
def test_factorization_bad_input(args, msg):
    with pytest.raises(ValueError, match=msg):
        albert_factorization(*args)
