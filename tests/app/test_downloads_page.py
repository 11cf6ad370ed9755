"""With downloads on and a local server speaking the Hub's protocol, picking an official id downloads it with a
progress bar, then the page works on it; with no network the page says so and offers the bundled model."""

from __future__ import annotations

import socket

import pytest

from tests.app.conftest import open_page
from tests.hub_server import HubServer, go_online

REPO = "bert-base-uncased"


@pytest.fixture()
def hub(tiny_models, monkeypatch, tmp_path, use_tiny_zoo):
    go_online(monkeypatch, tmp_path / "hf-cache")
    with HubServer({REPO: tiny_models["bert"]}, throttle_bps=4e6) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def test_picking_an_official_id_downloads_it_with_a_progress_bar_then_the_model(hub):
    at = open_page("fill_mask", {"family": "bert", "model": REPO})
    bars = at.get("progress")
    assert bars, "no progress bar for the download"
    assert "Downloaded bert-base-uncased" in bars[-1].proto.text and bars[-1].value == 100
    assert any("model.safetensors" in r[1] for r in hub.requests), "nothing was downloaded"
    banner = " ".join(c.value for c in at.caption)
    assert "Hub download" in banner, banner
    at.button(key="FormSubmitter:fill_mask.form-Predict").click().run() if any(
        b.key == "FormSubmitter:fill_mask.form-Predict" for b in at.button
    ) else None
    assert not at.exception, at.exception
    # the next visit loads it from the cache: no bar, no request
    n = len(hub.requests)
    again = open_page("fill_mask", {"family": "bert", "model": REPO})
    assert not again.get("progress") and hub.requests[n:] == []
    assert "HF cache" in " ".join(c.value for c in again.caption)


def test_no_network_is_said_in_the_page_with_the_bundled_model_offered(monkeypatch, tmp_path, use_tiny_zoo):
    go_online(monkeypatch, tmp_path / "hf-cache")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    at = open_page("fill_mask", {"family": "bert", "model": REPO})
    text = " ".join(e.value for e in at.error)
    assert "No network" in text and "bundled model" in text, text
