"""The model registry and the one loader every page uses.

Family differences (mask token, pair head, tokenizer kind, classes per task, official checkpoints and the
figures the seed articles claim for them) live here and nowhere else. ``load`` resolves a checkpoint in a
fixed order (local folder, bundled zoo, Hugging Face cache, Hub when allowed) and loads safetensors only.
"""
from __future__ import annotations

import json
import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

REPO_ROOT = Path(__file__).resolve().parent.parent
ASSETS = REPO_ROOT / "assets"
CONFIG_DIR = ASSETS / "configs"

TASKS = ("base", "mlm", "pretraining", "seqcls", "tokcls")


class ModelLoadError(ValueError):
    """A checkpoint could not be resolved or loaded. The message names the problem and the fix."""

    def __str__(self) -> str:  # hosted mode: the message names no server path (core.hosted.scrub)
        from core.hosted import scrub

        return scrub(super().__str__())


@dataclass(frozen=True)
class Checkpoint:
    id: str
    family: str
    claim_m: float | None = None  # parameters the seed articles claim, in millions
    claim_note: str = ""
    language: str = "en"
    model_type: str | None = None  # architecture when it differs from the family's (hfl's RoBERTa is BERT code)
    note: str = ""


@dataclass(frozen=True)
class Family:
    key: str
    label: str
    model_type: str
    mask_token: str
    pair_head: str | None  # "nsp", "sop" or None
    pair_head_note: str
    tokenizer_kind: str
    position_embeddings: str
    objectives: tuple[str, ...]
    classes: dict[str, str]
    checkpoints: tuple[Checkpoint, ...]
    bundled: str  # folder name under the zoo
    base_checkpoint: str  # the base-size architecture used for the Speed page
    summary: str = ""
    head_output: str = ""  # the attention output projection, a dotted path inside one layer (core.ablation)


