"""Using a finished fine-tune: load a run folder (``load_finetuned``), classify texts (``classify``, batched across
sessions; ``classify_now`` on the calling thread) or tag words (``tag``), and zip the folder for download.

A run folder is what core.train.finetune.train writes under ``<run>/model``: the family's own
*ForSequenceClassification / *ForTokenClassification folder (pooling "cls"), or the encoder plus HEAD_FILE (the
mean-pooling or scalar-mix head below, which training builds too), the tokenizer, and META_FILE (config, labels,
metrics). The file names are the saved format: runs written before keep loading.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.base.messages import holds_kind, msg
from core.data.token_data import align_batch, words_tokenizer
from core.models.loading import ModelSpec, load
from core.models.packed_linear import packed_forward
from core.registry import ModelLoadError
from core.registry.shape import shape
from core.runtime import artifacts
from core.runtime.backend import batched

META_FILE = "encoderlab_finetune.json"  # the run's metadata (core.compare.glue_claims reads it too)
HEAD_FILE = "pooling_head.safetensors"  # mean-pooling / scalar-mix head weights beside the encoder


def mean_pool_classifier(backbone, num_labels: int, dropout: float):
    """The encoder, mean over real tokens, dropout, one linear layer. Returns an nn.Module with ``.logits`` output."""
    from torch import nn  # lazy: torch loads in seconds; importing this module (the page) does not need it
    from transformers.modeling_outputs import SequenceClassifierOutput  # lazy: as torch

    class MeanPoolClassifier(nn.Module):
        # The backbone comes in as an argument, not from this function's closure: a class is freed only by a full
        # garbage collection, and a closure cell would keep the backbone (and its GPU memory) alive with it.
        def __init__(self, backbone):
            super().__init__()
            self.backbone = backbone
            hidden = getattr(backbone.config, "hidden_size", None) or backbone.config.dim
            self.dropout = nn.Dropout(dropout)
            self.classifier = nn.Linear(hidden, num_labels)

        def forward(self, input_ids, attention_mask, **kw):
            h = self.backbone(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state  # (b, t, H)
            m = attention_mask.unsqueeze(-1).to(h.dtype)  # (b, t, 1)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)  # (b, H)
            return SequenceClassifierOutput(logits=self.classifier(self.dropout(pooled)))

    return MeanPoolClassifier(backbone)


def scalar_mix_model(backbone, num_labels: int, dropout: float, per_token: bool):
    """ELMo's scalar mix (Peters et al., 2018): ``gamma * sum_j softmax(s)_j h_j`` over every hidden state
    (embeddings and each layer), then per token (token labelling) or mean over real tokens (sequences), dropout
    and one linear layer. ``layer_weights()`` gives softmax(s). s starts at 0 (an even mix), gamma at 1."""
    import torch  # lazy: as in mean_pool_classifier
    from torch import nn  # lazy: as torch
    from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput  # lazy: as torch

    class ScalarMixClassifier(nn.Module):
        def __init__(self, backbone):  # an argument, not the closure's: see mean_pool_classifier
            super().__init__()
            self.backbone = backbone
            cfg = backbone.config
            hidden, layers = shape(cfg).hidden, shape(cfg).layers
            self.per_token = per_token
            self.mix = nn.Parameter(torch.zeros(layers + 1))  # (L+1,): embeddings, layer 1..L
            self.gamma = nn.Parameter(torch.ones(()))
            self.dropout = nn.Dropout(dropout)
            self.classifier = nn.Linear(hidden, num_labels)

        def layer_weights(self):
            return torch.softmax(self.mix.detach().float(), 0)

        def forward(self, input_ids, attention_mask, **kw):
            hs = self.backbone(
                input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, **kw
            ).hidden_states  # L+1 tensors (b, t, H)
            w = torch.softmax(self.mix, 0).to(hs[0].dtype)
            h = self.gamma * torch.einsum("l,lbth->bth", w, torch.stack(hs))  # (b, t, H)
            if self.per_token:
                return TokenClassifierOutput(logits=self.classifier(self.dropout(h)))  # (b, t, labels)
            m = attention_mask.unsqueeze(-1).to(h.dtype)  # (b, t, 1)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)  # (b, H)
            return SequenceClassifierOutput(logits=self.classifier(self.dropout(pooled)))

    return ScalarMixClassifier(backbone)


@dataclass
class FinetunedModel:
    """A fine-tuned classifier ready to predict (``load_finetuned``); ablation and attribution take it too."""

    model: Any
    tokenizer: Any
    label_names: tuple[str, ...]
    pooling: str
    max_length: int
    device: str
    task: str = "sequence"
    word_tokenizer: Any = None  # task "token": the tokenizer for pre-split words (core.data.token_data.words_tokenizer)
    recipe: tuple | None = field(
        default=None, repr=False, compare=False
    )  # how another process loads it (core.runtime.backend)


def load_finetuned(model_dir: str | Path, device: str = "auto") -> FinetunedModel:
    """Load a folder written by core.train.finetune.train for prediction. Raises ModelLoadError if it is not one, or
    if it is damaged (a file cut short or overwritten: core.runtime.artifacts.damaged_files, or one that does not
    parse); a damaged run is left where it is (it is the user's, and its report stays true): train it again."""
    from safetensors.torch import load_file  # lazy: safetensors' torch half imports torch

    meta_path = Path(model_dir) / META_FILE
    if not meta_path.exists():
        raise ModelLoadError(msg("classify.not_fine_tuned_encoderlab", model_dir=model_dir, meta_file=META_FILE))
    try:
        bad = artifacts.damaged_files(Path(model_dir))
        if bad:
            raise ValueError(", ".join(bad))
        meta = json.loads(meta_path.read_text())
        c = meta["config"]
        spec = ModelSpec(c["family"], str(model_dir), device)
        task = c.get("task", "sequence")
        if c["pooling"] == "cls":
            lm = load(spec, "tokcls" if task == "token" else "seqcls")
            model = lm.model
        else:
            lm = load(spec, "base")
            head = load_file(str(Path(model_dir) / HEAD_FILE))
            if c["pooling"] == "mean":
                model = mean_pool_classifier(lm.model, len(meta["label_names"]), 0.0)
                model.classifier.load_state_dict(head)
            else:
                model = scalar_mix_model(lm.model, len(meta["label_names"]), 0.0, per_token=task == "token")
                missing, unexpected = model.load_state_dict(head, strict=False)
                if unexpected or [k for k in missing if not k.startswith("backbone.")]:
                    raise ModelLoadError(
                        msg("classify.does_not_match_scalar", model_dir=model_dir, head_file=HEAD_FILE)
                    )
            model.to(lm.device)
    except ModelLoadError as e:
        if holds_kind(e, "load.weights_unreadable"):  # said as a run's: train it again
            raise ModelLoadError(
                msg("classify.finetuned_run_unreadable", model_dir=model_dir, problem=e.params["problem"])
            ) from None
        raise
    except artifacts.read_errors() as e:
        raise ModelLoadError(msg("classify.finetuned_run_unreadable", model_dir=model_dir, problem=str(e))) from None
    model.eval()
    word_tok = None
    if task == "token":
        word_tok = words_tokenizer(lm.tokenizer)
    return FinetunedModel(
        model,
        lm.tokenizer,
        tuple(meta["label_names"]),
        c["pooling"],
        c["max_length"],
        lm.device,
        task,
        word_tok,
        recipe=("core.predict.classify:load_finetuned", (str(model_dir),), {"device": device}),
    )


def split_words(text: str) -> list[str]:
    """Words and punctuation of a typed sentence, the way CoNLL files split them ("Paris." -> "Paris", ".")."""
    return re.findall(r"\w+(?:[-'’.]\w+)*|[^\w\s]", text)


def tag(fm: FinetunedModel, texts: list[str] | list[list[str]]) -> list[list[tuple[str, str, float]]]:
    """Per-word tags of a token model: for each text (a string, split by ``split_words``, or a list of words),
    (word, tag, probability) for every word that fits in the model's max length."""
    import torch  # lazy: as in mean_pool_classifier
    from transformers import DataCollatorForTokenClassification  # lazy: as torch

    if fm.task != "token":
        raise ValueError(msg("classify.model_classifies_whole_texts"))
    sentences = [split_words(x) if isinstance(x, str) else list(x) for x in texts]
    out: list[list[tuple[str, str, float]]] = [[] for _ in sentences]
    todo = [i for i, s in enumerate(sentences) if s]
    rows = align_batch(fm.word_tokenizer, [sentences[i] for i in todo], None, None, fm.max_length)
    if not rows:
        return out
    # padded through the tokenizer (its side), as training's collator (core.train.finetune_data.TokenTask) pads;
    # labels mark each word's first piece, -100 elsewhere and on padding
    pad = DataCollatorForTokenClassification(fm.tokenizer, label_pad_token_id=-100, return_tensors="pt")
    b = dict(pad([{"input_ids": r["input_ids"], "labels": r["labels"]} for r in rows]))
    labels = b.pop("labels")  # (n, width)
    enc = {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}
    if "token_type_ids" in rows[0]:
        enc["token_type_ids"] = torch.zeros_like(b["input_ids"])
    with torch.no_grad():
        probs = torch.softmax(fm.model(**{k: v.to(fm.device) for k, v in enc.items()}).logits.float(), -1).cpu()
    for r, i in enumerate(todo):
        first = [p for p, y in enumerate(labels[r].tolist()) if y != -100]  # the first piece of each word
        for w, p in zip(sentences[i], first):
            k = int(probs[r, p].argmax())
            out[i].append((w, fm.label_names[k], float(probs[r, p, k])))
    return out


def classify(fm: FinetunedModel, texts: list[str], texts_b: list[str] | None = None) -> np.ndarray:
    """Class probabilities, shape (len(texts), classes).

    Concurrent calls on the same model (one per session thread) run as one batch (core.runtime.serving); single texts
    and pairs batch separately (the tokenizer takes one kind per call)."""
    if not texts:
        return classify_now(fm, texts, texts_b)
    op = "classify" if texts_b is None else "classify_pairs"
    return batched(fm, op, _classify_batch, (list(texts), None if texts_b is None else list(texts_b)))


def _classify_batch(fm: FinetunedModel, items: Sequence[tuple[list[str], list[str] | None]]) -> list[np.ndarray]:
    """Several callers' texts (all single, or all pairs) as one forward, split back per caller."""
    probs = classify_now(
        fm,
        [x for a, _ in items for x in a],
        None if items[0][1] is None else [x for _, b in items if b is not None for x in b],
    )  # one op: all pairs
    out, i = [], 0
    for a, _ in items:
        out.append(probs[i : i + len(a)])
        i += len(a)
    return out


def classify_now(fm: FinetunedModel, texts: list[str], texts_b: list[str] | None = None) -> np.ndarray:
    """``classify`` on this thread, never through the batcher (core.runtime.serving runs a batch on another
    session's thread, where e.g. core.inspect.ablation's per-context head switch does not hold)."""
    import torch  # lazy: as in mean_pool_classifier

    enc = fm.tokenizer(texts, texts_b, truncation=True, max_length=fm.max_length, padding=True, return_tensors="pt")
    enc = {k: v.to(fm.device) for k, v in enc.items() if k in fm.tokenizer.model_input_names}
    # the whole forward on packed linears (core.models.packed_linear), as fill-mask's
    with torch.no_grad(), packed_forward(fm.model):
        return torch.softmax(fm.model(**enc).logits.float(), -1).cpu().numpy()


def zip_folder(folder: str | Path) -> bytes:
    """The folder as a zip archive in memory (for the download button)."""
    buf = io.BytesIO()
    folder = Path(folder)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, Path(folder.name) / p.relative_to(folder))
    return buf.getvalue()
