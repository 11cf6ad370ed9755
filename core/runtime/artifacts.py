"""One artifact cache: where a per-model cache lives, the key of a model's weights, and writing a cache folder (or
file) whole or not at all.

Every cache of saved results keyed by a model goes through here: tuned lenses (core.inspect.tuned_lens), corpus
indexes (core.represent.corpus_index) and probe results (core.represent.probes). Each names its own root (an
environment variable, default a "session" folder under <runs>, so core.runtime.run_folders.evict_run_folders bounds it
with the runs' size and age), its own folder layout and its own format constants.

Every folder ``write_folder`` writes records its files' sizes and CRC-32s (CHECKSUMS_FILE); a reader asks
``damaged_files`` before it trusts one, so a file cut short or overwritten in the middle is told apart from a good one
even where its format would load it (a safetensors or faiss file damaged past its header loads without a word). A
damaged folder is ``set_aside`` (renamed ``<name>.damaged``, bounded with the runs like the rest), so the reader's
error says so once and the next build writes a fresh one. ``read_errors()`` are what reading a damaged file raises.

``model_key(lm, tag)`` hashes ``f"{tag}|{family}"`` then the checkpoint's files. Every cache passes its own tag, so
bumping one cache's tag invalidates that cache only. Today all three pass "lens1": the key was the tuned lens's
(``f"lens{LENS_FORMAT}"``, LENS_FORMAT = 1) before the caches had tags of their own, and keeping "lens1" keeps every
saved artifact's key and folder name byte-identical. (The tuned lens derives its tag from LENS_FORMAT; the corpus
index and the probes hold theirs as a plain constant, MODEL_KEY_TAG, that no longer moves with LENS_FORMAT.)
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import threading
import weakref
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.base.caches import register as register_cache
from core.base.settings import runs_base
from core.models.loading import LoadedModel


def cache_root(env: str, default: str) -> Path:
    """A cache's root folder: ``$env`` when set, else <runs>/``default`` (bounded with the runs)."""
    raw = os.environ.get(env, "").strip()
    return Path(raw) if raw else runs_base() / default


_KEYS: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()  # model -> {tag: key}
register_cache(f"{__name__}.model_key", _KEYS.clear)


def model_key(lm: LoadedModel, tag: str) -> str:
    """A key for the checkpoint's weights: a hash of ``tag``, the family, and its config.json and weight files (name,
    size, mtime); for a model that has no folder, of its config and a checksum of its parameters. Cached per model
    object and tag (weakly: the entry goes with the model). ``tag`` is the calling cache's own (see the module
    docstring)."""
    per_model = _KEYS.get(lm.model)
    if per_model is not None and tag in per_model:
        return per_model[tag]
    h = hashlib.sha256(f"{tag}|{lm.spec.family}".encode())
    folder = Path(lm.path) if lm.path else None
    if folder is not None and (folder / "config.json").is_file():
        h.update((folder / "config.json").read_bytes())
        for f in sorted(folder.glob("*.safetensors")):
            st = f.stat()
            h.update(f"{f.name}|{st.st_size}|{st.st_mtime_ns}".encode())
    else:
        import torch  # lazy: torch loads ~1 GB; only a model without a folder needs it here

        h.update(lm.model.config.to_json_string(use_diff=False).encode())
        with torch.no_grad():
            for name, p in lm.model.named_parameters():
                h.update(f"{name}|{tuple(p.shape)}|{float(p.double().sum()):.10e}".encode())
    key = h.hexdigest()[:20]
    _KEYS.setdefault(lm.model, {})[tag] = key
    return key


def write_folder(final: Path, fill: Callable[[Path], None]) -> Path:
    """Write the cache folder ``final`` whole or not at all: ``fill(tmp)`` writes its files into a temporary folder
    beside it (``.<name>.<pid>.<thread>.tmp``), their checksums are recorded (``write_checksums``), and it then
    replaces ``final`` by a rename. Returns ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
        write_checksums(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return swap_in(tmp, final)


def swap_in(tmp: Path, final: Path) -> Path:
    """Put the fully written folder ``tmp`` in the place of ``final``: the previous ``final`` (if any) is renamed
    aside first and removed only once the new one is in place, so a crash at any moment leaves a whole folder at
    ``final`` or the previous one beside it, never a half-written one. The one swap every cache folder and every
    training checkpoint (core.train.common.save_checkpoint) goes through. Returns ``final``."""
    old = final.with_name(final.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def write_file(path: Path, text: str) -> Path:
    """Write one cache file whole or not at all (a temporary file beside it, ``<stem>.<pid>.tmp``, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def touch(folder: Path) -> None:
    """Mark a cache folder in use: the runs' age bound counts from now (a folder that is gone is left alone)."""
    try:
        os.utime(folder)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------- damaged files
CHECKSUMS_FILE = "checksums.json"  # {relative path: "size:crc32"} of every other file of the folder
DAMAGED_SUFFIX = ".damaged"


def _checksum(path: Path) -> str:
    crc = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return f"{path.stat().st_size}:{crc:08x}"


def write_checksums(folder: Path) -> None:
    """Record the size and CRC-32 of every file under ``folder`` in its CHECKSUMS_FILE (CRC-32 reads ~3 GB/s: a
    damaged file is what it guards against, not a forged one)."""
    sums = {
        p.relative_to(folder).as_posix(): _checksum(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != CHECKSUMS_FILE
    }
    (folder / CHECKSUMS_FILE).write_text(json.dumps(sums, indent=0))


def damaged_files(folder: Path) -> tuple[str, ...]:
    """The files of ``folder`` that are not what its CHECKSUMS_FILE recorded (missing, another size or CRC-32; the
    record itself when it cannot be read). () when they all match, and for a folder written before there were
    records (its reader's own checks are all there is)."""
    record = folder / CHECKSUMS_FILE
    if not record.is_file():
        return ()
    try:
        sums = json.loads(record.read_text())
        if not isinstance(sums, dict):
            raise ValueError(CHECKSUMS_FILE)
    except (OSError, ValueError):
        return (CHECKSUMS_FILE,)
    bad = []
    for name, want in sorted(sums.items()):
        try:
            ok = _checksum(folder / name) == want
        except OSError:
            ok = False
        if not ok:
            bad.append(name)
    return tuple(bad)


def set_aside(folder: Path) -> Path:
    """Rename a damaged ``folder`` (or file) to ``<name>.damaged``, replacing one set aside before, so that nothing
    reads it again and the next build writes a fresh one; it stays for a look until the runs' bounds remove it.
    Returns the new path (``folder`` itself when it could not be moved)."""
    aside = folder.with_name(folder.name + DAMAGED_SUFFIX)
    if aside.is_dir():
        shutil.rmtree(aside, ignore_errors=True)
    try:  # a file set aside before is replaced by the rename
        folder.rename(aside)
    except OSError:
        return folder
    return aside


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged saved file raises: cut or garbled JSON, text, numpy, zip, pickle (torch.load) and
    safetensors files; a reader catches these around its parsing and says the file is damaged."""
    from safetensors import SafetensorError  # lazy: only the readers of saved files need it

    return (
        OSError,
        ValueError,  # JSON, UTF-8, numpy's short reads
        TypeError,
        KeyError,
        IndexError,
        AttributeError,  # JSON of another shape
        RuntimeError,  # torch's zip reader, faiss
        EOFError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        SafetensorError,
    )
