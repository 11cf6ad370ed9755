"""The Fine-tune page's settings form: its keys, the number boxes' bounds, the presets, the task switch, the config
the form stands for, and the advice and out-of-memory offers under it. The page's other pieces: finetune_data (the
data choice), finetune_charts (figures), finetune_results (finished runs), finetune_runs (each run's panel),
finetune_report (report entries), remedies (the "Out of memory?" panel); app.kit.finetune_work loads and starts what
they ask for."""

from __future__ import annotations

import streamlit as st

from app.kit import state, urlstate
from app.kit.i18n import explain, t
from core.base.fields import Bounds, bounded_fields, default_of
from core.base.messages import holds_kind
from core.data.datasets_local import GLUE_TASKS, HELD_OUT_FRACTION
from core.train.finetune_config import (
    DEFAULT_DATA,
    OOM_KIND,
    POOLINGS,
    PRECISIONS,
    REMEDIES,
    TASKS,
    FinetuneConfig,
    remedies_for,
    suggested_settings,
)

PAGE = "finetune"
# Settings and data choice outlive a visit to another page (Streamlit drops a widget's value once it is not
# drawn; the defaults set before the widgets would then reset them).
KEEP = "session"


def K(name: str) -> str:
    return state.key(PAGE, name)


# ---------------------------------------------------------------------------------------------- settings
# The form's widgets, keyed K(name) (also their URL parameters), and the FinetuneConfig field each one sets. A number
# box takes its range and step from the field (core.base.fields), so the widget, the URL and the config agree.
CONFIG_KEYS = {
    "epochs": "epochs",
    "max_steps": "max_steps",
    "lr": "lr",
    "batch": "batch_size",
    "max_len": "max_length",
    "warmup": "warmup_ratio",
    "wd": "weight_decay",
    "clip": "grad_clip",
    "seed": "seed",
    "freeze_emb": "freeze_embeddings",
    "freeze_n": "freeze_layers",
    "pooling": "pooling",
    "patience": "patience",
    "evals": "evals_per_epoch",
    "precision": "precision",
    "grad_ckpt": "gradient_checkpointing",
    "dropout": "dropout",
}
BOUNDS = bounded_fields(FinetuneConfig)
# The page's own: rows of each split to use (0: all); the held-out share of an upload is core.data.datasets_local's.
ROWS = Bounds(0, 0, 100_000, int)
TEST_FRAC = HELD_OUT_FRACTION
PAGE_BOUNDS = {"rows": ROWS, "test_rows": ROWS, "test_frac": TEST_FRAC, "tok_test_frac": TEST_FRAC}


def bounds_of(name: str) -> Bounds:
    """The range of the setting keyed K(name): its config field's, or the page's own."""
    return PAGE_BOUNDS[name] if name in PAGE_BOUNDS else BOUNDS[CONFIG_KEYS[name]]


def number(where, name: str, **kw):
    """A number box for the setting keyed K(name), its min, max and step from ``bounds_of(name)``."""
    return where.number_input(t(f"finetune.{name}"), **bounds_of(name).widget(), key=K(name), persist_state=KEEP, **kw)


# ---------------------------------------------------------------------------------------------- presets
PRESET_KEYS = {
    field: name
    for name, field in CONFIG_KEYS.items()
    if field in ("epochs", "max_steps", "lr", "batch_size", "max_length", "warmup_ratio", "weight_decay", "grad_clip")
}


def _apply(settings: dict) -> None:
    for field_, name in PRESET_KEYS.items():
        st.session_state[K(name)] = settings[field_]


def starting_settings(hidden: int | None, task: str) -> tuple[dict, dict]:
    """(this model size's settings, the articles' settings) for the task: token classification starts from the
    article's sequence-labelling lr (5e-5, in its 3e-5 to 7e-5)."""
    return suggested_settings(hidden, task), suggested_settings(None, task)


def task_changed(hidden: int | None) -> None:
    """The task switch: the lr moves to the new task's default (and the whole preset, when the form still held
    the other task's); mean pooling, which has no per-word form, becomes the family's head for token labelling."""
    new = st.session_state[K("task")]
    old = "sequence" if new == "token" else "token"
    current = {f: st.session_state.get(K(n)) for f, n in PRESET_KEYS.items()}
    for was, now in zip(starting_settings(hidden, old), starting_settings(hidden, new)):
        if current == was:
            _apply(now)
            break
    else:
        st.session_state[K("lr")] = starting_settings(hidden, new)[0]["lr"]
    if st.session_state.get(K("pooling")) not in poolings(new):
        st.session_state[K("pooling")] = "cls"


def poolings(task: str) -> tuple[str, ...]:
    return POOLINGS if task == "sequence" else tuple(p for p in POOLINGS if p != "mean")


OWN_DROPOUT = -1.0  # the dropout slider's first stop: keep the checkpoint's own (FinetuneConfig.dropout None)
DROPOUTS = (OWN_DROPOUT,) + BOUNDS["dropout"].stops  # then the field's stops (0 to 0.5)


def dropout_label(v: float) -> str:
    return t("finetune.dropout_own") if v == OWN_DROPOUT else f"{v:g}"


