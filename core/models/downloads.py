"""Downloading an official checkpoint from the Hub: when it is allowed, and the download itself with progress.

Policy (``policy()``): on by default, as transformers itself would do; off when ``HF_HUB_OFFLINE`` is set, when
``ENCODERLAB_ALLOW_DOWNLOAD=0``, or on the hosted server unless its operator sets ``ENCODERLAB_ALLOW_DOWNLOAD=1``.

``download`` is huggingface_hub's own ``snapshot_download`` (the Hub's cache layout, file locks, resumable
``.incomplete`` blobs, the ``HF_ENDPOINT`` setting), restricted to the files EncoderLab loads (config, safetensors
weights, tokenizer files: never pickled ``.bin`` weights). Its byte progress arrives through a tqdm class; we
turn it into ``DownloadProgress`` (size, speed, ETA) for a progress bar. A cut connection raises DownloadError
with what was fetched; the Hub cache keeps only complete files under the snapshot (a partial one stays an
``.incomplete`` blob that the next try resumes), so a later load never meets a half-written model.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlparse

from core.base.caches import register as register_cache
from core.base.messages import Problem, msg
from core.base.settings import hosted

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
# what a model folder needs, by the names transformers looks for; weights as safetensors only
ALLOW_PATTERNS = (
    "config.json",
    "*.safetensors",
    "*.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "*.spm",
)
REACH_TIMEOUT_S = 2.0  # a machine with no network is told so within this
log = logging.getLogger(__name__)


class DownloadError(Problem, RuntimeError):
    """A download could not start or did not finish. The message says what happened and what to do."""


class Source(StrEnum):
    """Where core.models.loading.resolve found a checkpoint: a code that code compares, never a display text (the page shows
    common.source.<value, lower case, "_" for spaces> in the session's language)."""

    BUNDLED = "bundled"
    LOCAL = "local folder"
    CACHE = "HF cache"
    DOWNLOAD = "Hub download"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class Policy:
    allowed: bool
    reason: str  # why not, or where from: a Message (core.base.messages)


@dataclass(frozen=True)
class DownloadProgress:
    done_bytes: int
    total_bytes: int  # 0 while the file list is being read
    rate_bps: float  # bytes per second so far
    elapsed_s: float

    @property
    def fraction(self) -> float:
        return min(self.done_bytes / self.total_bytes, 1.0) if self.total_bytes else 0.0

    @property
    def eta_s(self) -> float | None:
        if not self.total_bytes or self.rate_bps <= 0:
            return None
        return max(self.total_bytes - self.done_bytes, 0) / self.rate_bps

    def describe(self) -> str:
        """'12.3 of 45.6 MB · 3.2 MB/s · about 10 s left', for the progress bar's text: a Message (the page writes
        it in its language)."""
        if not self.total_bytes:
            return msg("download.progress.file_list")
        eta = self.eta_s
        return msg(
            "download.progress.bytes" if eta is None else "download.progress.bytes_eta",
            done=self.done_bytes / 1e6,
            total=self.total_bytes / 1e6,
            rate=self.rate_bps / 1e6,
            eta=eta or 0.0,
        )


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def policy() -> Policy:
    """Whether picking an official checkpoint that is not cached downloads it here, and why not."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE:
        return Policy(False, msg("download.policy.offline_set"))
    allow = os.environ.get("ENCODERLAB_ALLOW_DOWNLOAD", "").strip().lower()
    if allow in FALSE:
        return Policy(False, msg("download.policy.refused_by_env"))

    if hosted() and allow not in TRUE:
        return Policy(False, msg("download.policy.hosted_not_allowed"))
    return Policy(True, msg("download.policy.from_endpoint", endpoint=endpoint()))


def reachable(timeout: float = REACH_TIMEOUT_S) -> bool:
    """One TCP connect to the Hub endpoint; False on any failure (no DNS, refused, timeout) within ``timeout``.

    The name is resolved on a helper thread (resolution has no timeout of its own); a failure there is caught on
    that thread and logged as one debug line, never left to the thread's excepthook as a traceback."""
    url = urlparse(endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    deadline = time.monotonic() + timeout
    found: list = []
    th = threading.Thread(
        target=_resolve_into, args=(found, url.hostname or "", port), daemon=True, name="hub-reachable"
    )
    th.start()
    th.join(timeout)
    if not found or isinstance(found[0], Exception):
        return False
    try:
        family, kind, proto, _, addr = found[0][0]
        with socket.socket(family, kind, proto) as s:
            s.settimeout(max(deadline - time.monotonic(), 0.05))
            s.connect(addr)
        return True
    except OSError as e:
        log.debug("Hub %s:%s not reachable: %s", url.hostname, port, e)
        return False


def _resolve_into(found: list, host: str, port: int) -> None:
    """getaddrinfo(host, port) appended to ``found``, or the error it raised (socket.gaierror on a machine with no
    DNS): caught here, so a machine without network logs one quiet line instead of a thread's traceback."""
    try:
        found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    except (OSError, UnicodeError) as e:  # gaierror is an OSError; an over-long label raises UnicodeError
        log.debug("Hub host %r not resolved: %s", host, e)
        found.append(e)


REACH_TTL_S = 60.0  # how long one answer of hub_reachable_recently stands (one value per process: its bound)
_RECENT: dict = {"at": None, "endpoint": None, "ok": False}
_RECENT_LOCK = threading.Lock()


def hub_reachable_recently(ttl: float = REACH_TTL_S) -> bool:
    """``reachable()``, asked at most once per ``ttl`` seconds per endpoint in this process: what the sidebar uses
    to offer only checkpoints that can be downloaded now, without a connect on every script run."""
    now = time.monotonic()
    with _RECENT_LOCK:
        if _RECENT["at"] is not None and _RECENT["endpoint"] == endpoint() and now - _RECENT["at"] < ttl:
            return _RECENT["ok"]
    ok = reachable()
    with _RECENT_LOCK:
        _RECENT.update(at=time.monotonic(), endpoint=endpoint(), ok=ok)
    return ok


def forget_reachability() -> None:
    """Drop the remembered answer of ``hub_reachable_recently`` (tests; a network that just came back)."""
    with _RECENT_LOCK:
        _RECENT.update(at=None, endpoint=None, ok=False)


register_cache(__name__, forget_reachability)


def can_have_now(source: str) -> bool:
    """Whether a checkpoint that core.models.loading.resolve found at ``source`` can be had now: a bundled model,
    a local folder or the HF cache; a "Hub download" only when the Hub answered recently (downloads allowed and no
    network is not enough). What the sidebar suggests and the pages name as a full model."""
    if source == Source.UNAVAILABLE:
        return False
    return source != Source.DOWNLOAD or hub_reachable_recently()


class _Meter:
    """Bytes done and total over every file of one download (huggingface_hub reports per-file chunks)."""

    def __init__(self, report: Callable[[DownloadProgress], None] | None):
        self.report = report
        self.total = 0
        self.done = 0
        self.t0 = time.monotonic()
        self._lock = threading.Lock()

    def progress(self) -> DownloadProgress:
        el = time.monotonic() - self.t0
        return DownloadProgress(self.done, self.total, self.done / el if el > 0 else 0.0, el)

    def add(self, total: int = 0, done: int = 0) -> None:
        with self._lock:
            self.total += total
            self.done += done
            p = self.progress()
        if self.report is not None:
            self.report(p)


def _tqdm_class(meter: _Meter):
    """A tqdm class for snapshot_download that feeds ``meter`` from its byte bars and draws nothing.

    snapshot_download makes two byte bars (network transfer, and bytes written, described "Reconstructing"); with
    plain HTTP both move together, so only the bytes written to the cache are counted. A class that is not
    huggingface_hub's own tqdm gets no ``name``, so the bar is told by its unit and description.
    """
    from tqdm.auto import tqdm

    class Reporting(tqdm):
        def __init__(self, *args, **kwargs):
            self._bytes = kwargs.get("unit") == "B" and str(kwargs.get("desc", "")).startswith("Reconstructing")
            kwargs["disable"] = True
            kwargs.pop("name", None)
            super().__init__(*args, **kwargs)
            self._seen_total = 0

        def refresh(self, *a, **k):  # the parent's total grows as each file starts
            if self._bytes and (self.total or 0) > self._seen_total:
                meter.add(total=int(self.total) - self._seen_total)
                self._seen_total = int(self.total)

        def update(self, n=1):
            if self._bytes:
                self.refresh()
                meter.add(done=int(n or 0))
            return super().update(n)

    return Reporting


def download(
    repo_id: str, progress: Callable[[DownloadProgress], None] | None = None, cache_dir: str | Path | None = None
) -> Path:
    """Download ``repo_id``'s loadable files into the Hugging Face cache; return the snapshot folder.

    ``progress`` is called from download threads with the running totals. Raises DownloadError when downloads
    are off, the Hub cannot be reached, the repo does not exist, or the connection breaks.
    """
    pol = policy()
    if not pol.allowed:
        raise DownloadError(msg("download.downloads_off_here_use", reason=pol.reason))
    if not reachable():
        raise DownloadError(msg("download.no_network", endpoint=endpoint(), timeout_s=REACH_TIMEOUT_S, repo_id=repo_id))
    import httpx2  # huggingface_hub's own HTTP client: its errors are what a cut connection raises
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    meter = _Meter(progress)
    try:
        path = snapshot_download(
            repo_id,
            allow_patterns=list(ALLOW_PATTERNS),
            cache_dir=cache_dir,
            endpoint=endpoint(),
            tqdm_class=_tqdm_class(meter),
            max_workers=4,
        )
    except GatedRepoError:
        raise DownloadError(msg("download.gated_hub_accept_its", repo_id=repo_id)) from None
    except RepositoryNotFoundError:
        raise DownloadError(msg("download.not_model_hub_private", repo_id=repo_id)) from None
    except (httpx2.HTTPError, LocalEntryNotFoundError, EntryNotFoundError, HfHubHTTPError, OSError) as e:
        got = meter.progress()
        of = f" of {got.total_bytes / 1e6:,.1f} MB" if got.total_bytes else ""
        raise DownloadError(
            msg(
                "download.download_stopped_after_mb",
                repo_id=repo_id,
                mb_done=got.done_bytes / 1e6,
                of=of,
                error_type=type(e).__name__,
                error=e,
            )
        ) from None
    folder = Path(path)
    if not (folder / "config.json").exists() or not any(folder.glob("*.safetensors")):
        raise DownloadError(msg("download.no_safetensors_on_hub", repo_id=repo_id))
    return folder


def allow_download() -> bool:
    """Whether a checkpoint that is not cached is downloaded from the Hub here (``policy()`` says why not)."""
    return policy().allowed


def hub_endpoint() -> str:
    return endpoint()


def hub_reachable(timeout: float = 2.0) -> bool:
    """One TCP connect to the Hub endpoint within ``timeout``; False on any failure (no DNS, refused, timeout)."""
    return reachable(timeout)
