"""Core's messages carry a kind and params, and both languages of every kind live in assets/i18n/errors.toml.

- every kind in errors.toml has en and zh (real Chinese) with the same placeholders: tests/app/test_i18n.py checks
  it, with every other catalogue of assets/i18n, through core.base.messages.read_catalogue;
- every kind core asks for (msg("...") over the AST of core/) exists there;
- str(err) stays English (the CLI, logs and older tests read it), and a Message survives a process hop (pickle);
- fill-mask's notes (unknown pieces reaching the model as [UNK], CJK text) are messages with kinds, not bare strings.
"""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest

from core.base.messages import Message, carry, message_of, msg, templates
from core.predict.fill_mask import FillMaskConfig, FillMaskError, _script_notes

ROOT = Path(__file__).resolve().parents[2]


def kinds_used_in_core() -> dict[str, str]:
    """kind -> where, for every msg("kind", ...) / Message("kind", ...) with a literal kind in core/ (both branches
    of a conditional kind count)."""
    out: dict[str, str] = {}
    for path in sorted((ROOT / "core").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("msg", "Message")
                and node.args
            ):
                a = node.args[0]
                options = [a.body, a.orelse] if isinstance(a, ast.IfExp) else [a]
                for o in options:
                    if isinstance(o, ast.Constant) and isinstance(o.value, str):
                        out[o.value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return out


def test_every_kind_core_uses_exists():
    used = kinds_used_in_core()
    assert len(used) > 300  # the scan finds the converted raise sites
    missing = {k: where for k, where in used.items() if k not in templates()}
    assert not missing, f"kinds used in core but not in assets/i18n/errors.toml: {missing}"


def test_the_scan_sees_both_branches_of_a_conditional_kind():
    used = kinds_used_in_core()
    assert {"fields.whole_out_of_range", "fields.not_a_number", "finetune.lr_too_high", "finetune.lr_too_low"} <= set(
        used
    )


def test_str_of_an_error_stays_english_and_keeps_kind_and_params():
    with pytest.raises(ValueError) as info:
        FillMaskConfig("no mask here")
    err = info.value
    assert str(err).startswith("The text has no [MASK].")
    m = message_of(err)
    assert isinstance(m, Message) and m.kind == "fill_mask.no_mask_in_text" and m.params == {}
    e2 = FillMaskError(msg("fill_mask.too_many_masks", n_positions=9, max_masks=8))
    assert (e2.kind, e2.params) == ("fill_mask.too_many_masks", {"n_positions": 9, "max_masks": 8})
    assert str(e2) == "The text has 9 masks; at most 8 are allowed."


def test_a_message_survives_pickle_and_a_wrapping_error():
    m = msg("fill_mask.no_such_word", word=7, n_ws=3)
    back = pickle.loads(pickle.dumps(FillMaskError(m)))
    assert back.kind == "fill_mask.no_such_word" and back.params == {"word": 7, "n_ws": 3}
    assert carry(back) == m and isinstance(carry(back), Message)
    assert carry(ValueError("plain")) == "plain"


def test_an_unknown_kind_still_reads():
    assert "no.such.kind" in str(msg("no.such.kind", x=1))


class _Tok:
    unk_token = "[UNK]"


def test_fill_mask_tokenizer_notes_are_messages_with_kinds():
    """The walk's finding: the [UNK] and CJK notes stayed English in 中文; they are now messages with kinds."""
    text = "北京 ☃"
    pieces, offsets = ["北", "[UNK]", "[UNK]"], [(0, 1), (1, 2), (3, 4)]
    notes = _script_notes(text, pieces, offsets, _Tok())
    kinds = [n.kind for n in notes]
    assert kinds == ["fill_mask.note_unknown_pieces", "fill_mask.note_cjk"], notes
    assert notes[0].startswith("2 piece(s) are unknown to this tokenizer and reach the model as [UNK]")


# A kind's name says what its message means: a message whose first clause says no/not/never/… has a name that says
# it too. The kinds were once made from the English by dropping stop words, which dropped "no" and "not"
# (has_trained_mlm_head for "… has no trained MLM head"): 82 of them read as the opposite of their text.
NEGATION = re.compile(
    r"\b(no|not|never|nothing|none|nobody|cannot|can't|\w+n't|without|unknown|empty|missing|lacks?|absent)\b", re.I
)
NEGATION_IN_NAME = re.compile(
    r"(^|[_.])(no|not|never|nothing|none|cannot|cant|without|unknown|empty|missing|unavailable|un[a-z]+|too|refused"
    r"|fails?|failed|only|mismatch|differs?|wrong|off|negative|out|absent|bad)([_.]|$)"
)
# kinds whose first clause negates in passing: the name says the point, the negation is its consequence
INCIDENTAL_NEGATION = {
    "fill_mask.removed_specials": "the note says what was removed; 'nothing else' is the advice",
    "attribution.about.ixg": "a method's description ('no baseline' is one of its traits)",
    "probes.lengths_all_same": "the cause (all lengths the same); 'nothing to tell apart' is its consequence",
    "data.single_example_classes": "the cause (a class with one example); 'cannot be in both splits' follows",
    "corpus.looks_like_binary_file": "'binary, not text': the name says binary",
    "load.tried.looks_like_path": "the cause (a path); 'the Hub was not asked' follows",
}


def headline(text: str) -> str:
    """A message's first clause: up to the first '.', ':', ';', '?' or ' (' (a lead-in of placeholders only, like
    "{name}:", is skipped)."""
    for part in re.split(r"(?<=[^\s{])[.:;?](?:\s|$)|\s\(", text):
        if re.sub(r"\{[^}]*\}|\W", "", part):
            return part
    return text


def misread_kinds(entries: dict[str, dict[str, str]]) -> list[str]:
    """Kinds whose message says no/not/… up front while the name (after its namespace) does not."""
    return sorted(
        kind
        for kind, entry in entries.items()
        if NEGATION.search(headline(entry.get("en", ""))) and not NEGATION_IN_NAME.search(kind.split(".", 1)[-1])
    )


def test_kind_names_carry_their_messages_negation():
    bad = [k for k in misread_kinds(templates()) if k not in INCIDENTAL_NEGATION]
    assert not bad, f"{len(bad)} kinds read as the opposite of their text (add no_/not_/… to the name):\n" + "\n".join(
        f"{k}: {templates()[k]['en'][:80]}" for k in bad
    )
    assert set(INCIDENTAL_NEGATION) <= set(templates()), "the allow-list names kinds that no longer exist"


def test_the_kind_name_check_catches_the_old_names():
    """Old names, made by dropping stop words, are caught; their new names and plain negation-free kinds pass."""
    t = templates()
    renamed = {  # kind -> the name it had before issue #46 (its namespace left off)
        "fill_mask.no_trained_mlm_head": "has_trained_mlm_head",
        "fill_mask.no_mask_in_text": "text_has_mask_write",
        "lens.no_tuned_lens": "there_tuned_lens_model",
        "pair.no_rows_to_score": "rows_score",
    }
    old = {f"{kind.split('.')[0]}.{was}": t[kind] for kind, was in renamed.items()}
    assert misread_kinds(old) == sorted(old)
    new = {k: t[k] for k in [*renamed, "fill_mask.too_many_masks"]}
    assert misread_kinds(new) == []
    assert headline("{name__}: found 3 projections (inner groups are not supported).") == "found 3 projections"
