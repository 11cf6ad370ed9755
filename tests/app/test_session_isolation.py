"""Sessions kept apart (#34 §4): a session's pages reach only its own jobs, whatever job id they are handed."""

from __future__ import annotations

import threading

from streamlit.testing.v1 import AppTest

from app.kit.i18n import t
from core.runtime.backend import runner


def _panel_of(job_id: int) -> None:
    from app.kit.jobs_panel import job_panel

    job_panel(job_id, lambda j: None, key="test")


def test_a_session_handed_another_sessions_job_id_sees_no_panel_and_no_cancel():
    """Job ids count up, so any id a page were handed (a stale state, a future link) could be another session's:
    the panel then says the job is gone, draws no progress and no Cancel, and the job runs on."""
    r = runner()
    gate = threading.Event()
    theirs = r.submit("someone else's run", lambda ctx: gate.wait(30), owner="another-session")
    try:
        at = AppTest.from_function(_panel_of, args=(theirs.id,), default_timeout=60).run()
        assert not at.exception, at.exception
        assert [w.value for w in at.warning] == [t("common.job_gone")]
        assert not at.button and not at.get("progress"), "another session's job was drawn with its Cancel"
        assert not theirs.cancel_requested and not theirs.done
    finally:
        gate.set()
    assert r.wait(theirs).status == "done"
