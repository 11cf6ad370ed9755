"""Every upload box in the app: one way to draw it, read the file and say why a file is refused.

``upload_box`` draws ``st.file_uploader`` taking any file (Streamlit's own type filter refuses a file with a
hover tooltip only, and keeps the earlier file and its results on screen), then reads the file with
core.base.uploads.read_upload (type, the app's size limit, binary data, UTF-8, empty) and shows the reason right
under the box, in the session's language (assets/i18n/uploads.toml). Nothing of it is kept between runs: the
message is the current file's, so it goes when the file is removed or replaced. A file over Streamlit's
`server.maxUploadSize` never reaches the script: the box refuses it itself, so the caption under every box says
the limit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from app.kit.i18n import lang, t
from app.kit.render import as_text
from core.base.settings import current as server_settings
from core.base.uploads import UploadError, read_upload


@dataclass(frozen=True)
class Upload:
    """The file in a box: its text when it was read, else ``error`` (the reason shown under the box)."""

    name: str
    data: bytes
    text: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def sig(self) -> str:
        """Which file this is (name and bytes), for a page's "made from" keys."""
        return hashlib.sha1(self.name.encode() + self.data).hexdigest()


def rejection(e: UploadError) -> str:
    """``e``'s message in the session's language; the file name shown as typed (no Markdown made of it)."""
    params = {**e.params, "name": as_text(str(e.params.get("name", "")))}
    return t(f"uploads.rejected.{e.reason}", **params)


def limit_mb(limit: float | None = None) -> float:
    """The upload limit in MB: ``limit`` or the server's (ENCODERLAB_MAX_UPLOAD_MB; 5 on the hosted demo)."""
    return server_settings().max_upload_mb if limit is None else limit


def read(
    data: bytes,
    name: str,
    *,
    kinds: Sequence[str] | None,
    expect: str,
    limit: float | None = None,
) -> Upload:
    """``data`` read as an upload (no widget): an Upload with its text, or with the reason it is refused."""
    try:
        text = read_upload(data, name, kinds=kinds, limit_mb=limit_mb(limit), expect=expect)
    except UploadError as e:
        return Upload(name, data, None, rejection(e))
    return Upload(name, data, text)


def _css_text(text: str) -> str:
    """``text`` as a CSS string literal (for ``content:``)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def apply_uploader_language() -> None:
    """Streamlit's upload box writes its own English ("Drag and drop a file here", "200MB per file", "Upload") and
    offers no setting for it. In 中文 those texts are hidden and the box's prompt and button are drawn from the
    catalogue by CSS (uploads.dropzone, uploads.browse); the limits stand in the caption under every box."""
    if lang() == "en":
        return
    prompt, browse = _css_text(t("uploads.dropzone")), _css_text(t("uploads.browse"))
    st.html(
        "<style>"
        '[data-testid="stFileUploaderDropzoneInstructions"] > * { display: none !important; }'
        f'[data-testid="stFileUploaderDropzoneInstructions"]::before {{ content: {prompt}; font-size: .875rem; }}'
        '[data-testid="stFileUploaderDropzone"] button > * { display: none !important; }'
        f'[data-testid="stFileUploaderDropzone"] button::after {{ content: {browse}; }}'
        "</style>"
    )


def upload_box(
    label: str,
    key: str,
    *,
    kinds: Sequence[str] | None,
    expect: str,
    limit: float | None = None,
    help: str | None = None,
    note: str | None = None,
) -> Upload | None:
    """Draw an upload box taking any file; None when it is empty. A refused file's reason is shown under the box
    (and is the returned Upload's ``error``); ``kinds``: the extensions taken (None: any text file); ``expect``:
    what to upload, for the messages; ``note``: the caption under the box (default: the kinds and the limit)."""
    up = st.file_uploader(label, type=None, key=key, help=help)
    mb, box = f"{limit_mb(limit):g}", f"{st.get_option('server.maxUploadSize'):g}"
    if note is None:
        note = (
            t("uploads.limit", kinds=", ".join(f".{k}" for k in kinds), mb=mb, box=box)
            if kinds
            else t("uploads.limit_any", mb=mb, box=box)
        )
    st.caption(note)
    if up is None:
        return None
    got = read(up.getvalue(), up.name, kinds=kinds, expect=expect, limit=limit)
    if not got.ok:
        st.error(got.error)
    return got
