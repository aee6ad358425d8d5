"""Refactoring guard: train five small reference runs and compare their metrics byte for byte.

    python scripts/byte_identity.py make  DIR    # train the references into DIR (before a refactor)
    python scripts/byte_identity.py check DIR    # train them again into DIR/check, compare with DIR

The runs cover every recorder of the training side: ``geomcap train`` alone (copy/easy, 405k); with every
costly measure at every checkpoint (add/hard, 405k-deep: gradient ranks, Hessian, LLC); the grokking
setting (mod/hard on grok-1l: full batch, constant schedule, no clipping, number tokens); two runs through
``geomcap.packed.train_packed``; and a ``geomcap.monitor.GeometryMonitor`` recording a small model as it
trains. ``check`` compares each run's metrics.csv byte for byte, and each training run's config.json
without its provenance (so its directory name, the config hash, too). One torch thread throughout: the
metrics are byte-identical only at a fixed thread count. Exit status 1 when anything differs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: the ``geomcap train`` reference runs: name -> command-line options
CLI_RUNS = {
    "copy-easy": ["--task", "copy", "--level", "easy", "--size", "405k", "--steps", "40"],
    "add-hard-costly": ["--task", "add", "--level", "hard", "--size", "405k-deep", "--steps", "40",
                        "--measures", "grad_rank,grad_cov_rank,hessian_top,llc", "--costly-every", "1",
                        "--dynamics-size", "32"],
    "mod-grok": ["--task", "mod", "--level", "hard", "--size", "grok-1l", "--task-params",
                 "p=23,train_fraction=0.3,number_tokens=true", "--full-batch", "true", "--schedule", "constant",
                 "--warmup-steps", "5", "--grad-clip", "none", "--steps", "30"],
}
#: the packed runs' shared settings (two tasks of one preset)
PACKED = dict(level="easy", size="405k", steps=30, dense_steps=8, n_linear_checkpoints=6, n_train=2000,
              n_test=128, probe_size=64, train_eval_size=64, batch_size=32)
PACKED_TASKS = ("copy", "reverse")


def train_cli(out: Path) -> None:
    for name, options in CLI_RUNS.items():
        subprocess.run([sys.executable, "-m", "geomcap.cli", "train", *options, "--threads", "1", "--quiet",
                        "--out", str(out / name)], check=True)


def train_packed(out: Path) -> None:
    import torch

    from geomcap.packed import train_packed as packed
    from geomcap.train import TrainConfig

    torch.set_num_threads(1)
    configs = [TrainConfig(task=task, **PACKED) for task in PACKED_TASKS]
    packed(configs, outs=[out / f"packed-{task}" for task in PACKED_TASKS], device="cpu", progress=False)


def record_monitor(out: Path) -> None:
    """A GeometryMonitor (hooked layers, labels) on a 405k GPT trained 24 steps on add/easy."""
    import torch

    from geomcap import models, tasks
    from geomcap.monitor import GeometryMonitor
    from geomcap.train import TrainConfig, learning_rate, make_optimizer, train_step

    torch.set_num_threads(1)
    cfg = TrainConfig(task="add", level="easy", steps=24, batch_size=32)
    data = tasks.make_task(cfg.task, cfg.level, seed=0, n_train=512, n_test=64)
    torch.manual_seed(0)
    model = models.build(cfg.size, data.vocab_size)
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2))
    probe = models.answer_inputs(data.test_prompts, data.test_answers)
    monitor = GeometryMonitor(model, probe, steps=cfg.steps, position=data.answer_position,
                              layers=["tok_emb", "blocks.0", "blocks.1"], labels=data.test_answers[:, 0].numpy())
    gen = torch.Generator().manual_seed(0)
    for step in range(cfg.steps + 1):
        monitor.maybe_record(step)
        idx = torch.randint(data.n_train, (cfg.batch_size,), generator=gen)
        train_step(model, optimizer, data.train_prompts[idx], data.train_answers[idx], learning_rate(step, cfg),
                   cfg.grad_clip, torch.device("cpu"))
    monitor.save(out / "monitor")


def make(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    train_cli(out)
    train_packed(out)
    record_monitor(out)


def _config(run: Path) -> dict | None:
    path = run / "config.json"
    if not path.exists():
        return None
    config = json.loads(path.read_text())
    config.pop("provenance", None)
    return config


def check(reference: Path) -> int:
    fresh = reference / "check"
    if fresh.exists():
        raise SystemExit(f"{fresh} exists: remove it first")
    make(fresh)
    failures = 0
    for run in sorted(p for p in reference.iterdir() if p.is_dir() and p != fresh):
        same_metrics = (run / "metrics.csv").read_bytes() == (fresh / run.name / "metrics.csv").read_bytes()
        same_config = _config(run) == _config(fresh / run.name)
        failures += not (same_metrics and same_config)
        print(f"{run.name:<18} metrics.csv {'byte-identical' if same_metrics else 'DIFFERS'}, "
              f"config {'identical' if same_config else 'DIFFERS'}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "check"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "make":
        make(Path(sys.argv[2]))
    else:
        sys.exit(check(Path(sys.argv[2])))
