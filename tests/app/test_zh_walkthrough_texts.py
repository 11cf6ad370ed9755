"""The Walkthrough in 中文 with the bundled Chinese-capable model (encoderlab/xlmr-e5-small) names that model's
own special tokens (<mask>, <s>, </s>) instead of BERT's, draws step 2's fill-mask result, and gives Chinese
guidance in step 7. Texts: assets/i18n/walkthrough.toml (s2.zh_*, s7.zh_*).

The model is loaded once per process through the app's cache (as in test_zh_bundled_model.py); nothing here reads
what its MLM head predicts (it may be untrained)."""

from __future__ import annotations

import json

import pytest

from app.kit.i18n import catalog
from tests.app.conftest import open_page

XLMR = "encoderlab/xlmr-e5-small"
ZH = {"family": "xlm-roberta", "model": XLMR, "lang": "zh"}
pytestmark = pytest.mark.xdist_group("xlmr_e5")  # one worker loads the 12-layer model


def zh(key: str, **kw) -> str:
    return catalog()[key]["zh"].format(**kw) if kw else catalog()[key]["zh"]


def _step(n: int, **params):
    at = open_page("walkthrough", {**ZH, "walkthrough.step": str(n), **params})
    assert not at.exception, at.exception
    return at


def test_step2_names_the_loaded_tokenizers_mask_token():
    at = _step(2)
    labels = [m.label for m in at.metric]
    assert zh("walkthrough.s2.zh_m_mask", token="<mask>") in labels, labels
    assert not any("[MASK]" in label for label in labels), labels
    # the chips' hovers (mask 1 of this sentence masks a token) and the note tying the text's [MASK] to <mask>
    chips = [m.value for m in at.markdown if "encoderlab-tokens" in m.value]
    assert chips and not any("[MASK]" in c for c in chips)
    assert any("→ &lt;mask&gt;" in c for c in chips), chips
    assert zh("walkthrough.s2.zh_mask_note", id=XLMR, token="<mask>") in [c.value for c in at.caption]
    # the check question's options name it too
    options = at.radio(key="walkthrough.q2").options
    assert options[0] == zh("walkthrough.s2.zh_opt0", token="<mask>") and not any("[MASK]" in o for o in options)


def test_step2_fill_mask_draws_its_bars_above_the_caption():
    """The area between the word picker and the caption is the fill-mask chart: one subplot per piece of the
    chosen 词, each with its top-5 bars (in the browser it is blank only until Plotly has painted it)."""
    at = _step(2)
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    spec = json.loads(charts[0].proto.spec)
    bars = [tr for tr in spec["data"] if tr["type"] == "bar"]
    assert bars and all(len(tr["x"]) == 5 and all(p > 0 for p in tr["x"]) for tr in bars), bars
    before = zh("walkthrough.s2.fill_caption", word="词语", n=len(bars), ranks="|").split("|")[0]
    assert any(c.value.startswith(before) for c in at.caption), [c.value for c in at.caption]


def test_step7_gives_chinese_guidance_for_a_model_that_reads_chinese():
    at = _step(7, **{"walkthrough.s7.source": "sidebar"})
    box = at.text_input(key="walkthrough.s7.text")
    assert box.label == zh("walkthrough.s7.zh_text_zh", id=XLMR) and "英文" not in box.label
    hint = next(i.value for i in at.info if "逐层透镜" in i.value)
    assert "“行”" in hint and "light" not in hint
    assert "<mask>" in hint and "</s>" in hint and "[CLS]" not in hint and "[MASK]" not in hint
    assert at.radio(key="walkthrough.q7").label == zh("walkthrough.s7.zh_q", sep="</s>")
    heat = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert heat["layout"]["title"]["text"] == zh("walkthrough.s7.zh_heat_title_mean", layer=12)


def test_step4_pair_noise_names_the_sidebars_checkpoint_list_in_chinese():
    at = _step(4)
    notes = [w.value for w in at.warning if "SOP" in w.value]
    assert notes and all("Checkpoint" not in n for n in notes), notes
    assert any("侧边栏的“检查点”列表" in n for n in notes), notes
