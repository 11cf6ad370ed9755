"""A job's progress lines and status are Messages (#46 §1: "English that still reaches 中文").

Core reports a job's progress with ``ctx.progress(fraction, message)`` (or an ``on_progress`` / ``progress`` /
``report`` callable handed down to the work), and the job panel (app/kit/jobs_panel.py) writes the message in the
session's language (app.kit.i18n.explain). A written-out English text there reached a 中文 session as it was:

- no call named progress / on_progress / report in core/ passes an English text (a string literal or an f-string of
  two or more words, or one glued on with +) as a positional argument or as ``message=``; it passes
  ``msg("progress.<what>", **params)`` (assets/i18n/errors.toml) instead;
- no ``<job>.message = "..."`` in core/ sets a job's status line as text (core.runtime.jobs: queued, starting, done,
  failed, cancelled are Messages; code compares ``job.status``, never this text);
- the attribution methods' names in those lines (attribution.method_name.<key>) exist for every method, their
  English the registry's label.

tests/app/test_zh_progress_messages.py runs real jobs and reads their lines in 中文.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from core.base.messages import templates
from core.inspect.attribution_methods import METHODS

ROOT = Path(__file__).resolve().parents[2]
PROGRESS_CALLS = ("progress", "on_progress", "report")
WORD = re.compile(r"[A-Za-z]")


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _text(node: ast.expr) -> str | None:
    """The text a literal, an f-string (each {...} written "{x}", a word) or a + of them writes; None for anything
    else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{x}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is not None or right is not None:
            return f"{left if left is not None else '{x}'}{right if right is not None else '{x}'}"
    return None


def _words(text: str) -> int:
    return sum(1 for token in text.split() if WORD.search(token))


def english_progress(source: str, where: str = "<snippet>") -> list[str]:
    """Every place in ``source`` that hands a progress callable written-out English, or sets a ``.message`` (a job's
    status line) to a text: "where:line: the text"."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _name(node.func) in PROGRESS_CALLS:
            args = [*node.args, *(kw.value for kw in node.keywords if kw.arg == "message")]
            for a in args:
                text = _text(a)
                if text is not None and _words(text) >= 2:
                    found.append((node.lineno, f"{_name(node.func)}(… {text.strip()!r} …)"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                pairs = (
                    list(zip(target.elts, node.value.elts))
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    else [(target, node.value)]
                )
                for t, v in pairs:
                    text = None if v is None else _text(v)
                    if isinstance(t, ast.Attribute) and t.attr == "message" and text and text.strip():
                        found.append((node.lineno, f".message = {text.strip()!r}"))
    return [f"{where}:{line}: {what}" for line, what in sorted(found)]


def test_core_hands_its_progress_lines_over_as_messages():
    found = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        found += english_progress(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, (
        "progress written out in English reaches a 中文 session as it is: pass msg('progress.<what>', **params) "
        "with the template in assets/i18n/errors.toml instead:\n" + "\n".join(found)
    )


def test_the_check_catches_english_and_lets_messages_through():
    caught = [
        'ctx.progress(0.1, f"step {i} of {n}")',
        'on_progress(0.5, "loading a fresh copy of the model")',
        'report(f"{done}/{total} pairs")',
        'self.report(0.2, message="building the index")',
        'report(0.3, "reading: " + inner)',
        'job.message = "starting"',
        'job.status, job.message = RUNNING, "done"',
        'job.message = f"waiting for a node with a free {r}"',
    ]
    for snippet in caught:
        assert english_progress(snippet), snippet
    passed = [
        'ctx.progress(0.1, msg("progress.x"))',
        'ctx.progress(0.1, msg("progress.step", step=i, total=n), step=i)',
        'on_progress(1.0, "")',
        "report(0.3, inner)",
        'job.message = msg("progress.starting")',
        'self.fraction, self.message = 0.0, ""',
        'print(0.1, "not a progress call")',
    ]
    for snippet in passed:
        assert not english_progress(snippet), snippet


def test_every_attribution_method_has_its_name_in_both_languages():
    """core.inspect.attribution.method_name(key): the kind of each method, whose English is the registry's label."""
    for key, method in METHODS.items():
        entry = templates().get(f"attribution.method_name.{key}")
        assert entry is not None, key
        assert entry["en"] == method.label, (key, entry["en"], method.label)