FAMILIES: dict[str, Family] = {
    "bert": Family(
        key="bert", label="BERT", model_type="bert", mask_token="[MASK]", pair_head="nsp",
        pair_head_note="BERT was pretrained with Next Sentence Prediction: its NSP head says whether B follows A.",
        tokenizer_kind="WordPiece", position_embeddings="learned absolute, 512",
        objectives=("MLM", "NSP"),
        classes={"base": "BertModel", "mlm": "BertForMaskedLM", "pretraining": "BertForPreTraining",
                 "seqcls": "BertForSequenceClassification"},
        checkpoints=(
            Checkpoint("bert-base-uncased", "bert", 110, "110M (BERT-Base)"),
            Checkpoint("bert-large-uncased", "bert", 340, "340M, also quoted as 334M (BERT-Large)"),
            Checkpoint("bert-base-chinese", "bert", None, language="zh"),
        ),
        bundled="bert-mini", base_checkpoint="bert-base-uncased",
        summary="Bidirectional Transformer encoder; MLM (15%, 80/10/10) + NSP; WordPiece 30K.",
        head_output="attention.output.dense",
    ),
    "roberta": Family(
        key="roberta", label="RoBERTa", model_type="roberta", mask_token="<mask>", pair_head=None,
        pair_head_note=("RoBERTa has no sentence-pair head: its authors dropped NSP after finding that MLM alone, "
                        "on full-length contiguous text, did as well or better downstream."),
        tokenizer_kind="Byte-level BPE", position_embeddings="learned absolute, 512 (+2 offset)",
        objectives=("MLM (dynamic masking)",),
        classes={"base": "RobertaModel", "mlm": "RobertaForMaskedLM", "pretraining": "RobertaForMaskedLM",
                 "seqcls": "RobertaForSequenceClassification"},
        checkpoints=(
            Checkpoint("roberta-base", "roberta", 125, "125M (RoBERTa-base)"),
            Checkpoint("roberta-large", "roberta", 355, "355M (not in the articles; paper figure)"),
            Checkpoint("hfl/chinese-roberta-wwm-ext", "roberta", None, language="zh", model_type="bert",
                       note="RoBERTa-style training (whole-word masking, no NSP) on BERT code and a WordPiece vocab"),
        ),
        bundled="roberta-mini", base_checkpoint="roberta-base",
        summary="BERT retrained longer on 10x data; no NSP; dynamic masking; byte-level BPE 50K.",
        head_output="attention.output.dense",
    ),
    "albert": Family(
        key="albert", label="ALBERT", model_type="albert", mask_token="[MASK]", pair_head="sop",
        pair_head_note="ALBERT was pretrained with Sentence Order Prediction: its SOP head says whether A and B are in order.",
        tokenizer_kind="SentencePiece Unigram", position_embeddings="learned absolute, 512",
        objectives=("MLM (n-gram)", "SOP"),
        classes={"base": "AlbertModel", "mlm": "AlbertForMaskedLM", "pretraining": "AlbertForPreTraining",
                 "seqcls": "AlbertForSequenceClassification"},
        checkpoints=(
            Checkpoint("albert-base-v2", "albert", 12, "12M (ALBERT-base)"),
            Checkpoint("albert-large-v2", "albert", 18, "18M (ALBERT-large)"),
            Checkpoint("albert-xlarge-v2", "albert", 59, "59M (ALBERT-xlarge)"),
        ),
        bundled="albert-mini", base_checkpoint="albert-base-v2",
        summary="Factorized embeddings (V×E + E×H) and one layer shared across depth; SOP instead of NSP.",
        head_output="attention.dense",
    ),
    "distilbert": Family(
        key="distilbert", label="DistilBERT", model_type="distilbert", mask_token="[MASK]", pair_head=None,
        pair_head_note=("DistilBERT has no sentence-pair head: it was distilled from BERT with MLM, soft-logit KL "
                        "and hidden-state cosine losses only, and it has no token-type embeddings."),
        tokenizer_kind="WordPiece", position_embeddings="learned absolute, 512",
        objectives=("MLM", "distillation (KL)", "hidden cosine"),
        classes={"base": "DistilBertModel", "mlm": "DistilBertForMaskedLM", "pretraining": "DistilBertForMaskedLM",
                 "seqcls": "DistilBertForSequenceClassification"},
        checkpoints=(
            Checkpoint("distilbert-base-uncased", "distilbert", 66, "66M, ~1.7x faster than BERT-base"),
        ),
        bundled="distilbert-mini", base_checkpoint="distilbert-base-uncased",
        summary="6-layer student of BERT-base (every other layer), triple loss; ~40% smaller, ~1.7x faster.",
        head_output="attention.out_lin",
    ),
}

PAIR_HEADS = {"nsp": "Next Sentence Prediction", "sop": "Sentence Order Prediction"}


def family(key: str) -> Family:
    """Return the registry entry for a family key; raises ModelLoadError for an unknown one."""
    try:
        return FAMILIES[key]
    except KeyError:
        raise ModelLoadError(f"Unknown family {key!r}. Choose one of: {', '.join(FAMILIES)}.") from None


def official_checkpoints() -> list[Checkpoint]:
    return [c for f in FAMILIES.values() for c in f.checkpoints]


def checkpoint_info(checkpoint_id: str) -> Checkpoint | None:
    for c in official_checkpoints():
        if c.id == checkpoint_id:
            return c
    return None


def family_of_model_type(model_type: str) -> str | None:
    for f in FAMILIES.values():
        if f.model_type == model_type:
            return f.key
    return None


# ---------------------------------------------------------------------------------------------- settings
def zoo_dir() -> Path:
    """Folder of the bundled offline models (ENCODERLAB_ZOO, default assets/models)."""
    return Path(os.environ.get("ENCODERLAB_ZOO", ASSETS / "models"))


def bundled_id(family_key: str) -> str:
    return f"encoderlab/{family(family_key).bundled}"


