"""The Dockerfile and .dockerignore, checked on a machine without a Docker engine: what can be read from the files.

A build and a GPU run are not checked here (no engine, no GPU); scripts/gpu_check.sh covers the GPU side.
"""
from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The CUDA versions PyTorch builds torch 2.12-2.14 for (its release support matrix), with the wheel index of each.
TORCH_CUDA = {"12.6": "cu126", "13.0": "cu130", "13.2": "cu132"}


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out, cur = [], ""
    for line in text.splitlines():
        s = line.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        if s.startswith("#"):
            continue
        cur += " " + s.rstrip("\\").strip() if cur else s.rstrip("\\").strip()
        if not s.endswith("\\"):
            word, _, rest = cur.partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


@pytest.fixture(scope="module")
def docker() -> dict:
    ins = _instructions((ROOT / "Dockerfile").read_text())
    args = {}
    for word, rest in ins:
        if word == "ARG" and "=" in rest:
            k, v = rest.split("=", 1)
            args.setdefault(k.strip(), v.strip())
    return {"ins": ins, "args": args}


def _expand(s: str, args: dict) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), s)


def _runs(docker) -> str:
    return "\n".join(_expand(r, docker["args"]) for w, r in docker["ins"] if w == "RUN")


def test_base_image_is_a_cuda_base_image_torch_2_13_is_built_for(docker):
    froms = [_expand(r, docker["args"]) for w, r in docker["ins"] if w == "FROM"]
    assert len(froms) == 1, froms
    m = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.(\d+)-base-ubuntu(\d+\.\d+)", froms[0])
    assert m, f"not a CUDA -base- image: {froms[0]}"
    cuda = f"{m.group(1)}.{m.group(2)}"
    assert cuda in TORCH_CUDA, f"torch 2.13 has no CUDA {cuda} build (it has {', '.join(TORCH_CUDA)})"
    # The torch index must be the same CUDA as the base image.
    idx = re.findall(r"download\.pytorch\.org/whl/(\w+)", _runs(docker))
    assert idx == [TORCH_CUDA[cuda]], (idx, cuda)
    assert "cudnn" not in froms[0]  # the wheel brings its own cuDNN


def test_torch_in_the_image_is_the_pinned_version(docker):
    pin = re.search(r"^torch==([\w.]+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert f"torch=={pin} " in _runs(docker)
    assert "-r requirements.txt" in _runs(docker)


def test_the_uid_1000_user_of_ubuntu_24_04_is_removed_before_app_takes_it(docker):
    runs = _runs(docker)
    add = runs.find("useradd")
    assert add >= 0
    uid = re.search(r"useradd[^&]*--uid (\d+)", runs)
    if uid and uid.group(1) == "1000":
        delete = runs.find("userdel --remove ubuntu")
        assert 0 <= delete < add, "Ubuntu 24.04 images have user ubuntu with UID 1000: remove it first"
    users = [r for w, r in docker["ins"] if w == "USER"]
    assert users == ["app"]  # runs as non-root


def test_headless_chrome_libraries_include_cairo(docker):
    apt = next(r for r in _runs(docker).splitlines() if "apt-get install" in r)
    for lib in ("libcairo2", "libnss3", "libpango-1.0-0", "libgbm1", "fonts-noto-cjk"):
        assert re.search(rf"(^|\s){re.escape(lib)}(\s|$)", apt), lib


def test_healthcheck_and_port(docker):
    words = {w for w, _ in docker["ins"]}
    assert {"HEALTHCHECK", "EXPOSE", "CMD"} <= words
    assert "/_stcore/health" in next(r for w, r in docker["ins"] if w == "HEALTHCHECK")


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule, enough for these patterns: a path is out when it or a parent folder matches a pattern."""
    parts = path.split("/")
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        for p in patterns:
            p = p.rstrip("/")
            if fnmatch.fnmatch(sub, p) or (p.startswith("**/") and fnmatch.fnmatch(parts[i - 1], p[3:])):
                return True
    return False


def test_dockerignore_keeps_history_environments_and_run_folders_out():
    patterns = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    assert not any(p.startswith("!") for p in patterns)
    for out in (".git/HEAD", ".venv/bin/python", "runs/x/model.safetensors", "core/__pycache__/models.cpython-312.pyc",
                "tests/e2e/screenshots/home.png", ".pytest_cache/v"):
        assert _ignored(out, patterns), out
    for keep in ("app/main.py", "core/models.py", "requirements.txt", "assets/models/bert-mini/config.json",
                 ".streamlit/config.toml", "assets/i18n/home.toml"):
        assert not _ignored(keep, patterns), keep
