"""A full disk, told apart and said so: what a writer of the runs folder does when a write fails for want of space.

Every folder or file the jobs save under ``ENCODERLAB_RUNS`` (a fine-tune's model and checkpoints, the caches of
core.runtime.artifacts: corpus indexes, tuned lenses, probe results) is written beside its place and swapped in.
``whole_or_nothing(tmp)`` wraps that writing: when it fails, ``tmp`` is removed (no half-written folder is left, and
its space is given back), and a failure for want of space is raised as ``DiskFullError``, whose message says the disk
is full, however the library that was writing put it. core.runtime.job_outcome.describe_error then names the full
disk in the job's message (``is_disk_full``).

The libraries say it in several ways: Python's ``OSError(ENOSPC)``, safetensors' and faiss' "No space left on device"
in a message, and some only that a write failed: torch.save's zip writer ("unexpected pos ...") and numpy's
``np.save`` ("N requested and M written"). For those, a writer that failed while the disk under it has less than
FULL_BELOW_BYTES left failed for want of space.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.base.messages import Problem, carry, msg

FULL_BELOW_BYTES = 1 << 20  # a write that failed with less than this left on its disk failed for want of space
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
SPACE_TEXTS = ("no space left on device", "disk quota exceeded")  # strerror(ENOSPC), strerror(EDQUOT)


class DiskFullError(Problem, OSError):
    """Saving failed because the disk (or the quota) holding the runs folder is full; nothing half-written was left."""


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        yield x
        x = x.__cause__ or x.__context__


def space_left(where: str | Path) -> int | None:
    """Bytes a writer may still write on the disk holding ``where`` (or its nearest existing folder); None when it
    cannot be asked."""
    p = Path(where)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def is_disk_full(e: BaseException, where: str | Path | None = None) -> bool:
    """Whether ``e`` (or an error it came from) is a write that failed for want of space: DiskFullError, an OSError
    with errno ENOSPC or EDQUOT, or a library's text saying so; with ``where`` (the folder that was being written,
    asked before it is removed), also any failure while that disk has less than FULL_BELOW_BYTES left."""
    for x in _chain(e):
        if isinstance(x, DiskFullError) or (isinstance(x, OSError) and x.errno in SPACE_ERRNOS):
            return True
        text = str(x).lower()
        if any(s in text for s in SPACE_TEXTS):
            return True
    if where is None:
        return False
    left = space_left(where)
    return left is not None and left < FULL_BELOW_BYTES


def root_cause(e: BaseException) -> BaseException:
    """The library's own error behind a DiskFullError (what its message quotes), else ``e``."""
    return e.__cause__ if isinstance(e, DiskFullError) and e.__cause__ is not None else e


def remove(path: Path) -> None:
    """Remove a half-written folder or file (gone already: nothing to do)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


@contextmanager
def whole_or_nothing(tmp: Path) -> Iterator[None]:
    """Around the writing of ``tmp`` (a folder or file to be swapped in once whole): when the block raises, ``tmp``
    is removed, and a failure for want of space is raised as DiskFullError (from the library's error)."""
    try:
        yield
    except Exception as e:
        full = is_disk_full(e, tmp)  # asked before the removal gives the space back
        remove(tmp)
        if full:
            raise DiskFullError(msg("disk.no_space_left_nothing_saved", error=carry(e))) from e
        raise
    except BaseException:
        remove(tmp)
        raise