def allow_download() -> bool:
    """Hub downloads happen only when ENCODERLAB_ALLOW_DOWNLOAD=1 and HF_HUB_OFFLINE is not set."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False"):
        return False
    return os.environ.get("ENCODERLAB_ALLOW_DOWNLOAD", "0") in ("1", "true", "True", "yes")


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co")


def hub_reachable(timeout: float = 2.0) -> bool:
    """One TCP connect to the Hub endpoint; False on any failure (no DNS, refused, timeout)."""
    url = urlparse(hub_endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------- devices
@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu" or "cuda"
    name: str
    memory_gb: float | None
    torch_device: str


def resolve_device(choice: str = "auto") -> DeviceInfo:
    """auto -> cuda when present, else cpu. Raises ModelLoadError when cuda is asked for and there is none."""
    import torch

    if choice not in ("auto", "cpu", "cuda"):
        raise ModelLoadError(f"Unknown device {choice!r}: use auto, cpu or cuda.")
    has_cuda = torch.cuda.is_available()
    if choice == "cuda" and not has_cuda:
        raise ModelLoadError("CUDA was asked for, but this machine has no usable GPU. Choose 'auto' or 'cpu'.")
    if choice == "cuda" or (choice == "auto" and has_cuda):
        props = torch.cuda.get_device_properties(0)
        return DeviceInfo("cuda", props.name, round(props.total_memory / 2**30, 1), "cuda")
    return DeviceInfo("cpu", _cpu_name(), None, "cpu")


def _cpu_name() -> str:
    import platform

    name = platform.processor() or platform.machine() or "CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


# ---------------------------------------------------------------------------------------------- resolution
@dataclass(frozen=True)
class ModelSpec:
    """What the user picked: a family, a checkpoint (Hub id, bundled id or folder) and a device choice."""

    family: str
    checkpoint: str
    device: str = "auto"
    quant: str = ""  # "int8": dynamic int8 linears after loading (core.quantize; CPU inference only)

    def __post_init__(self) -> None:
        family(self.family)
        if not self.checkpoint or not self.checkpoint.strip():
            raise ModelLoadError("No checkpoint given: pick one from the list or type a Hugging Face id or a folder.")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ModelLoadError(f"Unknown device {self.device!r}: use auto, cpu or cuda.")
        if self.quant not in ("", "int8"):
            raise ModelLoadError(f"Unknown quantization {self.quant!r}: use '' (fp32) or 'int8'.")
        if self.quant and self.device == "cuda":
            raise ModelLoadError("int8 dynamic quantization runs on the CPU only: set the device to cpu, or turn "
                                 "int8 off.")


@dataclass(frozen=True)
class Resolution:
    path: str | None  # a local folder, or None when the Hub would be needed
    source: str  # "bundled", "local folder", "HF cache", "Hub download" or "unavailable"
    tried: tuple[str, ...] = ()


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
    if isinstance(hit, str):
        return Path(hit).parent
    return None


def resolve(checkpoint: str) -> Resolution:
    """Find where a checkpoint's files are, without loading them.

    Order: an existing local folder; a bundled id (encoderlab/NAME) in the zoo; the HF cache; the Hub when
    downloads are allowed. Returns source "unavailable" with the list of places tried otherwise.
    """
    tried: list[str] = []
    p = Path(checkpoint).expanduser()
    if p.is_dir():
        from core.hosted import HostedRefusal, check_folder

        try:
            check_folder(p)  # hosted mode: only the server's own folders (zoo, runs, HF cache)
        except HostedRefusal as e:
            return Resolution(None, "unavailable", (str(e),))
        zoo = zoo_dir().resolve()
        src = "bundled" if zoo in p.resolve().parents else "local folder"
        return Resolution(str(p), src, (f"local folder {p}",))
    tried.append(f"local folder {p} (not found)")
    if checkpoint.startswith(("/", ".", "~")) or checkpoint.count("/") > 1 or "\\" in checkpoint:
        tried.append("it looks like a path, so the Hub was not asked: check the folder exists on the server")
        return Resolution(None, "unavailable", tuple(tried))
    if checkpoint.startswith("encoderlab/"):
        z = zoo_dir() / checkpoint.split("/", 1)[1]
        if (z / "config.json").exists():
            return Resolution(str(z), "bundled", tuple(tried))
        tried.append(f"bundled zoo {z} (missing: run `make models`)")
        return Resolution(None, "unavailable", tuple(tried))
    snap = _cached_snapshot(checkpoint)
    if snap is not None:
        return Resolution(str(snap), "HF cache", tuple(tried))
    tried.append("Hugging Face cache (not cached)")
    if allow_download():
        return Resolution(None, "Hub download", tuple(tried))
    tried.append("Hub (downloads are off: set ENCODERLAB_ALLOW_DOWNLOAD=1 where there is network)")
    return Resolution(None, "unavailable", tuple(tried))


# ---------------------------------------------------------------------------------------------- loading
@dataclass
class LoadedModel:
    """A model and its tokenizer, ready for inference. Never mutate a shared one: copy it first."""

    model: Any
    tokenizer: Any
    spec: ModelSpec
    task: str
    source: str
    path: str
    device: str
    missing_keys: tuple[str, ...] = ()
    attentions: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def family(self) -> Family:
        return family(self.spec.family)

    @property
    def max_tokens(self) -> int:
        """How many tokens (special ones included) this model reads at most."""
        return max_tokens(self.model, self.tokenizer)

    @property
    def head_missing(self) -> bool:
        """True when the task's head weights were not in the checkpoint (they would be random)."""
        heads = ("cls.", "lm_head", "predictions", "vocab_", "classifier", "seq_relationship")
        return any(any(h in k for h in heads) for k in self.missing_keys)


