"""The pretraining loop: one linear, step-commented function with switchable objectives.

``pretrain(PretrainConfig(...))`` trains MLM (static or dynamic masking, optional whole-word), plus NSP (BERT),
SOP (ALBERT) or distillation from a teacher (DistilBERT); checkpoints every N steps and resumes from the last
one (model, optimizer, scheduler, RNG, step); writes a JSON log; is deterministic for a seed on one machine;
uses bf16 autocast on CUDA. The result is a frozen ``TrainReport`` and a Hugging Face folder in ``out``. What
differs by family is asked of the registry (``core.registry.pretraining.recipe`` and the ``Family`` fields); the
parameter groups, out-of-memory detection, padding and checkpoints are core.train.common's, shared with fine-tuning.

Randomness: the data order and the masks use their own seeded generators; the model's initialisation and
dropout draw the run's own stream (``core.train.rng.RunRNG``: CPU and CUDA states, saved in every checkpoint), so
concurrent runs in one server do not disturb each other. On a GPU a resumed run follows the same random stream,
but it is not bit-identical to an uninterrupted one: the backward of the embedding lookups (index_add / scatter
with atomic adds) and cuBLAS's split reductions sum in a run-dependent order, so losses agree closely rather
than exactly. ``torch.use_deterministic_algorithms(True)`` (with CUBLAS_WORKSPACE_CONFIG=:4096:8) would remove
that at a speed cost; it is not turned on here.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from core.base.fields import bounded, check_bounds
from core.base.messages import Problem, msg
from core.data.corpus import (
    CORPUS_DIR,
    HELDOUT_FILE,
    TRAIN_FILE,
    CorpusError,
    check_documents,
    held_out,
    load_documents,
    load_training_documents,
)
from core.data.masking import IGNORE, Masked, mask_tokens
from core.models.devices import is_oom, resolve_device
from core.models.loading import BUILD_LOCK
from core.registry import FAMILIES, families_with
from core.registry.pretraining import MAX_POSITIONS, recipe
from core.runtime.run_folders import CHECKPOINT_DIR
from core.train import common as training
from core.train.memory import drop_frames
from core.train.pretrain import build
from core.train.pretrain.data import Batch, Instance, collate, make_instances, pad, special_mask, tokenize_documents
from core.train.pretrain.evaluate import evaluate, unigram_top
from core.train.rng import RunRNG

LOG_FILE = "pretrain_log.json"
CKPT_DIR = CHECKPOINT_DIR  # dropped with a closed session (core.runtime.run_folders.drop_checkpoints)


class PretrainError(Problem, ValueError):
    """The run cannot start or continue; the message says why and what to do. Checkpoints are kept."""


@dataclass(frozen=True)
class PretrainConfig:
    """Everything a run needs. Checks itself; bad values raise PretrainError with the fix."""

    family: str
    out: str
    corpus: str = str(CORPUS_DIR)
    heldout: str | None = None  # default: heldout.txt next to the corpus, else a hash split of its documents
    # the training files of a corpus folder (its train.txt; the bundled corpus adds train_everyday.txt)
    train_files: tuple[str, ...] = (TRAIN_FILE,)
    # Numeric settings declare their range once (core.base.fields.bounded): __post_init__, the lab page's widgets, the
    # URL fields and the command line read it from here. Steps also stay within max_steps (the caller's limit).
    steps: int = bounded(300, 1, None, label="Steps")
    batch_size: int = bounded(32, 1, None, label="Batch size")
    max_len: int = bounded(128, 16, MAX_POSITIONS, label="Max length", hint="tokens")
    lr: float = bounded(5e-4, 0.0, 1.0, open_lo=True, label="Learning rate")
    # learning rate of the fresh MLM/pair heads (default: lr)
    head_lr: float | None = bounded(None, 0.0, 1.0, open_lo=True, kind=float, label="Head learning rate")
    embed_lr: float | None = None  # learning rate of the input embeddings (ALBERT: and E -> H); default: lr
    # ALBERT from MiniLM: first fit the shared layer to MiniLM's hidden states (build.MiniLMFit); 0 = off
    fit_steps: int = bounded(0, 0, None, label="fit_steps")
    fit_lr: float = 1e-3  # ... its learning rate for the shared layer
    fit_embed_lr: float = 3e-3  # ... and for the factorized embeddings
    prior_bias: bool = True  # start a fresh MLM head's output bias at log unigram frequencies
    # keep the word embeddings (and so the tied MLM decoder) as the start has them: words the corpus rarely shows
    # keep the start's place in embedding space instead of being pushed away as negatives; the output bias learns
    freeze_word_embeddings: bool = False
    # fraction of steps; the same range as fine-tuning's warmup_ratio
    warmup: float = bounded(0.06, 0.0, 0.5, label="Warmup", hint="a fraction of the steps")
    weight_decay: float = bounded(0.01, 0.0, 0.3, label="Weight decay")
    clip: float = bounded(1.0, 0.0, 10.0, label="Gradient clipping", hint="0 turns it off")
    size: str = "tiny"
    init: str = "scratch"  # "scratch", "minilm" (BERT: the offline MiniLM encoder), or a model folder to continue
    # with init "minilm": a BERT folder (bert-base-uncased vocabulary) whose encoder takes the MiniLM's place
    encoder_from: str | None = None
    mlm_probability: float = bounded(
        0.15, 0.0, 1.0, open_lo=True, open_hi=True, label="mlm_probability", hint="BERT uses 0.15"
    )
    masking: str = "dynamic"  # "static": one mask per instance for the whole run; "dynamic": fresh every visit
    whole_word: bool = False
    pair: str | None = "auto"  # "auto" = the family's own head (NSP for BERT, SOP for ALBERT), None = MLM only
    teacher: str | None = None  # DistilBERT: a BertForPreTraining folder to distil from
    student_layers: tuple[int, ...] | None = None  # default: every other teacher layer (0, 2, 4, ...)
    temperature: float = bounded(2.0, 0.0, None, open_lo=True, label="The distillation temperature")
    alpha_mlm: float = 2.0  # DistilBERT's weights: 5 * KL + 2 * MLM + 1 * cosine
    alpha_kl: float = 5.0
    alpha_cos: float = 1.0
    vocab_size: int | None = None  # BPE/Unigram vocabulary; default by size
    seed: int = bounded(0, 0, 2**31 - 1, label="Seed")
    log_every: int = bounded(10, 1, None, label="log_every")
    eval_every: int = bounded(100, 0, None, label="eval_every", hint="0 = only at the end")
    eval_instances: int = bounded(256, 1, None, label="eval_instances")
    checkpoint_every: int = bounded(100, 0, None, label="checkpoint_every", hint="0 = no checkpoints")
    resume: bool = True
    device: str = "auto"
    # "auto": bf16 autocast on a GPU that has it, fp32 elsewhere; "bf16": bf16 autocast on the CPU too (fast where
    # the CPU has bf16 instructions: avx512_bf16 / AMX); "fp32": never autocast
    precision: str = "auto"
    threads: int | None = None
    fp16_export: bool = False
    max_documents: int | None = None  # use only the first N training documents (quick runs)
    max_steps: int = 1_000_000  # limits a caller (the lab page) imposes
    max_size: str = "small"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise PretrainError(msg("pretrain.unknown_family_use_one", family=self.family, choices=", ".join(FAMILIES)))
        if self.size not in build.SIZES:
            raise PretrainError(msg("pretrain.unknown_size_use_one", size=self.size, choices=", ".join(build.SIZES)))
        order = list(build.SIZES)
        if order.index(self.size) > order.index(self.max_size):
            raise PretrainError(msg("pretrain.size_over_limit_here", size=self.size, max_size=self.max_size))
        check_bounds(self, PretrainError)  # every bounded field above, with its range
        if self.steps > self.max_steps:
            raise PretrainError(msg("pretrain.steps_must_between_here", max_steps=self.max_steps, steps=self.steps))
        if self.precision not in ("auto", "bf16", "fp32"):
            raise PretrainError(msg("pretrain.precision_must_auto_bf"))
        if self.masking not in ("static", "dynamic"):
            raise PretrainError(msg("pretrain.masking_must_static_dynamic"))
        if self.init not in ("scratch", "minilm") and not (Path(self.init) / "config.json").exists():
            raise PretrainError(msg("pretrain.init_must_scratch_minilm"))
        rec = recipe(self.family)
        if self.encoder_from is not None and (
            self.init != "minilm" or not (Path(self.encoder_from) / "config.json").exists()
        ):
            raise PretrainError(msg("pretrain.encoder_from_takes_encoder"))
        if self.init == "minilm" and rec.from_minilm is None:
            starts = ", ".join(f.label for k, f in FAMILIES.items() if recipe(k).from_minilm is not None)
            raise PretrainError(
                msg("pretrain.minilm_distils" if rec.distils else "pretrain.minilm_with", starts=starts)
            )
        head = FAMILIES[self.family].pair_head
        if self.pair not in ("auto", None, "nsp", "sop"):
            raise PretrainError(msg("pretrain.pair_must_auto_none"))
        if self.pair in ("nsp", "sop") and self.pair != head:
            has = f"has a {head.upper()} head" if head else "has no sentence-pair head"
            owners = " or ".join(f.label for f in families_with(pair_head=self.pair)) or "another family"
            raise PretrainError(
                msg(
                    "pretrain.needs_switch_off",
                    label=FAMILIES[self.family].label,
                    has=has,
                    pair_head=self.pair.upper(),
                    owners=owners,
                )
            )
        if self.fit_steps and not (rec.fits_to_minilm and self.init == "minilm"):
            fits = ", ".join(f.label for k, f in FAMILIES.items() if recipe(k).fits_to_minilm) or "none"
            raise PretrainError(msg("pretrain.fit_steps_fits_shared", fits=fits))
        if self.teacher and not rec.distils:
            students = ", ".join(f.label for k, f in FAMILIES.items() if recipe(k).distils)
            raise PretrainError(msg("pretrain.distillation_needs_distilled_family", students=students))

    @property
    def pair_objective(self) -> str | None:
        return FAMILIES[self.family].pair_head if self.pair == "auto" else self.pair


@dataclass(frozen=True)
class TrainReport:
    family: str
    out: str
    status: str  # "done" or "stopped"
    steps: int
    wall_s: float
    params: int
    history: tuple[dict, ...]
    evals: tuple[dict, ...]
    final: dict
    config: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- helpers
def _heldout_docs(cfg: PretrainConfig, docs: list[list[str]]) -> tuple[list[list[str]], list[list[str]]]:
    """(train, held-out) documents: a heldout file when there is one, else a stable hash split."""
    corpus = Path(cfg.corpus)
    path = Path(cfg.heldout) if cfg.heldout else (corpus / HELDOUT_FILE if corpus.is_dir() else None)
    if path is not None and path.exists():
        return docs, load_documents(path)
    ho = [d for i, d in enumerate(docs) if held_out("\n".join(d))]
    tr = [d for i, d in enumerate(docs) if not held_out("\n".join(d))]
    if not ho:
        k = max(1, len(docs) // 20)
        tr, ho = docs[:-k] if len(docs) > k else docs, docs[-k:]
    return tr, ho


def _param_groups(model, family: str, cfg: PretrainConfig):
    """Six groups: (encoder | embeddings | heads) x (decay | no decay on biases and LayerNorm), core.train.common's."""
    return training.param_groups(
        model,
        cfg.lr,
        cfg.weight_decay,
        head_lr_mult=(cfg.head_lr or cfg.lr) / cfg.lr,
        head_prefixes=build.head_paths(model),
        embed_lr_mult=(cfg.embed_lr or cfg.lr) / cfg.lr,
        embed_prefixes=build.embedding_paths(model, family),
    )


