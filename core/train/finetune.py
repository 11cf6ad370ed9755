"""Short fine-tunes for text classification: one linear, step-commented training function on `accelerate`.

The same ``train`` runs on CPU, on one GPU (bf16 autocast) and on several processes under ``accelerate launch``
(``accelerate launch --multi_gpu --num_processes 2 -m core.train.finetune_cli ... --device cpu`` runs two CPU
processes over gloo; accelerate's ``--cpu`` flag alone starts only one). It loads a fresh copy of the checkpoint
through ``core.models.loading.load`` (never the app's cached model), pads each batch only to its longest row (through
the tokenizer) and groups rows of similar length into batches, uses AdamW with no decay on biases and LayerNorm
weights, linear warmup and decay, gradient clipping, evaluates on the held-out split, stops early, checkpoints
every epoch and resumes. Padding, parameter groups, the Accelerator and checkpoints are core.train.common's, shared
with pretraining.

The rest of fine-tuning lives beside this loop: its settings (core.train.finetune_config), data plumbing
(core.train.finetune_data), model plumbing (core.train.finetune_model), the command line
(core.train.finetune_cli), and using a finished run (core.predict.classify). This module holds ``train``, what it
returns (``StepInfo``, ``FinetuneResult``), its checkpoints and the job wrapper around it.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.base.messages import Items, Message, msg
from core.data.datasets_local import DataError, LabelledData
from core.data.token_data import token_metrics as score_tokens
from core.models.devices import is_oom
from core.runtime.job_outcome import JobCancelled
from core.runtime.jobs import resource_for
from core.runtime.run_folders import CHECKPOINT_DIR
from core.train import common as training
from core.train.datamap import ARRAYS as MAP_ARRAYS
from core.train.datamap import DataMap, Recorder
from core.train.finetune_config import OOM_KIND, REMEDIES, FinetuneConfig, FinetuneError, remedies_for
from core.train.finetune_data import LengthGroupedBatches, padding_saved, task_for
from core.train.finetune_model import accelerator, freeze, load_fresh, param_groups, save_model
from core.train.memory import drop_frames
from core.train.rng import RunRNG


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class StepInfo:
    """What ``on_step`` receives: one optimizer step ("train") or one evaluation ("eval"). The step that closes an
    epoch of a sequence run carries the data map so far (``data_map``; never in ``metrics()``, which the curves keep)."""

    kind: str
    step: int
    total_steps: int
    epoch: float
    loss: float | None = None
    lr: float | None = None
    samples_per_s: float | None = None
    eta_s: float | None = None
    eval_accuracy: float | None = None
    eval_loss: float | None = None
    eval_f1: float | None = None  # task "token": held-out entity F1 (seqeval), the score early stopping follows
    data_map: DataMap | None = None  # core.train.datamap: after each finished epoch (task "sequence", cfg.data_map)

    @property
    def fraction(self) -> float:
        return self.step / max(1, self.total_steps)

    def message(self, with_eta: bool = True) -> Message:
        """One status line (a Message: English as a str, the page writes it in its language); ``with_eta=False``
        where the caller shows its own estimate (the app's job panel)."""
        at: dict[str, Any] = dict(step=self.step, total=self.total_steps, epoch=self.epoch)
        if self.kind == "eval":
            if self.eval_f1 is None:
                return msg("progress.finetune.eval", **at, accuracy=self.eval_accuracy)
            return msg("progress.finetune.eval_token", **at, accuracy=self.eval_accuracy, f1=self.eval_f1)
        at.update(loss=self.loss, samples_per_s=self.samples_per_s)
        if self.eta_s is None or not with_eta:
            return msg("progress.finetune.step", **at)
        return msg("progress.finetune.step_eta", **at, eta=self.eta_s)

    def metrics(self) -> dict[str, float]:
        keys = (
            ("step", "epoch", "loss", "lr", "samples_per_s")
            if self.kind == "train"
            else ("step", "epoch", "eval_accuracy", "eval_loss") + (("eval_f1",) if self.eval_f1 is not None else ())
        )
        return {k: getattr(self, k) for k in keys}


@dataclass(frozen=True)
class FinetuneResult:
    """A finished run: metrics on the held-out split, its curves, and where the model folder is."""

    config: FinetuneConfig
    data_name: str
    label_names: tuple[str, ...]
    model_dir: str
    device: str
    precision: str
    steps: int
    epochs_done: float
    stop_reason: str  # "finished", "early stopping", "max steps"
    train_seconds: float
    samples_per_s: float
    params_total: int
    params_trainable: int
    accuracy: float
    macro_f1: float
    majority_rate: float
    best_step: int
    confusion: np.ndarray  # (true, predicted) counts
    history: tuple[dict, ...]  # train steps: step, epoch, loss, lr, samples_per_s
    evals: tuple[dict, ...]  # evaluations: step, epoch, eval_accuracy, eval_loss
    test_texts: tuple[str, ...]
    test_labels: np.ndarray  # (n,)
    test_probs: np.ndarray  # (n, classes)
    padding_saved: float  # share of pad tokens avoided against padding every batch to max_length
    # pooling "scalar_mix": the learned softmax weights over (embeddings, layer 1..L), summing to 1
    layer_weights: tuple[float, ...] | None = None
    layer_gamma: float | None = None
    # task "token": entity-level P/R/F1 (seqeval), token accuracy, per-label table, majority-tag baseline. Then
    # accuracy is the token accuracy, macro_f1 the tag-level macro-F1, majority_rate the majority tag's token
    # accuracy, and test_texts/test_labels/test_probs/confusion are per word (the first piece of every word).
    token_metrics: Any = None  # core.data.token_data.TokenMetrics
    # task "sequence": the training examples' data map over the finished epochs (core.train.datamap), rows in the
    # order of data.train; None for task "token", with cfg.data_map off, or when no epoch finished
    data_map: DataMap | None = None

    @property
    def task(self) -> str:
        return self.config.task

    @property
    def test_preds(self) -> np.ndarray:
        return self.test_probs.argmax(-1)

    def worst_errors(self, n: int = 10) -> list[dict]:
        """Wrong held-out predictions, most confident first."""
        preds = self.test_preds
        wrong = np.flatnonzero(preds != self.test_labels)
        order = wrong[np.argsort(-self.test_probs[wrong, preds[wrong]])][:n]
        return [
            dict(
                text=self.test_texts[i],
                true=self.label_names[self.test_labels[i]],
                predicted=self.label_names[preds[i]],
                confidence=float(self.test_probs[i, preds[i]]),
                p_true=float(self.test_probs[i, self.test_labels[i]]),
            )
            for i in order
        ]


def _oom_message(cfg: FinetuneConfig, device: str) -> Message:
    """What to lower after running out of memory (kind OOM_KIND: the page finds it by its kind, not its words)."""
    offer = Items(REMEDIES[n][0] for n in remedies_for(cfg)) or Items((msg("finetune.remedy.smaller_checkpoint"),))
    return msg(
        OOM_KIND,
        device=device,
        batch=cfg.batch_size,
        max_len=cfg.max_length,
        half_batch=max(1, cfg.batch_size // 2),
        half_len=max(8, cfg.max_length // 2),
        offer=offer,
    )


# ---------------------------------------------------------------------------------------------- training
def train(
    cfg: FinetuneConfig,
    data,
    out_dir: str | Path,
    on_step: Callable[[StepInfo], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    resume: bool = False,
) -> FinetuneResult:
    """Fine-tune ``cfg.checkpoint`` on ``data.train``; evaluate on ``data.test``; save to ``out_dir/model``.

    ``data`` is a core.data.datasets_local.LabelledData for task "sequence", a core.data.token_data.TokenData for task
    "token"; the two differ only in small adapters (core.train.finetune_data's SequenceTask, TokenTask: encoding,
    collation, what a held-out row scores), the loop below is one.

    ``on_step`` is called after every optimizer step and every evaluation (the UI turns it into a progress
    bar and live curves); if it raises (e.g. core.runtime.job_outcome.JobCancelled), or ``should_stop()`` turns true, the
    state is checkpointed to ``out_dir/checkpoint`` first so ``resume=True`` continues from that step.
    Raises ValueError/ModelLoadError/DataError for bad settings, FinetuneError for NaN loss, out of memory
    or a checkpoint that does not match, and core.runtime.job_outcome.JobCancelled when stopped from outside.
    """
    import torch  # lazy: torch and transformers load in seconds; importing this module (the page) needs neither
    import torch.nn.functional as F  # lazy: as torch
    from torch.utils.data import DataLoader  # lazy: as torch
    from transformers import get_linear_schedule_with_warmup  # lazy: as torch

    out = Path(out_dir)
    ckpt_dir, model_dir = out / CHECKPOINT_DIR, out / "model"
    task = task_for(cfg, data)
    if len(data.train) < 2 or len(data.test) < 1:
        raise DataError(msg("finetune.data_needs_least_two"))

    # 1. One Accelerator: picks the device (CPU, GPU, or this process's share under `accelerate launch`),
    #    turns on bf16/fp16 autocast as asked (bf16 on GPU by default), and shards the batches across processes.
    with accelerator(cfg) as (acc, precision):
        # The run's own random stream (head init, dropout), not the process-wide seed other sessions share.
        rng = RunRNG(cfg.seed, cuda=acc.device.type == "cuda")

        # 2. A fresh copy of the model with a head for our labels, frozen where asked.
        with rng.active():
            model, tokenizer = load_fresh(cfg, data)
        freeze(model, cfg)
        params_total = sum(p.numel() for p in model.parameters())
        params_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)

        # 3. Tokenize once, unpadded; batches are padded to their own longest row, from length-grouped indices.
        #    (Token task: pre-split words, tags on first pieces, -100 elsewhere.)
        word_tok = task.tokenizer(tokenizer)
        train_enc = task.encode(word_tok, data.train, cfg.max_length)
        test_enc = task.encode(word_tok, data.test, cfg.max_length)
        train_lengths = [len(x) for x in train_enc.ids]
        sampler = LengthGroupedBatches(train_lengths, cfg.batch_size, cfg.seed, group=cfg.length_grouping)
        # Loaders get their own generator: drawing their base seed from the global RNG would shift dropout masks
        # after a resume.
        train_dl = DataLoader(
            train_enc,
            batch_sampler=sampler,
            collate_fn=task.collator(train_enc, word_tok),
            generator=torch.Generator().manual_seed(cfg.seed),
        )
        test_dl = DataLoader(
            test_enc,
            batch_sampler=LengthGroupedBatches([len(x) for x in test_enc.ids], cfg.batch_size * 2, 0, shuffle=False),
            collate_fn=task.collator(test_enc, word_tok),
            generator=torch.Generator().manual_seed(cfg.seed),
        )

        # 4. AdamW with no decay on biases/LayerNorm, then let accelerate place model, optimizer and loaders.
        # fused=True: one kernel per step for all parameters, as Trainer's default optimizer ("adamw_torch_fused");
        # the per-parameter loop took a quarter of a small model's step on a CPU (bench/finetune.py, token part).
        assert cfg.lr is not None  # FinetuneConfig.__post_init__ put the task's default in place of None
        optimizer = torch.optim.AdamW(param_groups(model, cfg.weight_decay, cfg.lr), lr=cfg.lr, fused=True)
        model, optimizer, train_dl, test_dl = acc.prepare(model, optimizer, train_dl, test_dl)

        # 5. Step budget (per process, after sharding) and the linear warmup + linear decay schedule.
        steps_per_epoch = len(train_dl)
        total_steps = steps_per_epoch * cfg.epochs
        stop_reason = "finished"
        if cfg.max_steps and cfg.max_steps < total_steps:
            total_steps, stop_reason = cfg.max_steps, "max steps"
        warmup = math.ceil(cfg.warmup_ratio * total_steps)
        scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
        acc.register_for_checkpointing(scheduler)
        eval_points = {
            min(steps_per_epoch, math.ceil(steps_per_epoch * (k + 1) / cfg.evals_per_epoch))
            for k in range(cfg.evals_per_epoch)
        }

        # 6. Resume: model, optimizer, scheduler and RNG from the checkpoint, our counters from trainer_state.json.
        state = dict(
            global_step=0,
            epoch=0,
            step_in_epoch=0,
            history=[],
            evals=[],
            best_acc=-1.0,
            best_step=0,
            bad_evals=0,
            best_probs=None,
            train_seconds=0.0,
            samples=0,
            fingerprint=data.fingerprint(),
            config=asdict(cfg),
        )
        best_weights = None
        # The data map's recorder: the gold label's probability of every training row in each epoch, read off the
        # training forward's logits (Dataset Cartography's training dynamics; sequence runs only).
        recorder = Recorder(data.train.labels, acc.device) if cfg.data_map and task.name == "sequence" else None
        if resume:  # accelerate restores the RNG states it saved: this run's (core.train.common.load_checkpoint)
            state, best_weights, mapped = _load_checkpoint(acc, ckpt_dir, cfg, data, rng, recorder)
            recorder = recorder if mapped else None  # a checkpoint without the map so far: no map, not half of one

        y_test = task.targets(test_enc)  # (units,): one per row, or one per word (token task)

        def evaluate() -> tuple[float, float, float, dict, np.ndarray]:
            """(score for early stopping, accuracy, loss, extra eval fields, probs (units, classes))."""
            model.eval()
            rows: dict[int, np.ndarray] = {}
            with torch.no_grad():
                for batch in test_dl:
                    idx, labels = batch.pop("idx"), batch.pop("labels")
                    logits = model(**batch).logits.float()  # (b, classes) or (b, pieces, tags)
                    if logits.ndim == 3:  # widths differ across processes: pad the piece axis first
                        logits = acc.pad_across_processes(logits, dim=1)
                        labels = acc.pad_across_processes(labels, dim=1, pad_index=-100)
                    idx = acc.pad_across_processes(idx, dim=0, pad_index=-1)
                    logits = acc.pad_across_processes(logits, dim=0)
                    labels = acc.pad_across_processes(labels, dim=0, pad_index=-100)
                    idx, probs_b, labels = (
                        acc.gather(idx).cpu(),
                        torch.softmax(acc.gather(logits), -1).cpu(),
                        acc.gather(labels).cpu(),
                    )
                    for r, i in enumerate(idx.tolist()):
                        if i >= 0:  # duplicates from even batching land on the same row
                            rows[i] = task.units(probs_b[r], labels[r]).numpy()
            model.train()
            probs = np.concatenate([rows[i] for i in range(len(test_enc))]).astype(np.float32)
            acc_ = float((probs.argmax(-1) == y_test).mean())
            loss_ = float(-np.log(np.clip(probs[np.arange(len(y_test)), y_test], 1e-12, None)).mean())
            score, extra = task.score(probs, test_enc)
            return score, acc_, loss_, extra, probs

        def emit(info: StepInfo) -> None:
            if on_step is not None and acc.is_main_process:
                on_step(info)

        # 7. The loop: forward (autocast on GPU), loss, backward, clip, step, schedule; evaluate at epoch ends.
        model.train()
        t_last = time.perf_counter()
        failure: BaseException | None = None
        try:
            while state["global_step"] < total_steps and state["epoch"] < cfg.epochs:
                epoch = state["epoch"]
                sampler.epoch = epoch  # same shuffle on every process, new one every epoch
                loader = (
                    acc.skip_first_batches(train_dl, state["step_in_epoch"]) if state["step_in_epoch"] else train_dl
                )
                for batch in loader:
                    if should_stop is not None and should_stop():
                        raise JobCancelled()
                    idx = batch.pop("idx")
                    labels = batch.pop("labels")
                    with rng.active():  # dropout draws this run's stream
                        logits = model(**batch).logits  # (b, classes) or (b, pieces, tags); autocast wraps forward
                        # One loss for both tasks: rows (b, classes) against (b,), or pieces (b*t, tags) against
                        # (b*t,), where -100 (special tokens, later pieces of a word, padding) is ignored.
                        loss = F.cross_entropy(logits.float().flatten(0, -2), labels.flatten(), ignore_index=-100)
                        loss_value = loss.item()
                        if not math.isfinite(loss_value):
                            raise FinetuneError(
                                msg(
                                    "finetune.loss_not_finite",
                                    loss_value=loss_value,
                                    step=state["global_step"] + 1,
                                    lr=scheduler.get_last_lr()[0],
                                )
                            )
                        if recorder is not None:  # no extra forward: this step's own logits
                            recorder.record(idx, logits, labels)
                        acc.backward(loss)
                        if cfg.grad_clip > 0:
                            acc.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                        optimizer.step()
                        scheduler.step()
                        optimizer.zero_grad(set_to_none=True)
                    state["global_step"] += 1
                    state["step_in_epoch"] += 1
                    closes_epoch = state["step_in_epoch"] == steps_per_epoch
                    data_map = recorder.end_epoch(acc) if recorder and closes_epoch else None  # all processes: a gather
                    now = time.perf_counter()
                    state["train_seconds"] += now - t_last
                    t_last = now
                    state["samples"] += labels.shape[0] * acc.num_processes
                    sps = state["samples"] / max(state["train_seconds"], 1e-9)
                    step_time = state["train_seconds"] / state["global_step"]
                    info = StepInfo(
                        "train",
                        state["global_step"],
                        total_steps,
                        epoch + state["step_in_epoch"] / steps_per_epoch,
                        loss=loss_value,
                        lr=float(scheduler.get_last_lr()[0]),
                        samples_per_s=sps,
                        eta_s=step_time * (total_steps - state["global_step"]),
                        data_map=data_map,
                    )
                    state["history"].append(info.metrics())
                    emit(info)
                    last_of_run = state["global_step"] >= total_steps
                    if state["step_in_epoch"] in eval_points or last_of_run:
                        # 8. Evaluate on the held-out split; remember the best weights; stop early on a plateau.
                        score, eval_acc, eval_loss, extra, probs = evaluate()
                        ev = StepInfo(
                            "eval",
                            state["global_step"],
                            total_steps,
                            info.epoch,
                            eval_accuracy=eval_acc,
                            eval_loss=eval_loss,
                            **extra,
                        )
                        state["evals"].append(ev.metrics())
                        emit(ev)
                        if score > state["best_acc"]:  # held-out accuracy, or entity F1 for the token task
                            state.update(best_acc=score, best_step=state["global_step"], bad_evals=0, best_probs=probs)
                            best_weights = {
                                k: v.detach().to("cpu", copy=True)
                                for k, v in acc.unwrap_model(model).state_dict().items()
                            }
                        else:
                            state["bad_evals"] += 1
                        t_last = time.perf_counter()  # evaluation time is not training time
                        if cfg.patience and state["bad_evals"] >= cfg.patience and not last_of_run:
                            stop_reason = "early stopping"
                            break
                    if last_of_run:
                        break
                else:
                    state["epoch"] += 1
                    state["step_in_epoch"] = 0
                    # 9. Checkpoint every epoch, so a crash or Cancel loses at most one epoch.
                    _save_checkpoint(acc, ckpt_dir, state, best_weights, rng, recorder)
                    continue
                break
        except JobCancelled as e:
            _save_checkpoint(acc, ckpt_dir, state, best_weights, rng, recorder)  # resume=True continues from here
            failure = e
        except Exception as e:
            failure = FinetuneError(_oom_message(cfg, str(acc.device)), remedies_for(cfg)) if is_oom(e) else e
        if failure is not None:
            # Raised outside the except blocks, with the traceback's frames cleared and our own references
            # dropped: an exception's traceback keeps every frame's locals (model, optimizer state, activations)
            # alive, on the GPU too, for as long as anyone holds the exception.
            training.release(acc, model, optimizer)
            model = optimizer = scheduler = train_dl = test_dl = loader = batch = labels = logits = loss = None
            best_weights = None
            drop_frames(failure)
            raise failure

        # 10. Keep the best evaluation's weights, save model + tokenizer (+ our metadata), drop the checkpoint.
        unwrapped = acc.unwrap_model(model)
        if best_weights is not None:
            unwrapped.load_state_dict(best_weights)
        probs = state["best_probs"]
        result = _result(
            cfg,
            data,
            model_dir,
            str(acc.device),
            precision,
            state,
            stop_reason,
            params_total,
            params_trainable,
            probs,
            y_test,
            train_lengths,
            task,
            test_enc,
            unwrapped,
            None if recorder is None else recorder.result(),
        )
        acc.wait_for_everyone()
        if acc.is_main_process:
            save_model(unwrapped, tokenizer, cfg, data, model_dir, result)
            shutil.rmtree(ckpt_dir, ignore_errors=True)
        acc.wait_for_everyone()
        training.release(acc, model, optimizer)
        return result


def _result(
    cfg,
    data,
    model_dir,
    device,
    precision,
    state,
    stop_reason,
    params_total,
    params_trainable,
    probs,
    labels_np,
    train_lengths,
    task,
    test_enc,
    model,
    data_map,
) -> FinetuneResult:
    from sklearn.metrics import confusion_matrix, f1_score  # lazy: sklearn loads scipy, only a finished run needs it

    preds = probs.argmax(-1)
    k = data.num_labels
    token_metrics, texts, majority = None, data.test.texts if task.name == "sequence" else (), None
    if task.name == "token":
        gold, pred = task.tag_lists(labels_np, test_enc), task.tag_lists(preds, test_enc)
        words = [tuple(ws[:n]) for ws, n in zip(data.test.words, test_enc.n_words)]
        token_metrics = score_tokens(
            words, gold, pred, data.majority_tag(), words_truncated=data.test.n_words - sum(test_enc.n_words)
        )
        texts = tuple(w for ws in words for w in ws)  # per word, like test_labels and test_probs
        majority = token_metrics.majority_accuracy
    weights = model.layer_weights() if hasattr(model, "layer_weights") else None
    return FinetuneResult(
        config=cfg,
        data_name=data.name,
        label_names=data.label_names,
        model_dir=str(model_dir),
        device=device,
        precision=precision,
        steps=state["global_step"],
        epochs_done=state["history"][-1]["epoch"] if state["history"] else 0.0,
        stop_reason=stop_reason,
        train_seconds=state["train_seconds"],
        samples_per_s=state["samples"] / max(state["train_seconds"], 1e-9),
        params_total=params_total,
        params_trainable=params_trainable,
        accuracy=float((preds == labels_np).mean()),
        macro_f1=float(f1_score(labels_np, preds, average="macro", labels=list(range(k)), zero_division=0)),
        majority_rate=data.majority_rate() if majority is None else majority,
        best_step=state["best_step"],
        confusion=confusion_matrix(labels_np, preds, labels=list(range(k))),
        history=tuple(state["history"]),
        evals=tuple(state["evals"]),
        test_texts=texts,
        test_labels=labels_np,
        test_probs=probs,
        padding_saved=padding_saved(train_lengths, cfg.batch_size, cfg.max_length, cfg.seed, cfg.length_grouping),
        layer_weights=None if weights is None else tuple(float(w) for w in weights),
        layer_gamma=None if weights is None else float(model.gamma.detach()),
        token_metrics=token_metrics,
        data_map=data_map,
    )


def _save_checkpoint(acc, ckpt_dir: Path, state: dict, best_weights: dict | None, rng, recorder) -> None:
    """core.train.common's checkpoint: accelerate's state (model, optimizer, scheduler, this run's RNG), our counters,
    the best evaluation's weights and held-out probabilities, and the data map so far (the epoch in progress too)."""
    training.save_checkpoint(
        acc,
        ckpt_dir,
        rng,
        {k: v for k, v in state.items() if k != "best_probs"},
        tensors={"best": best_weights},
        arrays={"best_probs": state["best_probs"], **({} if recorder is None else recorder.arrays(acc))},
    )


def _load_checkpoint(
    acc, ckpt_dir: Path, cfg: FinetuneConfig, data: LabelledData, rng, recorder: Recorder | None
) -> tuple[dict, dict | None, bool]:
    """(our counters, the best weights, whether ``recorder`` was given back the data map so far)."""
    if not training.has_checkpoint(ckpt_dir):
        raise FinetuneError(msg("finetune.nothing_resume_has_checkpoint", ckpt_dir=ckpt_dir))
    state = training.read_state(acc, ckpt_dir, FinetuneError)  # damaged: set aside, and the message says so
    if state.get("fingerprint") != data.fingerprint():
        raise FinetuneError(msg("finetune.checkpoint_was_trained_different"))
    old = state.get("config") or {}
    changed = [
        k
        for k in (
            "task",
            "family",
            "checkpoint",
            "batch_size",
            "max_length",
            "pooling",
            "seed",
            "epochs",
            "max_steps",
            "freeze_layers",
            "freeze_embeddings",
        )
        if old.get(k) != getattr(cfg, k)
    ]
    if changed:
        raise FinetuneError(msg("finetune.checkpoint_used_different_settings", changed=", ".join(changed)))
    state, tensors, arrays = training.load_checkpoint(
        acc, ckpt_dir, rng, tensors=("best",), arrays=("best_probs", *MAP_ARRAYS), error=FinetuneError
    )
    state["best_probs"] = arrays["best_probs"]
    return state, tensors["best"], recorder is not None and recorder.restore(arrays)


# ---------------------------------------------------------------------------------------------- as a job
def runs_root(session_id: str) -> Path:
    """Where this session's runs live: $ENCODERLAB_RUNS/<session> (default /tmp/encoderlab-runs)."""
    return Path(os.environ.get("ENCODERLAB_RUNS", "/tmp/encoderlab-runs")) / session_id


def job_fn(cfg: FinetuneConfig, data: LabelledData, out_dir: str | Path, resume: bool = False):
    """A core.runtime.jobs function: runs ``train`` and reports each step as progress + metrics (live curves).

    A partial of a module-level function over plain data, so core.runtime.jobs can run it in a worker process."""
    return functools.partial(_run_job, cfg, data, str(out_dir), resume)


def _run_job(cfg: FinetuneConfig, data: LabelledData, out_dir: str, resume: bool, ctx) -> FinetuneResult:
    def on_step(info: StepInfo) -> None:
        # the job panel adds its own ETA to this line: one estimate, not two; an epoch's last step brings the data
        # map so far, which the panel draws live (app/views/train/finetune_charts.py)
        extra = {} if info.data_map is None else {"data_map": info.data_map.to_metrics()}
        ctx.progress(info.fraction, info.message(with_eta=False), kind=info.kind, **info.metrics(), **extra)

    ctx.progress(0.0, msg("progress.loading_fresh_copy"))
    return train(cfg, data, out_dir, on_step=on_step, should_stop=lambda: ctx.cancelled, resume=resume)


def job_resource(cfg: FinetuneConfig) -> str:
    """'gpu' when the run will use CUDA, else 'cpu' (the job queue limits each separately)."""
    return resource_for(cfg.device)
