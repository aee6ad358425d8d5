"""Can a small GPT-NeoX learn 3-object deduction from solved puzzles alone? A probe beside the stand-in.

    python scripts/deduction_probe.py --out FILE.json [--layers 4] [--width 128] [--heads 4] [--steps 3000]
                                      [--lr 3e-3] [--batch 32] [--loss answer|all] [--every 250] [--seed 0]
                                      [--puzzle-shortcut kept|balanced] [--device auto]

The stand-in (geomcap pythia standin) learns deduction from puzzles mixed into other text, drawn from a fixed
set. This probe removes both limits: it trains on a fresh stream of solved 3-object ordering puzzles and
nothing else (geomcap.diagnostics.training_puzzle_items: the benchmark's generator, never a benchmark item;
the context followed by the gold statement), one puzzle per row, padded, with the loss on the answer's
tokens only (--loss answer) or on every token (--loss all); --puzzle-shortcut balanced keeps the
unnamed-object shortcut from paying more than chance in the stream (as the stand-in's --puzzle-shortcut).
The model is the stand-in's GPT-NeoX (geomcap.pythia.standin.neox_config: rotary on 25% of each head,
parallel residual, untied embeddings), its tokenizer a byte-level BPE of 512 tokens trained on the stream's
first puzzles; AdamW (betas 0.9, 0.95, weight decay 0.01 on the matrices), 1% warmup then
cosine to 10% of --lr, gradient norm clipped at 1 (geomcap.train.make_optimizer, geomcap.config.lr_schedule).
At step 0 and every --every steps the committed logical_deduction_3 benchmark is scored as `geomcap pythia
run` scores it (geomcap.pythia.scoring.score_items) and split by the unnamed-object shortcut
(geomcap.diagnostics.deduction_shortcut). The record (JSON) holds the options, the model's size, one row per
scoring (step, mean training loss since the last row, accuracy per class) and the seconds it took.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from geomcap import diagnostics, store
from geomcap.config import lr_schedule
from geomcap.models import resolve_device
from geomcap.pythia.scoring import score_items
from geomcap.pythia.standin import neox_config, train_tokenizer
from geomcap.train import make_optimizer

BENCHMARK = "logical_deduction_3"
CHUNK = 3200  # puzzles generated at a time; chunk k draws from generator seeds seed + 100 k + 1000 + round


def puzzle_stream(seed: int, shortcut: str = "kept"):
    """Solved 3-object puzzles, (context, answer) pairs, without end; never a benchmark item; ``shortcut`` as
    :func:`geomcap.diagnostics.training_puzzle_items`'s (balanced within each chunk)."""
    k = 0
    while True:
        for item in diagnostics.training_puzzle_items(CHUNK, seed=seed + 100 * k, sizes=(3,), shortcut=shortcut):
            yield item["context"], item["choices"][item["answer"]]
        k += 1


def batch_tensors(pairs, tokenizer, loss: str):
    """Right-padded ids (B, T), attention mask (B, T) and labels (B, T): every row is <|endoftext|>, the
    context's tokens, the answer's tokens (each tokenized on its own, as the scorer does); labels are -100 on
    padding and, with loss "answer", on the context."""
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    rows, starts = [], []
    for context, answer in pairs:
        ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
        ans = tokenizer(answer, add_special_tokens=False)["input_ids"]
        rows.append([eot, *ctx, *ans])
        starts.append(1 + len(ctx) if loss == "answer" else 0)
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for r, (row, start) in enumerate(zip(rows, starts)):
        ids[r, : len(row)] = torch.tensor(row)
        mask[r, : len(row)] = 1
        labels[r, start: len(row)] = torch.tensor(row[start:])
    return ids, mask, labels


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the record, JSON")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch", type=int, default=32, help="puzzles per step")
    parser.add_argument("--loss", choices=("answer", "all"), default="answer",
                        help="answer: the loss on the answer's tokens only; all: on every token")
    parser.add_argument("--puzzle-shortcut", choices=diagnostics.PUZZLE_SHORTCUTS, default="kept",
                        help="kept: the puzzles as generated; balanced: the unnamed object is the answer at chance rate")
    parser.add_argument("--every", type=int, default=250, help="score the benchmark every K steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    args = parser.parse_args(argv)
    for name in ("layers", "width", "heads", "steps", "batch", "every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.width % args.heads:
        parser.error(f"--width {args.width} is not divisible by --heads {args.heads}")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        parser.error(f"--lr must be a positive number, got {args.lr}")
    try:
        device = resolve_device(args.device)
    except ValueError as exc:
        parser.error(f"--device: {exc}")
    from transformers import GPTNeoXForCausalLM

    t0, made_by = time.perf_counter(), store.provenance(str(device))  # the commit that trains, not the one at the end
    torch.manual_seed(args.seed)
    stream = puzzle_stream(args.seed, args.puzzle_shortcut)
    first = [next(stream) for _ in range(3000)]
    tokenizer = train_tokenizer([c + a for c, a in first], 512)
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    net = GPTNeoXForCausalLM(neox_config(len(tokenizer), args.layers, args.width, args.heads, eot, 512)).to(device)
    opt = make_optimizer(net, args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    items = diagnostics.load_benchmark(BENCHMARK)
    classes = [diagnostics.deduction_shortcut(it) for it in items]
    rows, losses, pending = [], [], iter(first)

    def score(step):
        net.eval()
        scores = score_items(net, tokenizer, items, hidden=False)
        net.train()
        row = diagnostics.accuracy_by_shortcut(np.nanargmax(scores.logprob, axis=1) == scores.answer, classes)
        rows.append({"step": step, "train_loss": float(np.mean(losses)) if losses else None,
                     "seconds": round(time.perf_counter() - t0, 1), **row})
        losses.clear()
        print(f"step {step}: loss {rows[-1]['train_loss'] or float('nan'):.3f}, " + ", ".join(
            f"{c} {row[c]['accuracy']:.2f}" for c in ("all", *diagnostics.SHORTCUT_CLASSES)), flush=True)

    net.train()
    score(0)
    warmup = max(1, args.steps // 100)
    for step in range(1, args.steps + 1):
        pairs = [next(pending, None) or next(stream) for _ in range(args.batch)]
        ids, mask, labels = (t.to(device) for t in batch_tensors(pairs, tokenizer, args.loss))
        for group in opt.param_groups:
            group["lr"] = lr_schedule(step - 1, args.lr, warmup, args.steps, 0.1)
        loss = net(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if step % args.every == 0 or step == args.steps:
            score(step)
    record = {"benchmark": BENCHMARK, "file_sha256": diagnostics.file_sha(BENCHMARK),
              "options": {k: v for k, v in vars(args).items() if k != "out"},
              "parameters": sum(p.numel() for p in net.parameters()),
              "classes": list(diagnostics.SHORTCUT_CLASSES), "rule": "geomcap.diagnostics.deduction_shortcut",
              "rows": rows, "seconds": round(time.perf_counter() - t0, 1), "provenance": made_by}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    store.atomic_write_json(out, record)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
