"""Every chart a page draws goes through presenter.scale, so presenter view's projector-size fonts reach all of
them (the charts are the content), not only the pages that remembered to."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CALL = re.compile(r"\.plotly_chart\(\s*(?P<arg>[^\n]{0,40})")


def _unscaled(text: str) -> list[str]:
    return [m.group("arg") for m in CALL.finditer(text) if not m.group("arg").startswith("presenter.scale(")]


def test_every_plotly_chart_call_is_scaled_for_presenter_view():
    missing = []
    for path in sorted([*ROOT.glob("app/**/*.py"), *ROOT.glob("pages/*.py")]):
        missing += [f"{path.relative_to(ROOT)}: {arg}" for arg in _unscaled(path.read_text(encoding="utf-8"))]
    assert not missing, "charts drawn without presenter.scale:\n" + "\n".join(missing)


def test_the_check_sees_an_unscaled_call():
    assert _unscaled("st.plotly_chart(fig, key='a')\nst.plotly_chart(presenter.scale(fig))") == ["fig, key='a')"]
