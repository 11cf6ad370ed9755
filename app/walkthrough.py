"""The Walkthrough page's frame: step navigation and progress (kept per browser session and in the URL), the
check question with its answer on reveal, links to the pages each step points to, and helpers the steps share.

The step renderers themselves live in app/walkthrough_steps.py. Every text is in assets/i18n/walkthrough.toml.
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

import streamlit as st

from app import nav, report, room_ui, state, urlstate
from app.i18n import t

PAGE = "walkthrough"
N_STEPS = 7
STEPS = tuple(range(1, N_STEPS + 1))


def K(name: str) -> str:
    return state.key(PAGE, name)


STEP, DONE, REVEAL = K("step"), K("done"), K("reveal")
TEXT, TEXT_B = K("text"), K("text_b")
# The right option (0-based) of each step's check question; the options themselves are in the toml.
CORRECT = {1: 1, 2: 2, 3: 0, 4: 1, 5: 2, 6: 0, 7: 1}
N_OPTIONS = 3
# Pages each step points to (their url in app/nav.py): the step calls the same core they do.
LINKS = {1: ("models",), 2: ("fill-mask", "pretrain"), 3: ("sentence-pair",), 4: ("models",), 5: ("speed", "models"),
         6: ("finetune",), 7: ("attention", "attribution", "lens", "corpus-search")}
# Widget keys whose value must survive the steps where the widget is not drawn (Streamlit forgets those).
KEEP = (TEXT, TEXT_B, K("s2.whole_word"), K("s2.word"), K("s3.a"), K("s3.b"), K("s4.v"), K("s4.h"), K("s4.e"),
        K("s5.seq"), K("s5.batch"), K("s5.reps"), K("s5.sentences"), K("s6.model"), K("s6.lr"), K("s6.steps"),
        K("s7.source"), K("s7.tuned"), K("s7.text"), K("s7.layer"), K("s7.head"), K("s7.class"), K("s7.n_steps"),
        *(K(f"q{i}") for i in STEPS))


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


def text_default(key: str, entry: str) -> None:
    """Fill a text box once with the example sentence ``walkthrough.<entry>``."""
    st.session_state.setdefault(key, t(f"walkthrough.{entry}"))


# ---------------------------------------------------------------------------------------------- navigation
def _go(delta: int) -> None:
    st.session_state[STEP] = min(N_STEPS, max(1, int(st.session_state.get(STEP, 1)) + delta))


def go_to(step: int) -> None:
    st.session_state[STEP] = step


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
    step = st.radio(t("walkthrough.step_label"), STEPS, key=STEP, horizontal=True, format_func=step_label,
                    persist_state="session")
    c1, c2, _ = st.columns([1, 1, 5])
    c1.button(t("walkthrough.prev"), key=K("prev"), on_click=_go, args=(-1,), disabled=step == 1,
              icon=":material/arrow_back:", width="stretch")
    c2.button(t("walkthrough.next"), key=K("next"), on_click=_go, args=(1,), disabled=step == N_STEPS,
              icon=":material/arrow_forward:", width="stretch")
    return int(step)


def links(step: int) -> None:
    """Links to the pages this step points to (those that exist in this install)."""
    targets = []
    for url in LINKS.get(step, ()):
        try:
            targets.append((url, nav.page_obj(url)))
        except KeyError:  # the page is not part of this install, or the navigation was not built (bare tests)
            continue
    if not targets:
        return
    cols = st.columns(len(targets) + 1)
    for col, (url, page) in zip(cols, targets):
        col.page_link(page, label=t("walkthrough.open_page", page=t(f"nav.{url.replace('-', '_')}")),
                      icon=":material/open_in_new:")


def explain(step: int) -> None:
    st.markdown(t(f"walkthrough.s{step}.explain"))


def try_this(step: int) -> None:
    st.info(t(f"walkthrough.s{step}.try"), icon=":material/lightbulb:")


def question(step: int) -> None:
    """The check question: three options, and the answer (with a verdict on the choice) on reveal."""
    st.markdown("#### " + t("walkthrough.check"))
    choice = st.radio(t(f"walkthrough.s{step}.q"), list(range(N_OPTIONS)), index=None, key=K(f"q{step}"),
                      format_func=lambda j: t(f"walkthrough.s{step}.opt{j}"))
    # In a room the question is a poll: answers go to the room, the presenter sees them and reveals for everyone.
    revealed = room_ui.poll(step, choice, [t(f"walkthrough.s{step}.opt{j}") for j in range(N_OPTIONS)])
    if revealed is None:
        revealed = step in st.session_state[REVEAL]
        st.button(t("walkthrough.hide_answer") if revealed else t("walkthrough.show_answer"), key=K(f"reveal{step}"),
                  on_click=_toggle, args=(REVEAL, step), icon=":material/visibility:")
    if not revealed:
        return
    right = CORRECT[step]
    if choice is None:
        st.info(t("walkthrough.no_choice", answer=t(f"walkthrough.s{step}.opt{right}")))
    elif choice == right:
        st.success(t("walkthrough.right"))
    else:
        st.warning(t("walkthrough.wrong", answer=t(f"walkthrough.s{step}.opt{right}")))
    st.markdown(t(f"walkthrough.s{step}.answer"))


def mark_done(step: int) -> None:
    done = step in st.session_state[DONE]
    st.button(t("walkthrough.unmark_done") if done else t("walkthrough.mark_done"), key=K("mark_done"),
              on_click=_toggle, args=(DONE, step), type="secondary" if done else "primary",
              icon=":material/undo:" if done else ":material/check_circle:")


# ---------------------------------------------------------------------------------------------- shared helpers
def record(step: int, inputs: dict[str, Any], *, rows: Sequence[dict] = (), text: str = "",
           figures: Sequence = (), same: Sequence | None = None) -> None:
    """Put a step's live result into the session report. A later result with the same ``same`` values (default:
    the same inputs) replaces the earlier entry, so sliding through options does not flood the report."""
    basis = same if same is not None else sorted((str(k), str(v)) for k, v in inputs.items())
    digest = hashlib.sha1(repr(basis).encode()).hexdigest()[:10]
    report.record(f"walkthrough:s{step}:{digest}", page=t("nav.walkthrough"),
                  title=f"{step}. {t(f'walkthrough.s{step}.title')}", inputs=inputs, rows=rows, text=text,
                  figures=figures)


def fields() -> tuple[urlstate.Field, ...]:
    """What a link keeps: the step, the sentences, and each step's inputs and options."""
    from app.walkthrough_steps import LRS, S5_BATCHES, S5_SEQS, S5_SENTENCES, S7_SOURCES

    return (
        urlstate.Field(STEP, "int", lo=1, hi=N_STEPS), urlstate.Field(TEXT, max_len=500),
        urlstate.Field(TEXT_B, max_len=500), urlstate.Field(K("s2.whole_word"), "bool"),
        urlstate.Field(K("s3.a"), max_len=500), urlstate.Field(K("s3.b"), max_len=500),
        urlstate.Field(K("s4.v"), "int", lo=1, hi=1_000_000), urlstate.Field(K("s4.h"), "int", lo=1, hi=65_536),
        urlstate.Field(K("s4.e"), "int", lo=1, hi=65_536),
        urlstate.Field(K("s5.seq"), "int", choices=S5_SEQS), urlstate.Field(K("s5.batch"), "int", choices=S5_BATCHES),
        urlstate.Field(K("s5.reps"), "int", lo=1, hi=10),
        urlstate.Field(K("s5.sentences"), "int", choices=S5_SENTENCES),
        urlstate.Field(K("s6.lr"), "float", choices=LRS), urlstate.Field(K("s6.steps"), "int", lo=2, hi=200),
        urlstate.Field(K("s7.source"), choices=S7_SOURCES), urlstate.Field(K("s7.text"), max_len=500),
    )
