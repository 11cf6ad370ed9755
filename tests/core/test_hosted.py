"""Hosted mode: the custom box takes Hub ids only, messages show no server path, limits are settings."""

from __future__ import annotations

import pytest

from core.base import settings
from core.base.paths import scrub
from core.models.hosted import HostedRefusal, check_custom_checkpoint
from core.models.loading import ModelSpec, load
from core.registry import ModelLoadError


@pytest.fixture()
def hosted(monkeypatch):
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    monkeypatch.delenv("ENCODERLAB_ALLOW_DOWNLOAD", raising=False)
    monkeypatch.delenv("ENCODERLAB_HUB_ALLOWLIST", raising=False)


@pytest.mark.parametrize(
    "typed",
    [
        "/etc",
        "/etc/",
        "../",
        "../../etc/passwd",
        "./assets/models/bert-mini",
        "~/models",
        "/tmp/encoderlab-runs/abc123/run1",
        "assets/models/bert-mini",
        "C:\\models",
        "owner/name/../../etc",
        "..",
        ".",
    ],
)
def test_hosted_custom_box_refuses_paths_without_repeating_them(hosted, typed):
    with pytest.raises(HostedRefusal) as e:
        check_custom_checkpoint(typed)
    msg = str(e.value)
    assert "Hugging Face model ids only" in msg
    assert "/etc" not in msg and "assets" not in msg and "/tmp" not in msg and ".." not in msg
    assert isinstance(e.value, ModelLoadError)  # the sidebar's existing error display shows it


def test_hosted_custom_box_takes_allowed_hub_ids(hosted, monkeypatch):
    for ok in ("bert-base-uncased", "hfl/chinese-roberta-wwm-ext", "encoderlab/bert-mini"):
        check_custom_checkpoint(ok)
    with pytest.raises(HostedRefusal, match="not among the models this hosted server offers"):
        check_custom_checkpoint("someone/some-model")
    monkeypatch.setenv("ENCODERLAB_HUB_ALLOWLIST", "someone/some-model, other/one")
    check_custom_checkpoint("someone/some-model")
    with pytest.raises(HostedRefusal):
        check_custom_checkpoint("bert-base-uncased")  # the operator's list replaces the default one
    monkeypatch.setenv("ENCODERLAB_ALLOW_DOWNLOAD", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    check_custom_checkpoint("anyone/any-model")  # downloads allowed: any well-formed id
    with pytest.raises(HostedRefusal):
        check_custom_checkpoint("/etc")  # but never a path


def test_outside_hosted_mode_paths_are_allowed(monkeypatch, tiny_models):
    monkeypatch.delenv("ENCODERLAB_HOSTED", raising=False)
    check_custom_checkpoint("/etc")
    check_custom_checkpoint(str(tiny_models["bert"]))


def test_hosted_load_refuses_a_folder_outside_the_servers_own_and_names_no_path(hosted, tiny_models):
    folder = str(tiny_models["bert"])  # a pytest temp folder: not the zoo, the runs or the HF cache
    with pytest.raises(ModelLoadError) as e:
        load(ModelSpec("bert", folder), "mlm")
    msg = str(e.value)
    assert "its own folders only" in msg
    assert folder not in msg and "/tmp" not in msg and "pytest" not in msg


def test_hosted_load_of_the_zoo_still_works(hosted, use_tiny_zoo):
    lm = load(ModelSpec("bert", "encoderlab/bert-mini"), "mlm")
    assert lm.source == "bundled"


def test_scrub_replaces_server_paths_only_in_hosted_mode(monkeypatch):
    msg = "/srv/encoderlab/assets/models/x has no config.json; see https://huggingface.co/docs/x and C:\\a\\b"
    monkeypatch.delenv("ENCODERLAB_HOSTED", raising=False)
    assert scrub(msg) == msg
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    out = scrub(msg)
    assert "/srv" not in out and "C:\\" not in out and "https://huggingface.co/docs/x" in out
    assert "has no config.json" in out


def test_limits_are_settings_with_safe_hosted_defaults(monkeypatch):
    monkeypatch.delenv("ENCODERLAB_HOSTED", raising=False)
    local = settings.current()
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    h = settings.current()
    for f in (
        "max_text_chars",
        "max_batch_rows",
        "max_attribution_steps",
        "max_epochs",
        "max_upload_mb",
        "session_running",
        "session_queued",
    ):
        assert getattr(h, f) <= getattr(local, f), f
    monkeypatch.setenv("ENCODERLAB_MAX_EPOCHS", "2")
    assert settings.current().max_epochs == 2
    monkeypatch.setenv("ENCODERLAB_MAX_EPOCHS", "lots")
    with pytest.raises(ValueError, match="ENCODERLAB_MAX_EPOCHS='lots' is not a whole number"):
        settings.current()


def test_hosted_limits_reach_the_configs_with_clear_messages(hosted, monkeypatch):
    from core.inspect.attribution_inputs import AttributionConfig
    from core.predict.fill_mask import FillMaskConfig, configs_from_lines
    from core.predict.sentence_pair import PairConfig, parse_pairs_csv
    from core.train.finetune_config import FinetuneConfig

    monkeypatch.setenv("ENCODERLAB_MAX_BATCH_ROWS", "10")  # below every page's own cap, so the setting decides
    s = settings.current()
    long = "word " * (s.max_text_chars // 5) + "[MASK]."
    with pytest.raises(ValueError, match=f"the limit is {s.max_text_chars:,}"):
        FillMaskConfig(long)
    with pytest.raises(ValueError, match=f"the limit is {s.max_text_chars:,}"):
        PairConfig(long, "B.")
    with pytest.raises(ValueError, match=f"at most {s.max_batch_rows} are run as one batch"):
        configs_from_lines("\n".join(["A [MASK] here."] * (s.max_batch_rows + 1)))
    rows = "a,b,label\n" + "\n".join(["x,y,1"] * (s.max_batch_rows + 1))
    with pytest.raises(ValueError, match=f"the limit is {s.max_batch_rows}"):
        parse_pairs_csv(rows)
    with pytest.raises(ValueError, match=f"n_steps must be between 2 and {s.max_attribution_steps}"):
        AttributionConfig(text="A [MASK] here.", n_steps=s.max_attribution_steps + 1)
    with pytest.raises(ValueError, match=f"Epochs must be a whole number from 1 to {s.max_epochs}"):
        FinetuneConfig("bert", "encoderlab/bert-mini", epochs=s.max_epochs + 1)
    FillMaskConfig("word " * 10 + "[MASK].")  # within the limits: accepted
    FinetuneConfig("bert", "encoderlab/bert-mini", epochs=s.max_epochs)
