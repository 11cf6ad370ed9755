"""The README's relative links point at files a fresh clone has (no ../shared, nothing outside the repo)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _relative_links(text: str) -> list[str]:
    return [m for m in LINK.findall(text) if not re.match(r"[a-z]+:", m)]


def test_readme_relative_links_resolve_inside_the_repo():
    links = _relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert links, "the README should link its docs"
    for link in links:
        target = (ROOT / link).resolve()
        assert ROOT in target.parents or target == ROOT, f"README links {link}, outside the repository"
        assert target.exists(), f"README links {link}, which a clone does not have"


def test_architecture_document_is_in_the_repo():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "core/ never imports streamlit" in text


def test_link_check_catches_a_link_outside_the_repo():
    assert _relative_links("see [x](../shared/docs/architecture.md) and [y](https://example.org)") == [
        "../shared/docs/architecture.md"]
