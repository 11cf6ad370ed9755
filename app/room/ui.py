"""The room in the app: the presenter starts a room, followers' screens follow, polls and the room's sentences.

Every run of app/main.py calls ``begin(page)`` before the page and ``end(page)`` after it:
- ``begin`` joins the room named in the URL (``?room=CODE``; ``&key=SECRET`` makes this session the presenter),
  keeps those parameters in the address bar, and draws the banner: for a follower a fragment that polls the store
  every ``poll_s`` (st.fragment(run_every=...): only the banner reruns) and, when the presenter moved on, switches
  to the presenter's page with the presenter's query parameters (like a deep link: urlstate.bind restores them);
  for the presenter the room's code, link, QR code, following count and Close.
- ``end`` publishes the presenter's state (page + query parameters, as every page already keeps its inputs in the
  URL) to the store; for a follower it notices that they changed something themself and breaks away.

The walkthrough's check question calls ``poll`` (answers go to the store; the presenter sees the bar chart and
reveals for everyone), and the Fill-mask page calls ``sentences_panel`` (the room's sentences with the model's
top prediction each). Every store call goes through core.runtime.room; its errors (ValueError) are shown with st.error.
"""
from __future__ import annotations

import os
from urllib.parse import urlsplit

import plotly.graph_objects as go
import streamlit as st

from app import nav

from app.kit import presenter, state
from app.kit.i18n import t
from app.kit.render import as_text
from core.runtime import room as R
from core.runtime.backend import store as room_store
from core.predict.fill_mask import FillMaskConfig, fill_mask_batch

CODE, ROLE, KEY = "room.code", "room.role", "room.key"  # this session's room, "presenter" | "follower", the secret
FOLLOWING = "room.following"  # a follower follows (True) or broke away (False)
SEEN = "room.seen"  # (state_version, shared_version) this follower shows
LANDING = "room.landing"  # the next full run is the one applying the presenter's state
LANDED = "room.landed"  # what this follower showed right after applying it (the base for "changed something")
ANSWERED = "room.answered"  # step -> the choice sent to the store
CLOSED = "room.closed"  # the room closed while this session was in it: the reason
NOTICE = "room.notice"  # a message for the next run (a refused key, a join error), until a run shows it to the end
NOTICE_SHOWN = "room.notice_shown"
SHOW_QR = "room.show_qr"
PAGE_PATH = "room.page_path"  # this run's page url_path (to find the app's root in the browser's URL)
JOIN_INPUT = "room.join_input"
SENTENCE = "room.sentence"
SHOW_HIDDEN = "room.show_hidden"
PREDICTIONS = "room.predictions"  # (model spec, text) -> (filled text, top piece, prob) | error text; bounded
PREDICTIONS_KEEP = 400  # cached predictions per session (a room keeps at most 300 sentences)
PRESENTER, FOLLOWER = "presenter", "follower"


def rooms() -> R.RoomStore:
    return room_store()


def poll_s() -> float:
    return R.limits().poll_s


def in_room() -> bool:
    return st.session_state.get(CODE) is not None


def is_presenter() -> bool:
    return in_room() and st.session_state.get(ROLE) == PRESENTER


def is_follower() -> bool:
    return in_room() and st.session_state.get(ROLE) == FOLLOWER


def page_url(page) -> str:
    """app/nav.py's url of the st.Page ``page`` (the default page's url_path is "", its nav url is "home")."""
    return page.url_path or "home"


def _member() -> str:
    return state.session_id()


def _leave() -> None:
    for k in (CODE, ROLE, KEY, FOLLOWING, SEEN, LANDING, LANDED, ANSWERED, CLOSED):
        st.session_state.pop(k, None)
    for p in (R.ROOM_PARAM, R.KEY_PARAM):
        if p in st.query_params:
            del st.query_params[p]


