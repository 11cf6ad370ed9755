"""AppTest: the Attributions page's Patching tab on the tiny zoo: the example runs as a job and draws its grids, the
agreement and the CSV; the swap helper; inputs of different lengths; a link; the pair target; 中文."""

from __future__ import annotations

import pandas as pd
import pytest

from app.kit import patching_work
from core.runtime.backend import runner
from tests.app.conftest import default_tab, new_app, open_page, page_path

P = "attribution"
GRIDS = 5  # residual stream, heads, heads of one layer per position, MLP, and the agreement scatter


@pytest.fixture(autouse=True)
def fresh_results():
    """Each test computes its own patching (app/kit/patching_work keeps results process-wide)."""
    patching_work.forget_all()
    yield
    patching_work.forget_all()


def _page(family: str = "bert", target: str | None = None):
    at = new_app()
    if family != "bert":
        at.sidebar.selectbox(key="sidebar.family").set_value(family).run()
    at.switch_page(page_path(P)).run()
    assert not at.exception, at.exception
    if target:
        at.radio(key=f"{P}.target").set_value(target).run()
        assert not at.exception, at.exception
    return at


def _click(at, key: str):
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def _finish(at):
    job = runner().get(at.session_state[f"{P}.patch.job"])
    runner().wait(job, timeout=120)
    assert job.status == "done", (job.status, job.error)
    at.run()
    assert not at.exception, at.exception
    return job


def _charts(at) -> list:
    return [c for c in at.get("plotly_chart") if c.proto.id and "patch.result" in c.key]


def test_the_example_runs_and_draws_every_grid(use_tiny_zoo):
    at = _page()
    assert at.text_input(key=f"{P}.patch.clean").value == "The capital of France is [MASK]."
    assert "patched forwards" in " ".join(c.value for c in at.caption)
    _click(at, f"{P}.patch.go")
    job = _finish(at)
    res = job.result
    assert len(_charts(at)) == GRIDS, [c.key for c in at.get("plotly_chart")]
    labels = [m.label for m in at.metric]
    assert f"Clean: logit({res.answers[0]}) − logit({res.answers[1]})" in labels
    assert res.answers == ("paris", "rome")  # the example's answers, both one piece of the uncased vocabulary
    csv = next(b for b in at.get("download_button") if b.key == f"{P}.patch.result.csv")
    assert csv.proto.label == "Download every site as CSV"
    assert csv.proto.deferred_file_id and not csv.proto.url  # made on a click (app.kit.download_button.download)
    # the CSV holds every site: resid (L+1) x n, heads L x H (+ per position), mlp L (+ per position)
    n, L = len(res.tokens), res.n_layers
    H = res.exact["heads"].shape[1]
    want = (L + 1) * n + L * H * (1 + n) + L * (1 + n)
    from app.views.inspect.patching import table

    assert len(table(res)) == want == res.rows
    entries = [e for e in at.session_state["report.entries"].values() if e.entry_id.startswith("patching:")]
    assert len(entries) == 1 and len(entries[0].figures) == GRIDS
    # attribution's grids on request: same figures, the other method in their titles
    at.segmented_control(key=f"{P}.patch.method").set_value("attribution").run()
    assert not at.exception, at.exception
    assert len(_charts(at)) == GRIDS
    # a changed input marks the result out of date instead of showing it
    at.text_input(key=f"{P}.patch.corrupted").set_value("The capital of Spain is [MASK].").run()
    assert not _charts(at) and any("press Patch" in i.value for i in at.info)


def test_table_rows_are_the_grids(use_tiny_zoo):
    at = _page()
    _click(at, f"{P}.patch.go")
    res = _finish(at).result
    from app.views.inspect.patching import table

    df = table(res)
    one = df[(df.site == "heads_pos") & (df.layer == 1) & (df["head"] == 2) & (df.position == 3)]
    assert one.exact.item() == pytest.approx(res.exact["heads_pos"][1, 2, 3])
    assert one.token.item() == res.tokens[3]
    assert pd.isna(df[df.site == "mlp"].position).all()


