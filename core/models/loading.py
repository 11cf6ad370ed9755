"""The one loader every page uses.

The family registry (core.registry) says how families differ; this module resolves a checkpoint in a fixed
order (local folder, bundled zoo, Hugging Face cache, Hub when allowed) and loads safetensors only. The registry's
names are re-exported here for the modules that import them from core.models.loading.
"""

from __future__ import annotations

import errno
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.base.messages import carry, msg
from core.base.paths import zoo_dir
from core.models.devices import resolve_device
from core.models.downloads import DownloadError, Source, allow_download, download, policy
from core.models.hosted import HostedRefusal, check_folder
from core.models.int8 import QuantizeError, check_mode, quantize_int8
from core.models.spec import LoadedModel, ModelSpec
from core.registry import (
    FAMILIES,
    ModelLoadError,
    checkpoint_info,
    family,
    family_of_model_type,
    model_class,
)


# ---------------------------------------------------------------------------------------------- resolution
@dataclass(frozen=True)
class Resolution:
    path: str | None  # a local folder, or None when the Hub would be needed
    source: Source
    tried: tuple[str, ...] = ()  # each place asked: a Message (core.base.messages), shown in the page's language


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors"))


def _cached_snapshot(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return None
    try:
        hit = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # HFValidationError: not a valid repo id
        return None
    if isinstance(hit, str) and _has_weights(Path(hit).parent):  # a cut download leaves a snapshot without them
        return Path(hit).parent
    return None


def resolve(checkpoint: str) -> Resolution:
    """Find where a checkpoint's files are, without loading them.

    Order: an existing local folder; a bundled id (encoderlab/NAME) in the zoo; the HF cache; the Hub when
    downloads are allowed. Returns source "unavailable" with the list of places tried otherwise.
    """
    tried: list[str] = []
    try:  # a typed name the file system refuses (too long, an unknown ~user, a NUL): a message, not a traceback
        p = Path(checkpoint).expanduser()
        is_dir = p.is_dir()
    except (OSError, RuntimeError, ValueError) as e:
        kind = "load.tried.name_too_long" if getattr(e, "errno", None) == errno.ENAMETOOLONG else "load.tried.bad_name"
        return Resolution(None, Source.UNAVAILABLE, (msg(kind, n=len(checkpoint)),))
    if is_dir:
        try:
            check_folder(p)  # hosted mode: only the server's own folders (zoo, runs, HF cache)
        except HostedRefusal as e:
            return Resolution(None, Source.UNAVAILABLE, (carry(e),))
        zoo = zoo_dir().resolve()
        src = Source.BUNDLED if zoo in p.resolve().parents else Source.LOCAL
        return Resolution(str(p), src, (msg("load.tried.local_found", path=str(p)),))
    tried.append(msg("load.tried.local_missing", path=str(p)))
    if checkpoint.startswith(("/", ".", "~")) or checkpoint.count("/") > 1 or "\\" in checkpoint:
        tried.append(msg("load.tried.looks_like_path"))
        return Resolution(None, Source.UNAVAILABLE, tuple(tried))
    if checkpoint.startswith("encoderlab/"):
        z = zoo_dir() / checkpoint.split("/", 1)[1]
        if (z / "config.json").exists():
            return Resolution(str(z), Source.BUNDLED, tuple(tried))
        tried.append(msg("load.tried.zoo_missing", path=str(z)))
        return Resolution(None, Source.UNAVAILABLE, tuple(tried))
    snap = _cached_snapshot(checkpoint)
    if snap is not None:
        return Resolution(str(snap), Source.CACHE, tuple(tried))
    tried.append(msg("load.tried.not_cached"))
    if allow_download():
        return Resolution(None, Source.DOWNLOAD, tuple(tried))
    tried.append(msg("load.tried.downloads_off", reason=policy().reason))
    return Resolution(None, Source.UNAVAILABLE, tuple(tried))


# ---------------------------------------------------------------------------------------------- loading
def read_config(folder: str | Path) -> dict:
    cfg = Path(folder) / "config.json"
    if not cfg.exists():
        raise ModelLoadError(msg("load.no_config_json", folder=folder))
    try:
        return json.loads(cfg.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:  # cut short or overwritten with bytes that are not text
        raise ModelLoadError(msg("load.not_valid_json", config_file=cfg, error=e)) from None


def _check_folder(folder: Path, spec: ModelSpec) -> dict:
    cfg = read_config(folder)
    if not _has_weights(folder):
        bins = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt")]
        if bins:
            raise ModelLoadError(msg("load.only_pickled_weights", folder=folder, bin_files=", ".join(bins)))
        raise ModelLoadError(msg("load.no_safetensors", folder=folder))
    _check_family(cfg, spec)
    return cfg


def _check_family(cfg: dict, spec: ModelSpec) -> None:
    mt = cfg.get("model_type", "?")
    fam = family(spec.family)
    if fam.generic:  # any architecture no family claims; a registered one belongs to its own family
        owner = family_of_model_type(mt)
        if owner:
            raise ModelLoadError(msg("load.checkpoint_model_pick_family", label=FAMILIES[owner].label, model_type=mt))
        return
    info = checkpoint_info(spec.checkpoint)
    allowed = {fam.model_type} | ({info.model_type} if info and info.model_type else set())
    if mt not in allowed:
        owner = family_of_model_type(mt)
        hint = f" Pick the {FAMILIES[owner].label} family for it." if owner else ""
        raise ModelLoadError(msg("load.not_this_family", model_type=mt, label=fam.label, hint=hint))


# transformers' from_pretrained swaps process-wide functions while it builds a model (its init contexts patch
# e.g. PreTrainedModel.tie_weights and torch's init functions). Two loads at the same moment in one process (two
# sessions, or a training job and a page) can leave them swapped for good, and every later load then fails with
# "Cannot copy out of meta tensor". Every from_pretrained in EncoderLab holds this lock.
BUILD_LOCK = threading.RLock()


def load(
    spec: ModelSpec,
    task: str = "base",
    attentions: bool = False,
    dtype: str | None = None,
    model_kwargs: dict | None = None,
) -> LoadedModel:
    """Load model and tokenizer for ``task`` on the spec's device.

    Safetensors only, never trust_remote_code. Eager attention when ``attentions`` (sdpa returns none). Weights
    are float32 whatever dtype the folder was saved in, unless ``dtype`` ("bfloat16", "float16") says otherwise.
    Raises ModelLoadError with what was tried and how to fix it.
    """
    import torch
    import transformers
    from safetensors import SafetensorError  # lazy: as transformers (a damaged weight file raises it)

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    dev = resolve_device(spec.device)
    res = resolve(spec.checkpoint)
    if res.source == Source.UNAVAILABLE:
        raise ModelLoadError(msg("load.cannot_get", checkpoint=spec.checkpoint, tried=res.tried))
    kwargs: dict[str, Any] = {"use_safetensors": True, "trust_remote_code": False}
    if attentions:
        kwargs["attn_implementation"] = "eager"
    # transformers 5 loads with dtype="auto" (the checkpoint's own): an fp16/bf16 folder would train and run
    # integrated gradients in half precision. fp32 unless the caller asks for a half dtype.
    kwargs["dtype"] = getattr(torch, dtype) if dtype else torch.float32
    if model_kwargs:  # e.g. num_labels/id2label for a fresh classification head (core.train.finetune)
        kwargs.update(model_kwargs)
    if res.source == Source.DOWNLOAD:  # the page shows a progress bar first (app.kit.loaders); this is the rest
        try:
            target = str(download(spec.checkpoint))
        except DownloadError as e:
            raise ModelLoadError(carry(e)) from None
    else:
        assert res.path is not None
        target = res.path
    cfg = _check_folder(Path(target), spec)
    try:
        with BUILD_LOCK:
            # transformers resolves its classes by lazy imports, which are not safe to run from two threads at once
            # (two sessions' first loads: "module 'transformers' has no attribute 'AutoTokenizer'"); under the lock.
            cls = model_class(spec.family, task, cfg.get("model_type", ""))
            model, info = cls.from_pretrained(target, output_loading_info=True, **kwargs)
            tokenizer = transformers.AutoTokenizer.from_pretrained(target, trust_remote_code=False)
    except SafetensorError as e:  # a weight file cut short or overwritten (its header no longer reads)
        raise ModelLoadError(msg("load.weights_unreadable", checkpoint=spec.checkpoint, problem=str(e))) from None
    except (OSError, ValueError, RuntimeError) as e:
        if family(spec.family).generic and isinstance(e, ValueError) and "Unrecognized configuration" in str(e):
            raise ModelLoadError(
                msg(
                    "load.no_transformers_class",
                    checkpoint=spec.checkpoint,
                    model_type=cfg.get("model_type", "?"),
                    task=task,
                )
            ) from None
        raise ModelLoadError(msg("load.loading_failed", checkpoint=spec.checkpoint, error=e)) from None
    model.eval().to(dev.torch_device)
    if spec.quant:  # after from_pretrained, on this fresh copy (core.compare.int8 says why CPU only)
        try:
            check_mode(spec.quant, dev.kind)
            model = quantize_int8(model, inplace=True)
        except QuantizeError as e:
            raise ModelLoadError(carry(e)) from None
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        spec=spec,
        task=task,
        source=res.source,
        path=str(target),
        device=dev.torch_device,
        missing_keys=tuple(info.get("missing_keys", ())),
        recipe=None
        if dtype or model_kwargs
        else ("core.models.loading:load", (spec,), {"task": task, "attentions": attentions}),
    )