def _build_model(cfg: PretrainConfig, tokenizer, teacher):
    """The model to train: the student cut from its teacher, the MiniLM start, a folder to continue, or fresh."""
    with BUILD_LOCK:  # a fresh model built while another thread loads would skip its weight init
        if teacher is not None:
            return build.student(cfg.family, teacher, cfg.student_layers)
        if cfg.init == "minilm":
            return build.from_minilm(cfg.family, tokenizer, source=cfg.encoder_from)
        if cfg.init != "scratch":
            return build.pretraining_class(cfg.family).from_pretrained(
                cfg.init, use_safetensors=True, dtype=torch.float32
            )
        model = build.pretraining_class(cfg.family)(build.new_config(cfg.family, cfg.size, tokenizer))
    model.config.architectures = [type(model).__name__]
    return model


def _static_masks(instances: list[Instance], tokenizer, cfg: PretrainConfig) -> list[Masked]:
    """One fixed mask per instance for the whole run (BERT's static masking), drawn in blocks for speed."""
    gen = torch.Generator().manual_seed(cfg.seed + 17)
    out = []
    for b0 in range(0, len(instances), 512):
        block = instances[b0 : b0 + 512]
        ids, att, _, words, _ = pad(block, tokenizer)
        m = mask_tokens(
            ids,
            special_mask(ids, att, tokenizer),
            mask_id=tokenizer.mask_token_id,
            vocab_size=len(tokenizer),
            generator=gen,
            mlm_probability=cfg.mlm_probability,
            word_ids=words if cfg.whole_word else None,
        )
        for r in range(len(block)):
            real = att[r].bool()  # the instance's own tokens, whichever side the tokenizer pads
            out.append(Masked(m.input_ids[r][real][None].clone(), m.labels[r][real][None].clone()))
    return out


