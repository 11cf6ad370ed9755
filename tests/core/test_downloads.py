"""Downloads on the real huggingface_hub path, against a local server that speaks the Hub's file protocol."""

from __future__ import annotations

import hashlib
import socket
import threading

import pytest

from core.models import downloads
from core.models.downloads import DownloadError
from tests.hub_server import HubServer, go_online

REPO = "bert-base-uncased"  # an official BERT id: the tiny model is served under it


def _sha(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture()
def online(monkeypatch, tmp_path):
    return go_online(monkeypatch, tmp_path / "hf-cache")


@pytest.fixture()
def hub(tiny_models, online, monkeypatch):
    with HubServer({REPO: tiny_models["bert"]}, throttle_bps=8e6) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def test_policy_is_on_by_default_and_off_when_told(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("ENCODERLAB_ALLOW_DOWNLOAD", raising=False)
    monkeypatch.delenv("ENCODERLAB_HOSTED", raising=False)
    assert downloads.policy().allowed
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not downloads.policy().allowed and "HF_HUB_OFFLINE" in downloads.policy().reason
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("ENCODERLAB_ALLOW_DOWNLOAD", "0")
    assert not downloads.policy().allowed and "ENCODERLAB_ALLOW_DOWNLOAD=0" in downloads.policy().reason
    monkeypatch.delenv("ENCODERLAB_ALLOW_DOWNLOAD")
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    assert not downloads.policy().allowed and "operator" in downloads.policy().reason
    monkeypatch.setenv("ENCODERLAB_ALLOW_DOWNLOAD", "1")  # the operator allows it
    assert downloads.policy().allowed


def test_download_reports_progress_and_fills_the_cache(hub, online, tiny_models):
    seen = []
    folder = downloads.download(REPO, progress=seen.append)
    src = tiny_models["bert"]
    served = {p.name for p in src.iterdir() if p.is_file()}
    assert {p.name for p in folder.iterdir()} == served
    for name in served:
        assert _sha(folder / name) == _sha(src / name), f"{name} differs from the served file"
    assert online in folder.parents, "the files went somewhere other than the Hugging Face cache"
    total = sum((src / n).stat().st_size for n in served)
    assert seen and seen[-1].total_bytes == total and seen[-1].done_bytes == total
    done = [p.done_bytes for p in seen]
    assert done == sorted(done), "progress went backwards"
    assert any(0 < p.fraction < 1 for p in seen), "no progress between start and end"
    text = seen[len(seen) // 2].describe()
    assert " of " in text and "MB/s" in text, text
    assert not any(r[1].endswith(".bin") for r in hub.requests)


def test_a_second_load_reads_the_cache_and_asks_the_hub_nothing(hub, online):
    from core.models.loading import ModelSpec, load, resolve

    assert resolve(REPO).source == "Hub download"
    lm = load(ModelSpec("bert", REPO), "mlm")  # downloads, then loads the cached folder
    assert lm.source == "Hub download" and online in __import__("pathlib").Path(lm.path).parents
    before = len(hub.requests)
    assert resolve(REPO).source == "HF cache"
    again = load(ModelSpec("bert", REPO), "mlm")
    assert again.source == "HF cache"
    assert hub.requests[before:] == [], f"a cached load asked the Hub: {hub.requests[before:]}"


def test_a_cut_download_leaves_no_usable_half_and_resumes_later(hub, online):
    from core.models.loading import ModelSpec, load, resolve
    from core.registry import ModelLoadError

    hub.cut_after, hub.cuts = 1_000_000, 1_000  # the network drops mid-weights on every try
    with pytest.raises(DownloadError, match=r"download of 'bert-base-uncased' stopped.*pick the model again"):
        downloads.download(REPO)
    # the snapshot holds the small files but no weights: it is not taken for a cached model
    assert resolve(REPO).source == "Hub download"
    with pytest.raises(ModelLoadError, match="stopped"):
        load(ModelSpec("bert", REPO), "mlm")
    hub.cuts = 0  # the network is back
    lm = load(ModelSpec("bert", REPO), "mlm")
    assert lm.model.config.model_type == "bert"
    assert resolve(REPO).source == "HF cache"


def test_one_cut_is_resumed_without_the_user_noticing(hub, online, tiny_models):
    hub.cut_after, hub.cuts = 1_000_000, 1
    folder = downloads.download(REPO)
    assert _sha(folder / "model.safetensors") == _sha(tiny_models["bert"] / "model.safetensors")
    gets = [r for r in hub.requests if r[0] == "GET" and "model.safetensors" in r[1]]
    assert len(gets) == 2, gets


def test_no_network_is_told_at_once_and_nothing_is_downloaded(online, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    outcome: list[BaseException | None] = []

    def attempt():
        try:
            downloads.download(REPO)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread as it is
            outcome.append(e)

    th = threading.Thread(target=attempt, daemon=True)
    th.start()
    # a hang guard, not a speed bound: download() gives up after one connect within REACH_TIMEOUT_S
    th.join(downloads.REACH_TIMEOUT_S + 60)
    assert outcome, f"download() still waiting on a dead network after {downloads.REACH_TIMEOUT_S + 60:.0f} s"
    (err,) = outcome
    assert isinstance(err, DownloadError) and err.kind == "download.no_network", repr(err)
    assert "No network" in str(err) and "bundled model" in str(err)
    assert err.params["timeout_s"] == downloads.REACH_TIMEOUT_S  # the message names the bound it kept
    assert not list(online.rglob("*")), "a download started on a dead network"  # the HF cache is still empty


def test_an_unknown_repo_says_so(hub):
    with pytest.raises(DownloadError, match="not a model on the Hub"):
        downloads.download("nobody/no-such-model")


def test_downloads_off_refuse_before_any_request(hub, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_ALLOW_DOWNLOAD", "0")
    with pytest.raises(DownloadError, match="Downloads are off"):
        downloads.download(REPO)
    assert hub.requests == []