def config_from_state(spec, task: str, strict: bool = False) -> FinetuneConfig | None:
    """The FinetuneConfig the form's values stand for; None when they are not valid (``strict``: the ValueError)."""

    def value(name: str, field_: str):
        v = st.session_state.get(K(name))
        if field_ in BOUNDS:  # a number box holds an int for a float field when its min and max are ints
            return None if v is None or (field_ == "dropout" and v == OWN_DROPOUT) else BOUNDS[field_].kind(v)
        return bool(v) if isinstance(default_of(FinetuneConfig, field_), bool) else v

    try:
        if spec is None:
            raise ValueError(t("finetune.need_model_and_data"))
        values = {f: value(n, f) for n, f in CONFIG_KEYS.items()}
        if task == "token":  # no pooling for words: the family's token head, or the scalar mix (its own box)
            values["pooling"] = "scalar_mix" if st.session_state.get(K("tok_mix")) else "cls"
        return FinetuneConfig(spec.family, spec.checkpoint, device=spec.device, task=task, **values)
    except (ValueError, TypeError):
        if strict:
            raise
        return None


def is_oom_error(error: str | None) -> bool:
    """A failed job ran out of memory: its message is, or quotes, core.train.finetune's FinetuneError for OOM (by its
    kind, never its words: the words are the session's language)."""
    return holds_kind(error, OOM_KIND)


def presets(hidden: int | None, suggested: dict, articles: dict, task: str = "sequence") -> None:
    """Which settings the form holds (this model size's or the articles'), why they differ, and a button for each."""
    current = {f: st.session_state.get(K(n)) for f, n in PRESET_KEYS.items()}
    small = suggested != articles
    if current == articles:
        st.caption(t("finetune.preset.token_articles_in_use" if task == "token" else "finetune.preset.articles_in_use"))
    elif current == suggested:
        st.caption(
            t(
                "finetune.preset.token_small_in_use" if task == "token" else "finetune.preset.small_in_use",
                hidden=hidden,
                lr=f"{suggested['lr']:.0e}",
                epochs=suggested["epochs"],
                max_len=suggested["max_length"],
            )
        )
    else:
        st.caption(t("finetune.preset.own"))
    c1, c2, _ = st.columns([1, 1, 2])
    c1.button(
        t("finetune.preset.articles"),
        key=K("preset.articles"),
        on_click=_apply,
        args=(articles,),
        disabled=current == articles,
        help=t("finetune.preset.articles_help"),
    )
    if small:
        c2.button(
            t("finetune.preset.small"),
            key=K("preset.small"),
            on_click=_apply,
            args=(suggested,),
            disabled=current == suggested,
        )


# ---------------------------------------------------------------------------------------------- remedies
def advice(cfg: FinetuneConfig | None, hidden: int | None) -> None:
    """The config's advice (max length under 64, lr outside the article's range, ...) as warnings."""
    if cfg is None:
        return
    for line in cfg.advice(hidden):
        st.warning(explain(line))


def oom_offer(run: dict, restart) -> None:
    """Under a run that ran out of memory: one button per remedy that would change its config."""
    names = remedies_for(run["cfg"])
    if not names:
        return
    st.markdown(t("finetune.oom.offer"))
    cols = st.columns(len(names))
    for col, n in zip(cols, names):
        col.button(
            t("finetune.oom.restart", remedy=explain(REMEDIES[n][0])),
            key=K(f"remedy.{run['name']}.{n}"),
            on_click=restart,
            args=(run, n),
        )


# ---------------------------------------------------------------------------------------------- URL state
def url_options(start: dict, sources: tuple[str, ...], token_sources: tuple[str, ...]) -> dict[str, tuple]:
    """The page's settings as ``key: (default, URL field)``. Every widget is keyed K(key) and starts from its
    default (``start``: the starting settings for this model and task); a number's range is its config field's
    (bounds_of), in the URL as in the widget; ``sources`` and ``token_sources`` are the data pickers' choices."""
    default = {n: default_of(FinetuneConfig, f) for n, f in CONFIG_KEYS.items()}
    default.update(
        {PRESET_KEYS[f]: v for f, v in start.items()}, dropout=OWN_DROPOUT, rows=0, test_rows=0, test_frac=None
    )  # test_frac: set where the upload's widget is drawn
    options = {
        n: (default[n], urlstate.Field.of(K(n), bounds_of(n)))
        for n in (
            "epochs",
            "max_steps",
            "warmup",
            "wd",
            "clip",
            "freeze_n",
            "seed",
            "patience",
            "evals",
            "rows",
            "test_rows",
            "test_frac",
        )
    }
    options.update(
        {
            "task": ("sequence", urlstate.Field(K("task"), choices=TASKS)),
            "source": (DEFAULT_DATA, urlstate.Field(K("source"), choices=sources)),
            "tok_source": ("sample", urlstate.Field(K("tok_source"), choices=token_sources)),
            "glue_task": (None, urlstate.Field(K("glue_task"), choices=tuple(GLUE_TASKS))),
            "lr": (default["lr"], urlstate.Field(K("lr"), "float", choices=BOUNDS["lr"].stops)),
            "batch": (default["batch"], urlstate.Field(K("batch"), "int", choices=BOUNDS["batch_size"].stops)),
            "max_len": (default["max_len"], urlstate.Field(K("max_len"), "int", choices=BOUNDS["max_length"].stops)),
            "pooling": (default["pooling"], urlstate.Field(K("pooling"), choices=POOLINGS)),
            # token runs: the scalar mix, or the family's head
            "tok_mix": (False, urlstate.Field(K("tok_mix"), "bool")),
            "freeze_emb": (default["freeze_emb"], urlstate.Field(K("freeze_emb"), "bool")),
            "grad_ckpt": (default["grad_ckpt"], urlstate.Field(K("grad_ckpt"), "bool")),
            "precision": (default["precision"], urlstate.Field(K("precision"), choices=PRECISIONS)),
            "dropout": (OWN_DROPOUT, urlstate.Field(K("dropout"), "float", choices=DROPOUTS)),
        }
    )
    return options
