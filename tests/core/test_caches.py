"""core.base.caches: every process-level cache in core registers its clear, and reset_caches() empties them all."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from core.base import caches
from core.base.caches import reset_caches

ROOT = Path(__file__).resolve().parents[2]
# module-level tables in core that are not caches: they are never registered, each with its reason
NOT_CACHES = {
    ("core/inspect/ablation.py", "_LAYOUT"): "where a model's heads are, recorded with the hooks installed on it",
    ("core/inspect/ablation_predict.py", "_TAPS"): "the decoders a recording hook is installed on",
    ("core/inspect/tuned_lens.py", "_tuned_cls"): "the lazily built TunedLens class: a lens made before a reset "
    "must stay an instance of it",
}
CACHE_CALLS = {"lru_cache", "cache", "OrderedDict", "WeakKeyDictionary", "WeakValueDictionary"}


def _name(node: ast.AST) -> str:
    """The last name of a call's function or a decorator (functools.lru_cache(maxsize=2) -> lru_cache)."""
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def module_caches(source: str) -> set[str]:
    """Module-level caches of a module: functions decorated with lru_cache/cache, and module-level names assigned an
    OrderedDict or a weak dictionary."""
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_name(d) in {"lru_cache", "cache"} for d in node.decorator_list):
                found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            if _name(node.value) in CACHE_CALLS:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found.update(t.id for t in targets if isinstance(t, ast.Name))
    return found


def registered_in(source: str) -> str:
    """The source of what a module registers: its register_cache(...) calls and the functions they name."""
    tree = ast.parse(source)
    funcs = {n.name: ast.get_source_segment(source, n) for n in tree.body if isinstance(n, ast.FunctionDef)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node) == "register_cache":
            out.append(ast.get_source_segment(source, node))
            out.extend(funcs.get(getattr(a, "id", ""), "") for a in node.args)
    return "\n".join(out)


def test_every_core_cache_is_registered():
    missing = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        src = path.read_text(encoding="utf-8")
        reg = registered_in(src)
        missing += [
            f"{rel}: {name}" for name in sorted(module_caches(src)) if (rel, name) not in NOT_CACHES and name not in reg
        ]
    assert not missing, (
        "caches reset_caches() does not clear (register_cache them, or say in NOT_CACHES why not):\n"
        + "\n".join(missing)
    )


def test_the_registration_check_can_fail():
    src = "import functools\n\n@functools.lru_cache(maxsize=1)\ndef table():\n    return {}\n"
    assert module_caches(src) == {"table"} and "table" not in registered_in(src)
    src += "\n\nregister_cache(__name__, table.cache_clear)\n"
    assert "table" in registered_in(src)


def test_reset_caches_empties_what_core_remembered(tmp_path, monkeypatch):
    from core.base import messages, segment

    for m in ("core.represent.corpus_index", "core.inspect.tuned_lens", "core.predict.fill_mask"):
        importlib.import_module(m)
    assert {
        "core.base.messages",
        "core.base.segment",
        "core.models.downloads",
        "core.represent.corpus_index",
        "core.inspect.tuned_lens",
        "core.predict.fill_mask.han_pieces",
    } <= set(caches.registered())
    messages.templates()
    segment.han_words("我们在银行工作")
    assert messages.templates.cache_info().currsize == 1
    cleared = reset_caches()
    assert cleared == caches.registered()
    assert messages.templates.cache_info().currsize == 0
    assert messages.templates()  # read again on the next call
    assert segment.han_words("我们在银行工作")  # cut again on the next call


def test_register_replaces_an_owner_and_a_failing_clear_is_not_hidden():
    calls = []
    caches.register("tests.core.test_caches", lambda: calls.append(1))
    caches.register("tests.core.test_caches", lambda: calls.append(2))  # a reloaded module: its clear replaces
    try:
        reset_caches()
        assert calls == [2]

        def broken():
            raise RuntimeError("cannot clear")

        caches.register("tests.core.test_caches", broken)
        with pytest.raises(RuntimeError, match="cannot clear"):
            reset_caches()
    finally:
        caches.unregister("tests.core.test_caches")
    assert "tests.core.test_caches" not in caches.registered()
