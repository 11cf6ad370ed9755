"""core/base/text.py: the one empty-text and length-limit check the configs share, and that both configs use it."""

from __future__ import annotations

import pytest

from core.base import text as text_rules
from core.predict.fill_mask import FillMaskConfig
from core.predict.replaced_tokens import RtdConfig

HINTS = dict(empty_hint="Type something.", long_hint="Shorten it.")


@pytest.mark.parametrize("bad", ["", "   \n\t", None, 3])
def test_check_text_refuses_empty_or_non_text(bad):
    with pytest.raises(ValueError, match=r"^The text is empty\. Type something\.$"):
        text_rules.check_text(bad, max_chars=10, **HINTS)


def test_check_text_takes_the_lower_of_its_own_and_the_servers_limit(monkeypatch):
    monkeypatch.setenv("ENCODERLAB_MAX_TEXT_CHARS", "1000")
    assert text_rules.check_text("x" * 10, max_chars=10, **HINTS) == "x" * 10
    with pytest.raises(ValueError, match=r"^The text has 11 characters; the limit is 10\. Shorten it\.$"):
        text_rules.check_text("x" * 11, max_chars=10, **HINTS)
    monkeypatch.setenv("ENCODERLAB_MAX_TEXT_CHARS", "5")  # the server's limit is lower: it decides
    with pytest.raises(ValueError, match=r"the limit is 5\."):
        text_rules.check_text("x" * 6, max_chars=10, **HINTS)


def test_both_configs_run_the_shared_check(monkeypatch):
    seen = []
    real = text_rules.check_text

    def spy(text, **kw):
        seen.append(kw["max_chars"])
        return real(text, **kw)

    monkeypatch.setattr(text_rules, "check_text", spy)
    FillMaskConfig("A [MASK] here.")
    RtdConfig("A plain sentence.")
    assert len(seen) == 2
    monkeypatch.setenv("ENCODERLAB_MAX_TEXT_CHARS", "20")
    for make, hint in (
        (lambda t: FillMaskConfig(t), "Paste a shorter passage"),
        (lambda t: RtdConfig(t), "Paste a sentence or two"),
    ):
        with pytest.raises(ValueError, match=f"the limit is 20. {hint}"):
            make("word " * 10)
        with pytest.raises(ValueError, match="^The text is empty. Type a sentence"):
            make("  ")