def _stack_static(masks: list[Masked], tokenizer) -> Masked:
    """The batch's fixed masks padded like its instances (core.train.common.pad: the tokenizer's side; labels -100)."""
    b = training.pad(
        tokenizer,
        [{"input_ids": m.input_ids[0].tolist(), "labels": m.labels[0].tolist()} for m in masks],
        fill={"labels": IGNORE},
    )
    return Masked(b["input_ids"], b["labels"])


def _has_checkpoint(out: Path) -> bool:
    return training.has_checkpoint(out / CKPT_DIR)


# ---------------------------------------------------------------------------------------------- the loop
def pretrain(
    cfg: PretrainConfig,
    on_step: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_fit: Callable[[int, int, float], None] | None = None,
    on_eval: Callable[[object, object], dict] | None = None,
) -> TrainReport:
    """Train, checkpoint, evaluate and save a model folder in ``cfg.out``; returns the TrainReport.

    ``on_step(info)`` is called after every step with step, fraction, losses and accuracies (and ``eval`` when
    one ran); ``should_stop()`` ends the run early after a checkpoint (status "stopped"); ``on_fit(step, steps,
    cosine)`` follows the ALBERT fit to MiniLM (cfg.fit_steps) that comes before the first step; ``on_eval(model,
    tokenizer)`` adds its dict to every held-out evaluation (the zoo scores the everyday-English probe there), with
    the model in eval mode and no gradients.
    Raises PretrainError (bad corpus, out of memory: checkpoints are kept) or CorpusError.
    """
    import transformers

    transformers.logging.set_verbosity_error()
    t0 = time.time()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    fam, rec = FAMILIES[cfg.family], recipe(cfg.family)
    if cfg.teacher and not rec.distils:
        raise PretrainError(msg("pretrain.not_distilled_from_teacher", label=fam.label))
    dev = resolve_device(cfg.device)
    # 1. one Accelerator (device, bf16 autocast on a GPU that has it; checkpoints through its save_state); seeds:
    #    instances, data order and masks have their own seeded generators; init and dropout draw the run's own
    #    stream (RunRNG), never the process-wide one that other sessions share
    mixed = (
        "bf16"
        if cfg.precision == "bf16" or (cfg.precision == "auto" and dev.kind == "cuda" and training.bf16_ok())
        else "no"
    )
    with training.accelerator(dev.kind, mixed, PretrainError) as acc:
        device = acc.device
        rng = RunRNG(cfg.seed, cuda=dev.kind == "cuda")
        pair = cfg.pair_objective

        # 2. corpus -> train / held-out documents
        docs = load_training_documents(cfg.corpus, tuple(cfg.train_files))[: cfg.max_documents]
        check_documents(docs, need_pairs=pair is not None)
        train_docs, heldout_docs = _heldout_docs(cfg, docs)
        check_documents(train_docs, need_pairs=pair is not None)

        # 3. tokenizer: the family's own kind (reused on resume so ids stay the same); a student takes its teacher's
        resuming = cfg.resume and _has_checkpoint(out)
        teacher, teacher_family = None, fam.distilled_from
        if cfg.teacher:
            assert teacher_family is not None  # PretrainConfig takes a teacher for a distilled family only
            with BUILD_LOCK:  # see core.models.loading.BUILD_LOCK: one model build at a time per process
                teacher = (
                    build.pretraining_class(teacher_family)
                    .from_pretrained(cfg.teacher, use_safetensors=True, dtype=torch.float32)
                    .to(device)
                    .eval()
                )
            tokenizer = transformers.AutoTokenizer.from_pretrained(cfg.teacher)
            if not fam.token_types:
                tokenizer.model_input_names = ["input_ids", "attention_mask"]
            tokenizer.save_pretrained(str(out))
        elif cfg.init not in ("scratch", "minilm"):
            tokenizer = transformers.AutoTokenizer.from_pretrained(cfg.init)
            tokenizer.save_pretrained(str(out))
        elif (out / "tokenizer.json").exists() and resuming:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(out))
        else:
            vocab = cfg.vocab_size or build.SIZES[cfg.size]["vocab"]
            tokenizer = build.build_tokenizer(cfg.family, [s for d in train_docs for s in d], vocab, out)

        # 4. model: fresh config, the MiniLM start (first fitted to MiniLM, cfg.fit_steps), or the student cut from
        #    its teacher
        if cfg.fit_steps and not resuming:  # minutes of fitting (the zoo's command line): its dropout is seeded too,
            with rng.active():  # so it holds the build lock throughout
                model = build.from_minilm(
                    cfg.family,
                    tokenizer,
                    source=cfg.encoder_from,
                    fit=build.MiniLMFit(
                        train_docs,
                        steps=cfg.fit_steps,
                        lr=cfg.fit_lr,
                        embed_lr=cfg.fit_embed_lr,
                        seed=cfg.seed,
                        on_step=on_fit,
                        bf16=mixed == "bf16",
                        device=str(device),
                    ),
                )
        else:
            with rng.active():
                model = _build_model(cfg, tokenizer, teacher)
        if mixed == "bf16" and dev.kind == "cpu" and getattr(model, "_can_set_attn_implementation", lambda: False)():
            # measured on a 2-core EPYC (bert-mini, 16 x 64): torch's bf16 flash-attention backward on the CPU took
            # a quarter of the step; the eager (matmul) attention makes the step 1.3x faster
            model.set_attn_implementation("eager")
        if cfg.freeze_word_embeddings:
            model.get_input_embeddings().weight.requires_grad_(False)
        model.to(device).train()
        params = sum(p.numel() for p in model.parameters())

        # 5. instances (and static masks); held-out instances never trained on
        use_types = fam.token_types
        train_inst = make_instances(
            tokenize_documents(train_docs, tokenizer, cfg.family),
            tokenizer,
            pair=pair,
            max_len=cfg.max_len,
            seed=cfg.seed,
            use_types=use_types,
        )
        eval_inst = make_instances(
            tokenize_documents(heldout_docs, tokenizer, cfg.family),
            tokenizer,
            pair=pair,
            max_len=cfg.max_len,
            seed=cfg.seed + 1,
            use_types=use_types,
        )[: cfg.eval_instances]
        if not train_inst or not eval_inst:
            raise CorpusError(msg("pretrain.no_training_or_heldout"))
        static = _static_masks(train_inst, tokenizer, cfg) if cfg.masking == "static" else None
        unigram = unigram_top(train_inst, tokenizer)
        if cfg.prior_bias and teacher is None and cfg.init in ("scratch", "minilm"):  # only a fresh head
            special = set(tokenizer.all_special_ids)
            build.init_bias_to_prior(
                model, cfg.family, Counter(i for x in train_inst for i in x.ids if i not in special)
            )

        # 6. optimizer (no decay on biases/LayerNorm), linear warmup + decay; accelerate places them and saves
        #    them in checkpoints (the scheduler as an object registered for checkpointing)
        # fused=True: one kernel per step for all parameters (the per-parameter loop took a fifth of a bert-mini
        # step on a 2-core CPU, measured), as core.train.finetune
        optimizer = torch.optim.AdamW(
            _param_groups(model, cfg.family, cfg), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-6, fused=True
        )
        scheduler = transformers.get_linear_schedule_with_warmup(
            optimizer, math.ceil(cfg.warmup * cfg.steps), cfg.steps
        )
        model, optimizer = acc.prepare(model, optimizer)
        acc.register_for_checkpointing(scheduler)

        # 7. resume from the last checkpoint when there is one
        step, history, evals = 0, [], []
        ckpt = out / CKPT_DIR
        if resuming:
            state, _, _ = training.load_checkpoint(acc, ckpt, rng, error=PretrainError)  # damaged: set aside
            step, history, evals = int(state["step"]), state["history"], state["evals"]
        start_step = step
        setup_s = round(time.time() - t0, 2)

        def save(at: int) -> None:
            training.save_checkpoint(acc, ckpt, rng, {"step": at, "history": history, "evals": evals})

        n = len(train_inst)
        window: list[dict] = []
        status = "done"
        failure: BaseException | None = None
        batch: Batch | None = None  # set to None after a failure, with the other references, to free them
        try:
            while step < cfg.steps:
                # 8a. the batch: a seeded permutation per epoch, so the order is a function of (seed, step)
                first = step * cfg.batch_size
                idx, cur_epoch = [], -1
                for j in range(first, first + cfg.batch_size):
                    epoch, pos = divmod(j, n)
                    if epoch != cur_epoch:
                        cur_epoch = epoch
                        perm = torch.randperm(n, generator=torch.Generator().manual_seed(cfg.seed * 1000 + epoch))
                    idx.append(int(perm[pos]))
                chunk = [train_inst[i] for i in idx]
                if static is not None:
                    batch = collate(
                        chunk,
                        tokenizer,
                        generator=None,
                        mlm_probability=cfg.mlm_probability,
                        whole_word=cfg.whole_word,
                        vocab_size=len(tokenizer),
                        masked=_stack_static([static[i] for i in idx], tokenizer),
                    )
                else:
                    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
                    batch = collate(
                        chunk,
                        tokenizer,
                        generator=gen,
                        mlm_probability=cfg.mlm_probability,
                        whole_word=cfg.whole_word,
                        vocab_size=len(tokenizer),
                    )
                ids, att = batch.input_ids.to(device), batch.attention_mask.to(device)
                types = batch.token_type_ids.to(device)
                sel = (batch.labels != -100).to(device)
                gold = batch.labels.to(device)[sel]

                # 8b. forward: MLM on the selected positions only, then the pair head / distillation terms
                with rng.active():  # dropout draws this run's stream, from the forward to the optimizer step
                    with acc.autocast():
                        seq, pooled = build.encode(model, cfg.family, ids, att, types)
                        logits = build.mlm_logits(model, cfg.family, seq[sel]).float()  # (n_selected, vocab)
                        mlm_loss = torch.nn.functional.cross_entropy(logits, gold) if gold.numel() else logits.sum() * 0
                        loss = mlm_loss
                        info = {
                            "mlm_loss": mlm_loss.item(),
                            "mlm_acc": (logits.argmax(-1) == gold).float().mean().item() if gold.numel() else 0.0,
                        }
                        if pair is not None:
                            pair_out = build.pair_logits(model, cfg.family, pooled)
                            assert pair_out is not None  # a pair objective is set for a family with a pair head only
                            pl = pair_out.float()
                            plabels = batch.pair_labels.to(device)
                            pair_loss = torch.nn.functional.cross_entropy(pl, plabels)
                            loss = loss + pair_loss
                            info[f"{pair}_loss"] = pair_loss.item()
                            info[f"{pair}_acc"] = (pl.argmax(-1) == plabels).float().mean().item()
                        if teacher is not None and teacher_family is not None:  # a teacher has a family (above)
                            with torch.no_grad():
                                t_seq, _ = build.encode(teacher, teacher_family, ids, att, torch.zeros_like(ids))
                                t_logits = build.mlm_logits(teacher, teacher_family, t_seq[sel]).float()
                            T = cfg.temperature
                            kl = (
                                torch.nn.functional.kl_div(
                                    torch.log_softmax(logits / T, -1),
                                    torch.softmax(t_logits / T, -1),
                                    reduction="batchmean",
                                )
                                * T
                                * T
                            )
                            keep = att.bool()
                            cos = (
                                1
                                - torch.nn.functional.cosine_similarity(
                                    seq[keep].float(), t_seq[keep].float(), dim=-1
                                ).mean()
                            )
                            loss = cfg.alpha_mlm * mlm_loss + cfg.alpha_kl * kl + cfg.alpha_cos * cos
                            info.update(kl=kl.item(), cos=cos.item())

                    # 8c. backward, clip, step
                    acc.backward(loss)
                    acc.clip_grad_norm_(model.parameters(), cfg.clip)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                step += 1
                info.update(loss=loss.item(), lr=scheduler.get_last_lr()[0])
                window.append(info)

                # 8d. log (window means), evaluate, checkpoint, report
                event = {"step": step, "fraction": step / cfg.steps, "elapsed": time.time() - t0, **info}
                if step % cfg.log_every == 0 or step == cfg.steps:
                    mean = {k: sum(w[k] for w in window) / len(window) for k in window[0]}
                    history.append(
                        {
                            "step": step,
                            "elapsed": round(time.time() - t0, 2),
                            **{k: round(v, 5) for k, v in mean.items()},
                        }
                    )
                    window = []
                if (cfg.eval_every and step % cfg.eval_every == 0) or step == cfg.steps:
                    ev = evaluate(model, cfg.family, tokenizer, eval_inst, unigram, device=device, samples=3)
                    ev = {"step": step, **ev}
                    if on_eval is not None:
                        model.eval()
                        with torch.no_grad():
                            # without accelerate's autocast wrapper on forward (training calls the base model and
                            # heads directly, so it never used it): the probe reads fp32 logits, as a loaded model
                            ev.update(on_eval(acc.unwrap_model(model, keep_fp32_wrapper=False), tokenizer))
                        model.train()
                    evals.append(ev)
                    event["eval"] = ev
                if cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and step < cfg.steps:
                    save(step)
                if on_step is not None:
                    on_step(event)
                if should_stop is not None and step < cfg.steps and should_stop():
                    save(step)
                    status = "stopped"
                    break
        except (
            Exception
        ) as e:  # an error, out of memory, or a Cancel raised from on_step (core.runtime.job_outcome.JobCancelled)
            failure = (
                PretrainError(
                    f"Out of memory at step {step}: lower the batch size ({cfg.batch_size}), the max length "
                    f"({cfg.max_len}) or the model size. The last checkpoint is kept in {ckpt} and the run resumes "
                    "from it."
                )
                if is_oom(e)
                else e
            )
        if failure is not None:
            # Raised outside the except block, with the traceback's frames cleared and our references dropped: a
            # traceback keeps every frame's locals (model, optimizer state, activations) alive, on the GPU too.
            training.release(acc, model, optimizer)
            model = teacher = optimizer = scheduler = batch = ids = att = types = sel = gold = None
            # and the graphs, each of which holds the model's parameters
            seq = pooled = logits = loss = mlm_loss = pl = pair_out = pair_loss = kl = cos = t_seq = t_logits = None
            drop_frames(failure)
            raise failure

        # 9. save the Hugging Face folder and the log
        wall = time.time() - t0
        final = evals[-1] if evals else {}
        _save_folder(acc.unwrap_model(model), tokenizer, out, cfg.fp16_export)
        training.release(acc, model, optimizer)
        model = optimizer = scheduler = teacher = None
    report = TrainReport(
        cfg.family,
        str(out),
        status,
        step,
        round(wall, 2),
        params,
        tuple(history),
        tuple(evals),
        final,
        _config_dict(cfg),
    )
    (out / LOG_FILE).write_text(
        json.dumps(
            {**asdict(report), "resumed_from": start_step, "setup_s": setup_s, "unigram_top5_ids": unigram},
            indent=1,
            default=str,
        )
        + "\n"
    )
    return report


def _config_dict(cfg: PretrainConfig) -> dict:
    d = asdict(cfg)
    d["pair_objective"] = cfg.pair_objective
    return d


def _save_folder(model, tokenizer, out: Path, fp16: bool) -> None:
    """save_pretrained (safetensors); fp16 weights keep dtype float32 in config so loads run in fp32."""
    model.config.architectures = [type(model).__name__]
    if fp16:
        half = copy.deepcopy(model).half()
        half.config.dtype = torch.float32
        half.save_pretrained(str(out), safe_serialization=True)
        cfgp = out / "config.json"
        d = json.loads(cfgp.read_text())
        d["dtype"] = "float32"
        cfgp.write_text(json.dumps(d, indent=2) + "\n")
    else:
        model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
