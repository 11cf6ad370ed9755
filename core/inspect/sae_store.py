"""A trained SAE (core.inspect.sae): the job that trains, measures and saves it, the saved folder, and what the feature
browser reads from it (each feature's top-activating held-out contexts, its density, its mean activation).

Saved per model (core.runtime.artifacts.model_key, tag SAE_TAG), layer and settings under sae_root()
($ENCODERLAB_SAE_DIR, default <runs>/sae-cache, bounded with the runs), written whole by artifacts.write_folder, so a
second visit with the same model, layer and settings loads it at once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.base.caches import register as register_cache
from core.base.messages import carry, msg
from core.base.paths import scrub
from core.inspect import sae as S
from core.models.loading import load
from core.models.spec import LoadedModel, ModelSpec
from core.predict.fill_mask import FillMaskError, check_mlm
from core.runtime import artifacts
from core.runtime.job_outcome import JobCancelled

SAE_TAG = "sae1"  # bump when saved SAEs' meaning changes: old folders are then never read
TOP_CONTEXTS = 8  # top-activating held-out contexts kept per feature
KEEP = 4  # loaded SAEs kept per process (LRU)
WEIGHTS_FILE, REPORT_FILE, BROWSE_FILE, SENTENCES_FILE = (
    "sae.safetensors",
    "report.json",
    "browse.npz",
    "sentences.json",
)


@dataclass(frozen=True)
class SAEReport:
    """A trained SAE: what it was trained on and how, and its quality on held-out text."""

    key: str
    checkpoint: str
    family: str
    layer: int
    hidden: int
    features: int
    config: dict
    quality: dict  # core.inspect.sae.summary_row
    train_tokens: int
    eval_tokens: int
    seconds: dict = field(default_factory=dict)  # states, training, measuring
    created: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> SAEReport:
        return cls(**json.loads(text))


@dataclass(frozen=True, eq=False)
class Browse:
    """What the feature browser shows, measured on the held-out sentences: per feature (F, C) the sentence, position,
    activation and token id of its top contexts (activation 0: fewer than C contexts fired), its density (share of
    held-out tokens it fires on) and mean activation when it fires; the held-out sentences; the mean state."""

    ctx_sentence: np.ndarray
    ctx_position: np.ndarray
    ctx_activation: np.ndarray
    ctx_token: np.ndarray
    density: np.ndarray
    mean_activation: np.ndarray
    mean_state: np.ndarray
    sentences: tuple[str, ...]


def sae_root() -> Path:
    """Where SAEs are saved: $ENCODERLAB_SAE_DIR, default <runs>/sae-cache (bounded with the runs)."""
    return artifacts.cache_root("ENCODERLAB_SAE_DIR", "sae-cache")


def digest(cfg: S.SAEConfig) -> str:
    """A short hash of every setting (the saved SAE's folder name carries it)."""
    return hashlib.sha256(json.dumps(asdict(cfg), sort_keys=True).encode()).hexdigest()[:12]


def sae_dir(lm: LoadedModel, cfg: S.SAEConfig) -> Path:
    """This model's, layer's and settings' folder (named by family, key, int8 or not, and digest: never by a server
    path; an int8 model's states differ from its fp32 one's)."""
    quant = f"-{lm.spec.quant}" if lm.spec.quant else ""
    return (
        sae_root() / f"{lm.spec.family}-{artifacts.model_key(lm, SAE_TAG)}{quant}" / f"layer{cfg.layer}-{digest(cfg)}"
    )


# ---------------------------------------------------------------------------------------------- the browser's data
def browse_of(sae, states, sentence, position, ids, sentences) -> Browse:
    """Top contexts, density and mean activation of every feature over held-out ``states`` (rows, H), each row's
    sentence index, position and token id."""
    import torch

    codes = S.codes_of(sae, states)
    c = min(TOP_CONTEXTS, len(codes))
    act, row = codes.topk(c, dim=0)  # (C, F)
    fired = codes > 0
    count = fired.sum(0)
    mean_act = torch.where(count > 0, codes.sum(0) / count.clamp_min(1), torch.zeros_like(codes[0]))
    return Browse(
        ctx_sentence=S.as_numpy(sentence[row].T).astype(np.int32),
        ctx_position=S.as_numpy(position[row].T).astype(np.int32),
        ctx_activation=S.as_numpy(act.T).astype(np.float32),
        ctx_token=S.as_numpy(ids[row].T).astype(np.int64),
        density=S.as_numpy(count.float() / max(len(codes), 1)).astype(np.float32),
        mean_activation=S.as_numpy(mean_act).astype(np.float32),
        mean_state=S.as_numpy(states.mean(0)).astype(np.float32),
        sentences=tuple(sentences),
    )


def token_ids(lm: LoadedModel, sentences, sentence, position):
    """(rows,) the token id at each (sentence, position) row of core.inspect.sae.layer_states."""
    import torch

    enc = lm.tokenizer(list(sentences), truncation=True, max_length=S.MAX_LENGTH)["input_ids"]
    return torch.tensor([enc[s][p] for s, p in zip(sentence.tolist(), position.tolist(), strict=True)])


# ---------------------------------------------------------------------------------------------- train and save
def train_and_save(
    lm: LoadedModel, cfg: S.SAEConfig, progress: Callable[..., None] | None = None, save: bool = True
) -> tuple[Any, SAEReport, Browse]:
    """Read the states, train, measure, build the browser's data and save them (``save``). ``progress(fraction,
    message, **metrics)`` along the way (a job's ctx.progress: it raises on Cancel)."""
    report_to = progress or (lambda *a, **k: None)
    cfg.check(lm)
    try:
        check_mlm(lm)
    except FillMaskError as e:
        raise S.SAEError(carry(e)) from None
    train, held = S.training_text(cfg)
    report_to(0.0, msg("progress.sae.reading", n=len(train), layer=cfg.layer))
    (states, _, _), t_states = S.timed(lambda: S.layer_states(lm, train, cfg.layer, cfg.seed, share=S.MASK_SHARE))

    def step(i: int, n: int, mse: float, dead: float) -> None:
        if i % 10 == 0 or i == n:
            report_to(
                0.1 + 0.8 * i / n,
                msg("progress.sae.step", step=i, total=n, mse=f"{mse:.3f}", dead=f"{dead:.1%}"),
                step=i,
                mse=mse,
                dead=dead,
            )

    sae, t_train = S.timed(lambda: S.train_sae(lm, cfg, states, step))
    report_to(0.92, msg("progress.sae.measuring"))
    t0 = time.perf_counter()
    held_states, sent, pos = S.layer_states(lm, held, cfg.layer, cfg.seed)
    q = S.quality(lm, sae, cfg.layer, held_states, held[: S.LOSS_SENTENCES], cfg.seed)
    browse = browse_of(sae, held_states, sent, pos, token_ids(lm, held, sent, pos), held)
    report = SAEReport(
        key=artifacts.model_key(lm, SAE_TAG),
        checkpoint=scrub(lm.spec.checkpoint),
        family=lm.spec.family,
        layer=cfg.layer,
        hidden=int(states.shape[1]),
        features=sae.features,
        config=asdict(cfg) | {"texts": len(cfg.texts)},
        quality=S.summary_row(q),
        train_tokens=len(states),
        eval_tokens=len(held_states),
        seconds={
            "states": round(t_states, 1),
            "training": round(t_train, 1),
            "measuring": round(time.perf_counter() - t0, 1),
        },
        created=time.time(),
    )
    if save:
        _save(lm, cfg, sae, report, browse)
    report_to(1.0, msg("progress.sae.saved"))
    return sae, report, browse


def _save(lm: LoadedModel, cfg: S.SAEConfig, sae, report: SAEReport, browse: Browse) -> None:
    """Write the folder whole; one another job (another session's) saved first for the same settings is kept."""
    from safetensors.torch import save_file  # lazy: only saving and loading SAEs needs it

    if (sae_dir(lm, cfg) / REPORT_FILE).is_file():
        return

    def fill(tmp: Path) -> None:
        tensors = {k: v.detach().cpu().contiguous() for k, v in sae.state_dict().items()}
        save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"k": str(sae.k)})
        arrays = {k: v for k, v in asdict(browse).items() if k != "sentences"}
        np.savez_compressed(tmp / BROWSE_FILE, **arrays)
        (tmp / SENTENCES_FILE).write_text(json.dumps(list(browse.sentences), ensure_ascii=False))
        (tmp / REPORT_FILE).write_text(report.to_json())

    artifacts.write_folder(sae_dir(lm, cfg), fill)
    with _LOCK:
        _CACHE.pop((str(sae_dir(lm, cfg)), lm.device), None)


