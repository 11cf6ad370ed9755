"""Size and build time of the offline bertviz views against plain bertviz, on a bert-base-size model.

Model: random weights of the official bert-base-uncased config (12 layers x 12 heads, eager attention) with the
real bert-base-uncased tokenizer, on a text of exactly 128 and 512 tokens. Baseline: plain bertviz 1.4.1
(``head_view`` / ``model_view`` with ``html_action="return"``, float32 attention as a model returns it), on the
same attention and the same layers. Ours: app.views.inspect.bertviz_embed.build_view, which ships the layers that fit its
payload budget (all 12 at 128 tokens, 1 at 512), inlines ~0.4 MB of vendored JS and rounds weights to 3 decimals.
Plain bertviz with all 12 layers at 512 tokens is not run: it would be ~12x its 1-layer size below (it writes the
weights twice, once in a comment), and a try on this 2-core machine passed 4 GB of RAM before it was stopped.
Sizes are UTF-8 bytes of the returned HTML; times are wall-clock seconds of one build on this (shared) machine.
A last line repeats the 128-token head view on real pretrained weights (MiniLM), whose peaked heads compress more.
Run: .venv/bin/python bench/attention.py  [--quick]
``--quick``: the same views and ratios on a tiny random BERT (core.models.tiny: 2 layers x 4 heads) at 32 and 64
tokens, and MiniLM at 32 tokens (seconds; tests/test_bench_quick.py runs it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from bertviz import head_view, model_view  # noqa: E402

from app.views.inspect.bertviz_embed import build_view, fit_payload  # noqa: E402
from core.inspect.attention import AttentionConfig, compute_attention  # noqa: E402
from core.models.loading import (  # noqa: E402
    LoadedModel,
    ModelSpec,
    load,  # noqa: E402
)
from core.models.tiny import tiny_config  # noqa: E402
from core.models.tokenizer_build import (
    bert_uncased_tokenizer,  # noqa: E402
    minilm_folder,  # noqa: E402
)
from core.registry import official_config  # noqa: E402

WORDS = "the cat sat on the mat and then it slept for a long time in the warm sun".split()  # one WordPiece each


def build(quick: bool = False) -> LoadedModel:
    """bert-base-uncased's config with random weights; ``quick``: the family's tiny config (same tokenizer)."""
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    tok = bert_uncased_tokenizer()
    cfg = tiny_config("bert", len(tok), tok, max_pos=512) if quick else official_config("bert-base-uncased")
    cfg._attn_implementation = "eager"  # as core.models.loading.load(..., attentions=True) does
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    name = "tiny BERT" if quick else "bert-base-uncased"
    return LoadedModel(
        model=model,
        tokenizer=tok,
        spec=ModelSpec("bert", f"{name} (random weights)", "cpu"),
        task="base",
        source="random init",
        path="",
        device="cpu",
    )


def text_of(n_tokens: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n_tokens - 2))  # + [CLS] and [SEP]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def plain(kind: str, att, labels: list[str], layers: list[int]) -> tuple[int, float]:
    """Plain bertviz on the attention a model returns (float32 tensors, (1, heads, n, n) per layer)."""
    tensors = [torch.from_numpy(att[i : i + 1].astype("float32")) for i in layers]
    fn = head_view if kind == "head" else model_view
    out, sec = timed(lambda: fn(tensors, labels, html_action="return"))
    data = out.data
    return (len(data) if data.isascii() else len(data.encode("utf-8"))), sec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny BERT at 32 and 64 tokens: seconds")
    args = ap.parse_args()
    lm = build(args.quick)
    sizes, mini_tokens = ((32, 64), 32) if args.quick else ((128, 512), 128)
    n_layers, n_heads = lm.model.config.num_hidden_layers, lm.model.config.num_attention_heads
    print(f"{lm.spec.checkpoint} ({n_layers} layers x {n_heads} heads), eager attention, torch {torch.__version__}")
    print(
        f"{'tokens':>6} {'view':>5} {'layers':>6} | {'ours MB':>8} {'ours s':>7} | {'bertviz MB':>10} {'bertviz s':>9} "
        f"| {'size ours/bertviz':>17} {'time ours/bertviz':>17}"
    )
    worst = 0.0
    for n in sizes:
        r = compute_attention(lm, AttentionConfig(text_of(n)))
        assert r.n_tokens == n, r.n_tokens
        labels = list(r.labels)
        att = r.attentions  # (layers, heads, n, n) float16
        layers, heads = fit_payload(list(range(r.n_layers)), list(range(r.n_heads)), n, pair=False)
        assert len(heads) == r.n_heads
        for kind in ("head", "model"):
            view, ours_s = timed(
                lambda kind=kind, att=att, labels=labels, layers=layers: build_view(kind, att, labels, layers=layers)
            )
            base_b, base_s = plain(kind, att, labels, layers)
            ratio = view.size_bytes / base_b
            worst = max(worst, ratio)
            print(
                f"{n:>6} {kind:>5} {len(layers):>6} | {view.size_bytes / 1e6:>8.2f} {ours_s:>7.2f} | "
                f"{base_b / 1e6:>10.2f} {base_s:>9.2f} | {ratio:>16.3f}x {ours_s / base_s:>16.2f}x"
            )
    print(f"worst size ratio on the same layers: ours/bertviz = {worst:.3f}x (target <= 0.333x)")
    # Random weights spread attention evenly (every weight ~1/n). Trained heads are peaked, and weights that
    # round to 0 cost 2 bytes: the offline real MiniLM (6 x 12, pretrained) on the same 128 tokens.
    mini = load(ModelSpec("bert", str(minilm_folder()), "cpu"), task="base", attentions=True)
    r = compute_attention(mini, AttentionConfig(text_of(mini_tokens)))
    view, ours_s = timed(lambda: build_view("head", r.attentions, list(r.labels)))
    base_b, base_s = plain("head", r.attentions, list(r.labels), list(range(r.n_layers)))
    print(
        f"pretrained MiniLM, {mini_tokens} tokens, head view, all {r.n_layers} layers: ours {view.size_bytes / 1e6:.2f} MB "
        f"in {ours_s:.2f}s, bertviz {base_b / 1e6:.2f} MB in {base_s:.2f}s: ours/bertviz = "
        f"{view.size_bytes / base_b:.3f}x size, {ours_s / base_s:.2f}x time"
    )


if __name__ == "__main__":
    main()
