"""The family registry: no family name outside it, every family's official configs ship and build, its tiny model
matches its own data, and the generic family is derived from a checkpoint."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core import registry
from core.models.loading import ModelSpec, load
from core.registry import FAMILIES, GENERIC, ModelLoadError, family, official_config, piece_kind
from tests.conftest import GENERIC_KEY

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("core", "app", "pages")


def family_names() -> set[str]:
    """Every string that names a family: the keys and model types of the registered ones, and the generic key."""
    names = {GENERIC.key}
    for f in FAMILIES.values():
        names |= {f.key, f.model_type}
    return names


def literals(path: Path, names: set[str], root: Path = ROOT) -> list[str]:
    """file:line: 'literal' for each string constant in ``path`` equal to one of ``names`` (comments and
    docstrings are not constants of this kind: a docstring is skipped, a comment is not in the tree)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    rel = path.relative_to(root)
    return [
        f"{rel}:{n.lineno}: {n.value!r}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names and id(n) not in docstrings
    ]


def test_no_family_name_is_written_outside_the_registry():
    names = family_names()
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if (ROOT / "core" / "registry") in path.parents:
                continue
            found += literals(path, names)
    assert not found, (
        "Family names written outside core/registry (ask the registry instead: a Family field, "
        "families_with(...), family(key)):\n" + "\n".join(found)
    )


def test_the_scan_finds_a_literal_and_skips_docstrings_and_comments(tmp_path):
    """The grep test can fail: a literal is found; the same word in a docstring or a comment is not."""
    key = next(iter(FAMILIES))
    src = tmp_path / "probe.py"
    src.write_text(f'"""About {key!r}."""\n# {key}\ndef f():\n    """{key}"""\n    return {key!r}\n')
    assert literals(src, family_names(), tmp_path) == [f"probe.py:5: {key!r}"]


@pytest.mark.parametrize("cid", [c.id for c in registry.official_checkpoints()])
def test_every_official_checkpoint_ships_a_config_that_builds(cid):
    cfg = official_config(cid)
    info = registry.checkpoint_info(cid)
    assert cfg.model_type in {family(info.family).model_type, info.model_type}


@pytest.mark.parametrize("cid", [c.id for c in registry.official_checkpoints() if c.claim_m])
def test_parameters_from_the_shipped_config_match_the_published_size(cid):
    from core.models.params import breakdown

    b = breakdown(cid)
    assert abs(b.backbone / 1e6 - b.claim_m) / b.claim_m < 0.05, (cid, b.backbone / 1e6, b.claim_m)


def test_the_new_families_show_what_their_configs_say():
    from core.models.params import breakdown

    mb = {key: value for _, key, value in breakdown("answerdotai/ModernBERT-base").facts}
    assert mb == {"max_position_embeddings": 8192, "global_attn_every_n_layers": 3, "local_attention": 128}
    xlmr = official_config("xlm-roberta-base")
    assert xlmr.vocab_size == 250002 and family("xlm-roberta").piece_kind == "unigram"
    assert not family("xlm-roberta").token_types and family("xlm-roberta").positions_after_pad


def test_every_family_has_the_entries_the_code_asks_for():
    for f in FAMILIES.values():
        assert {"base", "mlm", "pretraining", "seqcls"} <= set(f.classes), f.key
        assert f.piece_kind in ("wordpiece", "bpe", "unigram"), f.key
        assert f.specials.get("mask_token") == f.mask_token, f.key
        assert f.head_output, f.key
        assert (f.qk_modules is None) == bool(f.qk_note), f.key  # no q/k view only with the reason
        assert f.base_checkpoint in {c.id for c in f.checkpoints}, f.key


def test_speed_and_glue_claims_name_registered_families():
    from core.compare.glue_claims import GLUE_CLAIMS
    from core.compare.speed import SEED_CLAIMS

    assert SEED_CLAIMS and all(a in FAMILIES and b in FAMILIES for a, b in SEED_CLAIMS)
    assert set(GLUE_CLAIMS) <= set(FAMILIES) and len(GLUE_CLAIMS) == 4


def test_an_unknown_family_is_refused_with_the_choices():
    with pytest.raises(ModelLoadError, match="Choose one of"):
        family("gpt2")


@pytest.mark.parametrize("fam", [*FAMILIES, GENERIC_KEY])
def test_each_tiny_model_matches_its_family(tiny_models, fam):
    lm = load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), task="mlm")
    want = family(fam)
    got = lm.family
    assert got.mask_token == lm.tokenizer.mask_token
    assert piece_kind(lm.tokenizer) == got.piece_kind
    if not want.generic:
        assert got is want and lm.model.config.model_type == want.model_type
    assert registry.mlm_head(lm.model) is not None


def test_the_generic_family_is_derived_from_the_checkpoint(tiny_models):
    lm = load(ModelSpec(GENERIC_KEY, str(tiny_models[GENERIC_KEY]), "cpu"), task="mlm")
    f = lm.family
    assert f.generic and f.model_type == "deberta-v2" and f.mask_token == "[MASK]" and f.pair_head is None
    assert f.piece_kind == "wordpiece" and f.qk_modules is None and f.layer_parts is None


def test_the_generic_family_refuses_a_registered_architecture(tiny_models):
    with pytest.raises(ModelLoadError, match="pick the BERT family"):
        load(ModelSpec(GENERIC_KEY, str(tiny_models["bert"]), "cpu"), task="mlm")


def test_a_family_without_a_bundled_model_says_so():
    fam = next(f for f in FAMILIES.values() if not f.bundled)
    with pytest.raises(ModelLoadError, match="ships no"):
        registry.bundled_id(fam.key)
