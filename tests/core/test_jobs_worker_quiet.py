"""A job's worker process starts quietly under ``streamlit run``: Streamlit runs each page script in a fake
``__main__`` module (no spec, no loader, ``__file__`` = the script), and multiprocessing's spawn re-runs a ``__main__``
that has a ``__file__`` in the child. The worker then ran the whole app in bare mode: hundreds of "missing
ScriptRunContext" warnings in the server log for every probes or corpus-index job."""

import functools
import sys
import types
from pathlib import Path

from core.runtime.jobs import DONE, JobRunner

ROOT = Path(__file__).resolve().parents[2]


def imports_then_reports(modules, ctx):
    """What a probes / corpus-index job imports, then the streamlit modules loaded in this worker."""
    import importlib

    for name in modules:
        importlib.import_module(name)
    return sorted(m for m in sys.modules if m == "streamlit" or m.startswith("streamlit."))


def test_a_job_started_from_a_streamlit_script_thread_imports_no_streamlit_and_logs_nothing(monkeypatch, capfd):
    fake_main = types.ModuleType("__main__")  # what streamlit's ScriptRunner installs for each script run
    fake_main.__dict__["__file__"] = str(ROOT / "app" / "main.py")
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    r = JobRunner({"cpu": 1}, workers=True)
    job = r.wait(
        r.submit(
            "probes", functools.partial(imports_then_reports, ("core.represent.probes", "core.represent.corpus_index"))
        ),
        timeout=300,
    )
    assert sys.modules["__main__"] is fake_main  # the script's module is back in place after the start
    assert job.in_process and job.status == DONE, job.error
    assert job.result == []
    out, err = capfd.readouterr()
    assert "ScriptRunContext" not in out + err and "streamlit" not in (out + err).lower(), (out + err)[-2000:]


def main_file_job(ctx):
    return getattr(sys.modules.get("__main__"), "__file__", None)


def test_a_plain_scripts_main_is_still_prepared_in_the_worker(monkeypatch, tmp_path):
    """A real ``python script.py`` main (it has a loader) is left to multiprocessing: the worker re-imports it as
    before, so a job defined in such a script can still be unpickled there."""
    import importlib.machinery

    script = tmp_path / "script.py"
    script.write_text("X = 1\n")
    real_main = types.ModuleType("__main__")
    real_main.__dict__["__file__"] = str(script)
    real_main.__loader__ = importlib.machinery.SourceFileLoader("__main__", str(script))
    monkeypatch.setitem(sys.modules, "__main__", real_main)
    r = JobRunner({"cpu": 1}, workers=True)
    job = r.wait(r.submit("plain", main_file_job), timeout=300)
    assert job.status == DONE and job.result == str(script), job.error
