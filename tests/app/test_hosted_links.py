"""Hosted links (#34 §4): a link names a session's own model by its label, never by its server folder, and opened in
another session names nothing there; the sidebar shows no server path on the hosted demo."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _page_text(at: AppTest) -> str:
    """Everything the page drew (every element's proto, as text): what a visitor could read in it."""
    out, todo = [], [at._tree]
    while todo:
        node = todo.pop()
        out.append(str(getattr(node, "proto", "")))
        todo.extend(getattr(node, "children", {}).values())
    return "\n".join(out)


def test_hosted_links_name_a_sessions_model_by_its_label_and_another_session_gets_none_of_it(
    use_tiny_zoo, tiny_models, tmp_path, monkeypatch
):
    """On the hosted demo, session A's fine-tuned model is in A's link as ``session:<label>`` (no server path, no
    session id), and the sidebar names no folder; session B opening A's link gets its own default model and a
    notice, and B typing A's run folder into the custom box gets the hosted refusal, which repeats no path."""
    import shutil

    from app.kit import state
    from tests.app.conftest import open_page

    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    run = tmp_path / "runs" / "a1b2c3d4e5f6" / "run1-bert-120000" / "model"
    shutil.copytree(tiny_models["bert"], run)
    label = "run1-bert (WordNet glosses)"
    a = open_page(
        None,
        state={
            state.SESSION_MODELS: {label: state.SessionModel(label, "bert", str(run), "fine-tuned")},
            state.FAMILY: "bert",
            state.CHECKPOINT: str(run),
        },
    )
    assert a.session_state[state.SPEC].checkpoint == str(run), "A's own run is A's model"
    link = a.query_params["model"]
    assert link == "session:" + label, f"A's link names its run by a server path: {link!r}"
    assert str(tmp_path) not in _page_text(a) and str(use_tiny_zoo) not in _page_text(a)

    b = open_page(None, params={"family": "bert", "model": link})
    assert b.session_state[state.SPEC].checkpoint != str(run) and b.warning, "B opened A's model from A's link"
    b = open_page(None, params={"family": "bert", "model": "custom", "custom": str(run)})
    assert b.session_state[state.SPEC] is None
    shown = _page_text(b).replace(f'value: "{run}"', "")  # the box shows what B typed: nothing else may
    assert "never files or folders on the server" in shown
    assert str(tmp_path) not in shown and "a1b2c3d4e5f6" not in shown