# ---------------------------------------------------------------------------------------------- joining
def _join_from_url() -> None:
    """Join (or start presenting) the room the URL names; a wrong code or closed room gets a clear message."""
    raw = st.query_params.get(R.ROOM_PARAM)
    key = st.query_params.get(R.KEY_PARAM)
    if raw is None:
        if key is not None:
            del st.query_params[R.KEY_PARAM]  # a key without a room means nothing: keep it out of the address bar
        return
    code = R.normalize_code(raw)
    if st.session_state.get(CODE) == code and (key is None or is_presenter()):
        return  # already in this room (a key on a follower's URL is checked below)
    if key is not None and rooms().is_presenter(code, key):
        try:
            rooms().view(code)
        except R.RoomError as e:
            st.session_state[NOTICE] = ("error", str(e))
            _leave()
            return
        _leave()
        st.session_state.update({CODE: code, ROLE: PRESENTER, KEY: key, SHOW_QR: True})
        return  # _keep_params writes the code as normalized
    if key is not None:  # a follower who tries the presenter's controls: refused, and the key leaves the URL
        del st.query_params[R.KEY_PARAM]
        st.session_state[NOTICE] = ("error", t("room.key_refused", code=code))
        if st.session_state.get(CODE) == code:
            return
    try:
        rooms().join(code, _member())
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", str(e))
        del st.query_params[R.ROOM_PARAM]
        if st.session_state.get(CODE) == code:
            _leave()
        return
    _leave()
    st.session_state.update({CODE: code, ROLE: FOLLOWER, FOLLOWING: True, SEEN: (0, 0), ANSWERED: {}})


def _keep_params() -> None:
    """The room (and the presenter's key) stay in the address bar after a page link dropped the query."""
    code = st.session_state[CODE]
    if st.query_params.get(R.ROOM_PARAM) != code:
        st.query_params[R.ROOM_PARAM] = code
    if is_presenter() and st.query_params.get(R.KEY_PARAM) != st.session_state[KEY]:
        st.query_params[R.KEY_PARAM] = st.session_state[KEY]


def begin(page) -> None:
    """Before the page: join from the URL, then draw this session's room banner (nothing outside a room)."""
    st.session_state[PAGE_PATH] = page.url_path
    _join_from_url()
    notice = st.session_state.get(NOTICE)
    if notice is not None:  # kept until a run ends: a switch to the presenter's page must not swallow it
        getattr(st, notice[0])(notice[1])
        st.session_state[NOTICE_SHOWN] = notice
    if not in_room():
        return
    _keep_params()
    if st.session_state.get(CLOSED):
        _closed_banner()
    elif is_presenter():
        _presenter_banner()
    else:
        _apply_before_drawing()
        _follower_banner()


def end(page) -> None:
    """After the page: the presenter publishes what it shows; a follower who changed something breaks away."""
    shown = st.session_state.pop(NOTICE_SHOWN, None)
    if shown is not None and st.session_state.get(NOTICE) is shown:
        del st.session_state[NOTICE]
    if not in_room() or st.session_state.get(CLOSED):
        return
    url, params = page_url(page), st.query_params.to_dict()
    if is_presenter():
        try:
            rooms().publish(st.session_state[CODE], st.session_state[KEY], R.PresenterState.of(url, params))
        except R.RoomClosedError:
            st.session_state[CLOSED] = R.BY_IDLE
        except R.RoomError as e:
            st.error(str(e))
        return
    if st.session_state.pop(LANDING, False):
        st.session_state[LANDED] = R.PresenterState.of(url, params)
        return
    landed = st.session_state.get(LANDED)
    if st.session_state.get(FOLLOWING) and landed is not None and R.diverged(landed, url, params):
        st.session_state[FOLLOWING] = False  # the banner says so on the next poll (within poll_s)
        st.session_state[NOTICE] = ("info", t("room.broke_away_auto"))


# ---------------------------------------------------------------------------------------------- banners
def _closed_banner() -> None:
    why = st.session_state[CLOSED]
    st.warning(t("room.closed_presenter" if why == R.BY_PRESENTER else "room.closed_idle",
                 code=st.session_state[CODE]), icon=":material/door_front:")
    st.button(t("room.leave"), key="room.leave_closed", on_click=_leave, icon=":material/logout:")


