"""The sidebar every page shares: the model picker (family, checkpoint: bundled, official, this session's,
custom; device) and the workshop controls (language, presenter view, pinned model, session report).
All of it is kept in the URL (app/kit/urlstate.py), so a link reproduces the choice."""

from __future__ import annotations

import threading

import streamlit as st

from app.kit import presenter, report, state, urlstate
from app.kit.download_button import download
from app.kit.gpu_notice import sidebar_gpu_line
from app.kit.i18n import LANG_KEY, LANGS, explain, t, t_or
from app.kit.model_choice import AWAITING, CUSTOM_OPTION, LOAD_FAILED, known_checkpoints, pick, source_slot
from app.kit.render import as_text, source_name
from app.room.joining import sidebar_controls as room_controls
from core.base.messages import carry, excerpt
from core.models.devices import check_int8, resolve_device
from core.models.downloads import can_have_now
from core.models.hosted import check_custom_checkpoint
from core.models.hosted import enabled as hosted_mode
from core.models.loading import ModelSpec, Source, resolve
from core.registry import FAMILIES, ModelLoadError, chinese_bundled, family, picker_families

DEVICES = ("auto", "cpu", "cuda")
QUANT = "sidebar.quant"  # True: the model's linears run int8 (core.compare.int8; CPU inference only)


def _checkpoint_options(fam: str) -> list[str]:
    return known_checkpoints(fam) + [CUSTOM_OPTION]


def _label(opt: str) -> str:
    if opt == CUSTOM_OPTION:
        return t("sidebar.custom_option")
    for m in state.session_models():
        if m.path == opt:
            return t("sidebar.session_label", label=m.label, kind=t(f"sidebar.kind.{m.kind}"))
    if opt.startswith("encoderlab/"):  # "xlmr-e5-small (bundled)": the id's prefix says "bundled" again, and
        return t("sidebar.bundled_label", id=opt.split("/", 1)[1])  # with it the box cut the label ("…(bund")
    return opt


def _checkpoint_choices() -> list[str]:
    """What a link may name as the checkpoint: the picker's options, or a custom id that can be had here."""
    return _checkpoint_options(st.session_state.get(state.FAMILY) or state.default_family())


SESSION_MODEL = "session:"  # a model this session made, as the hosted demo's links name it (CheckpointField)


class CheckpointField(urlstate.Field):
    """The picked checkpoint in the URL. On the hosted demo a model this session made (a fine-tuned or pretrained
    run) is named by its label, ``session:<label>``, never by its folder: the link shows no server path and no
    session id, and opened in another session it names nothing (that session made no model of that label)."""

    def render(self, value):
        if hosted_mode():
            label = next((m.label for m in state.session_models() if m.path == value), None)
            if label is not None:
                return SESSION_MODEL + label
        return super().render(value)

    def parse(self, raw: str):
        if hosted_mode() and raw.startswith(SESSION_MODEL):
            label = raw.removeprefix(SESSION_MODEL)
            raw = next((m.path for m in state.session_models() if m.label == label), raw)
        return super().parse(raw)


FIELDS = (
    urlstate.Field(LANG_KEY, choices=tuple(LANGS), param="lang"),
    urlstate.Field(presenter.PRESENT, "bool", param="present"),
    urlstate.Field(presenter.PIN, "bool", param="pin"),
    urlstate.Field(state.FAMILY, choices=tuple(picker_families()), param="family"),
    CheckpointField(state.CHECKPOINT, choices=_checkpoint_choices, param="model"),
    urlstate.Field(state.CUSTOM, max_len=300, param="custom"),
    urlstate.Field(state.DEVICE, choices=DEVICES, param="device"),
    urlstate.Field(QUANT, "bool", param="int8"),
)


def workshop_controls() -> None:
    """Language, presenter view (with a pinned model) and the session report, at the top of the sidebar."""
    sb = st.sidebar
    sb.selectbox(t("sidebar.language"), list(LANGS), key=LANG_KEY, format_func=LANGS.get)
    sb.toggle(t("sidebar.presenter"), key=presenter.PRESENT, help=t("sidebar.presenter_help"))
    if presenter.is_on():
        sb.toggle(t("sidebar.pin"), key=presenter.PIN, help=t("sidebar.pin_help"))
    room_controls(sb)  # Start a room (presenter view) / Join with a code
    _SLOT.report = sb.container()  # filled after the page ran (report_panel), so its count is current