def test_the_swap_helper_makes_the_corrupted_input(use_tiny_zoo):
    at = _page()
    at.text_input(key=f"{P}.patch.swap_old").set_value("France")
    at.text_input(key=f"{P}.patch.swap_new").set_value("Spain")
    _click(at, f"{P}.patch.swap")
    assert at.text_input(key=f"{P}.patch.corrupted").value == "The capital of Spain is [MASK]."
    at.text_input(key=f"{P}.patch.swap_new").set_value("Liechtensteinerland")
    _click(at, f"{P}.patch.swap")
    assert "changes the number of tokens" in " ".join(e.value for e in at.error)
    assert at.text_input(key=f"{P}.patch.corrupted").value == "The capital of Spain is [MASK]."  # kept


def test_inputs_of_different_lengths_are_refused_before_any_work(use_tiny_zoo):
    at = _page()
    at.text_input(key=f"{P}.patch.corrupted").set_value("The capital of the old kingdom is [MASK].").run()
    hint = next(c.value for c in at.caption if c.value.startswith("Patch would stop here:"))  # not yet an error
    assert "patching needs the same length" in hint and "Corrupted:" in hint and not at.error
    _click(at, f"{P}.patch.go")
    errors = " ".join(e.value for e in at.error)
    assert "patching needs the same length" in errors and "Corrupted:" in errors
    assert f"{P}.patch.job" not in at.session_state


def _link(params: dict):
    from streamlit.testing.v1 import AppTest

    from tests.app.conftest import MAIN

    at = AppTest.from_file(MAIN, default_timeout=120)
    at.query_params.update(params)
    at.switch_page(page_path(P)).run()
    assert not at.exception, at.exception
    return at


def test_a_link_restores_the_inputs_and_runs_once(use_tiny_zoo):
    at = _link(
        {
            f"{P}.tab": "patch",
            f"{P}.patch.clean": "The cat sat on the [MASK].",
            f"{P}.patch.corrupted": "The dog sat on the [MASK].",
            f"{P}.patch.answer": "",
            f"{P}.patch.kinds": "resid,mlp",
            f"{P}.patch.direction": "noise",
        }
    )
    assert not at.error, [e.value for e in at.error]
    assert at.pills(key=f"{P}.patch.kinds").value == ["resid", "mlp"]
    assert f"{P}.attribution.job" not in at.session_state  # the patching link starts patching only
    job = _finish(at)
    assert job.result.config.direction == "noise" and set(job.result.exact) == {"resid", "mlp", "mlp_pos"}
    at.run()
    assert at.session_state[f"{P}.patch.job"] == job.id
    assert len(_charts(at)) == 3  # residual stream, MLP, agreement


def test_the_pair_target_patches_the_sop_head(use_tiny_zoo):
    at = _page("albert", "pair")
    assert at.text_input(key=f"{P}.patch.clean_b").value == "It creaked loudly."
    _click(at, f"{P}.patch.go")
    res = _finish(at).result
    assert res.position == -1 and set(res.answers) == {"in order", "swapped"}
    assert len(_charts(at)) == GRIDS


def test_only_some_sites_draw_only_their_grids(use_tiny_zoo):
    at = _page()
    at.pills(key=f"{P}.patch.kinds").set_value(["mlp"]).run()
    _click(at, f"{P}.patch.go")
    res = _finish(at).result
    assert set(res.exact) == {"mlp", "mlp_pos"} and res.n_layers == 2
    assert len(_charts(at)) == 2  # MLP and the agreement


