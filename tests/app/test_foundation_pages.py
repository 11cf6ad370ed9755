"""AppTest drives the foundation pages headlessly: Home, Models, Speed, and the shared sidebar."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.runtime.backend import runner
from tests.app.conftest import MAIN, page_path
from tests.app.conftest import new_app as _app


def test_home_lists_families_and_device(use_tiny_zoo):
    at = _app()
    text = " ".join(m.value for m in at.markdown)
    assert "EncoderLab" in at.title[0].value
    df = at.table[0].value  # a table whose long texts wrap (a data grid cut them)
    from core.registry import FAMILIES

    assert list(df["family"]) == [f.label for f in FAMILIES.values()]  # every registered family, in its order
    assert any("CPU" in i.value or "GPU" in i.value for i in list(at.info) + list(at.success))
    assert "BERT" in text


def test_sidebar_family_changes_checkpoints_and_source(use_tiny_zoo):
    at = _app()
    assert at.sidebar.selectbox(key="sidebar.checkpoint").value == "encoderlab/bert-mini"
    at.sidebar.selectbox(key="sidebar.family").set_value("albert").run()
    cb = at.sidebar.selectbox(key="sidebar.checkpoint")
    assert cb.value == "encoderlab/albert-mini" and "albert-base-v2" in cb.options
    assert any("bundled" in c.value for c in at.sidebar.caption)


def test_sidebar_bad_inputs_show_messages(use_tiny_zoo, tmp_path):
    at = _app()
    at.sidebar.selectbox(key="sidebar.checkpoint").set_value("custom (Hub id or local folder)…").run()
    at.sidebar.text_input(key="sidebar.custom").set_value(str(tmp_path / "nope")).run()
    assert any("Not available" in w.value for w in at.sidebar.warning)
    at.sidebar.radio(key="sidebar.device").set_value("cuda").run()
    import torch

    if not torch.cuda.is_available():
        assert any("no usable GPU" in e.value for e in at.sidebar.error)
    assert not at.exception


def test_sidebar_shows_a_failed_load_instead_of_a_source(use_tiny_zoo, tmp_path):
    """Issue 14: after the load of a folder failed, the sidebar said "Weights from: local folder"."""
    at = _app()
    at.sidebar.selectbox(key="sidebar.checkpoint").set_value("custom (Hub id or local folder)…").run()
    at.sidebar.text_input(key="sidebar.custom").set_value(str(tmp_path)).run()  # a folder, but not a model's
    assert any("local folder" in c.value for c in at.sidebar.caption)  # nothing has tried to load it yet
    at.switch_page(page_path("fill_mask")).run()
    assert not at.exception and at.main.error
    assert any("Could not load" in e.value for e in at.sidebar.error)
    assert not any("Weights from" in c.value for c in at.sidebar.caption)
    at.switch_page(page_path("home")).run()  # a page that loads nothing still says so
    assert any("Could not load" in e.value for e in at.sidebar.error)
    at.sidebar.selectbox(key="sidebar.checkpoint").set_value("encoderlab/bert-mini").run()
    assert not at.sidebar.error and any("Weights from" in c.value for c in at.sidebar.caption)


def test_models_page_breakdown_and_calculator(use_tiny_zoo):
    at = _app()
    at.switch_page(page_path("models")).run()
    assert not at.exception
    claims = at.dataframe[0].value
    from core.registry import official_checkpoints

    assert len(claims) == len(official_checkpoints()) >= 14
    mb = at.dataframe[1].value  # the architecture table shows what ModernBERT's config says
    facts = mb[mb["checkpoint"] == "answerdotai/ModernBERT-base"].iloc[0]["from the config"]
    assert "8192" in facts and "every n layers: 3" in facts and "(tokens): 128" in facts
    row = claims[claims["checkpoint"] == "bert-base-uncased"].iloc[0]
    assert row["backbone (M)"] == pytest.approx(109.48, abs=0.01) and row["articles' claim (M)"] == "110"
    assert row["difference (M)"] == "-0.52"
    chinese = claims[claims["checkpoint"] == "bert-base-chinese"].iloc[0]  # no figure in the articles: a dash
    assert chinese["articles' claim (M)"] == "–" and chinese["difference (M)"] == "–"
    assert "None" not in claims.astype(str).to_string()
    assert [m.value for m in at.metric][:2] == ["23.04M", "3.94M"]
    at.number_input(key="models.E").set_value(1024)
    at.button[0].click().run()  # the form's submit button
    assert any("larger than H" in e.value for e in at.error)


def test_speed_page_runs_a_background_job(use_tiny_zoo):
    at = _app()
    at.switch_page(page_path("speed")).run()
    assert not at.exception
    at.select_slider(key="speed.seq").set_value(16)
    at.select_slider(key="speed.batch").set_value(1)
    at.number_input(key="speed.reps").set_value(1)
    at.multiselect(key="speed.families").set_value(["bert", "distilbert"])
    at.button[0].click().run()
    assert not at.exception
    jobs = [j for j in runner().jobs() if j.name == "Speed"]
    assert jobs, "no job was submitted"
    runner().wait(jobs[-1], timeout=300)
    at.run()
    assert not at.exception
    assert any("Measured on" in s.value for s in at.success)
    cmp = at.dataframe[0].value
    assert "DistilBERT vs BERT" in list(cmp["comparison"])
    (entry,) = [e for e in at.session_state["report.entries"].values() if e.entry_id == f"speed:{jobs[-1].id}"]
    assert [r["family"] for r in entry.rows] == ["BERT", "DistilBERT"] and len(entry.figures) == 2
    assert "DistilBERT vs BERT" in entry.text
    at.run()
    assert len([e for e in at.session_state["report.entries"].values() if e.entry_id.startswith("speed:")]) == 1


# ---------------------------------------------------------------------------------------------- workshop features
def _open(name: str, params: dict[str, str] | None = None, state: dict | None = None):
    """A page opened from a link (query ``params``) or with session ``state`` set before it runs."""
    at = _app()
    for key, value in (params or {}).items():
        at.query_params[key] = value
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.switch_page(page_path(name)).run()
    assert not at.exception, at.exception
    return at


def _entries(at) -> list:
    return list(at.session_state["report.entries"].values()) if "report.entries" in at.session_state else []


def test_family_texts_in_english_are_the_registry_texts():
    """families.toml's English must not drift from core/models/loading.py (pages fall back to the registry)."""
    from app.kit.i18n import catalog
    from core.registry import FAMILIES, PAIR_HEADS

    cat = catalog()
    for key, f in FAMILIES.items():
        assert cat[f"families.{key}.summary"]["en"] == f.summary
        assert cat[f"families.{key}.objectives"]["en"] == " + ".join(f.objectives)
        assert cat[f"families.{key}.pair_head"]["en"] == (PAIR_HEADS[f.pair_head] if f.pair_head else "none")
        assert cat[f"families.{key}.pair_head_note"]["en"] == f.pair_head_note
        assert cat[f"families.{key}.position_embeddings"]["en"] == f.position_embeddings
        for c in f.checkpoints:
            if f"families.{key}.claims.{c.id}" in cat:
                assert cat[f"families.{key}.claims.{c.id}"]["en"] == c.claim_note


