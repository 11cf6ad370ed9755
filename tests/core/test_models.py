"""Registry and loading for all four families through the real from_pretrained path on local folders."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch

from core.models.devices import resolve_device
from core.models.loading import ModelSpec, load, resolve
from core.registry import FAMILIES, ModelLoadError, bundled_id


def test_registry_has_the_families_with_their_differences():
    assert {"bert", "roberta", "albert", "distilbert", "xlm-roberta", "modernbert"} <= set(FAMILIES)
    assert FAMILIES["bert"].pair_head == "nsp" and FAMILIES["albert"].pair_head == "sop"
    assert FAMILIES["roberta"].pair_head is None and "NSP" in FAMILIES["roberta"].pair_head_note
    assert FAMILIES["roberta"].mask_token == "<mask>"
    ids = {c.id for f in FAMILIES.values() for c in f.checkpoints}
    assert {
        "bert-base-uncased",
        "bert-large-uncased",
        "roberta-base",
        "roberta-large",
        "albert-base-v2",
        "albert-large-v2",
        "albert-xlarge-v2",
        "distilbert-base-uncased",
        "bert-base-chinese",
        "hfl/chinese-roberta-wwm-ext",
        "xlm-roberta-base",
        "xlm-roberta-large",
        "answerdotai/ModernBERT-base",
        "answerdotai/ModernBERT-large",
    } <= ids


@pytest.mark.parametrize("task", ["base", "mlm", "pretraining", "seqcls"])
def test_load_every_family_and_task(tiny_models, family, task):
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task=task)
    assert lm.source == "local folder"
    assert type(lm.model).__name__ == FAMILIES[family].classes[task]
    assert lm.tokenizer.mask_token == FAMILIES[family].mask_token
    enc = lm.tokenizer("a short text", return_tensors="pt")
    with torch.inference_mode():
        out = lm.model(**enc)
    assert out[0].shape[0] == 1
    if task in ("mlm", "pretraining"):
        assert not lm.head_missing


def test_attentions_come_back_with_eager(tiny_models, family):
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task="base", attentions=True)
    enc = lm.tokenizer("attention must come back", return_tensors="pt")
    with torch.inference_mode():
        out = lm.model(**enc, output_attentions=True)
    assert out.attentions is not None and len(out.attentions) == 2
    seq = enc["input_ids"].shape[1]
    assert out.attentions[0].shape == (1, 4, seq, seq)
    assert torch.allclose(out.attentions[0].sum(-1), torch.ones(1, 4, seq), atol=1e-4)


def test_bundled_ids_resolve_in_zoo(use_tiny_zoo, family):
    if not FAMILIES[family].bundled:
        pytest.skip("EncoderLab ships no model of this family (test_registry checks bundled_id says so)")
    res = resolve(bundled_id(family))
    assert res.source == "bundled" and res.path
    lm = load(ModelSpec(family, bundled_id(family), "cpu"), task="mlm")
    assert lm.source == "bundled"


def test_missing_bundled_model_says_make_models(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_ZOO", str(tmp_path))
    with pytest.raises(ModelLoadError, match="make models"):
        load(ModelSpec("bert", "encoderlab/bert-mini", "cpu"))


def test_unknown_id_offline_lists_what_was_tried(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError) as e:
        load(ModelSpec("bert", "no-such-org/no-such-model", "cpu"))
    msg = str(e.value)
    assert "Tried" in msg and "cache" in msg and "downloads are off (HF_HUB_OFFLINE=1 is set)" in msg


def test_no_network_is_reported_fast(monkeypatch):
    # Downloads allowed, but the Hub endpoint is a closed local port: a real failed connection, no mock.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("ENCODERLAB_ALLOW_DOWNLOAD", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(ModelLoadError, match="No network"):
        load(ModelSpec("bert", "some-org/some-model-not-cached", "cpu"))


def test_folder_without_weights(tiny_models, tmp_path):
    d = tmp_path / "noweights"
    d.mkdir()
    shutil.copy(tiny_models["bert"] / "config.json", d / "config.json")
    with pytest.raises(ModelLoadError, match="no \\*.safetensors"):
        load(ModelSpec("bert", str(d), "cpu"))


def test_bin_only_checkpoint_is_refused(tiny_models, tmp_path):
    d = tmp_path / "binonly"
    shutil.copytree(tiny_models["bert"], d)
    (d / "model.safetensors").unlink()
    torch.save({"x": torch.zeros(1)}, d / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="safetensors only"):
        load(ModelSpec("bert", str(d), "cpu"))


def test_wrong_family_names_the_right_one(tiny_models):
    with pytest.raises(ModelLoadError, match="Pick the RoBERTa family"):
        load(ModelSpec("bert", str(tiny_models["roberta"]), "cpu"))


def test_not_a_model_folder(tmp_path):
    with pytest.raises(ModelLoadError, match="no config.json"):
        load(ModelSpec("bert", str(tmp_path), "cpu"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_where_there_is_none():
    with pytest.raises(ModelLoadError, match="no usable GPU"):
        resolve_device("cuda")


def test_spec_checks_itself():
    with pytest.raises(ModelLoadError, match="Unknown family"):
        ModelSpec("gpt2", "x")
    with pytest.raises(ModelLoadError, match="No checkpoint"):
        ModelSpec("bert", "  ")


def test_real_minilm_loads_and_reports_missing_mlm_head():
    from core.models.tokenizer_build import minilm_folder

    lm = load(ModelSpec("bert", str(minilm_folder()), "cpu"), task="mlm")
    assert lm.head_missing  # the MiniLM package ships the encoder only


def test_core_never_imports_streamlit():
    code = (
        "import sys, pkgutil, importlib, core\n"
        "for m in pkgutil.walk_packages(core.__path__, 'core.'):\n"
        "    if m.name.endswith('__main__'): continue\n"
        "    importlib.import_module(m.name)\n"
        "assert 'streamlit' not in sys.modules, 'core imported streamlit'\n"
        "print('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]),
    )
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_random_classifier_head_is_flagged(tiny_models, family):
    # The tiny folders hold pretraining heads only: a classifier loaded from them has a fresh, random head.
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task="seqcls")
    assert lm.head_missing


def test_parallel_loads_leave_transformers_working(tiny_models):
    """Loads from several threads at once (sessions, jobs) must not break later loads: core.models.loading.BUILD_LOCK."""
    import threading

    import transformers

    tie_before = transformers.PreTrainedModel.tie_weights
    errors: list[BaseException] = []

    def work(fam: str) -> None:
        try:
            for _ in range(3):
                load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), task="mlm")
        except BaseException as e:  # noqa: BLE001 - collected and reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(f,)) for f in ("distilbert", "bert", "albert", "roberta")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert transformers.PreTrainedModel.tie_weights is tie_before
    lm = load(ModelSpec("distilbert", str(tiny_models["distilbert"]), "cpu"), task="mlm")
    assert all(torch.isfinite(p).all() for p in lm.model.parameters())
