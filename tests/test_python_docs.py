"""docs/python.md and its notebook, docs/examples/encoderlab.ipynb, run as a reader runs them, so neither can rot:

- every ```python snippet of the page, in order, as one script in a fresh interpreter; each prints what the page
  shows under it (the words and labels; numbers may differ in their last digits);
- the command lines it gives for core.train.finetune_cli parse with that CLI's own parser;
- the notebook, executed by nbclient in this venv's interpreter (a kernel spec written for the test, so no other
  installed "python3" kernel is picked up), offline, from its own folder; its cells' real outputs are checked
  against the objects the kernel holds (the fill-mask list is the model's, the figures are Plotly figures with data).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from core.train.finetune_cli import parser

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "python.md"
NOTEBOOK = ROOT / "docs" / "examples" / "encoderlab.ipynb"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
CLI = "python -m core.train.finetune_cli"
KERNEL = "encoderlab-test-venv"
SNIPPETS_TIMEOUT_S = NOTEBOOK_TIMEOUT_S = 180  # each takes about 30 s on a 2-core machine


def fences(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return FENCE.findall(text)


def snippets_and_outputs(text: str) -> list[tuple[str, str | None]]:
    """Each ```python block with the ```text block right after it (what the page says it prints), or None."""
    blocks = fences(text)
    out = []
    for i, (lang, body) in enumerate(blocks):
        if lang == "python":
            after = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
            out.append((body, after[1] if after[0] == "text" else None))
    return out


def shape(printed: str) -> list[str]:
    """Printed lines with every number as # and runs of spaces as one: the words, labels and their order stay."""
    return [" ".join(NUMBER.sub("#", line).split()) for line in printed.strip().splitlines()]


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", ENCODERLAB_RUNS=str(tmp_path / "runs"))
    env["PLOTLY_RENDERER"] = "plotly_mimetype"  # a figure's output is its JSON, not plotly.js inlined
    env["TMPDIR"] = str(tmp_path)  # the fine-tuned model (90 MB) goes where pytest cleans up, not into /tmp
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one torch thread per xdist worker, as tests/conftest.py says why
        env["OMP_NUM_THREADS"] = "1"
    return env


# ---------------------------------------------------------------------------------------------- the page
MARK = "print('\\n@@ snippet done @@')"


@pytest.mark.timeout(SNIPPETS_TIMEOUT_S + 30)
def test_every_python_snippet_of_the_page_runs_and_prints_what_the_page_shows(tmp_path):
    pairs = snippets_and_outputs(DOC.read_text(encoding="utf-8"))
    assert len(pairs) >= 8, "docs/python.md lost its snippets"
    assert all(shown is not None for _, shown in pairs), "every snippet shows what it prints in a ```text block"
    script = tmp_path / "python_md.py"
    script.write_text("\n".join(f"{body}\n{MARK}\n" for body, _ in pairs), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={**_env(tmp_path), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=SNIPPETS_TIMEOUT_S,
    )
    assert done.returncode == 0, f"a snippet of docs/python.md failed:\n{done.stderr[-4000:]}"
    printed = done.stdout.split("\n@@ snippet done @@\n")
    assert len(printed) == len(pairs) + 1 and not printed[-1].strip(), done.stdout[-2000:]
    for n, ((body, shown), got) in enumerate(zip(pairs, printed), start=1):
        assert shape(got) == shape(shown), (
            f"snippet {n} of docs/python.md now prints something else than the page shows; paste its output:\n"
            f"{body}\n--- the page shows:\n{shown}--- it prints:\n{got}"
        )


def test_the_shape_of_printed_output_ignores_digits_only():
    assert shape("[('coffee', 0.096)]\n[[0.34 0.3  0.36]]") == shape("[('coffee', 0.1)]\n[[0.3 0.31 0.4]]")
    assert shape("[('coffee', 0.096)]") != shape("[('tea', 0.096)]")


def test_the_finetune_command_lines_of_the_page_parse():
    text = DOC.read_text(encoding="utf-8")
    lines = [ln for lang, body in fences(text) if lang == "bash" for ln in body.replace("\\\n", " ").splitlines()]
    commands = [shlex.split(ln)[3:] for ln in lines if ln.strip().startswith(CLI)]
    assert commands, f"docs/python.md shows no {CLI} command line"
    for argv in commands:
        args = parser().parse_args(argv)  # exits (SystemExit) on an argument the CLI does not have
        assert args.checkpoint and args.out
    assert f"`{CLI}`" in text and "--help" in text


# ---------------------------------------------------------------------------------------------- the notebook
PROBE = """
import json as _json
import plotly.graph_objects as _go
_tok = mlm.tokenizer
print(_json.dumps({
    "fill": [[c.text, c.piece, c.token_id, c.prob] for c in fm.masks[0].candidates],
    "pieces": [_tok.convert_ids_to_tokens(c.token_id) for c in fm.masks[0].candidates],
    "vocab": len(_tok),
    "mask_token": zh.tokenizer.mask_token,
    "zh": [c.text for c in fm_zh.masks[0].candidates],
    "pair": [s.prob for s in pair.scores],
    "figures": {k: [isinstance(f, _go.Figure), len(f.data)] for k, f in figures.items()},
    "cwd": os.getcwd(),
}))
"""


def _kernel(tmp_path: Path) -> KernelManager:
    """A kernel of this interpreter (the venv's python), whatever kernel specs the machine has installed."""
    spec = tmp_path / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"}))
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))