def test_home_in_chinese(use_tiny_zoo):
    at = _open("home", state={"ui.lang": "zh"})
    assert at.title[0].value == "EncoderLab"
    assert [s.value for s in at.subheader][:3] == ["从这里开始", "模型家族", "页面"]  # start here, above the table
    df = at.table[0].value
    assert list(df["模型家族"])[:4] == ["BERT", "RoBERTa", "ALBERT", "DistilBERT"]
    assert df["句对头"].tolist()[:4] == ["下一句预测 (NSP)", "无", "句序预测 (SOP)", "无"]
    assert "双向 Transformer 编码器" in df["核心思想"][0]
    links = [p.proto.label for p in at.get("page_link")]
    assert any(link.startswith("**完形填空（Fill-mask）** —— 预测被遮盖的词") for link in links), links
    assert any("仅有 CPU" in i.value or "GPU" in i.value for i in list(at.info) + list(at.success))


def test_home_page_links_have_their_help(use_tiny_zoo):
    at = _app()
    links = [p.proto.label for p in at.get("page_link")]
    from core.registry import official_checkpoints

    n = len(official_checkpoints())
    assert (
        f"**Models** — Parameter anatomy of the {n} official checkpoints, computed from their configs; "
        "ALBERT's factorization." in links
    )


def test_models_page_link_report_and_chinese(use_tiny_zoo):
    at = _open("models", {"models.V": "50000", "models.E": "256"})
    assert at.number_input(key="models.V").value == 50000 and at.number_input(key="models.E").value == 256
    assert [m.value for m in at.metric][:2] == ["38.40M", "13.00M"]
    titles = [e.title for e in _entries(at)]
    assert titles == [
        "Parameter breakdown of the official checkpoints",
        "ALBERT's factorized embeddings",
        "GLUE: the article's figures (claims) and what this installation measured",
    ]
    breakdown = _entries(at)[0]
    from core.registry import official_checkpoints

    assert len(breakdown.rows) == len(official_checkpoints()) and len(breakdown.figures) == 1
    assert _entries(at)[1].inputs == {"V (vocabulary)": "50000", "H (hidden size)": "768", "E (embedding size)": "256"}
    at.run()
    assert len(_entries(at)) == 3  # shown again, not recorded again
    bad = _open("models", {"models.H": "0"})
    assert "not valid here" in " ".join(w.value for w in bad.warning)
    assert bad.number_input(key="models.H").value == 768
    zh = _open("models", state={"ui.lang": "zh"})
    assert zh.title[0].value == "模型结构"
    assert "仅为原来的 1/" in zh.metric[2].value
    arch = zh.dataframe[1].value
    assert arch["层间共享"].tolist().count("是（只有一层，反复使用）") == 3  # the three ALBERTs


