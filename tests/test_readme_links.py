"""The README and docs/*.md: every relative link (and image) points at a file a fresh clone has (no ../shared,
nothing outside the repo); the README stays short, opens on its two set-up commands and links every docs page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_MAX_BYTES = 12 * 1024
# [text](target) and ![alt](target); the target stops at whitespace (an optional "title" follows) or ")"
LINK = re.compile(r"\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


def _relative_links(text: str) -> list[str]:
    """Relative link targets, `#anchor` suffixes stripped; URLs (http:, mailto:, ...) and pure #anchors left out."""
    links = []
    for target in LINK.findall(text):
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue
        links.append(target.split("#", 1)[0])
    return links


def _broken_links(doc: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for link in _relative_links(doc.read_text(encoding="utf-8")):
        target = (doc.parent / link).resolve()
        name = doc.relative_to(root)
        if not (root in target.parents or target == root):
            problems.append(f"{name} links {link}, outside the repository")
        elif not target.exists():
            problems.append(f"{name} links {link}, which a clone does not have")
    return problems


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repo(doc: Path):
    assert _broken_links(doc) == []


def test_readme_links_its_docs():
    assert any(link.startswith("docs/") for link in _relative_links(README.read_text(encoding="utf-8")))


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (limit {README_MAX_BYTES})"


def test_readme_opens_on_make_run_and_make_test():
    blocks = FENCE.findall(README.read_text(encoding="utf-8"))
    assert blocks, "the README should open with a code block of its set-up commands"
    assert "make run" in blocks[0] and "make test" in blocks[0]


def test_readme_links_every_docs_page():
    linked = {(ROOT / link).resolve() for link in _relative_links(README.read_text(encoding="utf-8"))}
    assert [d.name for d in DOCS if d.resolve() not in linked] == []


def test_architecture_document_is_in_the_repo():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "core/ never imports streamlit" in text


def test_link_check_catches_a_link_outside_the_repo():
    assert _relative_links("see [x](../shared/docs/architecture.md) and [y](https://example.org)") == [
        "../shared/docs/architecture.md"
    ]


def test_link_check_reads_images_anchors_and_titles():
    text = '![a](docs/x.png) [b](docs/pages.md#pages) [c](#local) [d](mailto:a@b.c) [e](models.md "title")'
    assert _relative_links(text) == ["docs/x.png", "docs/pages.md", "models.md"]


def test_link_check_reports_a_missing_file(tmp_path):
    tmp_path = tmp_path.resolve()
    (tmp_path / "there.md").write_text("x", encoding="utf-8")
    doc = tmp_path / "README.md"
    doc.write_text("[ok](there.md) [gone](missing.md) ![out](../outside.png)", encoding="utf-8")
    assert _broken_links(doc, tmp_path) == [
        "README.md links missing.md, which a clone does not have",
        "README.md links ../outside.png, outside the repository",
    ]


CODE_PATH = re.compile(r"(?<![\w./-])((?:core|app|pages|bench|tests|scripts)/[\w./-]*\w)")


def _missing_code_paths(text: str, root: Path = ROOT) -> list[str]:
    """Paths into the code (core/x.py, app/kit/, bench/speed.py ...) a page names that the checkout lacks (a
    name without a suffix may be a module written without .py)."""
    return sorted({p for p in CODE_PATH.findall(text) if not (root / p).exists() and not (root / f"{p}.py").exists()})


@pytest.mark.parametrize("doc", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_code_paths_named_in_the_docs_exist(doc: Path):
    """The docs describe the code as it is: a module they name that moved or went is a stale sentence."""
    assert _missing_code_paths(doc.read_text(encoding="utf-8")) == []


def test_code_path_check_reports_a_moved_module():
    assert _missing_code_paths("see core/models/loading.py, core/walkthrough_checks.py and app/kit/") == [
        "core/walkthrough_checks.py"
    ]