def max_tokens(model, tokenizer) -> int:
    """How many tokens (special ones included) the model reads at most: its position table (less RoBERTa's
    padding offset) and the tokenizer's own limit."""
    cfg = model.config
    n = int(getattr(cfg, "max_position_embeddings", 512))
    if getattr(cfg, "model_type", "") == "roberta":  # positions start after padding_idx
        n -= int(cfg.pad_token_id or 0) + 1
    tm = getattr(tokenizer, "model_max_length", n) or n
    return int(min(n, tm if tm < 10**6 else n))


def mlm_head(model):
    """The model's MLM head as a function of hidden states (n, H) -> logits (n, V); None when it has none."""
    import torch

    cls = getattr(model, "cls", None)
    if cls is not None and hasattr(cls, "predictions"):  # BertForMaskedLM / BertForPreTraining
        return cls.predictions
    for name in ("lm_head", "predictions"):  # RoBERTa; ALBERT (MLM and pretraining)
        if isinstance(getattr(model, name, None), torch.nn.Module):
            return getattr(model, name)
    if hasattr(model, "vocab_projector"):  # DistilBertForMaskedLM
        return lambda h: model.vocab_projector(model.vocab_layer_norm(model.activation(model.vocab_transform(h))))
    return None


def pair_head_module(model):
    """The NSP (BERT) or SOP (ALBERT) classifier, pooled (n, H) -> logits (n, 2); None when the model has none."""
    cls = getattr(model, "cls", None)
    if cls is not None and hasattr(cls, "seq_relationship"):  # BertForPreTraining / BertForNextSentencePrediction
        return cls.seq_relationship
    return getattr(model, "sop_classifier", None)  # AlbertForPreTraining


