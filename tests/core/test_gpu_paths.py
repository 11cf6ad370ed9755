"""The GPU paths that can be checked on a CPU (issue 22), and the GPU checks themselves (marked gpu: they skip
without CUDA; scripts/gpu_check.sh runs them on a lent GPU).

- memory: a weak reference to the training run's model (and a parameter) is dead once fine-tuning or
  pretraining has returned or raised: finished, cancelled from the progress hook, or failed;
- seeding: two seeded runs interleaved in threads give what each gives alone (fine-tune, KernelSHAP, LIME);
- pretraining checkpoints carry the CUDA generator states, and resume restores them;
- a checkpoint saved in bf16/fp16 loads as fp32;
- the nvidia-smi / torch diagnosis for a GPU that torch cannot use (core.models.devices).
"""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch

from core.models.loading import ModelSpec, load
from core.runtime.job_outcome import JobCancelled
from core.train.finetune import train
from core.train.finetune_config import FinetuneConfig, FinetuneError
from tests.core.test_finetune import nan_checkpoint, toy

gpu = pytest.mark.gpu


# ---------------------------------------------------------------------------------------------- memory (item 4)
@contextlib.contextmanager
def watch_modules():
    """Weak references to every module that runs a forward inside the block (torch's global forward hook),
    and to the parameters they own: the training run's model, built inside the call under test."""
    seen: list[weakref.ref] = []
    params: list[weakref.ref] = []
    ids: set[int] = set()

    def hook(module, args, output):
        if id(module) not in ids:
            ids.add(id(module))
            seen.append(weakref.ref(module))
            params.extend(weakref.ref(p) for p in module.parameters(recurse=False))

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield seen, params
    finally:
        handle.remove()


def assert_freed(seen, params) -> None:
    # No gc.collect() here: the model must be freed by reference counting alone, i.e. without a reference cycle
    # and without a traceback that keeps the training frame's locals.
    alive = [type(m()).__name__ for m in seen if m() is not None]
    assert not alive, f"still alive after the run: {sorted(set(alive))[:8]}"
    assert params and not [p for p in params if p() is not None], "parameters still alive"


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("outcome", ["finished", "cancelled", "failed"])
def test_finetune_model_is_freed_after_the_run(outcome, pooling, tiny_models, tmp_path):
    folder = nan_checkpoint(tmp_path / "nan") if outcome == "failed" else tiny_models["bert"]
    cfg = FinetuneConfig("bert", str(folder), epochs=2, batch_size=8, max_length=16, pooling=pooling, patience=0)

    def cancel_at_2(info):
        if info.kind == "train" and info.step == 2:
            raise JobCancelled()  # what core.runtime.jobs' ctx.progress raises after Cancel

    with watch_modules() as (seen, params):
        if outcome == "finished":
            r = train(cfg, toy(32, 8), tmp_path / "run")
            assert r.steps > 0
        elif outcome == "cancelled":
            with pytest.raises(JobCancelled) as err:
                train(cfg, toy(32, 8), tmp_path / "run", on_step=cancel_at_2)
        else:
            with pytest.raises(FinetuneError, match="became nan") as err:
                train(cfg, toy(32, 8), tmp_path / "run")
    assert len(seen) > 0
    assert_freed(seen, params)  # while `err` still holds the exception and its traceback
    if outcome != "finished":
        import traceback

        assert "core/train/finetune.py" in "".join(traceback.format_exception(err.value))  # the text is kept


