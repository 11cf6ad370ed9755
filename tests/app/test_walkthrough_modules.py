"""The walkthrough package's shape: one module per step, imports that run one way (common <- step_* <- frame), each
step module importable on its own in a fresh interpreter, no family name written in it, and the checks that
tests/app/test_i18n.py and test_presenter_charts.py make on app/*.py applied to app/views/start/walkthrough/*.py too."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app.test_i18n import _func_name, hard_coded
from tests.app.test_presenter_charts import _unscaled

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "app" / "views" / "start" / "walkthrough"
CHECKS = ROOT / "core" / "walkthrough" / "checks.py"
MODULES = sorted(p.stem for p in PKG.glob("*.py") if p.stem != "__init__")
STEP_MODULES = [m for m in MODULES if m.startswith("step_")]
FILES = [*sorted(PKG.glob("*.py")), ROOT / "pages" / "walkthrough.py", CHECKS]
# the names the open issue forbids outside core/registry/, the families it adds included
FAMILY_NAMES = {"bert", "roberta", "albert", "distilbert", "xlm-roberta", "xlm_roberta", "electra", "modernbert"}


def _package_imports(path: Path) -> set[str]:
    """Modules of app.views.start.walkthrough that ``path`` imports (by name, without the package prefix)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "app.views.start.walkthrough":
                out |= {a.name for a in node.names}
            elif node.module.startswith("app.views.start.walkthrough."):
                out.add(node.module.split(".")[4])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[4] for a in node.names if a.name.startswith("app.views.start.walkthrough.")}
    return out


def test_old_modules_are_gone_and_every_step_has_its_module():
    assert not (ROOT / "app" / "walkthrough.py").exists() and not (ROOT / "app" / "walkthrough_steps.py").exists()
    from app.views.start.walkthrough import frame

    assert [s.number for s in frame.STEPS] == list(range(1, len(STEP_MODULES) + 1))
    assert len(frame.STEPS) == len(STEP_MODULES) == 7


def test_imports_run_one_way_with_no_cycle():
    graph = {m: _package_imports(PKG / f"{m}.py") for m in MODULES}
    assert _package_imports(PKG / "__init__.py") == set(), "the package's __init__ must import none of its modules"
    assert graph["common"] == set()
    for m in STEP_MODULES:
        assert graph[m] <= {"common"}, f"{m} imports {graph[m] - {'common'}}: a step may import only common"
    assert set(STEP_MODULES) <= graph["frame"]
    # and no cycle at all (depth-first search)
    state: dict[str, int] = {}

    def visit(m: str, path: tuple[str, ...]) -> None:
        assert state.get(m) != 1, f"import cycle: {' -> '.join(path + (m,))}"
        if state.get(m) == 2:
            return
        state[m] = 1
        for n in graph.get(m, ()):
            visit(n, path + (m,))
        state[m] = 2

    for m in graph:
        visit(m, ())


def test_the_cycle_check_sees_a_cycle(tmp_path):
    a = tmp_path / "a.py"
    a.write_text(
        "from app.views.start.walkthrough.frame import STEPS\nfrom app.views.start.walkthrough import common, step_mlm\n"
    )
    assert _package_imports(a) == {"frame", "common", "step_mlm"}


@pytest.mark.slow
@pytest.mark.timeout(600)  # a fresh interpreter per step module, each with a 120 s guard of its own
def test_each_step_module_imports_on_its_own_in_a_fresh_interpreter():
    code = (
        "import importlib, sys\n"
        "m = importlib.import_module(sys.argv[1])\n"
        "assert m.STEP.number >= 1 and callable(m.STEP.render)\n"
    )
    for m in STEP_MODULES:
        r = subprocess.run(
            [sys.executable, "-c", code, f"app.views.start.walkthrough.{m}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, f"{m}: {r.stderr[-2000:]}"


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }


def family_literals(path: Path) -> list[str]:
    """String constants (docstrings aside) that are a family name or hold an official checkpoint id."""
    from core.registry import FAMILIES, official_checkpoints

    names = FAMILY_NAMES | set(FAMILIES)
    ids = {c.id.lower() for c in official_checkpoints()}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            v = node.value.lower()
            if v.strip(" |") in names or any(i in v for i in ids):
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    return found


def test_no_family_name_is_written_in_the_walkthrough():
    found = [f for p in FILES for f in family_literals(p)]
    assert not found, "family names written in the walkthrough instead of asked of core.registry:\n" + "\n".join(found)


def test_the_family_check_sees_a_name_and_a_checkpoint_but_not_a_docstring(tmp_path):
    p = tmp_path / "p.py"
    p.write_text(
        '"""BERT and bert are prose here."""\nA = ("bert", "albert")\nB = ["bert-base-uncased"]\n'
        'C = "distilbert|"\nD = "Bert"\n',
        encoding="utf-8",
    )
    assert sorted(f.split(":")[1] for f in family_literals(p)) == ["2", "2", "3", "4", "5"]


def test_no_ui_string_is_written_in_the_package_and_every_chart_is_scaled():
    found = [f for p in FILES if p != CHECKS for f in hard_coded(p)]
    assert not found, "UI strings written in the code instead of assets/i18n:\n" + "\n".join(found)
    unscaled = [f"{p.name}: {a}" for p in FILES for a in _unscaled(p.read_text(encoding="utf-8"))]
    assert not unscaled, unscaled


def test_every_key_the_package_asks_for_exists():
    from app.kit.i18n import catalog

    cat = catalog()
    missing = []
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _func_name(node)[1] in ("t", "t_or") and node.args:
                a = node.args[0]
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value not in cat:
                    missing.append(a.value)
                elif (
                    isinstance(a, ast.JoinedStr)
                    and a.values
                    and isinstance(a.values[0], ast.Constant)
                    and not any(k.startswith(a.values[0].value) for k in cat)
                ):
                    missing.append(a.values[0].value + "…")
    assert not missing, missing
    from app.views.start.walkthrough import frame

    for s in frame.STEPS:  # every step's texts, and its check question with the answer among the options
        for part in ("short", "title", "explain", "try", "q", "answer", *(f"opt{j}" for j in range(frame.N_OPTIONS))):
            assert f"walkthrough.s{s.number}.{part}" in cat, (s.number, part)
        assert 0 <= s.correct < frame.N_OPTIONS


def test_step_links_name_pages_of_the_navigation_and_fields_are_unique():
    from app import nav
    from app.views.start.walkthrough import frame

    urls = {p.url for p in nav.PAGES}
    for s in frame.STEPS:
        assert s.links and set(s.links) <= urls, (s.number, set(s.links) - urls)
        assert {url for url, _, _ in s.deep_links} <= urls, s.number
    names = [f.name for f in frame.fields()]
    assert len(names) == len(set(names))
    assert all(k in frame.KEEP for f in frame.fields() for k in (f.key,) if f.key != frame.STEP)