# ---------------------------------------------------------------------------------------------- load
_CACHE: OrderedDict[tuple[str, str], tuple[Any, SAEReport, Browse, int]] = OrderedDict()
_LOCK = threading.Lock()


def _forget_all() -> None:
    with _LOCK:
        _CACHE.clear()


register_cache(__name__, _forget_all)


def load_sae(lm: LoadedModel, cfg: S.SAEConfig) -> tuple[Any, SAEReport, Browse] | None:
    """(SAE, report, browser data) saved for this model, layer and settings, or None when there is none. Raises
    SAEError when the saved one is damaged (a file cut short or overwritten: core.runtime.artifacts.damaged_files,
    which tells one that safetensors or numpy would load without a word; or one that does not parse); it is set aside
    first, so the next call finds none and the page offers to train it again."""
    folder = sae_dir(lm, cfg)
    if not folder.is_dir():
        return None
    try:
        version = (folder / REPORT_FILE).stat().st_mtime_ns
    except OSError:
        version = -1  # no report: reading it below says the folder is damaged
    key = (str(folder), lm.device)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[3] == version:
            _CACHE.move_to_end(key)
            return hit[0], hit[1], hit[2]
    from safetensors import safe_open  # lazy: only saving and loading SAEs needs it

    try:
        bad = artifacts.damaged_files(folder)
        if bad:
            raise ValueError(", ".join(bad))
        report = SAEReport.from_json((folder / REPORT_FILE).read_text())
        with safe_open(str(folder / WEIGHTS_FILE), framework="pt") as f:
            k = int(f.metadata()["k"])
            tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 - safe_open has no iteration
        arrays = np.load(folder / BROWSE_FILE)
        sentences = tuple(json.loads((folder / SENTENCES_FILE).read_text(encoding="utf-8")))
        browse = Browse(**{name: arrays[name] for name in arrays.files}, sentences=sentences)
    except artifacts.read_errors() as e:
        artifacts.set_aside(folder)
        with _LOCK:
            _CACHE.pop(key, None)
        raise S.SAEError(msg("sae.saved_sae_unreadable", problem=str(e))) from None
    sae = S.sae_module(tensors["w_enc"].shape[1], tensors["w_enc"].shape[0], k)
    sae.load_state_dict(tensors)
    sae.to(lm.device).eval().requires_grad_(False)
    artifacts.touch(folder)
    with _LOCK:
        _CACHE[key] = (sae, report, browse, version)
        while len(_CACHE) > KEEP:
            _CACHE.popitem(last=False)
    return sae, report, browse


# ---------------------------------------------------------------------------------------------- the job
def sae_job(spec: ModelSpec, cfg: S.SAEConfig) -> Callable[[Any], SAEReport]:
    """A core.runtime.jobs function training and saving an SAE for ``spec`` (a fresh copy of the model, loaded in the
    job): a partial of a module-level function over plain data, so it runs in a worker process."""
    return functools.partial(_run_sae_job, spec, cfg)


def _run_sae_job(spec: ModelSpec, cfg: S.SAEConfig, ctx) -> SAEReport:
    ctx.progress(0.0, msg("progress.loading_fresh_copy"))
    lm = load(spec, task="mlm")
    if ctx.cancelled:
        raise JobCancelled()
    try:
        done = load_sae(lm, cfg)  # another session's job saved it while this one waited in the queue
    except S.SAEError:  # a damaged one, now set aside: train it again
        done = None
    if done is not None:
        return done[1]
    _, report, _ = train_and_save(lm, cfg, progress=ctx.progress)
    return report