@pytest.mark.parametrize("outcome", ["finished", "cancelled", "failed"])
def test_pretrain_model_is_freed_after_the_run(outcome, tmp_path):
    from core.data.corpus import CORPUS_DIR, parse_documents
    from core.train.pretrain.train import PretrainConfig, pretrain

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_text(
        "\n\n".join("\n".join(d) for d in parse_documents((CORPUS_DIR / "train.txt").read_text())[:30])
    )
    (corpus / "heldout.txt").write_text(
        "\n\n".join("\n".join(d) for d in parse_documents((CORPUS_DIR / "heldout.txt").read_text())[:4])
    )
    cfg = PretrainConfig(
        family="bert",
        out=str(tmp_path / "out"),
        corpus=str(corpus),
        steps=6,
        batch_size=4,
        max_len=32,
        lr=3e-3,
        size="tiny",
        vocab_size=300,
        log_every=1,
        eval_every=0,
        eval_instances=4,
        checkpoint_every=2,
        threads=1,
        warmup=0.0,
        prior_bias=False,
    )
    if outcome == "failed":  # a real failure mid-run: the checkpoint folder's name is taken by a file
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "checkpoint").write_text("not a folder")

    def on_step(ev):
        if outcome == "cancelled" and ev["step"] == 3:
            raise JobCancelled()

    with watch_modules() as (seen, params):
        if outcome == "finished":
            assert pretrain(cfg, on_step=on_step).steps == 6
        else:
            with pytest.raises(JobCancelled if outcome == "cancelled" else FileExistsError) as err:
                pretrain(cfg, on_step=on_step)
    assert len(seen) > 0
    assert_freed(seen, params)  # while `err` still holds the exception, as a job table would
    if outcome != "finished":
        assert err.value is not None  # (and it is still held here)