REPORT_BUILT = "sidebar.report_built"  # (what it was built from, the HTML): one per session, the latest
_SLOT = threading.local()  # one script run per thread: each session's run keeps its own slot


def report_panel() -> None:
    """The session report's download, drawn into the sidebar slot once the page has recorded this run's results."""
    slot = getattr(_SLOT, "report", None)
    _SLOT.report = None
    if slot is None:
        return
    items = report.entries()
    with slot.expander(report.panel_label(items)):
        if not items:
            st.caption(t("sidebar.report_empty"))
        else:
            st.caption(t("sidebar.report_help"))
            # Built on request with a progress bar, not on every run or in the background: drawing the figures
            # takes seconds of a browser's time, which a room of sessions should not spend on reports nobody takes.
            # what the report shows (not when: a page records its result again on every rerun)
            made_from = tuple((e.entry_id, e.text, e.figures, tuple(e.inputs.items()), e.rows) for e in items)
            built = st.session_state.get(REPORT_BUILT)
            if built is None or built[0] != made_from:
                button = st.empty()  # goes once the file is ready, so only the download shows
                if button.button(t("sidebar.report_build"), key="sidebar.report_build", icon=":material/description:"):
                    bar = st.progress(0.0, text=t("sidebar.report_building", n=len(items)))
                    html = report.build_html(
                        items, on_progress=lambda f: bar.progress(f, text=t("sidebar.report_building", n=len(items)))
                    )
                    bar.empty()
                    button.empty()
                    built = st.session_state[REPORT_BUILT] = (made_from, html.encode("utf-8"))
            if built is not None and built[0] == made_from:
                page = built[1]  # built above, when asked (progress bar, figures): the click only hands it over
                download(
                    st,
                    t("sidebar.report_download"),
                    lambda: page,
                    "encoderlab-session.html",
                    "text/html",
                    "sidebar.report_dl",
                    icon=":material/download:",
                )
            if st.button(t("sidebar.report_clear"), key="sidebar.report_clear"):
                report.clear()
                st.session_state.pop(REPORT_BUILT, None)
                st.rerun()


