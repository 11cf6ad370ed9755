"""Contextual vectors for many sentences at once: what corpus search, the projector and the layer probes build on.

``token_vectors(lm, sentences, layers)`` runs the encoder over the sentences in length-sorted batches (one forward
per batch with ``output_hidden_states=True``) and keeps, for every non-special token, its hidden state at each asked
depth (0 = the embeddings, L = the last layer; ALBERT's shared layer counts once per application), plus where it came
from: the sentence, the piece, the whole word it belongs to and that word's character span. ``unit="word"`` keeps
one row per word instead (the mean of its pieces), which is what "the vectors of *bank* across the corpus" means.

transformers has no corpus-level feature extractor that keeps word alignment (the ``feature-extraction`` pipeline
returns one padded array per text, with specials and no word ids), so the batching and the alignment are here. Words
are the same for every family: runs of letters/digits, each punctuation mark on its own, each CJK character on
its own except Chinese ones, which make up the 词 of core.base.segment (``sentence_words``: ``WORD_RE`` regrouped
by jieba). The
tokenizers' own ``word_ids()`` would disagree (ALBERT's Metaspace keeps "muddy." as one word, with its leading
space); a piece belongs to the word its first non-space character falls in (from the fast tokenizer's offsets).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from core.base.messages import msg
from core.base.segment import regroup
from core.models.loading import LoadedModel
from core.registry.shape import shape

MAX_SENTENCES = 20_000  # the largest corpus a page may index (issue #18: up to 20k sentences)
UNITS = ("piece", "word")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
WORD_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")  # a CJK character apart, as BERT splits it (then: 词)


def sentence_words(text: str) -> list[tuple[int, int]]:
    """Character spans of the words of ``text`` as everything built on these vectors counts them: ``WORD_RE``'s,
    with Chinese characters regrouped into their 词 (core.base.segment: 北京 is one word, not two)."""
    return regroup(text, [m.span() for m in WORD_RE.finditer(text)])


def align_pieces(
    sentence: str, offsets: Sequence[tuple[int, int]], special: Sequence[int]
) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """(positions kept, the word each falls in, the sentence's word spans) of one encoded sentence: a piece is kept
    when it is not special and not empty, and belongs to the word its first non-space character falls in. A word
    that no piece starts in (the tokenizer merged it into a piece that starts in the word before, or it lies past
    the cut at max_length) has no row of its own."""
    spans = sentence_words(sentence)
    word_starts = [a for a, _ in spans]
    pos, words = [], []
    for p, (a, b) in enumerate(offsets):
        if special[p] or b <= a:
            continue
        while a < b and sentence[a].isspace():
            a += 1
        if a >= b:
            continue  # a piece of whitespace only (byte BPE's lone space)
        w = bisect.bisect_right(word_starts, a) - 1
        if w < 0:
            continue
        pos.append(p)
        words.append(w)
    return pos, words, spans


def words_with_tokens(lm: LoadedModel, text: str, max_length: int = 128) -> frozenset[int]:
    """The indices (in ``sentence_words`` order) of the words of ``text`` that have a token of their own when
    token_vectors reads it with ``max_length``: tokenizing only, no forward."""
    if not getattr(lm.tokenizer, "is_fast", False):
        raise ValueError(msg("vectors.needs_fast_tokenizer_word"))
    enc = lm.tokenizer(
        str(text),
        truncation=True,
        max_length=min(int(max_length), lm.max_tokens),
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    return frozenset(align_pieces(str(text), enc["offset_mapping"], enc["special_tokens_mask"])[1])


@dataclass(frozen=True, eq=False)
class TokenVectors:
    """Rows are tokens (``unit="piece"``) or words (``unit="word"``) of the sentences, specials left out.

    ``vectors[i]`` is depth ``layers[i]``: (rows, H) float32. Everything else is per row."""

    checkpoint: str
    family: str
    unit: str
    layers: tuple[int, ...]  # depths kept, 0 = embeddings
    num_depths: int  # L + 1 for this model (every depth it has)
    sentences: tuple[str, ...]
    vectors: np.ndarray  # (len(layers), rows, H) float32
    sentence_ids: np.ndarray  # (rows,) int32: index into sentences
    word_index: np.ndarray  # (rows,) int32: the word's index within its sentence
    positions: np.ndarray  # (rows,) int32: the token's position in its sentence's encoding (word: its first piece)
    starts: np.ndarray  # (rows,) int32: character span of the row's whole word in its sentence
    ends: np.ndarray  # (rows,) int32
    pieces: tuple[str, ...]  # the piece (unit "piece"), or the word's pieces joined by " " (unit "word")
    first_piece: np.ndarray  # (rows,) bool: the row is its word's first piece (always True for unit "word")
    truncated: int  # sentences cut at max_length (their tail has no rows)

    def __len__(self) -> int:
        return int(self.sentence_ids.shape[0])

    @property
    def words(self) -> tuple[str, ...]:
        """The whole word of each row, as written in its sentence."""
        return tuple(self.sentences[s][a:b] for s, a, b in zip(self.sentence_ids, self.starts, self.ends))

    def at(self, depth: int) -> np.ndarray:
        """(rows, H) vectors at ``depth`` (one of ``layers``)."""
        if depth not in self.layers:
            raise ValueError(msg("vectors.depth_was_not_kept", depth=depth, depths=list(self.layers)))
        return self.vectors[self.layers.index(depth)]

    def rows_of(self, word: str) -> np.ndarray:
        """Indices of the rows whose whole word is ``word`` (case-insensitive)."""
        w = word.strip().lower()
        return np.asarray([i for i, x in enumerate(self.words) if x.lower() == w], dtype=np.int64)

    def sentence_means(self) -> np.ndarray:
        """(len(layers), sentences, H): each sentence's mean row vector per depth (zeros for a sentence with no rows)."""
        n = len(self.sentences)
        out = np.zeros((self.vectors.shape[0], n, self.vectors.shape[2]), dtype=np.float32)
        counts = np.bincount(self.sentence_ids, minlength=n).astype(np.float32)
        for i in range(self.vectors.shape[0]):
            np.add.at(out[i], self.sentence_ids, self.vectors[i])
        out /= np.maximum(counts, 1.0)[None, :, None]
        return out


def num_depths(lm: LoadedModel) -> int:
    """Hidden-state depths the model returns: its layers (applications, for ALBERT) plus the embeddings."""
    return shape(lm.model.config).depths


def _encoder(model):
    return getattr(model, "base_model", model)


def token_vectors(
    lm: LoadedModel,
    sentences: Sequence[str],
    layers: Sequence[int] | None = None,
    *,
    unit: str = "piece",
    max_length: int = 128,
    batch_tokens: int = 8192,
    on_progress: Callable[[float, str], None] | None = None,
) -> TokenVectors:
    """Hidden states of every non-special token of ``sentences`` at ``layers`` (default: every depth).

    Sentences are tokenized once, sorted by length and run in batches of about ``batch_tokens`` padded tokens.
    ``on_progress(fraction, message)`` is called after each batch (a job's ``ctx.progress``, which raises
    JobCancelled on Cancel). Raises ValueError for no sentences, too many, unknown depths or unit.
    """
    import torch

    sentences = tuple(str(s) for s in sentences)
    if not sentences or not any(s.strip() for s in sentences):
        raise ValueError(msg("vectors.no_text"))
    if len(sentences) > MAX_SENTENCES:
        raise ValueError(msg("vectors.too_many_sentences", n_sentences=len(sentences), max_sentences=MAX_SENTENCES))
    if unit not in UNITS:
        raise ValueError(msg("vectors.unit_must_one_got", choices=", ".join(UNITS), unit=unit))
    depths = num_depths(lm)
    layers = tuple(range(depths)) if layers is None else tuple(int(x) for x in layers)
    bad = [x for x in layers if not 0 <= x < depths]
    if bad or not layers:
        raise ValueError(msg("vectors.depths_must_embeddings_model", last_depth=depths - 1, depths=list(layers)))
    tok = lm.tokenizer
    if not getattr(tok, "is_fast", False):
        raise ValueError(msg("vectors.needs_fast_tokenizer_word"))
    max_length = min(int(max_length), lm.max_tokens)
    enc = tok(
        list(sentences),
        truncation=True,
        max_length=max_length,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    ids_all = enc["input_ids"]
    truncated = sum(
        1
        for i, s in enumerate(sentences)
        if len(ids_all[i]) >= max_length
        and enc["offset_mapping"][i]
        and max(b for _, b in enc["offset_mapping"][i]) < len(s.rstrip())
    )
    order = sorted(range(len(sentences)), key=lambda i: len(ids_all[i]))
    model = _encoder(lm.model)
    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    uses_types = "token_type_ids" in enc and getattr(model.config, "type_vocab_size", 0) > 1

    # Per sentence: which positions are kept (non-special, not empty), the word each falls in and the words' spans.
    keep_pos, word_of, span_of = {}, {}, {}
    for i, sent in enumerate(sentences):
        keep_pos[i], word_of[i], span_of[i] = align_pieces(
            sent, enc["offset_mapping"][i], enc["special_tokens_mask"][i]
        )

    chunks: list[list[np.ndarray]] = [[] for _ in layers]
    sent_rows: list[np.ndarray] = []
    done = 0
    k = 0
    with torch.inference_mode():
        while k < len(order):
            longest = len(ids_all[order[k]])
            j = k + 1
            while j < len(order) and (j - k + 1) * len(ids_all[order[j]]) <= batch_tokens:
                j += 1
            batch = order[k:j]
            longest = len(ids_all[batch[-1]])
            input_ids = torch.full((len(batch), longest), pad, dtype=torch.long)
            attn = torch.zeros((len(batch), longest), dtype=torch.long)
            for r, i in enumerate(batch):
                n = len(ids_all[i])
                input_ids[r, :n] = torch.tensor(ids_all[i])
                attn[r, :n] = 1
            kwargs = dict(input_ids=input_ids.to(device), attention_mask=attn.to(device), output_hidden_states=True)
            if uses_types:
                kwargs["token_type_ids"] = torch.zeros_like(kwargs["input_ids"])
            hs = model(**kwargs).hidden_states  # L + 1 tensors of (b, seq, H)
            # Gather the kept positions of the whole batch with one index per depth.
            rows_b = torch.tensor([r for r, i in enumerate(batch) for _ in keep_pos[i]], dtype=torch.long)
            cols_b = torch.tensor([p for i in batch for p in keep_pos[i]], dtype=torch.long)
            for li, depth in enumerate(layers):
                chunks[li].append(hs[depth][rows_b.to(device), cols_b.to(device)].float().cpu().numpy())
            sent_rows.append(np.asarray(batch, dtype=np.int32))
            done += len(batch)
            k = j
            if on_progress is not None:
                on_progress(done / len(order), msg("progress.sentences", done=done, total=len(order)))

    # Rows come out in batch order; put them back in sentence order (sentence, then position).
    order_rows = (
        np.concatenate([np.repeat(b, [len(keep_pos[i]) for i in b]) for b in sent_rows])
        if sent_rows
        else np.zeros(0, dtype=np.int32)
    )
    vecs = [np.concatenate(c, axis=0) if c else np.zeros((0, model.config.hidden_size), np.float32) for c in chunks]
    perm = np.argsort(order_rows, kind="stable")
    vecs = [v[perm] for v in vecs]
    sentence_ids = order_rows[perm].astype(np.int32)
    word_index = np.asarray([w for i in range(len(sentences)) for w in word_of[i]], dtype=np.int32)
    positions = np.asarray([p for i in range(len(sentences)) for p in keep_pos[i]], dtype=np.int32)
    pieces_all = [tok.convert_ids_to_tokens(ids_all[i][p]) for i in range(len(sentences)) for p in keep_pos[i]]
    starts = np.asarray([span_of[i][w][0] for i in range(len(sentences)) for w in word_of[i]], dtype=np.int32)
    ends = np.asarray([span_of[i][w][1] for i in range(len(sentences)) for w in word_of[i]], dtype=np.int32)
    first = np.ones(len(sentence_ids), dtype=bool)
    if len(first) > 1:
        first[1:] = (sentence_ids[1:] != sentence_ids[:-1]) | (word_index[1:] != word_index[:-1])
    stacked = np.stack(vecs) if vecs else np.zeros((0, 0, 0), np.float32)
    if unit == "word":
        group = np.cumsum(first) - 1  # (rows,) the word row each piece goes to
        n_words = int(group[-1]) + 1 if len(group) else 0
        counts = np.bincount(group, minlength=n_words).astype(np.float32)
        out = np.zeros((stacked.shape[0], n_words, stacked.shape[2]), dtype=np.float32)
        for li in range(stacked.shape[0]):
            np.add.at(out[li], group, stacked[li])
        stacked = out / np.maximum(counts, 1.0)[None, :, None]
        joined: list[list[str]] = [[] for _ in range(n_words)]
        for g, pc in zip(group, pieces_all):
            joined[g].append(pc)
        pieces_all = [" ".join(x) for x in joined]
        keep = first
        sentence_ids, word_index, starts, ends = sentence_ids[keep], word_index[keep], starts[keep], ends[keep]
        positions = positions[keep]
        first = np.ones(n_words, dtype=bool)
    return TokenVectors(
        checkpoint=lm.spec.checkpoint,
        family=lm.spec.family,
        unit=unit,
        layers=layers,
        num_depths=depths,
        sentences=sentences,
        vectors=np.ascontiguousarray(stacked),
        sentence_ids=sentence_ids,
        word_index=word_index,
        positions=positions,
        starts=starts,
        ends=ends,
        pieces=tuple(pieces_all),
        first_piece=first,
        truncated=int(truncated),
    )
