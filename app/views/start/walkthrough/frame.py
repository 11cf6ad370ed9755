"""The Walkthrough page's frame: the step list, navigation and progress (kept per browser session and in the URL),
the explanation, links to the pages a step points to, the check question with its answer on reveal, and what a
link keeps. Each step is a module of this package exporting ``STEP`` (see common.Step)."""

from __future__ import annotations

import streamlit as st

from app import nav
from app.kit import urlstate
from app.kit.i18n import t
from app.kit.walkthrough_work import Flow
from app.room.polls import poll as room_poll
from app.room.polls import presenting as room_presenting
from app.views.start.walkthrough import (
    step_distil,
    step_finetune,
    step_inputs,
    step_inside,
    step_mlm,
    step_pair,
    step_sharing,
)
from app.views.start.walkthrough.common import DONE, REVEAL, STEP, TEXT, TEXT_B, K, Step

STEPS: tuple[Step, ...] = tuple(
    m.STEP for m in (step_inputs, step_mlm, step_pair, step_sharing, step_distil, step_finetune, step_inside)
)
N_STEPS = len(STEPS)
NUMBERS = tuple(range(1, N_STEPS + 1))
if tuple(s.number for s in STEPS) != NUMBERS:  # the texts are keyed s1..sN: the list order is the numbering
    raise RuntimeError(f"walkthrough steps are numbered {[s.number for s in STEPS]}, expected {list(NUMBERS)}")
BY_NUMBER = {s.number: s for s in STEPS}
N_OPTIONS = 3
# Widget keys whose value must survive the steps where the widget is not drawn (Streamlit forgets those).
KEEP = (TEXT, TEXT_B, *(k for s in STEPS for k in s.keep), *(K(f"q{i}") for i in NUMBERS))


def init() -> None:
    """Session defaults for the page (before bind() fills them from a link, and before any widget)."""
    st.session_state.setdefault(STEP, 1)
    st.session_state.setdefault(DONE, set())
    st.session_state.setdefault(REVEAL, set())


def keep_widget_state() -> None:
    """Re-assign the kept widget keys, so that values typed in one step are still there in the next."""
    for k in KEEP:
        if k in st.session_state:
            st.session_state[k] = st.session_state[k]


def fields() -> tuple[urlstate.Field, ...]:
    """What a link keeps: the step, the sentences, and each step's inputs and options."""
    return (
        urlstate.Field(STEP, "int", lo=1, hi=N_STEPS),
        urlstate.Field(TEXT, max_len=500),
        urlstate.Field(TEXT_B, max_len=500),
        *(f for s in STEPS for f in s.fields),
    )


# ---------------------------------------------------------------------------------------------- navigation
def _go(delta: int) -> None:
    st.session_state[STEP] = min(N_STEPS, max(1, int(st.session_state.get(STEP, 1)) + delta))


def _toggle(key: str, item: int) -> None:
    items: set = st.session_state.setdefault(key, set())
    items.symmetric_difference_update({item})


def step_label(i: int) -> str:
    return f"{i}. {t(f'walkthrough.s{i}.short')}"  # no state in here: the options must stay the same between runs


def navigation() -> int:
    """Progress bar, the step picker and Previous / Next; returns the current step."""
    done = st.session_state[DONE]
    text = t("walkthrough.progress", done=len(done), total=N_STEPS)
    if done:
        text += " · " + t("walkthrough.done_list", steps=", ".join(str(i) for i in sorted(done)))
    st.progress(len(done) / N_STEPS, text=text)
    # persist_state: coming back from another page keeps the step (Streamlit drops an undrawn widget's value)
    step = st.radio(
        t("walkthrough.step_label"), NUMBERS, key=STEP, horizontal=True, format_func=step_label, persist_state="session"
    )
    c1, c2, _ = st.columns([1, 1, 5])
    c1.button(
        t("walkthrough.prev"),
        key=K("prev"),
        on_click=_go,
        args=(-1,),
        disabled=step == 1,
        icon=":material/arrow_back:",
        width="stretch",
    )
    c2.button(
        t("walkthrough.next"),
        key=K("next"),
        on_click=_go,
        args=(1,),
        disabled=step == N_STEPS,
        icon=":material/arrow_forward:",
        width="stretch",
    )
    return int(step)


