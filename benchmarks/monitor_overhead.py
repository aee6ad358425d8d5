"""Cost of geomcap.monitor: its share of a training run's wall time, and one checkpoint of a 100M model.

    python benchmarks/monitor_overhead.py                  # both parts, one thread
    python benchmarks/monitor_overhead.py --part overhead  # the toy Trainer run of the book page only
    python benchmarks/monitor_overhead.py --part checkpoint --prompts 256 --tokens 32

overhead    the book page's run (a 2-layer GPT-2, n_embd 32, modular addition,
            Hugging Face Trainer) with GeometryCallback on the default schedule
            and on ``every`` = 10, 50: wall time, time inside the monitor, share.
checkpoint  one ``record`` of a GPT-2-small-sized model (random init, 124M
            parameters of which 85M outside the embeddings) on ``--prompts``
            probe prompts of ``--tokens`` tokens: the forward (without the
            output head, as the monitor runs it without labels) and the 13
            RankMe values; plus the forward's FLOPs (2 x non-embedding
            parameters x tokens + attention) to project other devices.

Works from a checkout without installing the package (it puts ``src`` on the path).
"""
import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402


def toy_run(max_steps: int, **options) -> dict:
    from transformers import GPT2Config, GPT2LMHeadModel, PrinterCallback, Trainer, TrainingArguments
    from transformers.utils import logging as hf_logging

    from geomcap.monitor import GeometryCallback

    hf_logging.set_verbosity_error()
    p = 23  # every "a b = c" with c = (a + b) mod p; 70% of the pairs train, 30% are the probe batch
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.ravel(), b.ravel()
    pairs = torch.stack([a, b, torch.full_like(a, p), (a + b) % p], dim=1)
    pairs = pairs[torch.randperm(len(pairs), generator=torch.Generator().manual_seed(0))]
    train, test = pairs[: int(0.7 * len(pairs))], pairs[int(0.7 * len(pairs)):]
    labels = train.clone()
    labels[:, :-1] = -100
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=p + 1, n_positions=4, n_embd=32, n_layer=2, n_head=4))
    callback = GeometryCallback(test[:, :-1], labels=test[:, -1].numpy(), **options)
    args = TrainingArguments("/tmp/geomcap-monitor-bench", max_steps=max_steps, per_device_train_batch_size=64,
                             learning_rate=3e-3, logging_steps=max_steps, report_to="none", save_strategy="no",
                             use_cpu=True, disable_tqdm=True, seed=0)
    trainer = Trainer(model=model, args=args, callbacks=[callback],
                      train_dataset=[{"input_ids": x, "labels": y} for x, y in zip(train, labels)])
    trainer.remove_callback(PrinterCallback)  # no log lines on stdout
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    records = callback.metrics["step"].nunique()
    return {"schedule": options or "default", "records": records, "wall_s": wall,
            "monitor_s": callback.monitor.seconds, "share": callback.monitor.seconds / wall,
            "ms_per_record": 1000 * callback.monitor.seconds / records}


def gpt2_small_checkpoint(prompts: int, tokens: int, repeats: int = 2) -> dict:
    from transformers import GPT2Config, GPT2LMHeadModel

    from geomcap import geometry
    from geomcap.monitor import GeometryMonitor

    cfg = GPT2Config()  # 12 layers x 768, vocab 50257: GPT-2 small
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    n_body = n_params - model.transformer.wte.weight.numel() - model.transformer.wpe.weight.numel()
    ids = torch.randint(0, cfg.vocab_size, (prompts, tokens), generator=torch.Generator().manual_seed(0))
    monitor = GeometryMonitor(model, ids)
    total = forward = rankme = float("inf")
    for step in range(repeats):  # the best of a few: other processes share these cores
        t0 = time.perf_counter()
        monitor.record(step)
        total = min(total, time.perf_counter() - t0)
        with torch.no_grad():
            t0 = time.perf_counter()
            hidden = model.transformer(ids, output_hidden_states=True).hidden_states
            forward = min(forward, time.perf_counter() - t0)
        t0 = time.perf_counter()
        for h in hidden:
            geometry.rankme(h[:, -1])
            geometry.mean_energy_share(h[:, -1])
        rankme = min(rankme, time.perf_counter() - t0)
    n_tok = prompts * tokens
    flops = 2 * n_body * n_tok + 2 * 2 * cfg.n_layer * prompts * tokens * tokens * cfg.n_embd  # matmuls + QK^T, AV
    return {"parameters": n_params, "non_embedding": n_body, "prompts": prompts, "tokens": tokens,
            "record_s": total, "forward_s": forward, "rankme_s": rankme, "forward_gflop": flops / 1e9,
            "cpu_gflops": flops / forward / 1e9}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("overhead", "checkpoint", "all"), default="all")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=1000, help="training steps of the toy run")
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s)")
    if args.part in ("overhead", "all"):
        for options in ({}, {"every": 10}, {"every": 50}):
            r = toy_run(args.steps, **options)
            print(f"toy run {args.steps} steps, schedule {r['schedule']}: {r['records']} records, wall "
                  f"{r['wall_s']:.1f} s, monitor {r['monitor_s']:.2f} s = {100 * r['share']:.1f}% "
                  f"({r['ms_per_record']:.1f} ms per record)")
    if args.part in ("checkpoint", "all"):
        r = gpt2_small_checkpoint(args.prompts, args.tokens)
        print(f"GPT-2-small-sized ({r['parameters'] / 1e6:.0f}M parameters, {r['non_embedding'] / 1e6:.0f}M outside "
              f"the embeddings), {r['prompts']} prompts x {r['tokens']} tokens: one record {r['record_s']:.2f} s "
              f"(best of 2; forward alone {r['forward_s']:.2f} s, RankMe and mean share of 13 layers "
              f"{r['rankme_s']:.3f} s); forward "
              f"{r['forward_gflop']:.0f} GFLOP = {r['cpu_gflops']:.0f} GFLOP/s here")
        for name, tflops in (("one H200 at 30% of its 790 TFLOP/s bf16 peak", 0.3 * 790),):
            print(f"projected forward on {name}: {r['forward_gflop'] / tflops:.1f} ms "
                  f"(+ the RankMe SVDs: {r['rankme_s']:.3f} s on this CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