def test_a_link_runs_only_the_open_tabs_work(use_tiny_zoo):
    """The address bar carries both tabs' fields (every bound field is published): a link runs what its open tab
    shows, and nothing else."""
    both = {f"{P}.text.mask": "Paris is the [MASK] of France.", f"{P}.patch.clean": "The cat sat on the [MASK]."}
    at = _link({**both, f"{P}.patch.corrupted": "The dog sat on the [MASK]."})
    assert f"{P}.attribution.job" in at.session_state and f"{P}.patch.job" not in at.session_state
    at = _link({**both, f"{P}.patch.corrupted": "The dog sat on the [MASK].", f"{P}.tab": "patch"})
    assert f"{P}.patch.job" in at.session_state and f"{P}.attribution.job" not in at.session_state
    _finish(at)
    at = _link({f"{P}.tab": "patch", f"{P}.patch.method": "attribution", f"{P}.patch.fmt": "svg"})
    assert f"{P}.patch.job" not in at.session_state  # display settings alone run nothing


def test_the_example_fits_every_tokenizer(use_tiny_zoo):
    """paris and rome are one WordPiece each but two BPE pieces: RoBERTa's tab starts with the model's own answers."""
    at = _page("roberta")
    assert not at.error, [e.value for e in at.error]
    assert at.text_input(key=f"{P}.patch.answer").value == ""
    assert "patched forwards" in " ".join(c.value for c in at.caption)


def test_the_tab_in_chinese(use_tiny_zoo):
    at = _link({"lang": "zh", f"{P}.tab": "patch"})
    assert not at.error, [e.value for e in at.error]
    assert at.button(key=f"{P}.patch.go").label == "开始修补"
    assert at.text_input(key=f"{P}.patch.clean").label == "干净输入"
    assert "次修补前向" in " ".join(c.value for c in at.caption)


def test_the_token_target_is_explained(use_tiny_zoo, tmp_path):
    at = _page(target="token")
    assert any("Patching measures a masked word" in i.value for i in at.info)


def test_the_walkthroughs_look_inside_step_opens_the_tab(use_tiny_zoo, tmp_path, monkeypatch):
    """Step 7 links to patching: the link opens the Attributions page on its Patching tab, and runs nothing."""
    from urllib.parse import parse_qsl

    from app.views.start.walkthrough.frame import BY_NUMBER

    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    url, _, query = next(x for x in BY_NUMBER[7].deep_links if x[0] == "attribution")
    at = open_page("walkthrough", {"walkthrough.step": "7"})
    link = next(p for p in at.get("page_link") if p.proto.label == "Open activation patching on the Attributions page")
    assert dict(parse_qsl(link.proto.query_string)) == query
    opened = open_page(url, query)
    assert not opened.exception and not opened.error
    assert default_tab(opened) == 2  # Patching, not One input
    assert f"{P}.patch.job" not in opened.session_state and f"{P}.attribution.job" not in opened.session_state


def test_a_rooms_followers_see_the_presenters_patching_computed_once(use_tiny_zoo):
    """The presenter opens the Patching tab and patches; a follower who joins lands on the same tab with the same
    inputs, and its job returns the very result the presenter's computed (app/kit/patching_work)."""
    from app.room import session as room_session
    from tests.app.conftest import click

    pres = open_page(None, params={"present": "1"})
    click(pres, "Start a room")
    code = pres.session_state[room_session.CODE]
    pres.session_state[f"{P}.tab"] = "patch"  # as the tab's own click sets it
    pres.switch_page(page_path(P)).run()
    assert not pres.exception, pres.exception
    assert pres.query_params[f"{P}.tab"] == "patch"
    pres.text_input(key=f"{P}.patch.corrupted").set_value("The capital of Spain is [MASK].").run()
    _click(pres, f"{P}.patch.go")
    mine = _finish(pres)
    follower = open_page(None, params={"room": code})
    follower.run()  # the first poll brought it to the presenter's page; this run draws it
    assert not follower.exception, follower.exception
    assert follower.text_input(key=f"{P}.patch.corrupted").value == "The capital of Spain is [MASK]."
    theirs = _finish(follower)
    assert theirs.result is mine.result  # computed once, for the presenter; the follower's job read it
    assert len(_charts(follower)) == GRIDS
