"""The pretraining recipe of each family, as data: core.train.pretrain asks here and names no family. The starts and
student cuts a recipe names are functions of core.train.pretrain.build (its STARTS and STUDENTS tables), so the
registry never imports the training code.

What a family's pretraining needs besides its ``Family`` fields (pair head: ``pair_head``; masking's word starts:
``piece_kind``; segment embeddings: ``token_types``; its special tokens: ``specials``; the teacher it is distilled
from: ``distilled_from``):

- ``config``: a fresh config of the family's own class at a size (core.train.pretrain.build.SIZES) for a tokenizer;
- ``vocabulary``: the real bert-base-uncased WordPiece vocabulary (shipped with the offline MiniLM) or a tokenizer
  of the family's piece kind trained on the corpus;
- ``from_minilm``: the name of how the family starts from the offline MiniLM encoder (``init="minilm"``), if it can, or from
  another BERT encoder with the same vocabulary (``encoder_from``: the zoo's RoBERTa and ALBERT start from the
  bundled bert-mini);
- ``fits_to_minilm``: whether that start can first fit the model to MiniLM's hidden states (``fit_steps``);
- ``embedding_parts``: the modules under the base model that learn at ``embed_lr`` (the input embeddings, and
  ALBERT's E -> H mapping);
- ``student``: the name of how a student is cut from a teacher of family ``distilled_from`` (distillation);
- ``zoo``: the bundled model's training settings (core.train.pretrain.zoo, ``make models``).

The heads (which learn at ``head_lr``) need no entry: they are every top-level module besides the base model
(``base_model_prefix``), and the MLM head's output bias is ``get_output_embeddings().bias``.

A family without an entry in ``RECIPES`` gets ``recipe()``'s default: a scratch start from a config of its model
type with the usual size fields, MLM only (and its own pair head when it has one), a trained tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.registry import FAMILIES, family

MAX_POSITIONS = 512
EVERYDAY = (
    "train.txt",
    "train_everyday.txt",
)  # a stage's ``train_files``: the first three sources and the everyday ones
BERT_UNCASED = "bert-base-uncased"  # a ``vocabulary``: the real WordPiece vocabulary of the offline MiniLM
TRAINED = "trained"  # a ``vocabulary``: the family's piece kind, trained on the corpus

# (size dims by name, e.g. {"hidden": 256}; tokenizer) -> a fresh transformers config (Any to mypy, like the tokenizer)
ConfigMaker = Callable[[dict[str, int], Any], Any]


@dataclass(frozen=True)
class Recipe:
    family: str
    config: ConfigMaker  # (size dims, tokenizer) -> a fresh config of the family's class
    vocabulary: str = TRAINED
    # the name of its start in core.train.pretrain.build.STARTS: (tokenizer, fit, source folder or None) -> model
    from_minilm: str | None = None
    fits_to_minilm: bool = False
    embedding_parts: tuple[str, ...] = ("embeddings",)
    student: str | None = (
        None  # the name of its cut in core.train.pretrain.build.STUDENTS: (teacher, layers) -> student
    )
    zoo: dict[str, Any] = field(default_factory=dict)  # keyword settings of different types (zoo.py reads them)

    @property
    def distils(self) -> bool:
        """Its checkpoints are a student distilled from a teacher of family ``distilled_from``."""
        return self.student is not None and family(self.family).distilled_from is not None


# ---------------------------------------------------------------------------------------------- configs
def _bert_config(s: dict[str, int], tokenizer: Any) -> Any:
    import transformers

    return transformers.BertConfig(
        hidden_size=s["hidden"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        intermediate_size=s["ffn"],
        max_position_embeddings=MAX_POSITIONS,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
    )


def _roberta_config(s: dict[str, int], tokenizer: Any) -> Any:
    import transformers

    # no token types; positions are offset by padding_idx + 1
    return transformers.RobertaConfig(
        hidden_size=s["hidden"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        intermediate_size=s["ffn"],
        max_position_embeddings=MAX_POSITIONS + 2,
        type_vocab_size=1,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
    )


def _albert_config(s: dict[str, int], tokenizer: Any) -> Any:
    import transformers

    # factorized embeddings V x E + E x H, one layer shared across depth
    return transformers.AlbertConfig(
        embedding_size=s["embedding"],
        hidden_size=s["hidden"],
        num_hidden_layers=s["layers"],
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=s["heads"],
        intermediate_size=s["ffn"],
        hidden_act="gelu_new",
        max_position_embeddings=MAX_POSITIONS,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.1,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
    )


def _distilbert_config(s: dict[str, int], tokenizer: Any) -> Any:
    import transformers

    return transformers.DistilBertConfig(
        dim=s["hidden"],
        n_layers=s["layers"],
        n_heads=s["heads"],
        hidden_dim=s["ffn"],
        max_position_embeddings=MAX_POSITIONS,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
    )


def _generic_config(model_type: str, token_types: bool) -> ConfigMaker:
    """A config of ``model_type`` from the size fields most encoders share (hidden_size, num_hidden_layers, ...)."""

    def make(s: dict[str, int], tokenizer: Any) -> Any:
        import transformers

        ids = {
            k: getattr(tokenizer, t)
            for k, t in (("bos_token_id", "cls_token_id"), ("eos_token_id", "sep_token_id"))
            if getattr(tokenizer, t, None) is not None
        }
        # two spare positions: RoBERTa-style position ids start after the padding index
        return transformers.AutoConfig.for_model(
            model_type,
            vocab_size=len(tokenizer),
            hidden_size=s["hidden"],
            num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"],
            intermediate_size=s["ffn"],
            max_position_embeddings=MAX_POSITIONS + 2,
            type_vocab_size=2 if token_types else 1,
            pad_token_id=tokenizer.pad_token_id,
            **ids,
        )

    return make


# ---------------------------------------------------------------------------------------------- the recipes
RECIPES: dict[str, Recipe] = {
    "bert": Recipe(
        "bert",
        _bert_config,
        vocabulary=BERT_UNCASED,
        from_minilm="copy_encoder",
        zoo=dict(
            init="minilm",
            size="mini",
            steps=600,
            lr=5e-4,
            head_lr=2e-3,
            masking="static",
            pair="auto",
            eval_every=50,
            then=[
                dict(steps=1500, lr=2e-4, head_lr=1e-3, seed=1, eval_every=250),
                dict(steps=800, lr=1e-4, head_lr=5e-4, seed=2, eval_every=200),
                dict(steps=7000, lr=1e-4, head_lr=5e-4, seed=3, eval_every=1000, train_files=EVERYDAY),
            ],
            bars=dict(probe_top5=0.60, pair_acc=0.90),
            note="MLM (static masking, 15% / 80-10-10) + NSP; starts from the offline "
            "MiniLM-L6-H384 encoder with fresh MLM (tied to the word embeddings) and NSP heads; the "
            "fresh heads learn at 4-5x the encoder's rate. Four stages, each with a new seed and so new "
            "static masks (BERT duplicated its data with different masks): 600, 1500 and 800 steps at "
            "falling learning rates on the first three sources (train.txt), then 7000 steps on all of "
            "them (train.txt + train_everyday.txt).",
        ),
    ),
    "roberta": Recipe(
        "roberta",
        _roberta_config,
        from_minilm="transfer_to_bpe",
        zoo=dict(
            init="minilm",
            encoder_from="bert",
            size="mini",
            steps=3000,
            lr=1e-4,
            head_lr=5e-4,
            embed_lr=5e-4,
            masking="dynamic",
            pair=None,
            vocab_size=15000,
            eval_every=500,
            train_files=EVERYDAY,
            bars=dict(probe_top5=0.40),
            note="MLM only with dynamic masking (a fresh mask on every visit), no NSP, no token types; "
            "byte-level BPE (15,000 tokens) trained on the corpus. Starts from the bundled bert-mini's "
            "encoder (MiniLM's, after bert-mini's MLM training) and its MLM head's transform, with the "
            "BPE embeddings transferred from its WordPiece ones (same piece, or the mean of the pieces "
            "that spell it); 3000 steps on all the sources.",
        ),
    ),
    "albert": Recipe(
        "albert",
        _albert_config,
        from_minilm="factorize_and_share",
        fits_to_minilm=True,
        embedding_parts=("embeddings", "encoder.embedding_hidden_mapping_in"),
        zoo=dict(
            init="minilm",
            encoder_from="bert",
            size="mini",
            steps=3000,
            lr=1e-4,
            embed_lr=3e-3,
            head_lr=3e-3,
            fit_steps=1200,
            fit_lr=1e-3,
            fit_embed_lr=3e-3,
            masking="dynamic",
            whole_word=False,
            pair="auto",
            vocab_size=16000,
            eval_every=500,
            train_files=EVERYDAY,
            bars=dict(probe_top5=0.40, pair_acc=0.70),
            note="MLM + SOP; factorized embeddings (E=128 < H=384: a 16,000-piece vocabulary costs 2.0 M "
            "parameters instead of 6.1 M) and one layer shared across all 6 layers of depth; Unigram "
            "tokenizer trained on the corpus. Starts from the bundled bert-mini: first, on its WordPiece "
            "ids with 15% of them corrupted, the shared layer (from its layer 2, the two residual "
            "branches halved), the factorized embeddings and an MLM head are fitted for 1200 steps to "
            "reproduce bert-mini's last hidden states (cosine + MSE) and its predictions at the "
            "corrupted positions (KL at temperature 2): one shared layer learns what six distinct ones "
            "do. They then move to the Unigram vocabulary (each piece the mean of the WordPiece pieces "
            "that spell it). Then 3000 steps of MLM + SOP on all the sources: the shared layer's "
            "gradient sums over its 6 uses, so it learns at 1e-4, the factorized embeddings and the "
            "heads at 3e-3.",
        ),
    ),
    "distilbert": Recipe(
        "distilbert",
        _distilbert_config,
        vocabulary=BERT_UNCASED,
        student="every_other_layer",
        zoo=dict(
            steps=4000,
            lr=2e-4,
            masking="dynamic",
            pair=None,
            eval_every=500,
            train_files=EVERYDAY,
            bars=dict(probe_top5=0.40),
            note="Distilled from the mini BERT: 3 layers initialised from its layers "
            "0, 2, 4; loss = 2 x MLM + 5 x KL(T=2) + 1 x hidden-state cosine; 4000 steps on all the "
            "sources.",
        ),
    ),
}


def recipe(key: str) -> Recipe:
    """The family's recipe; a family without one in RECIPES gets the default (scratch, MLM, trained tokenizer).
    Raises ModelLoadError for an unknown family."""
    f = family(key)
    return RECIPES.get(key) or Recipe(key, _generic_config(f.model_type, f.token_types))


def zoo_recipes() -> dict[str, dict[str, Any]]:
    """The bundled models' training settings by bundled name, in an order where every model comes after the ones it
    starts from; each with its ``family`` and, for a student, its ``teacher`` (the teacher family's bundled name),
    and for a start from another family's bundled encoder (zoo key ``encoder_from``: a family), that model's
    bundled name."""
    out: dict[str, dict[str, Any]] = {}
    todo = [r for r in RECIPES.values() if r.zoo and FAMILIES[r.family].bundled]

    def needs(r: Recipe) -> list[str]:
        teacher = FAMILIES[r.family].distilled_from  # not None when r.distils
        fams = ([teacher] if r.distils and teacher is not None else []) + (
            [r.zoo["encoder_from"]] if r.zoo.get("encoder_from") else []
        )
        return [FAMILIES[f].bundled for f in fams]

    while todo:
        ready = [r for r in todo if all(n in out for n in needs(r))]
        if not ready:
            raise ValueError(
                "A bundled model starts from a model with no bundled recipe: " + ", ".join(r.family for r in todo)
            )
        for r in ready:
            f = FAMILIES[r.family]
            teacher = f.distilled_from  # not None when r.distils
            extra = {"teacher": FAMILIES[teacher].bundled} if r.distils and teacher is not None else {}
            if r.zoo.get("encoder_from"):
                extra["encoder_from"] = FAMILIES[r.zoo["encoder_from"]].bundled
            out[f.bundled] = dict(family=r.family, **{**r.zoo, **extra})
            todo.remove(r)
    return out