def test_release_breaks_accelerates_mixed_precision_cycle():
    """With bf16, accelerate's prepare stores bound methods of the model on the model (model.forward,
    model._original_forward): a cycle only a full collection frees. core.train.common.release removes it."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    from core.train.common import release as _release

    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        acc = Accelerator(cpu=True, mixed_precision="bf16")
        model = acc.prepare(torch.nn.Sequential(torch.nn.Linear(4, 4)))
        assert "_original_forward" in vars(model)  # the cycle this test is about
        ref = weakref.ref(model)
        gc.collect()
        gc.disable()  # so that only reference counting can free it
        try:
            _release(acc, model)
            del model
            assert ref() is None
        finally:
            gc.enable()
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


# ---------------------------------------------------------------------------------------------- seeding (item 8)
def _interleaved(fns):
    """Run the functions in threads that take turns at every progress call (a barrier), so their draws from any
    shared random state interleave; returns their results in order."""
    barrier = threading.Barrier(len(fns), timeout=120)
    out, errors = [None] * len(fns), []

    def run(i):
        try:
            out[i] = fns[i](lambda *a, **k: barrier.wait())
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    return out


def test_two_seeded_finetunes_interleaved_in_threads_match_each_alone(tiny_models, tmp_path):
    # BERT's tiny config has dropout 0.1 and a fresh random classification head: both draw random numbers.
    data = toy(48, 8)
    cfgs = [
        FinetuneConfig(
            "bert", str(tiny_models["bert"]), max_steps=5, batch_size=8, max_length=16, seed=s, lr=1e-3, patience=0
        )
        for s in (1, 2)
    ]
    alone = [train(c, data, tmp_path / f"alone{i}") for i, c in enumerate(cfgs)]
    assert [h["loss"] for h in alone[0].history] != [h["loss"] for h in alone[1].history]
    together = _interleaved(
        [lambda hook, c=c, i=i: train(c, data, tmp_path / f"together{i}", on_step=hook) for i, c in enumerate(cfgs)]
    )
    for a, b in zip(alone, together):
        assert [h["loss"] for h in a.history] == [h["loss"] for h in b.history]
        assert np.array_equal(a.test_probs, b.test_probs)


@pytest.mark.parametrize("method", ["kernelshap", "lime"])
def test_two_seeded_attributions_interleaved_in_threads_match_each_alone(method, tiny_models):
    from core.inspect.attribution import attribute
    from core.inspect.attribution_inputs import AttributionConfig

    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="pretraining")
    cfgs = [
        AttributionConfig(
            target="mask",
            text="the capital of france is [MASK] and it is big .",
            methods=(method,),
            n_samples=48,
            internal_batch_size=8,
            seed=s,
        )
        for s in (3, 4)
    ]
    alone = [attribute(lm, c).method(method).scores for c in cfgs]
    assert not np.array_equal(alone[0], alone[1])
    together = _interleaved([lambda hook, c=c: attribute(lm, c, progress=hook).method(method).scores for c in cfgs])
    for a, b in zip(alone, together):
        assert np.array_equal(a, b)


def test_run_rng_leaves_the_process_stream_where_it_was():
    from core.train.rng import RunRNG

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    rng = RunRNG(7)
    with rng.active():
        first = torch.rand(2)
    assert torch.equal(torch.rand(3), expected)  # outside, the process stream continues undisturbed
    with rng.active():
        second = torch.rand(2)
    torch.manual_seed(7)
    assert torch.equal(torch.cat([first, second]), torch.rand(4))  # inside, one continuous seeded stream


# ---------------------------------------------------------------------------------------------- resume (item 6)
def test_pretrain_checkpoint_carries_the_cuda_generators_and_resume_restores_them(tmp_path):
    from core.data.corpus import CORPUS_DIR, parse_documents
    from core.train.common import RUN_RNG_FILE
    from core.train.pretrain.train import PretrainConfig, pretrain
    from core.train.rng import RunRNG

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    docs = parse_documents((CORPUS_DIR / "train.txt").read_text())
    (corpus / "train.txt").write_text("\n\n".join("\n".join(d) for d in docs[:30]))
    (corpus / "heldout.txt").write_text("\n\n".join("\n".join(d) for d in docs[30:34]))
    cfg = PretrainConfig(
        family="bert",
        out=str(tmp_path / "out"),
        corpus=str(corpus),
        steps=6,
        batch_size=4,
        max_len=32,
        size="tiny",
        vocab_size=300,
        eval_every=0,
        eval_instances=4,
        checkpoint_every=3,
        log_every=1,
        threads=1,
        prior_bias=False,
    )
    calls = []
    assert pretrain(cfg, should_stop=lambda: calls.append(1) or len(calls) >= 4).status == "stopped"
    state = torch.load(tmp_path / "out" / "checkpoint" / RUN_RNG_FILE, weights_only=True)  # the run's own stream
    assert "cuda" in state and isinstance(state["cuda"], list)
    if torch.cuda.is_available():
        assert len(state["cuda"]) == torch.cuda.device_count()
    else:
        assert state["cuda"] == []
    # Restoring continues the saved streams: the CPU one exactly; CUDA ones where there is CUDA, skipped here.
    rng = RunRNG(999)
    rng.load_state_dict(state)
    assert torch.equal(rng.cpu_state, state["cpu"])
    foreign = {**state, "cuda": [torch.zeros(16, dtype=torch.uint8)]}  # a GPU machine's checkpoint
    rng2 = RunRNG(999)
    rng2.load_state_dict(foreign)
    assert torch.equal(rng2.cpu_state, state["cpu"])
    assert rng2.cuda_states == ([] if not torch.cuda.is_available() else rng2.cuda_states)
    # ...and the resumed run ends where the straight run ends.
    straight = pretrain(PretrainConfig(**{**cfg.__dict__, "out": str(tmp_path / "straight")}))
    resumed = pretrain(cfg)
    assert resumed.steps == 6
    assert [h["loss"] for h in resumed.history] == pytest.approx([h["loss"] for h in straight.history], abs=1e-5)


# ---------------------------------------------------------------------------------------------- dtype (item 9)
@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_half_precision_checkpoint_loads_as_fp32(half, tmp_path):
    import json

    import transformers

    from core.models.tiny import make_tiny

    folder = make_tiny("bert", tmp_path / "m")
    m = transformers.BertForPreTraining.from_pretrained(str(folder), dtype=torch.float32)
    m.to(getattr(torch, half)).save_pretrained(str(folder))
    assert json.loads((folder / "config.json").read_text())["dtype"] == half  # the folder says half
    for task in ("base", "mlm", "seqcls"):
        lm = load(ModelSpec("bert", str(folder), "cpu"), task)
        assert {p.dtype for p in lm.model.parameters()} == {torch.float32}, task
    asked = load(ModelSpec("bert", str(folder), "cpu"), "mlm", dtype=half)  # half only when asked for
    assert {p.dtype for p in asked.model.parameters()} == {getattr(torch, half)}


def test_finetune_of_a_bf16_checkpoint_trains_fp32_weights(tmp_path):
    import transformers

    from core.models.tiny import make_tiny

    folder = make_tiny("bert", tmp_path / "m")
    transformers.BertForPreTraining.from_pretrained(str(folder)).to(torch.bfloat16).save_pretrained(str(folder))
    r = train(
        FinetuneConfig("bert", str(folder), max_steps=2, batch_size=8, max_length=16, pooling="mean"),
        toy(24, 8),
        tmp_path / "run",
    )
    assert r.precision == "fp32"
    from safetensors.torch import load_file

    saved = load_file(str(Path(r.model_dir) / "model.safetensors"))
    assert {v.dtype for v in saved.values()} == {torch.float32}


# ---------------------------------------------------------------------------------------------- the GPU itself
def _cuda_allocated() -> int:
    """Bytes held by tensors on the GPU, without cuBLAS's per-handle workspaces (torch keeps one per thread and
    stream for good, which is not a leak; torch's own memory tests clear them the same way)."""
    torch.cuda.synchronize()
    gc.collect()
    torch._C._cuda_clearCublasWorkspaces()
    return torch.cuda.memory_allocated()