def model_picker() -> ModelSpec | None:
    """Draw the picker and store the chosen ModelSpec (or the reason it is invalid) in session state."""
    state.init()
    st.session_state.setdefault(QUANT, False)
    if st.session_state.get(state.FAMILY) not in picker_families():
        st.session_state[state.FAMILY] = state.default_family()
    urlstate.bind(FIELDS)
    workshop_controls()
    sb = st.sidebar
    locked = presenter.pinned()
    sb.markdown("### " + t("sidebar.model"))
    if locked:
        sb.caption(t("sidebar.pinned_note"))
    if st.session_state.get(LANG_KEY) == "zh":  # the Chinese checkpoints first, above the (English) minis
        _chinese_suggestion(sb)
    fam = sb.selectbox(
        t("sidebar.family"),
        picker_families(),
        key=state.FAMILY,
        format_func=lambda k: t_or(f"families.{k}.label", family(k).label),
        disabled=locked,
    )
    if family(fam).generic:  # what it is and how to pick one: a folder or Hub id typed under custom
        sb.caption(t_or(f"families.{fam}.summary", family(fam).summary))
    opts = _checkpoint_options(fam)
    if st.session_state.get(state.CHECKPOINT) not in opts:
        st.session_state[state.CHECKPOINT] = opts[0]
    choice = sb.selectbox(
        t("sidebar.checkpoint"),
        opts,
        key=state.CHECKPOINT,
        format_func=_label,
        disabled=locked,
        help=t("sidebar.checkpoint_help"),
    )  # what "(bundled)" means: the label stays short
    checkpoint = choice
    if choice == CUSTOM_OPTION:
        checkpoint = sb.text_input(
            t("sidebar.custom_input"), key=state.CUSTOM, disabled=locked, placeholder=t("sidebar.custom_placeholder")
        ).strip()
    # Nothing typed in the custom box yet (the generic family starts here): not an error, a step still to take. It
    # is said once, under the box; the page's main area shows only a pointer here (AWAITING, awaiting_checkpoint).
    awaiting = choice == CUSTOM_OPTION and not checkpoint
    st.session_state[AWAITING] = awaiting
    if awaiting:
        sb.info(t("sidebar.custom_needed"), icon=":material/arrow_upward:")
    if not presenter.is_on():
        sb.radio(t("sidebar.device"), DEVICES, key=state.DEVICE, horizontal=True)
        sb.checkbox(t("sidebar.int8"), key=QUANT, help=t("sidebar.int8_help"))
        sidebar_gpu_line(sb)  # a GPU that torch cannot use: one line here, the fix on Home
    spec, error = None, None
    try:
        if awaiting:  # what a page's model_or_error shows: the pointer, not the sidebar's sentence again
            raise ModelLoadError(t("sidebar.custom_pointer"))
        resolve_device(st.session_state[state.DEVICE])  # cuda asked for on a machine without one: said here
        if choice == CUSTOM_OPTION:
            check_custom_checkpoint(checkpoint)  # hosted mode: Hub ids only, never a server path
        quant = "int8" if st.session_state.get(QUANT) else ""
        check_int8(quant, st.session_state[state.DEVICE])  # "auto" on a GPU server: said here, not on every page
        spec = ModelSpec(fam, checkpoint, st.session_state[state.DEVICE], quant)
    except ModelLoadError as e:
        error = carry(e)
    st.session_state[state.SPEC] = spec
    st.session_state[state.SPEC_ERROR] = error
    if error and not awaiting:
        sb.error(explain(error))
    elif spec is not None:
        source = source_slot(sb.empty())  # a page whose load of this model fails replaces the source with the failure
        failed = st.session_state.get(LOAD_FAILED, {}).get(spec)
        res = resolve(spec.checkpoint)
        if failed:
            source.error(t("sidebar.load_failed", id=as_text(excerpt(spec.checkpoint)), error=explain(failed)))
        elif res.source == Source.UNAVAILABLE:
            tried = as_text(" ".join(explain(x) for x in res.tried))  # each place asked, in the page's language
            source.warning(t("sidebar.unavailable", id=as_text(excerpt(spec.checkpoint)), tried=tried))
        elif not can_have_now(res.source):  # downloads allowed, but the Hub does not answer: say so here
            source.warning(t("sidebar.hub_unreachable", id=as_text(excerpt(spec.checkpoint))))
        else:
            shown = res.path if res.path and not hosted_mode() else None  # the hosted demo shows no server path
            source.caption(
                t("sidebar.weights_from", source=source_name(res.source)) + (f" — `{shown}`" if shown else "")
            )
    if not presenter.is_on():
        _offline_summary(sb)
    urlstate.publish()
    return spec


def _chinese_suggestion(sb) -> None:
    """With 中文 chosen: offer the Chinese checkpoints that can be had here, the bundled Chinese-capable model first
    (it works offline), then the Hub's (a local folder, the HF cache, or a download from a Hub that answers now),
    or say why the Hub's cannot be had."""
    zh = [(f.key, c.id) for f in FAMILIES.values() for c in f.checkpoints if c.language == "zh"]
    own = [(fam, cid) for fam, cid in chinese_bundled() if can_have_now(resolve(cid).source)]
    current = st.session_state.get(state.CHECKPOINT)
    if any(cid == current for _, cid in own + zh) or presenter.pinned():
        return
    here = own + [(fam, cid) for fam, cid in zh if can_have_now(resolve(cid).source)]
    if here:
        sb.info(t("sidebar.zh_suggest"))
        for fam, cid in here:
            sb.button(cid, key=f"sidebar.zh.{cid}", on_click=pick, args=(fam, cid), icon=":material/translate:")
    if len(here) == len(own):  # none of the Hub's: why (the bundled one, if any, still reads Chinese)
        sb.caption(
            t(
                "sidebar.zh_hub_unavailable" if own else "sidebar.zh_unavailable",
                ids=", ".join(f"`{cid}`" for _, cid in zh),
            )
        )


def _offline_summary(sb) -> None:
    missing = [c.id for f in FAMILIES.values() for c in f.checkpoints if not can_have_now(resolve(c.id).source)]
    if missing:
        with sb.expander(t("sidebar.offline_title", n=len(missing))):
            st.markdown(t("sidebar.offline_body", ids=", ".join(f"`{m}`" for m in missing)))
