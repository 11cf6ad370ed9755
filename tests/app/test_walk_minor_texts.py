"""#46 §5, 15: small wording found by the browser walk. The message that asks to untick the sentence-pair box names
the box as it is labelled (句对, not 句子对); walkthrough steps 3-4 do not tell a person offline to pick a Hub model
the sidebar cannot offer; Join with an empty room code says what is missing; one room sentence is "1 sentence"."""

from __future__ import annotations

import json

from app.kit.i18n import catalog
from app.room import session as room_session
from core.base.messages import templates
from core.registry import bundled_families
from tests.app.conftest import click, open_page, page_path


def test_the_untick_message_names_the_pair_box_as_it_is_labelled():
    label = catalog()["attention.pair"]
    message = templates()["attention.sentence_b_empty_type"]
    assert f"“{label['zh']}”" in message["zh"], (label["zh"], message["zh"])
    assert f"'{label['en']}'" in message["en"]


def test_the_pair_head_hint_does_not_offer_a_hub_model_the_hub_cannot_give(tmp_path, monkeypatch):
    """Downloads allowed but no network: the full checkpoint cannot be had, so the hint says it needs the Hub
    instead of 'pick it in the sidebar's list' (the list does not offer it: core.models.downloads.can_have_now)."""
    from app.views.start.walkthrough.common import noise_hint
    from core.models import downloads, loading
    from core.walkthrough.checks import unlearned_pair_head

    fam = next(f for f in bundled_families() if f.pair_head is not None and f.checkpoints)
    folder = tmp_path / "zoo" / fam.bundled
    folder.mkdir(parents=True)
    card = {"family": fam.key, "heldout": {"pair_acc": 0.47, "pair_majority": 0.53, "pairs": 600}}
    (folder / "encoderlab_card.json").write_text(json.dumps(card))
    monkeypatch.setenv("ENCODERLAB_ZOO", str(tmp_path / "zoo"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("ENCODERLAB_ALLOW_DOWNLOAD", "1")
    monkeypatch.setattr(loading, "_cached_snapshot", lambda repo_id: None)  # nothing in the HF cache
    monkeypatch.setattr(downloads, "hub_reachable_recently", lambda ttl=0: False)
    note = unlearned_pair_head(f"encoderlab/{fam.bundled}", fam.pair_head)
    assert note is not None and note.full == fam.checkpoints[0].id and not note.full_here
    hint = noise_hint(note)
    assert note.full in hint and "cannot be had here now" in hint and "Hugging Face Hub" in hint
    monkeypatch.setattr(downloads, "hub_reachable_recently", lambda ttl=0: True)  # the Hub answers: pick it
    assert unlearned_pair_head(f"encoderlab/{fam.bundled}", fam.pair_head).full_here


def test_join_with_an_empty_code_says_what_is_missing(use_tiny_zoo):
    at = open_page(None)
    at.sidebar.text_input(key=room_session.JOIN_INPUT).set_value("  ")
    click(at, "Join")
    warnings = [w.value for w in at.warning]
    assert any("Type the room code first" in w for w in warnings), warnings
    assert "room" not in at.query_params and room_session.CODE not in at.session_state


def test_one_room_sentence_is_one_sentence(use_tiny_zoo):
    pres = open_page(None, params={"present": "1"})
    click(pres, "Start a room")
    pres.switch_page(page_path("fill_mask")).run()
    pres.toggle(key="room.collect_toggle").set_value(True).run()
    follower = open_page(None, params={"room": pres.session_state[room_session.CODE]})
    follower.text_input(key=room_session.SENTENCE).set_value("Paris is the [MASK] of France.")
    click(follower, "Send to the room")
    pres.run()
    captions = [c.value for c in pres.caption]
    assert "1 sentence" in captions and not any("1 sentences" in c for c in captions), captions


def test_step_one_table_writes_pieces_as_its_chart_does():
    """#46 (third walk 6): the step-1 table showed a raw "▁" where its chart showed "␣"; the table writes each piece as
    the chart does (core.base.text.display_piece) and keeps the tokenizer's own piece in a column beside it."""
    at = open_page("walkthrough", {"family": "xlm-roberta", "model": "encoderlab/xlmr-e5-small"})
    assert not at.exception, at.exception
    df = at.dataframe[0].value
    shown, raw = (
        list(df[catalog()["walkthrough.s1.col.token"]["en"]]),
        list(df[catalog()["walkthrough.s1.col.raw"]["en"]]),
    )
    assert any("▁" in p for p in raw), raw  # SentencePiece pieces carry the marker
    assert not any("▁" in p for p in shown), shown