@gpu
@pytest.mark.parametrize("outcome", ["finished", "cancelled", "failed"])
def test_gpu_memory_is_back_at_its_baseline_after_a_finetune(outcome, tiny_models, tmp_path):
    folder = nan_checkpoint(tmp_path / "nan") if outcome == "failed" else tiny_models["bert"]
    cfg = FinetuneConfig("bert", str(folder), epochs=2, batch_size=8, max_length=16, device="cuda", patience=0)
    train(
        FinetuneConfig("bert", str(tiny_models["bert"]), max_steps=2, batch_size=8, max_length=16, device="cuda"),
        toy(32, 8),
        tmp_path / "warm-up",
    )  # what the first run creates once per process (CUDA context, kernels)
    base = _cuda_allocated()

    def cancel_at_2(info):
        if info.kind == "train" and info.step == 2:
            raise JobCancelled()

    held = None
    try:
        train(cfg, toy(32, 8), tmp_path / "run", on_step=cancel_at_2 if outcome == "cancelled" else None)
    except (JobCancelled, FinetuneError) as e:
        held = e  # the exception stays referenced, as a job table would keep it
    assert (held is None) == (outcome == "finished"), held
    after = _cuda_allocated()
    print(f"\ntorch.cuda.memory_allocated(): baseline {base} B, after a {outcome} fine-tune {after} B")
    assert after == base


@gpu
def test_gpu_out_of_memory_gives_the_memory_back_and_says_what_to_do(tiny_models, tmp_path):
    """A real out-of-memory: the process may use 2% of the GPU (torch's per-process limit), and a batch of 256
    rows of 512 tokens through a 1024-wide model needs more."""
    from core.data.datasets_local import LabelledData, Split
    from core.models.tiny import make_tiny

    big = make_tiny("bert", tmp_path / "big", task="base", hidden=1024, layers=4, heads=16, ffn=4096, max_pos=512)
    long = LabelledData(
        "long",
        Split(tuple(f"row {i} " + "very " * 600 for i in range(264)), tuple(i % 2 for i in range(264))),
        Split(("short one", "short two"), (0, 1)),
        ("a", "b"),
        "generated in the test",
        "n/a",
    )
    cfg = FinetuneConfig("bert", str(big), max_steps=1, batch_size=256, max_length=512, device="cuda", precision="fp32")
    train(
        FinetuneConfig(
            "bert", str(tiny_models["bert"]), max_steps=1, batch_size=8, max_length=16, device="cuda", precision="fp32"
        ),
        toy(32, 8),
        tmp_path / "warm-up",
    )
    base = _cuda_allocated()
    torch.cuda.set_per_process_memory_fraction(0.02)
    try:
        with pytest.raises(FinetuneError, match="Out of memory on cuda.*Try batch size 128 or max length 256") as err:
            train(cfg, long, tmp_path / "run")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    after = _cuda_allocated()
    print(f"\nOut of memory at 2% of the GPU: {err.value}; memory_allocated baseline {base} B, after {after} B")
    assert after == base


