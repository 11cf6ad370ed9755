"""core/train/common.py, the pieces fine-tuning and pretraining share: padding through the tokenizer (both sides, every
family's tokenizer), parameter groups, out-of-memory detection, the one-setting-per-process Accelerator, and a
checkpoint that resumes a run to the very same losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.models.devices import is_oom
from core.train import common as training
from core.train.rng import RunRNG

TEXTS = ["The cat sat on the mat.", "A much longer sentence, with commas, than the first one is.", "Short."]


@pytest.fixture()
def tokenizer(family, tiny_models):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_models[family]))


# ---------------------------------------------------------------------------------------------- padding
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_equals_the_tokenizers_own_padding(tokenizer, side):
    tokenizer.padding_side = side
    rows = tokenizer(TEXTS)  # unpadded
    feats = [{k: rows[k][i] for k in rows} for i in range(len(TEXTS))]
    got = training.pad(tokenizer, feats)
    want = tokenizer(TEXTS, padding=True, return_tensors="pt")
    assert set(got) == set(want)
    for k in want:
        assert torch.equal(got[k], want[k]), k
    assert got["attention_mask"].sum().item() == sum(len(r) for r in rows["input_ids"])
    pad_col = 0 if side == "left" else -1  # the shortest row has padding on the tokenizer's side
    assert got["input_ids"][2, pad_col] == tokenizer.pad_token_id


@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_puts_labels_and_word_positions_on_the_same_side(tokenizer, side):
    tokenizer.padding_side = side
    ids = tokenizer(TEXTS)["input_ids"]
    feats = [
        {"input_ids": r, "labels": list(range(10, 10 + len(r))), "words": list(range(len(r))), "row": i}
        for i, r in enumerate(ids)
    ]
    b = training.pad(tokenizer, feats, fill={"labels": -100, "words": training.POSITION})
    width = max(len(r) for r in ids)
    assert b["input_ids"].shape == b["labels"].shape == b["words"].shape == (3, width)
    assert torch.equal(b["row"], torch.tensor([0, 1, 2]))  # a per-row field is stacked
    for r, row in enumerate(ids):
        real = b["attention_mask"][r].bool()
        assert b["input_ids"][r][real].tolist() == row
        assert b["labels"][r][real].tolist() == feats[r]["labels"] and (b["labels"][r][~real] == -100).all()
        # word positions point at the real tokens' columns; padding points to itself
        cols = torch.nonzero(real).flatten()
        assert b["words"][r][real].tolist() == cols.tolist()
        assert b["words"][r][~real].tolist() == torch.nonzero(~real).flatten().tolist()


def test_pad_refuses_an_empty_batch(tiny_models):
    from transformers import AutoTokenizer

    with pytest.raises(ValueError, match="at least one row"):
        training.pad(AutoTokenizer.from_pretrained(str(tiny_models["bert"])), [])


# ---------------------------------------------------------------------------------------------- parameter groups
def test_param_groups_no_decay_on_biases_and_layernorm_and_heads_at_the_multiplied_rate(tiny_models):
    import transformers

    model = transformers.BertForPreTraining.from_pretrained(str(tiny_models["bert"]))
    model.bert.embeddings.position_embeddings.weight.requires_grad = False  # frozen: in no group
    heads = training.head_paths(model)
    assert heads == ("cls",)
    groups = training.param_groups(
        model,
        1e-3,
        0.01,
        head_lr_mult=4.0,
        head_prefixes=heads,
        embed_lr_mult=2.0,
        embed_prefixes=training.embedding_paths(model, ("embeddings",)),
    )
    where = {id(p): g for g in groups for p in g["params"]}
    named = dict(model.named_parameters())
    assert len(where) == sum(1 for p in named.values() if p.requires_grad)  # each trainable parameter once
    assert id(named["bert.embeddings.position_embeddings.weight"]) not in where
    for name, p in named.items():
        if not p.requires_grad:
            continue
        g = where[id(p)]
        if p.ndim < 2 or "LayerNorm" in name:
            assert g["weight_decay"] == 0.0, name
        else:
            assert g["weight_decay"] == 0.01, name
        if name.startswith("cls."):
            assert g["lr"] == pytest.approx(4e-3), name
        elif name.startswith("bert.embeddings."):
            assert g["lr"] == pytest.approx(2e-3), name
        else:
            assert g["lr"] == pytest.approx(1e-3), name
    # the decoder's weight is the tied word embedding: it learns with the embeddings, not at the head's rate
    assert model.cls.predictions.decoder.weight is named["bert.embeddings.word_embeddings.weight"]
    assert where[id(model.cls.predictions.decoder.weight)]["lr"] == pytest.approx(2e-3)
    assert all(g["params"] for g in groups)


# ---------------------------------------------------------------------------------------------- out of memory
@pytest.mark.parametrize(
    "err, oom",
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity)"), True),
        (RuntimeError("[enforce fail at alloc_cpu.cpp:114] DefaultCPUAllocator: can't allocate memory"), True),
        (MemoryError(), True),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x8 and 16x2)"), False),
        (ValueError("Learning rate out of range"), False),
        (KeyError("out of memory"), False),  # says it, but is no allocator's error
    ],
)
def test_is_oom(err, oom):
    assert is_oom(err) is oom


# ---------------------------------------------------------------------------------------------- accelerate
class Busy(RuntimeError):
    pass


def test_a_second_setting_waits_while_a_run_holds_the_accelerator():
    with training.accelerator("cpu", "no", Busy) as acc:
        assert acc.device.type == "cpu"
        with training.accelerator("cpu", "no", Busy):
            pass  # the same setting shares it
        with pytest.raises(Busy, match="one setting per process"):
            with training.accelerator("cpu", "bf16", Busy):
                pass
    with training.accelerator("cpu", "bf16", Busy) as acc:  # free again: the setting may change
        assert acc.mixed_precision == "bf16"


# ---------------------------------------------------------------------------------------------- checkpoints
def _run(folder, steps: int, stop_at: int | None = None, resume: bool = False) -> list[float]:
    """A few seeded AdamW steps of a small net with dropout (warmup + decay schedule), checkpointed at ``stop_at``."""
    import torch.nn.functional as F
    from transformers import get_linear_schedule_with_warmup

    with training.accelerator("cpu", "no") as acc:
        rng = RunRNG(0)
        with rng.active():
            model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 2))
        opt = torch.optim.AdamW(training.param_groups(model, 1e-2, 0.01), lr=1e-2)
        sched = get_linear_schedule_with_warmup(opt, 2, steps)
        model, opt = acc.prepare(model, opt)
        acc.register_for_checkpointing(sched)
        start, losses = 0, []
        if resume:
            state, tensors, arrays = training.load_checkpoint(
                acc, folder, rng, tensors=("best", "none"), arrays=("probs",)
            )
            start, losses = state["step"], state["losses"]
            assert tensors["none"] is None and np.array_equal(arrays["probs"], np.arange(3.0))
            assert torch.equal(tensors["best"]["0.weight"], model.state_dict()["0.weight"].cpu())
        x = torch.randn(32, 8, generator=torch.Generator().manual_seed(1))
        y = (x[:, 0] > 0).long()
        for step in range(start, steps):
            with rng.active():  # dropout draws the run's stream
                loss = F.cross_entropy(model(x), y)
                acc.backward(loss)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            if step + 1 == stop_at:
                training.save_checkpoint(
                    acc,
                    folder,
                    rng,
                    {"step": step + 1, "losses": losses},
                    tensors={"best": model.state_dict(), "none": None},
                    arrays={"probs": np.arange(3.0)},
                )
                break
        training.release(acc, model, opt)
    return losses


def test_a_checkpoint_saved_mid_run_resumes_to_the_same_losses(tmp_path):
    straight = _run(None, 10)
    ckpt = tmp_path / "checkpoint"
    assert not training.has_checkpoint(ckpt)
    assert len(_run(ckpt, 10, stop_at=4)) == 4
    assert training.has_checkpoint(ckpt) and not (tmp_path / "checkpoint.tmp").exists()
    _run(ckpt, 10, stop_at=4)  # saving again replaces the checkpoint in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    resumed = _run(ckpt, 10, resume=True)
    assert resumed == straight  # the model, optimizer, schedule and dropout stream all continued
    assert _run(None, 10)[4:] != _run(tmp_path / "none", 6)  # (a fresh start would not give them)


def test_a_checkpoint_cannot_land_on_a_file_and_a_missing_one_says_so(tmp_path):
    (tmp_path / "checkpoint").write_text("not a folder")
    with pytest.raises(FileExistsError, match="in the way"):
        _run(tmp_path / "checkpoint", 4, stop_at=2)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        _run(tmp_path / "elsewhere", 4, resume=True)
