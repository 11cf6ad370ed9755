"""The room's sentences on the Fill-mask page: followers send sentences with a [MASK]; the presenter sees them with the
model's top prediction each (app.kit.cache.top_fills), shows one to everyone or hides any."""

from __future__ import annotations

import streamlit as st

from app.kit import live
from app.kit.cache import top_fills
from app.kit.i18n import explain, t
from app.kit.render import as_text
from app.room.session import (
    CLOSED,
    CODE,
    KEY,
    NOTICE,
    SENTENCE,
    SHOW_HIDDEN,
    TOP,
    in_room,
    is_presenter,
    member,
    rooms,
)
from core.base.messages import carry
from core.predict.fill_mask import FillMaskConfig
from core.runtime import room as R


def _prediction_line(pred) -> str:
    if isinstance(pred, str):
        return t("room.cannot_predict", why=as_text(pred))
    filled, word, prob = pred
    return t("room.prediction", filled=as_text(filled), word=as_text(word), prob=f"{prob:.0%}")


def _set_collecting(on_key: str) -> None:
    try:
        rooms().collect(st.session_state[CODE], st.session_state[KEY], bool(st.session_state.get(on_key)))
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", carry(e))


def _pick(sid: int | None) -> None:
    try:
        rooms().pick(st.session_state[CODE], st.session_state[KEY], sid)
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", carry(e))


def _hide(sid: int, hidden: bool) -> None:
    try:
        rooms().hide(st.session_state[CODE], st.session_state[KEY], sid, hidden)
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", carry(e))


def sentences_panel(lm) -> None:
    """On Fill-mask in a room: the presenter asks for sentences and sees them with the model's top prediction each
    (show one to everyone, hide any); a follower sends one and sees the one shown to everyone."""
    if not in_room() or st.session_state.get(CLOSED) or lm is None:
        return
    code = st.session_state[CODE]
    try:
        view = rooms().view(code)
    except R.RoomError as e:
        st.error(explain(e))
        return
    if is_presenter():
        st.divider()
        st.subheader(t("room.sentences_title"))
        on_key = "room.collect_toggle"
        st.session_state[on_key] = view.collecting
        st.toggle(t("room.collect"), key=on_key, on_change=_set_collecting, args=(on_key,), help=t("room.collect_help"))
        _sentences_list(lm)
        return
    # A follower's part goes under their banner, above the page: on a phone the page's output runs for thousands of
    # pixels, and the box to send a sentence must not wait below it.
    with st.session_state.get(TOP) or st.container(), st.container(border=True, key="room-sentences"):
        _follower_part(lm, code, view)


def _follower_part(lm, code: str, view: R.RoomView) -> None:
    st.markdown("##### " + t("room.sentences_title"))
    if view.picked is not None:
        _show_picked(lm, view.picked)
    if not view.collecting:
        st.caption(t("room.not_collecting"))
        return
    with st.form("room.sentence_form", clear_on_submit=True):
        text = st.text_input(t("room.sentence_label"), key=SENTENCE, placeholder=t("room.sentence_placeholder"))
        go_ = st.form_submit_button(t("room.send"), icon=":material/send:")
    if go_:
        try:
            if text.strip() and len(text) <= R.limits().max_sentence_chars:
                FillMaskConfig(text, top_k=1)  # a sentence the model cannot fill (no [MASK]) is refused here
            rooms().submit(code, member(), text)  # empty, too long, too many: the room's own message
        except ValueError as e:  # RoomError, or FillMaskConfig's own message (no [MASK], empty)
            st.error(explain(e))
        else:
            st.success(t("room.sent"))


def _show_picked(lm, sub: R.Submission) -> None:
    pred = top_fills(lm, [sub.text])[sub.text]
    with st.container(border=True, key="room-picked"):
        st.markdown(t("room.picked", text=as_text(sub.text)))
        st.markdown(_prediction_line(pred))


@live.every(2 * R.limits().poll_s)
def _sentences_list(lm) -> None:
    code, key = st.session_state[CODE], st.session_state[KEY]
    show_hidden = st.checkbox(t("room.show_hidden"), key=SHOW_HIDDEN)
    try:
        subs = rooms().submissions(code, key, hidden=show_hidden)
        view = rooms().view(code)
    except R.RoomError as e:
        st.error(explain(e))
        return
    if view.picked is not None:
        _show_picked(lm, view.picked)
        st.button(t("room.unpick"), key="room.unpick", on_click=_pick, args=(None,), icon=":material/close:")
    if not subs:
        st.caption(t("room.no_sentences"))
        return
    st.caption(t("room.n_sentences", n=len(subs)) if len(subs) > 1 else t("room.one_sentence"))
    preds = top_fills(lm, [s.text for s in subs])
    for s in reversed(subs):  # newest first
        with st.container(border=True, key=f"room-sub-{s.id}"):
            c1, c2, c3 = st.columns([6, 1, 1], vertical_alignment="center")
            c1.markdown(("~~" if s.hidden else "") + as_text(s.text) + ("~~" if s.hidden else ""))
            c1.caption(_prediction_line(preds[s.text]))
            if not s.hidden:
                c2.button(
                    t("room.pick"),
                    key=f"room.pick.{s.id}",
                    on_click=_pick,
                    args=(s.id,),
                    icon=":material/cast:",
                    disabled=view.picked is not None and view.picked.id == s.id,
                    width="stretch",
                )
            c3.button(
                t("room.unhide") if s.hidden else t("room.hide"),
                key=f"room.hide.{s.id}",
                on_click=_hide,
                args=(s.id, not s.hidden),
                icon=":material/visibility_off:",
                width="stretch",
            )