def header(step: int) -> None:
    st.header(f"{step}. {t(f'walkthrough.s{step}.title')}" + (" ✓" if step in st.session_state[DONE] else ""))


def explain(step: int) -> None:
    st.markdown(t(f"walkthrough.s{step}.explain"))


def links(step: int) -> None:
    """Links to the pages this step points to, then to the views it points to (those that exist in this install)."""
    targets = []
    wanted = [
        (url, t("walkthrough.open_page", page=t(f"nav.{url.replace('-', '_')}")), None) for url in BY_NUMBER[step].links
    ]
    wanted += [(url, t(label), query) for url, label, query in BY_NUMBER[step].deep_links]
    for url, label, query in wanted:
        try:
            targets.append((nav.page_obj(url), label, query))
        except KeyError:  # the page is not part of this install, or the navigation was not built (bare tests)
            continue
    if not targets:
        return
    # One row that wraps: each link as wide as its label (equal columns cut long labels off on narrow windows)
    row = st.container(horizontal=True, wrap=True, gap="medium")
    for page, label, query in targets:
        row.page_link(page, label=label, icon=":material/open_in_new:", width="content", query_params=query)


def render(step: int) -> Flow[None]:
    """The step's live widget, as a flow the page drives (app.kit.walkthrough_work.drive): it loads the models the
    step asks for and starts its jobs."""
    return BY_NUMBER[step].render()


def try_this(step: int) -> None:
    hint = BY_NUMBER[step].hint
    st.info(hint() if hint is not None else t(f"walkthrough.s{step}.try"), icon=":material/lightbulb:")


def quiz_text(step: int, part: str) -> str:
    """A part of the check question (q, opt0.., answer): the step's own when it depends on the model."""
    quiz = BY_NUMBER[step].quiz
    return quiz(part) if quiz is not None else t(f"walkthrough.s{step}.{part}")


def question(step: int) -> None:
    """The check question: three options, and the answer (with a verdict on the choice) on reveal."""
    st.markdown("#### " + t("walkthrough.check"))
    options = [quiz_text(step, f"opt{j}") for j in range(N_OPTIONS)]
    urlstate.relabel((K(f"q{step}"),))  # its labels are in the session's language
    choice = st.radio(
        quiz_text(step, "q"), list(range(N_OPTIONS)), index=None, key=K(f"q{step}"), format_func=lambda j: options[j]
    )
    # In a room the question is a poll: answers go to the room, the presenter sees them and reveals for everyone.
    revealed = room_poll(step, choice, options, BY_NUMBER[step].correct)
    if revealed is None:
        revealed = step in st.session_state[REVEAL]
        st.button(
            t("walkthrough.hide_answer") if revealed else t("walkthrough.show_answer"),
            key=K(f"reveal{step}"),
            on_click=_toggle,
            args=(REVEAL, step),
            icon=":material/visibility:",
        )
    if not revealed:
        return
    right = BY_NUMBER[step].correct
    if room_presenting():
        pass  # the room's presenter does not answer: their poll panel marks and names the answer
    elif choice is None:
        st.info(t("walkthrough.no_choice", answer=options[right]))
    elif choice == right:
        st.success(t("walkthrough.right"))
    else:
        st.warning(t("walkthrough.wrong", answer=options[right]))
    st.markdown(quiz_text(step, "answer"))


def mark_done(step: int) -> None:
    done = step in st.session_state[DONE]
    st.button(
        t("walkthrough.unmark_done") if done else t("walkthrough.mark_done"),
        key=K("mark_done"),
        on_click=_toggle,
        args=(DONE, step),
        type="secondary" if done else "primary",
        icon=":material/undo:" if done else ":material/check_circle:",
    )