def attention_layers(model) -> list[tuple[int, Any]]:
    """(depth, attention output projection) for every depth of the encoder, from the family's ``head_output``.
    A layer shared across depth (ALBERT) appears once per depth, as the same module, by transformers' own
    layer -> group rule. Raises ModelLoadError for a model of no known family."""
    # a wrapper (core.finetune's mean-pool classifier) holds the transformers model as a submodule
    inner = next((m for m in model.modules() if hasattr(m, "base_model") and hasattr(m, "config")), model)
    base = inner.base_model
    cfg = base.config
    fam_key = family_of_model_type(getattr(cfg, "model_type", ""))
    if fam_key is None or not FAMILIES[fam_key].head_output:
        raise ModelLoadError(f"{type(model).__name__} is not a model of a known family: its attention heads "
                             "cannot be located.")
    suffix = "." + FAMILIES[fam_key].head_output
    mods = [m for name, m in base.named_modules() if ("." + name).endswith(suffix)]  # in layer order
    n = int(cfg.num_hidden_layers)
    if len(mods) == n:
        return list(enumerate(mods))
    groups = int(getattr(cfg, "num_hidden_groups", 0) or 0)
    if groups and len(mods) == groups:  # shared layers: one module per group, each applied at several depths
        return [(i, mods[int(i / (n / groups))]) for i in range(n)]
    raise ModelLoadError(f"{type(model).__name__}: found {len(mods)} attention output projections for {n} layers "
                         "(inner layer groups are not supported).")


def _model_class(family_key: str, task: str, model_type: str):
    import transformers

    if task not in TASKS:
        raise ModelLoadError(f"Unknown task {task!r}: use one of {', '.join(TASKS)}.")
    fam_key = family_of_model_type(model_type) or family_key
    if task == "tokcls":  # every family has a *ForTokenClassification; the Auto class picks it from model_type
        return transformers.AutoModelForTokenClassification
    return getattr(transformers, FAMILIES[fam_key].classes[task])


def read_config(folder: str | Path) -> dict:
    cfg = Path(folder) / "config.json"
    if not cfg.exists():
        raise ModelLoadError(f"{folder} has no config.json: it is not a Hugging Face model folder.")
    try:
        return json.loads(cfg.read_text())
    except json.JSONDecodeError as e:
        raise ModelLoadError(f"{cfg} is not valid JSON ({e}).") from None


def _check_folder(folder: Path, spec: ModelSpec) -> dict:
    cfg = read_config(folder)
    if not _has_weights(folder):
        bins = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt")]
        if bins:
            raise ModelLoadError(
                f"{folder} holds only {', '.join(bins)}. EncoderLab loads safetensors only, because a pickled .bin "
                "file can run arbitrary code when loaded. Convert it once where you trust it: "
                "`AutoModel.from_pretrained(path).save_pretrained(path, safe_serialization=True)`.")
        raise ModelLoadError(f"{folder} has a config.json but no *.safetensors weights. Copy the weights in, "
                             "or pick another checkpoint.")
    _check_family(cfg, spec)
    return cfg


def _check_family(cfg: dict, spec: ModelSpec) -> None:
    mt = cfg.get("model_type", "?")
    fam = family(spec.family)
    info = checkpoint_info(spec.checkpoint)
    allowed = {fam.model_type} | ({info.model_type} if info and info.model_type else set())
    if mt not in allowed:
        owner = family_of_model_type(mt)
        hint = f" Pick the {FAMILIES[owner].label} family for it." if owner else ""
        raise ModelLoadError(f"This checkpoint is a {mt!r} model, not {fam.label}.{hint}")


# transformers' from_pretrained swaps process-wide functions while it builds a model (its init contexts patch
# e.g. PreTrainedModel.tie_weights and torch's init functions). Two loads at the same moment in one process (two
# sessions, or a training job and a page) can leave them swapped for good, and every later load then fails with
# "Cannot copy out of meta tensor". Every from_pretrained in EncoderLab holds this lock.
BUILD_LOCK = threading.RLock()


