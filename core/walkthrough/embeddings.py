"""What an encoder reads: the three embeddings its input vectors are made of (the MLM corruption of that input
during pretraining is in core/walkthrough/masking_view.py).

``embedding_parts`` takes a text (or a pair) through the tokenizer and the model's own embedding layer, and
returns, per token, the norms of its token (word-piece), segment (token-type) and position embeddings and of their
sum after LayerNorm, which is exactly what the first encoder layer receives (for ALBERT: before the E -> H
projection). Families differ, and the result says how instead of failing:

- BERT and ALBERT add a segment embedding (A = 0, B = 1); ALBERT's vectors are E-dimensional (E < H).
- RoBERTa keeps a segment table of size 1 (type_vocab_size 1): the same vector is added to every token, so it
  cannot tell sentence A from B; its positions start after the padding index (padding_idx + 1).
- DistilBERT has no segment embeddings at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.base.messages import msg
from core.base.text import with_mask_token
from core.models.loading import LoadedModel
from core.runtime.backend import model_op

MAX_TEXT_TOKENS = 128  # the walkthrough shows one sentence (or a pair): longer inputs are cut, and the result says so


@dataclass(frozen=True, eq=False)
class EmbeddingParts:
    """Per token (special tokens included): ids, and the norms of each embedding part. Numpy and plain Python."""

    checkpoint: str
    family: str
    tokens: tuple[str, ...]
    special: tuple[bool, ...]  # [CLS]/[SEP]/<s>/</s>
    token_type_ids: tuple[int, ...]  # segment of each token (all 0 for a single sentence, and for RoBERTa/DistilBERT)
    position_ids: tuple[int, ...]  # row of the position table each token reads (RoBERTa: from padding_idx + 1)
    token_norms: np.ndarray  # (seq,) L2 norm of the word-piece embedding
    segment_norms: np.ndarray | None  # (seq,) None when the family has no segment embeddings (DistilBERT)
    position_norms: np.ndarray  # (seq,)
    sum_norms: np.ndarray  # (seq,) norm of token + segment + position, before LayerNorm
    output_norms: np.ndarray  # (seq,) norm after LayerNorm: what the encoder receives
    output: np.ndarray  # (seq, E) the LayerNormed sum itself (dropout is off at inference)
    embedding_size: int  # E: the size of these vectors
    hidden_size: int  # H: the encoder's width (E == H except ALBERT)
    segments: str  # "ab": A/B segments; "single": one segment vector for every token (RoBERTa); "none" (DistilBERT)
    type_vocab_size: int  # rows of the segment table (0 when there is none)
    sentence_b_start: int | None  # first position of sentence B; None for one sentence
    truncated: bool = False  # the input was cut to MAX_TEXT_TOKENS (or the model's limit)

    @property
    def has_segments(self) -> bool:
        """True when segment embeddings can tell sentence A from sentence B."""
        return self.segments == "ab"

    @property
    def factorized(self) -> bool:
        """True when the embeddings are smaller than the encoder (ALBERT's V x E + E x H)."""
        return self.embedding_size != self.hidden_size


def _base(model):
    """The encoder without heads (BertModel, RobertaModel, AlbertModel, DistilBertModel)."""
    return getattr(model, "base_model", model)


@model_op
def embedding_parts(lm: LoadedModel, text: str, text_b: str | None = None) -> EmbeddingParts:
    """Split the model's input vectors into their token, segment and position parts for ``text`` (and ``text_b``).

    Returns an EmbeddingParts of numpy arrays. Raises ValueError for an empty text, or when the model has no
    embedding layer of the known shape.
    """
    import torch

    if not text or not text.strip():
        raise ValueError(msg("walkthrough.text_empty_to_embed"))
    tok, base = lm.tokenizer, _base(lm.model)
    emb = getattr(base, "embeddings", None)
    if emb is None or not hasattr(emb, "word_embeddings") or not hasattr(emb, "position_embeddings"):
        raise ValueError(msg("walkthrough.no_bert_embeddings", model_class=type(lm.model).__name__))
    limit = min(MAX_TEXT_TOKENS, lm.max_tokens)
    pair = bool(text_b and text_b.strip())
    text = with_mask_token(text, tok.mask_token)  # a typed [MASK] is the model's own mask token, as on every page
    text_b = with_mask_token(text_b, tok.mask_token) if text_b else text_b
    full = tok(text, text_b if pair else None)["input_ids"]
    enc = tok(
        text,
        text_b if pair else None,
        truncation=True,
        max_length=limit,
        return_tensors="pt",
        return_token_type_ids=True,
    )
    ids = enc["input_ids"].to(lm.device)  # (1, seq)
    seq = ids.shape[1]
    seg_table = getattr(emb, "token_type_embeddings", None)
    type_vocab = int(seg_table.num_embeddings) if seg_table is not None else 0
    # A/B segments only when the tokenizer gives them: a table of two rows behind a tokenizer without token type ids
    # (the bundled XLM-R: multilingual-e5 keeps MiniLM's two rows) adds its first row to every token, as RoBERTa's one
    gives_types = "token_type_ids" in getattr(tok, "model_input_names", ("token_type_ids",))
    segments = "none" if seg_table is None else ("ab" if type_vocab > 1 and gives_types else "single")
    types = enc.get("token_type_ids")
    if types is None or segments != "ab":
        types = torch.zeros_like(ids)
    types = types.to(lm.device)
    if hasattr(emb, "create_position_ids_from_input_ids") and getattr(emb, "padding_idx", None) is not None:
        positions = emb.create_position_ids_from_input_ids(ids, emb.padding_idx)  # RoBERTa: padding_idx + 1 + i
    else:
        positions = torch.arange(seq, device=ids.device).unsqueeze(0)  # (1, seq)
    with torch.inference_mode():
        w = emb.word_embeddings(ids)[0].float()  # (seq, E)
        p = emb.position_embeddings(positions)[0].float()  # (seq, E)
        s = seg_table(types)[0].float() if seg_table is not None else torch.zeros_like(w)  # (seq, E)
        total = w + s + p
        ln = emb.LayerNorm
        out = torch.nn.functional.layer_norm(total, ln.normalized_shape, ln.weight.float(), ln.bias.float(), ln.eps)
    specials = set(tok.all_special_ids) - {tok.unk_token_id}
    id_list = ids[0].tolist()
    type_list = [int(x) for x in types[0].tolist()]
    b_start = next((i for i, x in enumerate(type_list) if x == 1), None) if pair and segments == "ab" else None
    if pair and b_start is None:  # no segment ids to find B by: it starts after the first separator run
        seps = [i for i, x in enumerate(id_list) if x == tok.sep_token_id]
        b_start = (seps[0] + 1 + (1 if len(seps) > 2 and seps[1] == seps[0] + 1 else 0)) if seps else None
    cfg = base.config
    hidden = int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "dim", 0))
    return EmbeddingParts(
        checkpoint=lm.spec.checkpoint,
        family=lm.spec.family,
        tokens=tuple(tok.convert_ids_to_tokens(id_list)),
        special=tuple(i in specials for i in id_list),
        token_type_ids=tuple(type_list),
        position_ids=tuple(int(x) for x in positions[0].tolist()),
        token_norms=w.norm(dim=-1).cpu().numpy(),
        segment_norms=s.norm(dim=-1).cpu().numpy() if seg_table is not None else None,
        position_norms=p.norm(dim=-1).cpu().numpy(),
        sum_norms=total.norm(dim=-1).cpu().numpy(),
        output_norms=out.norm(dim=-1).cpu().numpy(),
        output=out.cpu().numpy(),
        embedding_size=int(w.shape[-1]),
        hidden_size=hidden,
        segments=segments,
        type_vocab_size=type_vocab,
        sentence_b_start=b_start,
        truncated=len(full) > seq,
    )


# ---------------------------------------------------------------------------------------------- MLM masking
