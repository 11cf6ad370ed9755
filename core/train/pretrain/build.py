"""Models and tokenizers for pretraining, and the family heads applied to the selected positions only.

Sizes: ``tiny`` (tests, the lab page's quick runs), ``mini`` (the bundled zoo), ``small``. The mini BERT starts
from the offline MiniLM encoder (6x384, bert-base-uncased vocab) with a fresh MLM head tied to its word
embeddings and a fresh NSP head; the DistilBERT student takes every other layer of its teacher.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from core.base.messages import msg
from core.data.masking import WORD_MARKERS, mask_tokens
from core.models.loading import BUILD_LOCK
from core.models.tokenizer_build import bert_uncased_tokenizer, minilm_folder, save_tokenizer, train_tokenizer
from core.registry import FAMILIES, family_of_model_type, mlm_head, pair_head_module
from core.registry.pretraining import BERT_UNCASED, recipe
from core.train import common as training

SIZES: dict[str, dict[str, int]] = {
    "tiny": dict(hidden=64, layers=2, heads=2, ffn=128, embedding=32, vocab=2000),
    "mini": dict(hidden=256, layers=4, heads=4, ffn=1024, embedding=128, vocab=8000),
    "small": dict(hidden=384, layers=6, heads=6, ffn=1536, embedding=128, vocab=16000),
}


def build_tokenizer(family: str, texts: list[str], vocab_size: int, out_dir: str | Path):
    """The family's vocabulary (its recipe's): the real bert-base-uncased WordPiece one, or a tokenizer of its
    piece kind trained on ``texts``."""
    if recipe(family).vocabulary == BERT_UNCASED:
        return bert_uncased_tokenizer(out_dir, family=family)
    raw = train_tokenizer(family, texts, vocab_size=vocab_size)
    return save_tokenizer(family, raw, out_dir)


def new_config(family: str, size: str, tokenizer):
    """A fresh config of the family's own class at ``size`` (its recipe's ``config``; ALBERT keeps E < H and one
    shared layer)."""
    if size not in SIZES:
        raise ValueError(msg("pretrain.unknown_size_use_one", size=size, choices=", ".join(SIZES)))
    return recipe(family).config(SIZES[size], tokenizer)


def pretraining_class(family: str):
    import transformers

    return getattr(transformers, FAMILIES[family].classes["pretraining"])


def from_minilm(family: str, tokenizer, fit: MiniLMFit | None = None, source: str | Path | None = None):
    """The family's start from a BERT-architecture encoder (its recipe's ``from_minilm``): the offline MiniLM, or
    ``source``, a folder of a BERT model with the bert-base-uncased vocabulary (the zoo's RoBERTa and ALBERT start
    from the bundled bert-mini, whose encoder has learned MLM). Raises ValueError for a family that has none."""
    start = recipe(family).from_minilm
    if start is None:
        raise ValueError(msg("pretrain.no_minilm_start", label=FAMILIES[family].label))
    return STARTS[start](tokenizer, fit, source)


def student(family: str, teacher, layers: tuple[int, ...] | None = None):
    """A student of ``family`` cut from ``teacher`` (its recipe's ``student``); ValueError for a family that is not
    distilled (PretrainConfig refuses a teacher for one first)."""
    cut = recipe(family).student
    if cut is None:
        students = ", ".join(f.label for k, f in FAMILIES.items() if recipe(k).distils)
        raise ValueError(msg("pretrain.family_not_distilled", students=students, label=FAMILIES[family].label))
    return STUDENTS[cut](teacher, layers)


def _source(source: str | Path | None) -> str:
    return str(source) if source is not None else str(minilm_folder())


def bert_from_minilm(source: str | Path | None = None):
    """BertForPreTraining with the MiniLM encoder (or ``source``'s); MLM transform + NSP head fresh unless the
    source has them, decoder tied to embeddings."""
    import transformers

    transformers.logging.set_verbosity_error()
    with BUILD_LOCK:
        model = transformers.BertForPreTraining.from_pretrained(
            _source(source), use_safetensors=True, dtype=torch.float32
        )
    model.config.architectures = [type(model).__name__]
    model.tie_weights()
    return model


def distil_student(teacher, layers: tuple[int, ...] | None = None):
    """A DistilBertForMaskedLM with half the teacher's layers, initialised from every other teacher layer.

    Token-type embedding 0 is folded into the position embeddings (DistilBERT has no token types), and the
    teacher's MLM transform and decoder bias initialise the student's head. Raises ValueError on a mismatch.
    """
    import transformers

    tc = teacher.config
    n = tc.num_hidden_layers
    layers = tuple(layers) if layers is not None else tuple(range(0, n, 2))
    if any(not 0 <= i < n for i in layers):
        raise ValueError(msg("pretrain.student_layers_must_teacher", layers=layers, last_layer=n - 1))
    cfg = transformers.DistilBertConfig(
        vocab_size=tc.vocab_size,
        dim=tc.hidden_size,
        n_layers=len(layers),
        n_heads=tc.num_attention_heads,
        hidden_dim=tc.intermediate_size,
        max_position_embeddings=tc.max_position_embeddings,
        pad_token_id=tc.pad_token_id,
        activation="gelu",
    )
    student = transformers.DistilBertForMaskedLM(cfg)
    tb, sb = teacher.bert, student.distilbert
    with torch.no_grad():
        sb.embeddings.word_embeddings.weight.copy_(tb.embeddings.word_embeddings.weight)
        sb.embeddings.position_embeddings.weight.copy_(
            tb.embeddings.position_embeddings.weight + tb.embeddings.token_type_embeddings.weight[0]
        )
        sb.embeddings.LayerNorm.load_state_dict(tb.embeddings.LayerNorm.state_dict())
        for s_layer, t_i in zip(sb.transformer.layer, layers):
            t = tb.encoder.layer[t_i]
            s_layer.attention.q_lin.load_state_dict(t.attention.self.query.state_dict())
            s_layer.attention.k_lin.load_state_dict(t.attention.self.key.state_dict())
            s_layer.attention.v_lin.load_state_dict(t.attention.self.value.state_dict())
            s_layer.attention.out_lin.load_state_dict(t.attention.output.dense.state_dict())
            s_layer.sa_layer_norm.load_state_dict(t.attention.output.LayerNorm.state_dict())
            s_layer.ffn.lin1.load_state_dict(t.intermediate.dense.state_dict())
            s_layer.ffn.lin2.load_state_dict(t.output.dense.state_dict())
            s_layer.output_layer_norm.load_state_dict(t.output.LayerNorm.state_dict())
        head = teacher.cls.predictions
        student.vocab_transform.load_state_dict(head.transform.dense.state_dict())
        student.vocab_layer_norm.load_state_dict(head.transform.LayerNorm.state_dict())
        student.vocab_projector.bias.copy_(head.decoder.bias if head.decoder.bias is not None else head.bias)
    student.tie_weights()
    student.config.architectures = [type(student).__name__]
    return student


def encode(model, family: str, input_ids, attention_mask, token_type_ids=None):
    """Run the encoder (``model.base_model``); returns (sequence output (batch, seq, hidden), pooled output
    (batch, hidden) or None). Token types go in only for a family that has segment embeddings."""
    types = {"token_type_ids": token_type_ids} if FAMILIES[family].token_types else {}
    out = model.base_model(input_ids=input_ids, attention_mask=attention_mask, **types)
    return out.last_hidden_state, getattr(out, "pooler_output", None)


def mlm_logits(model, family: str, hidden: torch.Tensor) -> torch.Tensor:
    """The family's MLM head on some positions' hidden states (n, hidden) -> (n, vocab)."""
    head = mlm_head(model) if family in FAMILIES else None
    if head is None:
        raise ValueError(msg("pretrain.unknown_family_model_without", family=family))
    return head(hidden)


def pair_logits(model, family: str, pooled: torch.Tensor) -> torch.Tensor | None:
    """NSP (BERT) or SOP (ALBERT) logits (batch, 2); None for families without a pair head."""
    head = pair_head_module(model) if FAMILIES[family].pair_head else None
    return None if head is None else head(pooled)


def head_paths(model) -> tuple[str, ...]:
    """The MLM / pair heads' module paths: every top-level module besides the base model (not the tied word
    embeddings, which are the encoder's)."""
    return training.head_paths(model)


def embedding_paths(model, family: str) -> tuple[str, ...]:
    """The input embeddings' module paths (the recipe's ``embedding_parts``: ALBERT's E -> H mapping too); tied
    output embeddings included."""
    return training.embedding_paths(model, recipe(family).embedding_parts)


def mlm_bias(model, family: str | None = None) -> torch.nn.Parameter:
    """The MLM decoder's output bias (vocab,): the output embeddings' bias, transformers' generic handle on it."""
    out = model.get_output_embeddings()
    if out is None or getattr(out, "bias", None) is None:
        raise ValueError(msg("pretrain.no_mlm_output_bias", model_class=type(model).__name__))
    return out.bias


def init_bias_to_prior(model, family: str | None, counts: dict[int, int]) -> None:
    """Start the fresh MLM head at the unigram distribution: bias = log frequency (add-one smoothed), so the
    first steps learn context instead of re-learning token frequencies."""
    bias = mlm_bias(model, family)
    freq = torch.ones(bias.shape[0])
    for i, c in counts.items():
        if i < freq.shape[0]:
            freq[i] += c
    with torch.no_grad():
        bias.copy_(torch.log(freq / freq.sum()))


def _bert_piece_ids(token: str, kind: str, bert_tok, vocab: dict[str, int] | None = None) -> list[int]:
    """bert-base-uncased ids that spell ``token`` of a BPE ("Ġ" word start) or Unigram ("▁") vocabulary.
    ``vocab`` is ``bert_tok.get_vocab()``, passed in by loops: the tokenizer builds that 30k-entry dict afresh on
    every ``.vocab`` access (it was 40% of an ALBERT-from-MiniLM build)."""
    marker = WORD_MARKERS[kind]
    start = token.startswith(marker)
    text = token[len(marker) :] if start else token
    text = text.lower()
    if not text:
        return []
    vocab = bert_tok.get_vocab() if vocab is None else vocab
    key = text if start or not text[0].isalnum() else "##" + text  # punctuation is never a "##" piece
    if key in vocab:
        return [vocab[key]]
    ids = bert_tok(text, add_special_tokens=False)["input_ids"]
    return [i for i in ids if i != bert_tok.unk_token_id]


def _minilm_encoder(source: str | Path | None = None):
    """The offline MiniLM encoder (BertModel, float32), or ``source``'s, whose weights the RoBERTa and ALBERT
    starts take."""
    import transformers

    transformers.logging.set_verbosity_error()
    with BUILD_LOCK:
        return transformers.BertModel.from_pretrained(_source(source), use_safetensors=True, dtype=torch.float32)


def _mlm_transform(source: str | Path | None) -> dict[str, torch.Tensor] | None:
    """The source's MLM head transform (dense H -> H, then LayerNorm) when its folder has one (a BERT trained
    with MLM, like the bundled bert-mini); None for the MiniLM, which has no MLM head."""
    from safetensors.torch import load_file

    path = Path(_source(source)) / "model.safetensors"
    if not path.exists():
        return None
    state = load_file(str(path))
    pre = "cls.predictions.transform."
    keys = {k[len(pre) :]: v.float() for k, v in state.items() if k.startswith(pre)}
    return keys if {"dense.weight", "dense.bias", "LayerNorm.weight", "LayerNorm.bias"} <= set(keys) else None


def roberta_from_minilm(tokenizer, source: str | Path | None = None):
    """A RoBERTa (6 x 384, type_vocab_size 1) whose encoder is the offline MiniLM's (or ``source``'s) and whose
    byte-level BPE embeddings are transferred from its WordPiece ones: a BPE token takes the embedding of the same
    (lower-cased) word piece, or the mean of the pieces that spell it. Positions are shifted by RoBERTa's
    padding offset, with token-type 0 folded in. The MLM head is fresh, except its transform when the source
    was trained with MLM (then the transferred embeddings are already what it maps to)."""
    import transformers

    minilm = _minilm_encoder(source)
    bert_tok = bert_uncased_tokenizer()
    mc = minilm.config
    cfg = transformers.RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=mc.hidden_size,
        num_hidden_layers=mc.num_hidden_layers,
        num_attention_heads=mc.num_attention_heads,
        intermediate_size=mc.intermediate_size,
        max_position_embeddings=mc.max_position_embeddings + 2,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    model = transformers.RobertaForMaskedLM(cfg)
    me, re_ = minilm.embeddings, model.roberta.embeddings
    _piece_means(tokenizer, "bpe", me.word_embeddings.weight, bert_tok, re_.word_embeddings.weight)
    with torch.no_grad():
        pos = me.position_embeddings.weight + me.token_type_embeddings.weight[0]
        re_.position_embeddings.weight[2:] = pos
        re_.position_embeddings.weight[:2] = pos[0]
        re_.LayerNorm.load_state_dict(me.LayerNorm.state_dict())
        model.roberta.encoder.load_state_dict(minilm.encoder.state_dict())
        transform = _mlm_transform(source)
        if transform is not None:
            model.lm_head.dense.weight.copy_(transform["dense.weight"])
            model.lm_head.dense.bias.copy_(transform["dense.bias"])
            model.lm_head.layer_norm.weight.copy_(transform["LayerNorm.weight"])
            model.lm_head.layer_norm.bias.copy_(transform["LayerNorm.bias"])
    model.tie_weights()
    model.config.architectures = ["RobertaForMaskedLM"]
    return model


def _piece_means(tokenizer, kind: str, src: torch.Tensor, bert_tok, out: torch.Tensor) -> None:
    """Rows of ``out`` (a BPE/Unigram vocabulary's embeddings) from ``src`` (bert-base-uncased WordPiece rows):
    special tokens take their WordPiece twin, every other token the mean of the pieces that spell it; tokens with
    no such piece keep their row."""
    specials = {
        tokenizer.cls_token_id: bert_tok.cls_token_id,
        tokenizer.sep_token_id: bert_tok.sep_token_id,
        tokenizer.pad_token_id: bert_tok.pad_token_id,
        tokenizer.unk_token_id: bert_tok.unk_token_id,
        tokenizer.mask_token_id: bert_tok.mask_token_id,
    }
    vocab = bert_tok.get_vocab()
    with torch.no_grad():
        for tid in range(len(tokenizer)):
            ids = (
                [specials[tid]]
                if tid in specials
                else _bert_piece_ids(tokenizer.convert_ids_to_tokens(tid), kind, bert_tok, vocab)
            )
            if ids:
                out[tid] = src[ids].mean(0)


def _transferred_embeddings(tokenizer, kind: str, minilm, bert_tok) -> torch.Tensor:
    """(vocab, 384) embeddings for a BPE/Unigram vocabulary, taken from MiniLM's WordPiece ones."""
    src = minilm.embeddings.word_embeddings.weight
    out = src.new_zeros((len(tokenizer), src.shape[1])).normal_(0.0, 0.02)
    _piece_means(tokenizer, kind, src, bert_tok, out)
    return out


@dataclass
class MiniLMFit:
    """Fit ALBERT's shared layer to MiniLM before pretraining: ``steps`` steps on ``docs`` (training documents
    only) of cosine + MSE between the ALBERT's last hidden states and MiniLM's, on MiniLM's own WordPiece ids
    with 15% of them corrupted 80/10/10 as in MLM. ``on_step(step, steps, cosine)`` reports progress."""

    docs: list[list[str]]
    steps: int = 1000
    lr: float = 1e-3  # the shared layer
    embed_lr: float = 3e-3  # the factorized embeddings and their E -> H mapping
    seed: int = 0
    batch_size: int = 16
    max_len: int = 64
    on_step: Callable[[int, int, float], None] | None = None
    bf16: bool = False  # bf16 autocast for the forward passes (the pretraining run's own precision)
    device: str = "cpu"  # where the fit runs (the pretraining run's device); the fitted model comes back on the CPU


def _albert_like_minilm(
    minilm, tokenizer, words: torch.Tensor, embedding_size: int, layers: int, shared_from: int, residual_scale: float
):
    """An AlbertForPreTraining for ``tokenizer`` with MiniLM's start: ``words`` (V, H) factorized by PCA, the
    shared layer from MiniLM layer ``shared_from``, its residual branches scaled; fresh MLM and SOP heads."""
    import transformers

    mc = minilm.config
    cfg = transformers.AlbertConfig(
        vocab_size=len(tokenizer),
        embedding_size=embedding_size,
        hidden_size=mc.hidden_size,
        num_hidden_layers=layers,
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=mc.num_attention_heads,
        intermediate_size=mc.intermediate_size,
        hidden_act="gelu",
        max_position_embeddings=mc.max_position_embeddings,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.1,
        pad_token_id=tokenizer.pad_token_id,
    )
    with BUILD_LOCK:  # see core.models.loading.BUILD_LOCK (re-entrant: callers may hold it already)
        model = transformers.AlbertForPreTraining(cfg)
    me, ae = minilm.embeddings, model.albert.embeddings
    with torch.no_grad():
        mean = words.mean(0)
        _, _, vt = torch.linalg.svd(words - mean, full_matrices=False)
        proj = vt[:embedding_size].T  # (H, E), orthonormal columns
        ae.word_embeddings.weight.copy_((words - mean) @ proj)
        ae.position_embeddings.weight.copy_((me.position_embeddings.weight + mean) @ proj)
        ae.token_type_embeddings.weight.copy_(me.token_type_embeddings.weight @ proj)
        # E-space LayerNorm leaves norm sqrt(E); scale back to H-space's sqrt(H), then MiniLM's LN affine
        gamma, beta = me.LayerNorm.weight, me.LayerNorm.bias
        mapping = model.albert.encoder.embedding_hidden_mapping_in
        mapping.weight.copy_(gamma[:, None] * proj * (mc.hidden_size / embedding_size) ** 0.5)
        mapping.bias.copy_(beta)
        t = minilm.encoder.layer[shared_from]
        s = model.albert.encoder.albert_layer_groups[0].albert_layers[0]
        s.attention.query.load_state_dict(t.attention.self.query.state_dict())
        s.attention.key.load_state_dict(t.attention.self.key.state_dict())
        s.attention.value.load_state_dict(t.attention.self.value.state_dict())
        s.attention.dense.load_state_dict(t.attention.output.dense.state_dict())
        s.attention.LayerNorm.load_state_dict(t.attention.output.LayerNorm.state_dict())
        s.ffn.load_state_dict(t.intermediate.dense.state_dict())
        s.ffn_output.load_state_dict(t.output.dense.state_dict())
        s.full_layer_layer_norm.load_state_dict(t.output.LayerNorm.state_dict())
        # One MiniLM layer applied ``layers`` times pulls every token to the same vector (mean cosine between
        # positions 0.34 -> 0.99 after 6 uses), and MLM then cannot leave the unigram guess. Scaling the two
        # branches that write into the residual stream keeps each use a small step, so tokens stay apart.
        for lin in (s.attention.dense, s.ffn_output):
            lin.weight.mul_(residual_scale)
            lin.bias.mul_(residual_scale)
        if minilm.pooler is not None:
            model.albert.pooler.load_state_dict(minilm.pooler.dense.state_dict())
    model.tie_weights()
    model.config.architectures = ["AlbertForPreTraining"]
    return model


def fit_to_minilm(albert, minilm, bert_tok, fit: MiniLMFit, head=None, teacher_head=None) -> float:
    """Train ``albert`` (an AlbertModel on the WordPiece vocabulary) so its last hidden states match MiniLM's;
    returns the final mean cosine. Deterministic for a given seed (windows and masks are seeded).

    With ``head`` (the ALBERT's MLM head on the WordPiece vocabulary) and ``teacher_head`` (the source's own MLM
    head, when the source learned MLM), the head also learns the teacher's predictions at the corrupted positions
    (KL at temperature 2, as DistilBERT's soft targets), so the ALBERT starts able to fill a blank."""

    import torch.nn.functional as F

    # sentence by sentence (WordPiece splits on spaces, so the ids are those of the joined text, without the
    # tokenizer's over-length warning for long documents)
    ids = [i for e in bert_tok([s for d in fit.docs for s in d], add_special_tokens=False)["input_ids"] for i in e]
    span = fit.max_len - 2
    if len(ids) <= span:
        raise ValueError(msg("pretrain.corpus_too_small_fit"))
    # an AlbertModel: the recipe's embedding parts sit at its top level
    model_type = albert.config.model_type
    parts = recipe(family_of_model_type(model_type) or model_type).embedding_parts
    named = [(training.under(n, parts), p) for n, p in albert.named_parameters()]
    groups: list[dict[str, Any]] = [
        {"params": [p for e, p in named if e], "lr": fit.embed_lr},
        {"params": [p for e, p in named if not e], "lr": fit.lr},
    ]
    distil = head is not None and teacher_head is not None
    if distil:  # the head's own parameters (its decoder is the tied word embeddings, already above)
        mine = {id(p) for _, p in named}
        groups.append({"params": [p for p in head.parameters() if id(p) not in mine], "lr": fit.embed_lr})
        head.to(fit.device)
        teacher_head.to(fit.device).eval()
    device = fit.device
    albert.to(device)
    minilm.to(device)
    opt = torch.optim.AdamW(groups, weight_decay=0.01, fused=True)
    warm = max(1, round(0.06 * fit.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, 1 - s / fit.steps))
    rng = random.Random(fit.seed)
    minilm.eval()
    albert.train()
    cos = 0.0
    for step in range(fit.steps):
        # 1. a batch of corpus windows, 15% of tokens corrupted 80/10/10 (the states at masks are what MLM reads)
        starts = [rng.randrange(0, len(ids) - span) for _ in range(fit.batch_size)]
        x = torch.tensor([[bert_tok.cls_token_id] + ids[a : a + span] + [bert_tok.sep_token_id] for a in starts])
        special = (x == bert_tok.cls_token_id) | (x == bert_tok.sep_token_id)
        masked = mask_tokens(
            x,
            special,
            mask_id=bert_tok.mask_token_id,
            vocab_size=len(bert_tok),
            generator=torch.Generator().manual_seed(fit.seed * 100_003 + step),
        )
        x, sel = masked.input_ids.to(device), (masked.labels != -100).to(device)
        # 2. MiniLM's last hidden states are the target; cosine + MSE (+ the teacher's predictions at the masks)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=fit.bf16):
            with torch.no_grad():
                target = minilm(input_ids=x).last_hidden_state.float()  # (B, T, H)
                soft = torch.softmax(teacher_head(target[sel]).float() / 2.0, -1) if distil else None
            h = albert(input_ids=x).last_hidden_state.float()
            logits = head(h[sel]).float() if distil else None
        c = F.cosine_similarity(h, target, dim=-1).mean()
        loss = (1 - c) + F.mse_loss(h, target)
        if logits is not None and soft is not None:  # distil
            loss = loss + F.kl_div(torch.log_softmax(logits / 2.0, -1), soft, reduction="batchmean") * 4.0
        # 3. step, clipped
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
        opt.step()
        sched.step()
        cos = float(c.detach())
        if fit.on_step is not None:
            fit.on_step(step + 1, fit.steps, cos)
    albert.eval().cpu()
    minilm.cpu()
    if distil:
        head.eval().cpu()
        teacher_head.cpu()
    return cos


def albert_from_minilm(
    tokenizer,
    embedding_size: int = 128,
    layers: int = 6,
    shared_from: int = 2,
    residual_scale: float = 0.5,
    fit: MiniLMFit | None = None,
    source: str | Path | None = None,
):
    """An ALBERT (E=128 < H=384, one layer shared across ``layers`` of depth) started from MiniLM: Unigram
    embeddings transferred from its WordPiece ones and factorized by PCA (V x E, then E x H), and the shared
    layer initialised from MiniLM layer ``shared_from``. MLM and SOP heads are fresh.

    With ``fit``, the same start is first built on MiniLM's own WordPiece vocabulary and fitted to reproduce
    MiniLM's last hidden states (``fit_to_minilm``): one shared layer learns to do what MiniLM's six distinct
    layers do. The fitted layer, positions and E-space embeddings then move to ``tokenizer``'s vocabulary (each
    piece the mean of the WordPiece pieces that spell it). With ``source`` (a BERT folder with the bert-base-uncased
    vocabulary, e.g. the bundled bert-mini), that model's encoder takes MiniLM's place throughout: the fit then
    reproduces the states an MLM-trained encoder has at masked positions too."""
    teacher_head = None
    if _mlm_transform(source) is not None:  # a source that learned MLM: its head teaches the ALBERT's in the fit
        import transformers

        with BUILD_LOCK:
            teacher = transformers.BertForMaskedLM.from_pretrained(
                _source(source), use_safetensors=True, dtype=torch.float32
            )
        minilm, teacher_head = teacher.bert, teacher.cls
    else:
        minilm = _minilm_encoder(source)
    bert_tok = bert_uncased_tokenizer()
    words = _transferred_embeddings(tokenizer, "unigram", minilm, bert_tok)  # (V, H)
    albert_like = functools.partial(
        _albert_like_minilm,
        embedding_size=embedding_size,
        layers=layers,
        shared_from=shared_from,
        residual_scale=residual_scale,
    )
    if fit is None or fit.steps == 0:
        return albert_like(minilm, tokenizer, words)
    wp = albert_like(minilm, bert_tok, minilm.embeddings.word_embeddings.weight.detach())
    fit_to_minilm(
        wp.albert,
        minilm,
        bert_tok,
        fit,
        head=wp.predictions if teacher_head is not None else None,
        teacher_head=teacher_head,
    )
    model = albert_like(minilm, tokenizer, words)  # its heads and config; the rest from ``wp``
    if teacher_head is not None:  # the fitted head's transform (H -> E, LayerNorm) works on any E-space vocabulary
        with torch.no_grad():
            model.predictions.dense.load_state_dict(wp.predictions.dense.state_dict())
            model.predictions.LayerNorm.load_state_dict(wp.predictions.LayerNorm.state_dict())
    a, w = model.albert, wp.albert
    with torch.no_grad():
        a.encoder.load_state_dict(w.encoder.state_dict())
        for name in ("position_embeddings", "token_type_embeddings", "LayerNorm"):
            getattr(a.embeddings, name).load_state_dict(getattr(w.embeddings, name).state_dict())
        a.pooler.load_state_dict(w.pooler.state_dict())
    # the fitted E-space rows (30522, E) move to the Unigram vocabulary
    _piece_means(
        tokenizer, "unigram", w.embeddings.word_embeddings.weight, bert_tok, a.embeddings.word_embeddings.weight
    )
    model.tie_weights()
    return model


# The starts and student cuts a recipe (core.registry.pretraining) names, with one signature each:
# a start is (tokenizer, fit: MiniLMFit | None, source: a BERT folder or None for the MiniLM) -> model.
STARTS: dict[str, Callable] = {
    "copy_encoder": lambda tokenizer, fit=None, source=None: bert_from_minilm(source),
    "transfer_to_bpe": lambda tokenizer, fit=None, source=None: roberta_from_minilm(tokenizer, source),
    "factorize_and_share": lambda tokenizer, fit=None, source=None: albert_from_minilm(
        tokenizer, fit=fit, source=source
    ),
}
STUDENTS: dict[str, Callable] = {"every_other_layer": distil_student}