def _cell(nb, needle: str):
    found = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    assert len(found) == 1, f"one code cell of the notebook should hold {needle!r}"
    return found[0]


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def _data(cell, mime: str):
    shown = [
        o.data[mime] for o in cell.outputs if o.output_type in ("execute_result", "display_data") and mime in o.data
    ]
    assert shown, f"the cell {cell.source!r} shows no {mime}"
    return shown[0]


@pytest.mark.timeout(NOTEBOOK_TIMEOUT_S + 30)
def test_the_example_notebook_runs_offline_and_its_outputs_come_from_the_model(tmp_path, monkeypatch):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not [c for c in nb.cells if c.cell_type == "code" and (c.outputs or c.execution_count)], (
        "commit docs/examples/encoderlab.ipynb without outputs (a Plotly output is megabytes)"
    )
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    for k, v in _env(tmp_path).items():
        monkeypatch.setenv(k, v)  # the kernel inherits this process's environment
    client = NotebookClient(
        nb,
        km=_kernel(tmp_path),
        timeout=NOTEBOOK_TIMEOUT_S,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},  # as Jupyter opens it: its first cell finds the root
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, when a cell fails
    probe = json.loads(_stdout(nb.cells[-1]))
    assert Path(probe["cwd"]) == ROOT

    # fill-mask: the printed top-5 is the model's (real vocabulary pieces, probabilities falling, below 1 in all)
    fill = probe["fill"]
    assert len(fill) == 5 and probe["pieces"] == [piece for _, piece, _, _ in fill]
    assert all(0 <= tid < probe["vocab"] for _, _, tid, _ in fill)
    probs = [p for *_, p in fill]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    lines = _stdout(_cell(nb, "fm = fill_mask(")).splitlines()
    assert [w for w, _ in ast.literal_eval(lines[1])] == [text for text, *_ in fill]
    zh_line = _stdout(_cell(nb, "xlmr-e5-small"))
    assert probe["mask_token"] in zh_line and len(probe["zh"]) == 3 and all(w in zh_line for w in probe["zh"])

    # sentence pairs: one P(IsNext) line per scored pair, with the kernel's numbers
    pair_lines = _stdout(_cell(nb, "predict_pair(")).splitlines()
    assert [float(ln.split()[-1]) for ln in pair_lines] == [round(p, 3) for p in probe["pair"]]

    # the bertviz view is inline and offline
    view = _data(_cell(nb, "build_view("), "text/html")
    assert "<iframe srcdoc=" in view and "cdnjs" not in view and "d3" in view

    # the figures: Plotly figures with data, and the displayed top-k bars are the fill-mask probabilities
    assert probe["figures"] and all(ok and n >= 1 for ok, n in probe["figures"].values()), probe["figures"]
    bars = _data(_cell(nb, 'figures["fill-mask"]'), "application/vnd.plotly.v1+json")
    assert bars["data"][0]["type"] == "bar" and bars["data"][0]["x"] == pytest.approx(probs)
    lens_fig = _data(_cell(nb, 'figures["lens"]'), "application/vnd.plotly.v1+json")
    assert lens_fig["data"][0]["type"] == "heatmap"