@gpu
def test_bf16_finetune_on_the_gpu_learns(tiny_models, tmp_path):
    cfg = FinetuneConfig(
        "bert",
        str(tiny_models["bert"]),
        epochs=3,
        lr=3e-3,
        batch_size=16,
        max_length=16,
        pooling="mean",
        patience=0,
        device="cuda",
        precision="bf16",
        seed=0,
    )
    r = train(cfg, toy(), tmp_path / "run")
    print(f"\nbf16 fine-tune on {r.device}: accuracy {r.accuracy:.3f}, {r.samples_per_s:.0f} samples/s")
    assert r.precision == "bf16" and r.device.startswith("cuda")
    assert r.accuracy >= 0.75, r.accuracy
    from safetensors.torch import load_file

    saved = load_file(str(Path(r.model_dir) / "model.safetensors"))
    assert {v.dtype for v in saved.values()} == {torch.float32}  # bf16 autocast, fp32 master weights


@gpu
def test_two_seeded_gpu_finetunes_interleaved_in_threads_match_each_alone(tiny_models, tmp_path):
    data = toy(48, 8)
    cfgs = [
        FinetuneConfig(
            "bert",
            str(tiny_models["bert"]),
            max_steps=5,
            batch_size=8,
            max_length=16,
            seed=s,
            lr=1e-3,
            patience=0,
            device="cuda",
            precision="fp32",
        )
        for s in (1, 2)
    ]
    alone = [train(c, data, tmp_path / f"alone{i}") for i, c in enumerate(cfgs)]
    together = _interleaved(
        [lambda hook, c=c, i=i: train(c, data, tmp_path / f"together{i}", on_step=hook) for i, c in enumerate(cfgs)]
    )
    for a, b in zip(alone, together):
        # the same dropout masks; cuBLAS may still sum in another order, hence a tolerance
        assert np.allclose([h["loss"] for h in a.history], [h["loss"] for h in b.history], atol=1e-4)


@gpu
def test_gpu_pretrain_checkpoint_restores_the_cuda_stream(tmp_path):
    from core.train.rng import RunRNG

    rng = RunRNG(5, cuda=True)
    with rng.active():
        torch.rand(3, device="cuda")
    saved = rng.state_dict()
    with rng.active():
        expected = torch.rand(4, device="cuda")
    restored = RunRNG(0, cuda=True)
    restored.load_state_dict(saved)
    with restored.active():
        assert torch.equal(torch.rand(4, device="cuda"), expected)


@gpu
def test_auto_and_cuda_load_one_model_on_the_gpu(tiny_models):
    from core.models.devices import resolve_device

    assert resolve_device("auto").torch_device == resolve_device("cuda").torch_device == "cuda"
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cuda"), "mlm")
    assert {p.dtype for p in lm.model.parameters()} == {torch.float32}
    assert next(lm.model.parameters()).device.type == "cuda"


def test_speed_benchmark_builds_leave_the_process_stream_alone():
    from core.compare.speed import _build

    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    a, _ = _build("distilbert", "cpu")
    assert torch.equal(torch.rand(3), expected)  # before: torch.manual_seed(0) reset every session's stream
    b, _ = _build("distilbert", "cpu")
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))  # still seeded weights