def load(spec: ModelSpec, task: str = "base", attentions: bool = False, dtype: str | None = None,
         model_kwargs: dict | None = None) -> LoadedModel:
    """Load model and tokenizer for ``task`` on the spec's device.

    Safetensors only, never trust_remote_code. Eager attention when ``attentions`` (sdpa returns none). Weights
    are float32 whatever dtype the folder was saved in, unless ``dtype`` ("bfloat16", "float16") says otherwise.
    Raises ModelLoadError with what was tried and how to fix it.
    """
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    dev = resolve_device(spec.device)
    res = resolve(spec.checkpoint)
    if res.source == "unavailable":
        raise ModelLoadError(f"Cannot get {spec.checkpoint!r} here. Tried: " + "; ".join(res.tried) +
                             ". Use a bundled model, a local folder, or a machine with network.")
    kwargs: dict[str, Any] = {"use_safetensors": True, "trust_remote_code": False}
    if attentions:
        kwargs["attn_implementation"] = "eager"
    # transformers 5 loads with dtype="auto" (the checkpoint's own): an fp16/bf16 folder would train and run
    # integrated gradients in half precision. fp32 unless the caller asks for a half dtype.
    kwargs["dtype"] = getattr(torch, dtype) if dtype else torch.float32
    if model_kwargs:  # e.g. num_labels/id2label for a fresh classification head (core.finetune)
        kwargs.update(model_kwargs)
    if res.source == "Hub download":
        if not hub_reachable():
            raise ModelLoadError(f"No network: the Hub at {hub_endpoint()} cannot be reached, and "
                                 f"{spec.checkpoint!r} is not cached. Use a bundled model or a local folder.")
        target: str = spec.checkpoint
        try:
            cfg_obj = transformers.AutoConfig.from_pretrained(target, trust_remote_code=False)
        except OSError as e:
            raise ModelLoadError(f"{spec.checkpoint!r} is not a model on the Hub, or it cannot be read: {e}") from None
        cfg = cfg_obj.to_dict()
        _check_family(cfg, spec)
    else:
        assert res.path is not None
        target = res.path
        cfg = _check_folder(Path(res.path), spec)
    try:
        with BUILD_LOCK:
            # transformers resolves its classes by lazy imports, which are not safe to run from two threads at once
            # (two sessions' first loads: "module 'transformers' has no attribute 'AutoTokenizer'"); under the lock.
            cls = _model_class(spec.family, task, cfg.get("model_type", ""))
            model, info = cls.from_pretrained(target, output_loading_info=True, **kwargs)
            tokenizer = transformers.AutoTokenizer.from_pretrained(target, trust_remote_code=False)
    except (OSError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"Loading {spec.checkpoint!r} failed: {e}") from None
    model.eval().to(dev.torch_device)
    if spec.quant:  # after from_pretrained, on this fresh copy (core.quantize says why CPU only)
        from core.quantize import QuantizeError, check_mode, quantize_int8

        try:
            check_mode(spec.quant, dev.kind)
            model = quantize_int8(model, inplace=True)
        except QuantizeError as e:
            raise ModelLoadError(str(e)) from None
    return LoadedModel(model=model, tokenizer=tokenizer, spec=spec, task=task, source=res.source,
                       path=str(target), device=dev.torch_device,
                       missing_keys=tuple(info.get("missing_keys", ())), attentions=attentions)


def availability(checkpoint: str) -> Resolution:
    """Where a checkpoint would come from right now (for the sidebar banner); never loads weights."""
    return resolve(checkpoint)


def official_config(checkpoint_id: str):
    """The shipped official config (assets/configs) as a transformers config object; no weights needed."""
    import transformers

    name = checkpoint_id.replace("/", "__") + ".json"
    path = CONFIG_DIR / name
    if not path.exists():
        raise ModelLoadError(f"No shipped config for {checkpoint_id!r} (looked for {path}).")
    d = json.loads(path.read_text())
    return transformers.AutoConfig.for_model(**d)