def test_speed_page_link_restores_without_measuring(use_tiny_zoo):
    before = len(runner().jobs())
    at = _open("speed", {"speed.seq": "32", "speed.batch": "2", "speed.reps": "3", "speed.families": "bert,albert"})
    assert at.select_slider(key="speed.seq").value == 32 and at.select_slider(key="speed.batch").value == 2
    assert at.number_input(key="speed.reps").value == 3
    assert at.multiselect(key="speed.families").value == ["bert", "albert"]
    assert len(runner().jobs()) == before  # a link never starts a measurement
    bad = _open("speed", {"speed.seq": "100", "speed.families": "bert,gpt2"})
    notice = " ".join(w.value for w in bad.warning)
    assert "speed.seq" in notice and "speed.families" in notice
    assert bad.select_slider(key="speed.seq").value == 128
    from core.compare.speed import SpeedConfig

    assert bad.multiselect(key="speed.families").value == list(SpeedConfig.families)


def test_foundation_pages_in_presenter_view(use_tiny_zoo):
    for name in ("home", "models", "speed"):
        at = _open(name, state={"ui.present": True})
        assert not at.exception, (name, at.exception)
    assert "Settings" in [e.label for e in at.main.expander]  # Speed's shape, folded away
    zh = _open("speed", state={"ui.lang": "zh"})
    assert zh.title[0].value == "速度" and any("开始测量" in i.value for i in zh.info)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_custom_checkpoint_too_long_for_a_file_name_gets_a_message_not_a_traceback(use_tiny_zoo, lang):
    """The third walk (#46): a custom checkpoint of about 300 characters replaced every page with
    ``OSError: [Errno 36] File name too long`` and a traceback, in English and 中文."""
    from app.kit import i18n
    from app.kit.model_choice import CUSTOM_OPTION

    at = AppTest.from_file(MAIN, default_timeout=120)
    at.session_state[i18n.LANG_KEY] = lang
    at.run()
    at.sidebar.selectbox(key="sidebar.checkpoint").set_value(CUSTOM_OPTION).run()
    at.sidebar.text_input(key="sidebar.custom").set_value("x" * 300).run()
    assert not at.exception, at.exception
    said = " ".join(w.value for w in at.sidebar.warning)
    assert ("300 characters long" if lang == "en" else "300 个字符") in said
    assert "Errno" not in said and "x" * 201 not in said
    at.switch_page(page_path("fill_mask")).run()
    assert not at.exception, at.exception
    assert at.main.error and "Errno" not in " ".join(e.value for e in [*at.main.error, *at.sidebar.error])