def _mark_closed(view: R.RoomView | None) -> None:
    st.session_state[CLOSED] = view.closed_reason if view is not None else R.BY_IDLE


def _apply(view: R.RoomView) -> None:
    """Show the presenter's state: switch to its page with its query parameters (a full rerun), like a deep link."""
    st.session_state[SEEN] = (view.state_version, view.shared_version)
    try:
        target = nav.page_obj(view.state.page)
    except KeyError:  # a page this install lacks: stay where we are
        return
    st.session_state[LANDING] = True
    # The session switches page with the presenter's query (urlstate.bind restores it). Streamlit's client then
    # shows the new page's path but keeps its own query string in the address bar; the room code is in it, so a
    # reload joins again and catches up.
    st.switch_page(target, query_params={**view.state.as_dict(), R.ROOM_PARAM: view.code})


def _fragment_run() -> bool:
    """True in a run of fragments only (run_every), False in a run of the whole app."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def _apply_before_drawing() -> None:
    """In a full run (a join, a click), switch to a newer presenter state before anything is drawn, as
    app/nav.follow_deep_link does: a switch in a session's first run after elements were sent can leave the
    browser on its loading skeleton."""
    if not st.session_state.get(FOLLOWING):
        return
    try:
        view = rooms().view(st.session_state[CODE])
    except R.RoomError:
        return
    if view.open and view.state is not None and view.state_version != st.session_state.get(SEEN, (0, 0))[0]:
        _apply(view)


def _break_away() -> None:
    st.session_state[FOLLOWING] = False


def _catch_up() -> None:
    st.session_state[FOLLOWING] = True
    st.session_state[SEEN] = (-1, st.session_state.get(SEEN, (0, 0))[1])  # the next poll applies the latest state


@st.fragment(run_every=R.limits().poll_s)
def _follower_banner() -> None:
    code = st.session_state.get(CODE)
    if code is None or st.session_state.get(CLOSED) or not is_follower():
        return
    following = bool(st.session_state.get(FOLLOWING))
    try:
        step = R.follow_step(rooms(), code, _member(), st.session_state.get(SEEN, (0, 0)), following)
    except R.RoomError:  # the room was evicted long after it closed
        step = None
    if step is None or step.action == R.CLOSED:
        _mark_closed(step.view if step else None)
        st.rerun(scope="app")  # the banner becomes the static "closed" notice; polling stops
    view = step.view
    if step.action == R.APPLY:
        if _fragment_run():  # a page switch from a fragment's own run leaves the browser's address bar behind:
            st.rerun(scope="app")  # switch from the full run this starts (it runs this fragment inline)
        _apply(view)
    elif step.action == R.REFRESH:
        st.session_state[SEEN] = (st.session_state.get(SEEN, (0, 0))[0], view.shared_version)
        st.rerun(scope="app")  # a revealed answer or a picked sentence is drawn by the page
    where = nav.title(next((p for p in nav.PAGES if p.url == view.state.page), nav.PAGES[0])) if view.state else "—"
    box = st.container(border=True, key="room-banner")
    c1, c2 = box.columns([5, 1], vertical_alignment="center")
    if following:
        c1.info(t("room.following", code=code, page=where), icon=":material/cast_connected:")
        c2.button(t("room.break_away"), key="room.break_away", on_click=_break_away, icon=":material/call_split:",
                  width="stretch")
    else:
        c1.warning(t("room.on_your_own", code=code, page=where), icon=":material/person:")
        c2.button(t("room.catch_up"), key="room.catch_up", on_click=_catch_up, type="primary",
                  icon=":material/fast_forward:", width="stretch")


def join_link(code: str) -> str:
    """The followers' link: the app's root as the presenter's browser reaches it (or ENCODERLAB_PUBLIC_URL), plus
    ?room=CODE. Never the key."""
    base = os.environ.get("ENCODERLAB_PUBLIC_URL", "").strip()
    if not base:
        url = st.context.url or f"http://localhost:{st.get_option('server.port')}"  # None in AppTest (no browser)
        parts = urlsplit(url)
        path = parts.path
        current = st.session_state.get(PAGE_PATH, "")
        if current and path.rstrip("/").endswith("/" + current):
            path = path.rstrip("/")[: -len(current) - 1]
        base = f"{parts.scheme}://{parts.netloc}{path}"
    return base.rstrip("/") + f"/?{R.ROOM_PARAM}={code}"


def qr_svg(link: str) -> str:
    """The link as a QR code (segno's SVG: paths only, no script), dark on white so it reads in a dark theme too."""
    import segno

    return segno.make(link, error="m").svg_inline(scale=8, dark="#000000", light="#ffffff")


def _close_room() -> None:
    try:
        rooms().close(st.session_state[CODE], st.session_state[KEY])
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", str(e))
    st.session_state[CLOSED] = R.BY_PRESENTER


@st.fragment(run_every=2 * R.limits().poll_s)
def _presenter_banner() -> None:
    code = st.session_state.get(CODE)
    if code is None or not is_presenter():
        return
    try:
        view = rooms().view(code)
    except R.RoomError:
        view = None
    if view is None or not view.open:
        _mark_closed(view)
        st.rerun(scope="app")
    link = join_link(code)
    box = st.container(border=True, key="room-presenter")
    c1, c2 = box.columns([4, 1], vertical_alignment="center")
    c1.markdown(t("room.presenting", code=code))
    c1.markdown(t("room.join_at", link=as_text(link)))
    if urlsplit(link).hostname in ("localhost", "127.0.0.1", "::1"):
        c1.caption(t("room.localhost_hint"))
    c2.metric(t("room.following_count"), view.following, help=t("room.following_help", n=view.members))
    if st.session_state.get(SHOW_QR):
        q1, q2 = box.columns([1, 3], vertical_alignment="center")
        q1.image(qr_svg(link), width=240)
        q2.markdown(f"# {code}")
        q2.caption(t("room.qr_help"))


# ---------------------------------------------------------------------------------------------- the sidebar
def _start() -> None:
    try:
        made = rooms().create()
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", str(e))
        return
    _leave()
    st.session_state.update({CODE: made.code, ROLE: PRESENTER, KEY: made.key, SHOW_QR: True})
    st.query_params[R.ROOM_PARAM] = made.code
    st.query_params[R.KEY_PARAM] = made.key


def _join_typed() -> None:
    code = R.normalize_code(st.session_state.get(JOIN_INPUT, ""))
    if code:
        st.query_params[R.ROOM_PARAM] = code  # begin() joins it (or says why not) in the run this callback starts


def sidebar_controls(sb) -> None:
    """In the sidebar: Start a room (presenter view), or Join with a code; the presenter's QR toggle and Close while
    presenting; nothing for a follower (their banner has their controls)."""
    if is_presenter() and not st.session_state.get(CLOSED):
        sb.toggle(t("room.show_qr"), key=SHOW_QR)
        sb.button(t("room.close"), key="room.close", on_click=_close_room, icon=":material/door_front:")
        return
    if in_room():
        return
    if presenter.is_on():
        sb.button(t("room.start"), key="room.start", on_click=_start, icon=":material/groups:",
                  help=t("room.start_help"))
        return
    with sb.expander(t("room.join_title")):
        st.text_input(t("room.join_code"), key=JOIN_INPUT, max_chars=12, placeholder="ABC123")  # i18n: ok (an example code)
        st.button(t("room.join"), key="room.join", on_click=_join_typed, icon=":material/login:")


# ---------------------------------------------------------------------------------------------- polls
def poll(step: int, choice: int | None, options: list[str]) -> bool | None:
    """The walkthrough check question of ``step`` as a poll. Outside a room: None (the page reveals by itself).
    A follower's choice goes to the store; the presenter sees the answers as a bar chart, with Reveal. Returns
    whether the presenter revealed the answer."""
    if not in_room() or st.session_state.get(CLOSED):
        return None
    code = st.session_state[CODE]
    try:
        if is_presenter():
            _poll_panel(step, options)
            return step in rooms().view(code).revealed
        sent = st.session_state.setdefault(ANSWERED, {})
        if sent.get(step, None) != choice and choice is not None:
            rooms().answer(code, _member(), step, choice)
            sent[step] = choice
        revealed = step in rooms().view(code).revealed
    except R.RoomError as e:
        st.error(str(e))
        return None
    if not revealed:
        st.caption(t("room.poll_sent") if choice is not None else t("room.poll_wait"))
    return revealed


def tally_chart(tally: R.Tally, options: list[str]) -> go.Figure:
    """The room's answers: one horizontal bar per option, its count on it."""
    fig = go.Figure(go.Bar(x=list(tally.counts), y=options, orientation="h", marker_color="#4C78A8",
                           text=[str(c) for c in tally.counts], textposition="auto",
                           hovertemplate="%{y}: %{x}<extra></extra>"))
    fig.update_layout(xaxis_title=t("room.poll_x"), yaxis=dict(autorange="reversed", automargin=True),
                      xaxis=dict(rangemode="tozero", dtick=1 if max(tally.counts, default=0) < 10 else None),
                      margin=dict(t=10, b=10, l=10, r=10), height=90 + 60 * len(options))
    return fig


def _toggle_reveal(step: int, on: bool) -> None:
    try:
        rooms().reveal(st.session_state[CODE], st.session_state[KEY], step, on)
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", str(e))


@st.fragment(run_every=R.limits().poll_s)
def _poll_panel(step: int, options: list[str]) -> None:
    code, key = st.session_state[CODE], st.session_state[KEY]
    try:
        tally = rooms().tally(code, key, step, len(options))
        view = rooms().view(code)
    except R.RoomError as e:
        st.error(str(e))
        return
    box = st.container(border=True, key=f"room-poll-{step}")
    box.markdown("##### " + t("room.poll_title", n=tally.answered, following=view.following))
    box.plotly_chart(presenter.scale(tally_chart(tally, options)), key=f"room.poll_chart.{step}",
                     config={"displayModeBar": False})
    revealed = step in view.revealed
    if box.button(t("room.hide_answer") if revealed else t("room.reveal"), key=f"room.reveal.{step}",
                  type="secondary" if revealed else "primary", icon=":material/visibility:"):
        _toggle_reveal(step, not revealed)
        st.rerun(scope="app")  # the answer below the chart is drawn by the page


# ---------------------------------------------------------------------------------------------- sentences
def _predict(lm, texts: list[str]) -> dict[str, tuple | str]:
    """Top prediction per text (cached per model and text): (filled text, top word, probability), or the reason
    the model cannot read it. One batched call (core.predict.fill_mask.fill_mask_batch) for the texts not seen yet."""
    cache: dict = st.session_state.setdefault(PREDICTIONS, {})
    todo = [s for s in dict.fromkeys(texts) if (lm.spec, s) not in cache]
    if todo:
        cfgs, bad = [], {}
        for s in todo:
            try:
                cfgs.append(FillMaskConfig(s, top_k=1))
            except ValueError as e:
                bad[s] = str(e)
        try:
            results = fill_mask_batch(lm, cfgs)
        except ValueError as e:
            results = ()
            bad.update({c.text: str(e) for c in cfgs})
        for c, r in zip(cfgs, results):
            top = r.masks[0].candidates[0] if r.masks and r.masks[0].candidates else None
            cache[(lm.spec, c.text)] = (r.filled_text, top.text if top else "", top.prob if top else 0.0)
        cache.update({(lm.spec, s): why for s, why in bad.items()})
        while len(cache) > PREDICTIONS_KEEP:
            cache.pop(next(iter(cache)))
    return {s: cache[(lm.spec, s)] for s in texts}


def _prediction_line(pred) -> str:
    if isinstance(pred, str):
        return t("room.cannot_predict", why=as_text(pred))
    filled, word, prob = pred
    return t("room.prediction", filled=as_text(filled), word=as_text(word), prob=f"{prob:.0%}")


def _set_collecting(on_key: str) -> None:
    try:
        rooms().collect(st.session_state[CODE], st.session_state[KEY], bool(st.session_state.get(on_key)))
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", str(e))


def _pick(sid: int | None) -> None:
    try:
        rooms().pick(st.session_state[CODE], st.session_state[KEY], sid)
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", str(e))


def _hide(sid: int, hidden: bool) -> None:
    try:
        rooms().hide(st.session_state[CODE], st.session_state[KEY], sid, hidden)
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", str(e))


def sentences_panel(lm) -> None:
    """On Fill-mask in a room: the presenter asks for sentences and sees them with the model's top prediction each
    (show one to everyone, hide any); a follower sends one and sees the one shown to everyone."""
    if not in_room() or st.session_state.get(CLOSED) or lm is None:
        return
    code = st.session_state[CODE]
    try:
        view = rooms().view(code)
    except R.RoomError as e:
        st.error(str(e))
        return
    st.divider()
    st.subheader(t("room.sentences_title"))
    if is_presenter():
        on_key = "room.collect_toggle"
        st.session_state[on_key] = view.collecting
        st.toggle(t("room.collect"), key=on_key, on_change=_set_collecting, args=(on_key,),
                  help=t("room.collect_help"))
        _sentences_list(lm)
        return
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
            rooms().submit(code, _member(), text)  # empty, too long, too many: the room's own message
        except ValueError as e:  # RoomError, or FillMaskConfig's own message (no [MASK], empty)
            st.error(str(e))
        else:
            st.success(t("room.sent"))


def _show_picked(lm, sub: R.Submission) -> None:
    pred = _predict(lm, [sub.text])[sub.text]
    with st.container(border=True, key="room-picked"):
        st.markdown(t("room.picked", text=as_text(sub.text)))
        st.markdown(_prediction_line(pred))


@st.fragment(run_every=2 * R.limits().poll_s)
def _sentences_list(lm) -> None:
    code, key = st.session_state[CODE], st.session_state[KEY]
    show_hidden = st.checkbox(t("room.show_hidden"), key=SHOW_HIDDEN)
    try:
        subs = rooms().submissions(code, key, hidden=show_hidden)
        view = rooms().view(code)
    except R.RoomError as e:
        st.error(str(e))
        return
    if view.picked is not None:
        _show_picked(lm, view.picked)
        st.button(t("room.unpick"), key="room.unpick", on_click=_pick, args=(None,), icon=":material/close:")
    if not subs:
        st.caption(t("room.no_sentences"))
        return
    st.caption(t("room.n_sentences", n=len(subs)))
    preds = _predict(lm, [s.text for s in subs])
    for s in reversed(subs):  # newest first
        with st.container(border=True, key=f"room-sub-{s.id}"):
            c1, c2, c3 = st.columns([6, 1, 1], vertical_alignment="center")
            c1.markdown(("~~" if s.hidden else "") + as_text(s.text) + ("~~" if s.hidden else ""))
            c1.caption(_prediction_line(preds[s.text]))
            if not s.hidden:
                c2.button(t("room.pick"), key=f"room.pick.{s.id}", on_click=_pick, args=(s.id,),
                          icon=":material/cast:", disabled=view.picked is not None and view.picked.id == s.id,
                          width="stretch")
            c3.button(t("room.unhide") if s.hidden else t("room.hide"), key=f"room.hide.{s.id}", on_click=_hide,
                      args=(s.id, not s.hidden), icon=":material/visibility_off:", width="stretch")
