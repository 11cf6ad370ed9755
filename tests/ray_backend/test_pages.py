"""The pages on the Ray backend: the same page, opened from the same link, renders the same results in-process and
on Ray, and the model it used was served by a Ray Serve deployment (pages never ask which backend is in use)."""

from __future__ import annotations

import json
import re

import pytest

import core.runtime.backend as backend
from tests.app.conftest import new_app, page_path
from tests.ray_backend.conftest import RAY_TESTS

pytestmark = RAY_TESTS
LATENCY = re.compile(r"\d[\d,.]*\s*(ms|s)\b")  # wall times differ run to run


def _render(name: str, params: dict[str, str]) -> dict:
    at = new_app()
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(page_path(name)).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    charts = []
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        charts.append(json.dumps(spec["data"], sort_keys=True))
    return {
        "markdown": [LATENCY.sub("T", m.value) for m in at.markdown],
        "metrics": [(m.label, m.value) for m in at.metric],
        "tables": [df.value.to_json() for df in at.dataframe],
        "charts": charts,
        "captions": [LATENCY.sub("T", c.value) for c in at.caption],
    }


CASES = {
    "fill_mask": {"fill_mask.text": "The cat sat on the [MASK] .", "fill_mask.type.top_k": "6"},
    "sentence_pair": {
        "sentence_pair.a": "The sun rose.",
        "sentence_pair.b": "Birds began to sing.",
        "sentence_pair.probe": "0",
    },
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", sorted(CASES))
def test_a_page_renders_the_same_on_both_backends(page, tiny_models, ray_backend):
    from ray import serve

    params = {"family": "bert", "model": "custom", "custom": str(tiny_models["bert"]), **CASES[page]}
    prev = backend.use(backend.InProcessBackend())
    try:
        here = _render(page, params)
    finally:
        backend.use(prev)
    there = _render(page, params)
    assert here["metrics"] or here["tables"] or here["charts"]  # something was computed
    # the one difference: the source line says where predictions run (core.runtime.backend.runs_on)
    served = [c for c in there["captions"] if "on `Ray Serve, 1 replica (CPU)`" in c]
    assert served, there["captions"]
    there["captions"] = [c.replace("`Ray Serve, 1 replica (CPU)`", "`cpu`") for c in there["captions"]]
    assert there == here
    # the page's model went to a Serve deployment: a running application holds the folder the link named
    running = set(serve.status().applications)
    # (other tests of the "ray" group, in this process before this one, left recipes of other kinds: a recipe's
    # first argument is a ModelSpec only for a loaded model)
    assert any(
        name in running and getattr(recipe[1][0], "checkpoint", None) == params["custom"]
        for name, recipe in ray_backend.recipes.items()
    ), (ray_backend.recipes, running)
