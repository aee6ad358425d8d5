"""Benchmarks: how fast geomcap trains and measures, against a peer and this machine's limits.

``geomcap bench`` (``run_bench``) measures, in one process, each figure as
the median of several timed repetitions after a warm-up:

* ``throughput`` -- training throughput (tokens/s) of each preset that fits
  the device, for geomcap's model and for a *peer*: the same shape built
  from ``transformers`` (GPT-2: same width, depth, heads, MLP ratio,
  vocabulary, context and tied embeddings; exact GELU, no dropout; the
  parameter count is identical). Both go through one shared loop
  (``make_train_step``: the loop of ``geomcap.train.train`` -- batch drawn
  from pre-generated tensors on the device, bf16 autocast on CUDA,
  cross-entropy on the answer tokens, AdamW, gradient clipping). The models
  are timed in interleaved *rounds* (geomcap, peer, [compiled geomcap], a
  matmul-peak sample, then again), so a change in the machine's load hits
  all of them alike; each ratio is the median of the per-round ratios.
  Achieved FLOP/s = ``flops_per_token`` x tokens/s, as a fraction of the
  matmul peak sampled in the same round.
* ``geometry`` -- the cost of one checkpoint of ``geomcap.train.evaluate``
  (the model-level evaluation, and inside it the geometry: four RankMe
  variants on every layer + the linear probes), as a share of the training
  time of a run at the default checkpoint schedule; training steps and
  checkpoints are again timed in alternation.
* ``costly`` -- seconds per evaluation of each costly training-dynamics
  measure (per-example gradients, gradient effective rank, gradient
  covariance rank, Hessian top-k, LLC) on the 405k model, as training-step
  equivalents and as a share of a run that records them on every 4th checkpoint.
* ``rankme`` -- ``geomcap.geometry.rankme`` against a naive float64 SVD
  (``numpy.linalg.svd(Z.astype(float64), compute_uv=False)``) for N x d
  matrices; times and the largest difference in value.
* ``book`` (optional) -- cold and warm ``jupyter-book build . -W -n``;
  ``make_test`` (optional) -- ``make test`` wall time.

The machines are shared: the result records the load average at the start
and end of every part, and the ratios -- measured side by side -- are the
figures to compare across machines; absolute figures are given beside them.

FLOPs (``flops_per_token``): 6 N + 12 L d T per trained token (the
"model FLOPs" of Chowdhery et al. 2022, PaLM appendix B: N = parameters
that take part in matrix products, i.e. all but the position table, the tied
embedding counted once as the output layer; L layers, width d, sequence
length T; the attention term as non-causal). Matmul peak: a square
``peak_n`` x ``peak_n`` product (2 n^3 FLOPs; n = 2048 on the CPU, 8192 on
CUDA by default) in float32 on the CPU, in bf16 on CUDA (the dtype training
runs its matrix products in under autocast).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from geomcap import geometry, store, tasks
from geomcap.models import PRESETS, answer_loss, build, check_preset, count_parameters

DEFAULT_PARTS = ("throughput", "geometry", "costly", "rankme")
OPTIONAL_PARTS = ("book", "make_test", "threads")
ALL_PARTS = DEFAULT_PARTS + OPTIONAL_PARTS
PEERS = ("gpt2", "gpt-neox")
RANKME_N = (512, 4096, 32768)
RANKME_D = (128, 768, 2560)
COSTLY_PARTS = ("per_example_gradients", "grad_rank", "grad_cov_rank", "hessian", "llc")
# the step budget of the committed grid (scripts/cpu_grid.sh), used for projections
GRID_STEPS = {"easy": 2000, "medium": 4000, "hard": 3000}
TARGETS = {
    "peer_ratio_min": 1.0,          # geomcap tokens/s / transformers peer tokens/s, every measured preset
    "peak_fraction_min": 0.40,      # achieved FLOP/s / same-run matmul peak, the second preset
    "geometry_share_max": 0.10,     # per-checkpoint geometry / training time, default schedule
    "rankme_speedup_min": 1.0,      # naive SVD time / geomcap RankMe time, every size
    "rankme_abs_diff_max": 1e-6,    # |geomcap RankMe - naive RankMe|, every size
}


def data_dir() -> Path:
    """The committed benchmark results: <repository>/data/bench."""
    return Path(__file__).resolve().parents[2] / "data" / "bench"


def _log(progress: bool, message: str) -> None:
    if progress:
        print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the machine --------------------------------------------------------------

def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: torch.device) -> dict:
    """CPU model, cores, torch/transformers versions, device (and GPU name and memory on CUDA)."""
    try:
        import transformers
        transformers_version = transformers.__version__
    except ImportError:
        transformers_version = None
    info = {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": _memory_gib(),
        "torch_version": torch.__version__,
        "transformers_version": transformers_version,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "device": device.type,
        "git_commit": store.git_commit(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu_name=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    cuda_version=torch.version.cuda)
    return info


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def default_output_name(device: torch.device) -> str:
    """File name for a result: ``cpu-2core.json``, ``cuda-nvidia-h200.json``."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device).lower()
        return "cuda-" + "".join(c if c.isalnum() else "-" for c in name).strip("-") + ".json"
    return f"cpu-{os.cpu_count()}core.json"


# --- timing -------------------------------------------------------------------

def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_once(fn, device: torch.device = torch.device("cpu")) -> float:
    """Wall seconds of one call of ``fn()`` (the device synchronised before and after)."""
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def time_repeats(fn, repeats: int = 5, warmup: int = 1, device: torch.device = torch.device("cpu")) -> list[float]:
    """Seconds of ``repeats`` timed calls of ``fn()`` after ``warmup`` untimed ones."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats} and {warmup}")
    for _ in range(warmup):
        fn()
    return [time_once(fn, device) for _ in range(repeats)]


def summarize(values) -> dict:
    """Median, min, max and count of a list of numbers (seconds, ratios, ...)."""
    values = [float(v) for v in values]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


# --- the matmul peak ----------------------------------------------------------

def peak_dtype(device: torch.device) -> torch.dtype:
    """The dtype training runs its matrix products in: float32 on CPU, bf16 on CUDA (autocast)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def matmul_peak(device: torch.device, n: int = 2048, repeats: int = 10, warmup: int = 2,
                dtype: torch.dtype | None = None) -> dict:
    """FLOP/s of an n x n matrix product (2 n^3 FLOPs), median of ``repeats`` after ``warmup``.

    Returns {"flops_per_s": median, "min", "max", "n", "dtype", "repeats", "times_s"}.
    """
    if n < 1:
        raise ValueError(f"peak_n must be positive, got {n}")
    dtype = dtype or peak_dtype(device)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
    times = time_repeats(lambda: torch.mm(a, b), repeats=repeats, warmup=warmup, device=device)
    rates = [2 * n ** 3 / t for t in times]
    s = summarize(rates)
    return {"flops_per_s": s["median"], "min": s["min"], "max": s["max"], "n": n,
            "dtype": str(dtype).replace("torch.", ""), "repeats": repeats, "times_s": times}


# --- models and the shared training loop ------------------------------------

def flops_per_token(preset: str, vocab_size: int, seq_len: int) -> float:
    """Training FLOPs per token: 6 N + 12 L d T (see the module docstring).

    N = parameters of the preset with ``vocab_size`` minus the position
    table (block_size x d); L, d from the preset; T = ``seq_len``.
    """
    check_preset(preset)
    cfg = PRESETS[preset]
    with torch.device("meta"):
        n_params = count_parameters(build(preset, vocab_size))
    n_matmul = n_params - cfg.block_size * cfg.d_model
    return 6.0 * n_matmul + 12.0 * cfg.n_layer * cfg.d_model * seq_len


class LogitsOnly(nn.Module):
    """Wrap a Hugging Face causal LM so that ``module(idx)`` returns logits (B, T, V), as geomcap's GPT."""

    def __init__(self, hf_model: nn.Module):
        super().__init__()
        self.hf_model = hf_model

    def forward(self, idx: torch.Tensor, return_hidden: bool = False) -> torch.Tensor:
        if return_hidden:
            raise ValueError("the peer wrapper returns logits only")
        return self.hf_model(input_ids=idx).logits


def build_peer(preset: str, vocab_size: int, kind: str = "gpt2") -> nn.Module:
    """The transformers model of the same shape as ``preset``, wrapped to return logits.

    kind="gpt2": GPT2LMHeadModel with the same layers, width, heads, MLP
    width (4 d), context (block_size), vocabulary and tied embeddings, exact
    GELU and no dropout -- the same architecture, parameter for parameter.
    kind="gpt-neox": GPTNeoXForCausalLM with the same layers, width, heads,
    MLP width, vocabulary and tied embeddings (rotary positions and a parallel
    residual, so not the same function; a second opinion only).
    Built from a config: nothing is downloaded.
    """
    check_preset(preset)
    if kind not in PEERS:
        raise ValueError(f"unknown peer {kind!r}; choose one of: {', '.join(PEERS)}")
    cfg = PRESETS[preset]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if kind == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        config = GPT2Config(vocab_size=vocab_size, n_positions=cfg.block_size, n_embd=cfg.d_model,
                            n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=cfg.mlp_ratio * cfg.d_model,
                            activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            use_cache=False, tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)
        return LogitsOnly(GPT2LMHeadModel(config))
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    config = GPTNeoXConfig(vocab_size=vocab_size, hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layer,
                           num_attention_heads=cfg.n_head, intermediate_size=cfg.mlp_ratio * cfg.d_model,
                           max_position_embeddings=cfg.block_size, hidden_act="gelu", attention_dropout=0.0,
                           hidden_dropout=0.0, use_cache=False, tie_word_embeddings=True,
                           bos_token_id=0, eos_token_id=0)
    return LogitsOnly(GPTNeoXForCausalLM(config))


def make_train_step(model: nn.Module, prompts: torch.Tensor, answers: torch.Tensor, batch_size: int,
                    device: torch.device, seed: int = 0, lr: float = 1e-3, weight_decay: float = 0.1):
    """The training steps of ``geomcap.train.train`` for any model mapping token ids to logits.

    model: ``model(idx)`` -> logits (B, T, V); prompts (n, Tp), answers (n, Ta)
    int64 tensors already on ``device``. Returns ``run(n_steps)``, which does
    n_steps of :func:`geomcap.train.train_step` (the training loop's own step:
    answer cross-entropy under bf16 autocast on CUDA, AdamW from
    :func:`geomcap.train.make_optimizer` with TrainConfig's betas, gradient norm
    clipped at TrainConfig's ``grad_clip``) on batches of ``batch_size`` rows
    drawn with a seeded CPU generator. The learning rate is held at ``lr`` (the
    schedule costs nothing measurable).
    """
    from geomcap.train import TrainConfig, make_optimizer, train_step

    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    defaults = TrainConfig(task="copy", level="easy")
    optimizer = make_optimizer(model, lr, weight_decay, (defaults.beta1, defaults.beta2))
    gen = torch.Generator().manual_seed(seed)
    n = prompts.shape[0]

    def run(n_steps: int):
        model.train()
        loss = None
        for _ in range(n_steps):
            idx = torch.randint(n, (batch_size,), generator=gen).to(device)
            loss = train_step(model, optimizer, prompts[idx], answers[idx], lr, defaults.grad_clip, device)
        return loss

    return run


def _task_tensors(task: str, level: str, device: torch.device, n_train: int = 8192, n_test: int = 512):
    data = tasks.make_task(task, level, seed=0, n_train=n_train, n_test=n_test)
    return data, data.train_prompts.to(device), data.train_answers.to(device)


def select_presets(presets, device: torch.device, peak_flops: float, seq_len: int, batch_size: int,
                   max_step_s: float = 2.0, assumed_efficiency: float = 0.25) -> list[str]:
    """The presets to time: a list of names, or "auto" = those whose estimated step fits.

    Estimated step seconds = 6 x parameters x tokens per step /
    (``assumed_efficiency`` x ``peak_flops``); "auto" keeps the presets with an
    estimate <= ``max_step_s`` (and whose weights + AdamW state + activations
    take less than half the device's memory). Always at least the smallest.
    """
    if isinstance(presets, str) and presets != "auto":
        presets = [p.strip() for p in presets.split(",") if p.strip()]
    if presets != "auto":
        for p in presets:
            check_preset(p)
        if not presets:
            raise ValueError("no preset given")
        return list(presets)
    memory = (torch.cuda.get_device_properties(device).total_memory if device.type == "cuda"
              else (_memory_gib() or 8) * 2**30)
    chosen = []
    for name, cfg in PRESETS.items():
        with torch.device("meta"):
            n_params = count_parameters(build(name, tasks.VOCAB_SIZE))
        est_s = 6 * n_params * batch_size * seq_len / (assumed_efficiency * peak_flops)
        est_bytes = 16 * n_params + 40 * batch_size * seq_len * cfg.d_model * cfg.n_layer * 4
        if not chosen or (est_s <= max_step_s and est_bytes < memory / 2):
            chosen.append(name)
    return chosen


def throughput(presets, device: torch.device, task: str = "add", level: str = "hard", batch_size: int = 128,
               rounds: int = 5, block_s: float = 2.0, warmup_steps: int = 3, peer: str | None = "gpt2",
               compile_presets=(), peak_n: int = 2048, peak_repeats: int = 3, progress: bool = True,
               on_progress=None) -> dict:
    """Training throughput of geomcap's model, its transformers peer and (optionally) torch.compile.

    For each preset: build the models (same seed), warm each up for
    ``warmup_steps`` steps (the compiled model's first steps include its
    compilation, reported as ``compile_warmup_s``), pick a block of k steps
    lasting ~``block_s`` seconds, then ``rounds`` rounds of: k steps of each
    model (the order rotating from round to round, each block preceded by
    one untimed step), then ``peak_repeats`` matmul-peak samples. Figures are medians
    over rounds: ms per step, tokens/s (batch_size x T per step), fraction of
    the round's matmul peak, and the per-round ratios geomcap / peer and
    compiled / eager. ``data_ms_per_step``: drawing the batch alone (indices,
    transfer, gather), the part a data loader would do. ``on_progress(out)``,
    if given, is called with the partial result after each preset.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds}")
    if peer is not None and peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; choose one of: {', '.join(PEERS)}")
    data, prompts, answers = _task_tensors(task, level, device)
    seq_len = data.prompt_len + data.answer_len - 1
    tokens_per_step = batch_size * seq_len
    out = {"task": task, "level": level, "seq_len": seq_len, "batch_size": batch_size,
           "tokens_per_step": tokens_per_step, "rounds": rounds, "warmup_steps": warmup_steps,
           "peer": peer, "peak_dtype": str(peak_dtype(device)).replace("torch.", ""),
           "flops_formula": "6 N + 12 L d T per token (N: parameters minus the position table)",
           "presets": []}
    for preset in presets:
        _log(progress, f"throughput {preset}: building models")
        models = {}
        torch.manual_seed(0)
        models["geomcap"] = build(preset, tasks.VOCAB_SIZE).to(device)
        if peer is not None:
            torch.manual_seed(0)
            models["peer"] = build_peer(preset, tasks.VOCAB_SIZE, kind=peer).to(device)
        if preset in compile_presets:
            torch.manual_seed(0)
            models["geomcap_compiled"] = torch.compile(build(preset, tasks.VOCAB_SIZE).to(device))
        steps = {name: make_train_step(m, prompts, answers, batch_size, device) for name, m in models.items()}
        row = {"preset": preset, "parameters": count_parameters(models["geomcap"]),
               "flops_per_token": flops_per_token(preset, tasks.VOCAB_SIZE, seq_len), "models": {}}
        if peer is not None:
            row["peer_parameters"] = count_parameters(models["peer"])
        warm = {}
        for name, run in steps.items():
            t_first = time_once(lambda: run(1), device)
            t_rest = time_once(lambda: run(max(1, warmup_steps - 1)), device)
            warm[name] = t_rest / max(1, warmup_steps - 1)
            if name == "geomcap_compiled":
                row["compile_warmup_s"] = t_first
        k = int(min(500, max(1, round(block_s / warm["geomcap"]))))
        row["steps_per_block"] = k
        per_round = {name: [] for name in steps}
        peaks = []
        names = list(steps)
        for r in range(rounds):
            # rotate the order, and one untimed step before each block: the first step after other
            # work pays for idle BLAS/OpenMP threads and cold caches, which must not favour one model
            for name in names[r % len(names):] + names[:r % len(names)]:
                steps[name](1)
                per_round[name].append(time_once(lambda: steps[name](k), device) / k)
            peaks.append(matmul_peak(device, n=peak_n, repeats=peak_repeats, warmup=1)["flops_per_s"])
            _log(progress, f"throughput {preset} round {r + 1}/{rounds}: "
                 + ", ".join(f"{name} {1000 * v[-1]:.1f} ms/step" for name, v in per_round.items())
                 + f", peak {peaks[-1] / 1e9:.0f} GFLOP/s")
        row["peak_flops_per_s_rounds"] = peaks
        row["peak_flops_per_s"] = statistics.median(peaks)
        for name, secs in per_round.items():
            fractions = [row["flops_per_token"] * tokens_per_step / s / p for s, p in zip(secs, peaks)]
            row["models"][name] = {
                "ms_per_step": 1000 * statistics.median(secs),
                "ms_per_step_rounds": [1000 * s for s in secs],
                "tokens_per_s": tokens_per_step / statistics.median(secs),
                "achieved_flops_per_s": row["flops_per_token"] * tokens_per_step / statistics.median(secs),
                "peak_fraction": statistics.median(fractions),
                "peak_fraction_rounds": fractions,
            }
        if "peer" in per_round:
            ratios = [p / g for g, p in zip(per_round["geomcap"], per_round["peer"])]
            row["peer_ratio"] = statistics.median(ratios)  # geomcap tokens/s / peer tokens/s
            row["peer_ratio_rounds"] = ratios
        if "geomcap_compiled" in per_round:
            ratios = [e / c for e, c in zip(per_round["geomcap"], per_round["geomcap_compiled"])]
            row["compile_ratio"] = statistics.median(ratios)  # compiled tokens/s / eager tokens/s
            row["compile_ratio_rounds"] = ratios
        gen = torch.Generator().manual_seed(1)

        def draw(n_steps=k):
            for _ in range(n_steps):
                idx = torch.randint(prompts.shape[0], (batch_size,), generator=gen).to(device)
                prompts[idx], answers[idx]
        row["data_ms_per_step"] = 1000 * statistics.median(time_repeats(draw, repeats=3, warmup=1, device=device)) / k
        row["data_share"] = row["data_ms_per_step"] / row["models"]["geomcap"]["ms_per_step"]
        out["presets"].append(row)
        del models, steps
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if on_progress is not None:
            on_progress(out)
    return out


# --- per-checkpoint geometry ------------------------------------------------

def geometry_cost(presets, device: torch.device, task: str = "add", level: str = "hard", rounds: int = 3,
                  block_s: float = 2.0, schedules=(2000, GRID_STEPS["hard"]), progress: bool = True,
                  on_progress=None) -> dict:
    """Share of training time spent on per-checkpoint evaluation and geometry, per preset.

    Alternates ``rounds`` times: a block of training steps (~``block_s`` s),
    then one ``geomcap.train.evaluate`` (after one untimed warm-up of each).
    ``geometry_s`` is the part of evaluate spent on RankMe (4 variants x every
    layer) and the probes; ``eval_s`` the whole checkpoint (forward passes on
    512 training and 512 test examples + geometry). For a run of ``steps``
    steps at the default schedule (``checkpoint_steps(steps)``): share =
    checkpoints x seconds per checkpoint / (steps x seconds per step), the
    median over rounds of the per-round shares. ``on_progress(out)``, if
    given, is called with the partial result after each preset.
    """
    from geomcap.train import TrainConfig, checkpoint_steps, evaluate

    data = tasks.make_task(task, level, seed=0, n_train=8192, n_test=512)
    prompts, answers = data.train_prompts.to(device), data.train_answers.to(device)
    out = {"task": task, "level": level, "rounds": rounds, "presets": []}
    for preset in presets:
        cfg = TrainConfig(task=task, level=level, size=preset)
        torch.manual_seed(0)
        model = build(preset, tasks.VOCAB_SIZE).to(device)
        run = make_train_step(model, prompts, answers, cfg.batch_size, device)
        step_s = time_once(lambda: run(2), device) / 2
        k = int(min(500, max(1, round(block_s / step_s))))
        evaluate(model, data, cfg, device)
        steps_s, eval_s, geo_s = [], [], []
        for r in range(rounds):
            steps_s.append(time_once(lambda: run(k), device) / k)
            t0 = time.perf_counter()
            _, g = evaluate(model, data, cfg, device)
            eval_s.append(time.perf_counter() - t0)
            geo_s.append(g)
            _log(progress, f"geometry {preset} round {r + 1}/{rounds}: step {1000 * steps_s[-1]:.1f} ms, "
                 f"checkpoint {eval_s[-1]:.2f} s (geometry {geo_s[-1]:.2f} s)")
        row = {"preset": preset, "ms_per_step": 1000 * statistics.median(steps_s),
               "eval_s": statistics.median(eval_s), "geometry_s": statistics.median(geo_s),
               "layers": model.n_hidden, "probe_size": cfg.probe_size, "schedules": []}
        for steps in schedules:
            n_ckpt = len(checkpoint_steps(steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints))
            geo_share = [n_ckpt * g / (steps * s) for g, s in zip(geo_s, steps_s)]
            eval_share = [n_ckpt * e / (steps * s) for e, s in zip(eval_s, steps_s)]
            row["schedules"].append({"steps": steps, "checkpoints": n_ckpt,
                                     "geometry_share": statistics.median(geo_share),
                                     "eval_share": statistics.median(eval_share),
                                     "geometry_share_rounds": geo_share})
        out["presets"].append(row)
        if on_progress is not None:
            on_progress(out)
    return out


# --- costly measures ----------------------------------------------------------

def costly_cost(size: str = "405k", task: str = "add", level: str = "hard", repeats: int = 3, warmup: int = 1,
                n_examples: int = 256, hessian_k: int = 1, measures=COSTLY_PARTS, costly_every: int = 4,
                steps: int = GRID_STEPS["hard"], block_s: float = 2.0, progress: bool = True) -> dict:
    """Seconds per evaluation of each costly measure, as ``geomcap.train.costly_measures`` runs them (CPU).

    measures: any of ``per_example_gradients`` (G, N x P, shared by the two
    gradient ranks), ``grad_rank`` (G + its effective rank), ``grad_cov_rank``
    (G + covariance rank), ``hessian`` (top-``hessian_k`` eigenvalues),
    ``llc`` (devinterp SGLD, ``LLC_DEFAULTS``). Each repetition times a
    block of training steps first, so every measure also has a median
    training-step equivalent; ``run_share`` is the share of a ``steps``-step
    run that records all of them on every ``costly_every``-th checkpoint.
    """
    from geomcap import dynamics
    from geomcap.train import checkpoint_steps

    unknown = [m for m in measures if m not in COSTLY_PARTS]
    if unknown:
        raise ValueError(f"unknown costly measure {unknown[0]!r}; choose from: {', '.join(COSTLY_PARTS)}")
    device = torch.device("cpu")
    data = tasks.make_task(task, level, seed=0, n_train=max(8192, n_examples), n_test=64)
    torch.manual_seed(0)
    model = build(size, tasks.VOCAB_SIZE)
    run = make_train_step(model, data.train_prompts, data.train_answers, 128, device)
    step_s = time_once(lambda: run(2)) / 2
    k = int(min(500, max(1, round(block_s / step_s))))
    prompts, answers = data.train_prompts[:n_examples], data.train_answers[:n_examples]

    def grads():
        model.eval()
        return dynamics.per_example_gradients(model, prompts, answers)

    G = grads()
    fns = {
        "per_example_gradients": grads,
        "grad_rank": lambda: dynamics.gradient_effective_rank(grads()),
        "grad_cov_rank": lambda: dynamics.gradient_covariance_rank(grads()),
        "hessian": lambda: dynamics.hessian_top_eigenvalues(model.eval(), prompts, answers, k=hessian_k),
        "llc": lambda: dynamics.local_learning_coefficient(model, prompts, answers),
    }
    secs = {m: [] for m in measures}
    steps_s = []
    rank_only = {"erank": [], "cov_rank": []}
    for r in range(warmup + repeats):
        s = time_once(lambda: run(k)) / k
        for m in measures:
            t = time_once(fns[m])
            if r >= warmup:
                secs[m].append(t)
        if r >= warmup:
            steps_s.append(s)
            rank_only["erank"].append(time_once(lambda: dynamics.gradient_effective_rank(G)))
            rank_only["cov_rank"].append(time_once(lambda: dynamics.gradient_covariance_rank(G)))
        _log(progress, f"costly {size} repetition {r + 1}/{warmup + repeats}"
             f"{' (warm-up)' if r < warmup else ''}: step {1000 * s:.1f} ms, "
             + ", ".join(f"{m} {v[-1]:.2f} s" for m, v in secs.items() if v))
    schedule = checkpoint_steps(steps)
    n_costly = len(set(schedule[::costly_every].tolist()) | {steps})
    rows = []
    for m in measures:
        rows.append({"measure": m, "seconds": statistics.median(secs[m]), "seconds_rounds": secs[m],
                     "step_equivalents": statistics.median([t / s for t, s in zip(secs[m], steps_s)])})
    # what train.costly_measures does per costly checkpoint: G once, both ranks, Hessian, LLC
    per_ckpt = []
    for i in range(len(steps_s)):
        total = 0.0
        if "per_example_gradients" in secs:
            total += secs["per_example_gradients"][i] + rank_only["erank"][i] + rank_only["cov_rank"][i]
        for m in ("hessian", "llc"):
            if m in secs:
                total += secs[m][i]
        per_ckpt.append(total)
    return {"size": size, "task": task, "level": level, "n_examples": n_examples, "hessian_k": hessian_k,
            "repeats": repeats, "warmup": warmup, "ms_per_step": 1000 * statistics.median(steps_s),
            "measures": rows,
            "rank_only_s": {k_: statistics.median(v) for k_, v in rank_only.items()},
            "per_costly_checkpoint_s": statistics.median(per_ckpt),
            "run": {"steps": steps, "costly_every": costly_every, "costly_checkpoints": n_costly,
                    "run_share": statistics.median([n_costly * c / (steps * s) for c, s in zip(per_ckpt, steps_s)])}}


# --- RankMe against a naive SVD -----------------------------------------------

def naive_rankme(Z, eps: float = 1e-7) -> float:
    """RankMe from a plain float64 SVD of the whole (N, d) matrix (numpy/LAPACK gesdd, values only)."""
    s = np.linalg.svd(np.asarray(Z, dtype=np.float64), compute_uv=False)
    p = s / s.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def rankme_test_matrix(n: int, d: int, seed: int = 0) -> np.ndarray:
    """A float32 (n, d) matrix shaped like hidden states: a power-law spectrum plus a common component.

    Z = X diag(k^-1) + 0.5 m, X standard normal (n, d), k = 1..d, m one
    random row shared by all rows (the uncentred states' common component).
    """
    if n < 1 or d < 1:
        raise ValueError(f"matrix sizes must be positive, got {n} x {d}")
    rng = np.random.default_rng([seed, n, d])
    Z = rng.standard_normal((n, d), dtype=np.float32)
    Z *= (1.0 / np.arange(1, d + 1, dtype=np.float32))
    Z += 0.5 * rng.standard_normal((1, d), dtype=np.float32)
    return Z


def _rankme_repeats(n: int, d: int) -> tuple[int, int]:
    """(repeats, warmup) by the work n d min(n, d): fewer for the largest (stated in the result)."""
    work = n * d * min(n, d)
    if work <= 5e9:
        return 5, 1
    if work <= 5e10:
        return 3, 1
    return 1, 0


def rankme_vs_naive(sizes, repeats: int | None = None, progress: bool = True, on_progress=None) -> dict:
    """geomcap's RankMe vs ``naive_rankme`` on ``rankme_test_matrix(N, d)`` for each (N, d) in sizes.

    Both take the same float32 matrix (as hidden states are) and convert to
    float64 themselves; timed in alternation, ``repeats`` each (default by
    size: 5, 3, or 1 without warm-up for N d min(N, d) > 5e10). speedup =
    median over repetitions of naive time / geomcap time. ``on_progress(out)``,
    if given, is called with the partial result after each size.
    """
    out = {"naive": "numpy.linalg.svd(Z.astype(float64), compute_uv=False), numpy " + np.__version__,
           "matrix": "rankme_test_matrix: float32, power-law spectrum k^-1 plus a common component", "sizes": []}
    rows = out["sizes"]
    for n, d in sizes:
        Z = rankme_test_matrix(n, d)
        reps, warm = _rankme_repeats(n, d) if repeats is None else (repeats, 1)
        method = "gram" if min(n, d) >= 256 and max(n, d) >= 4 * min(n, d) else "svd"
        ours_t, naive_t = [], []
        ours_v = naive_v = None
        for r in range(warm + reps):
            t0 = time.perf_counter()
            ours_v = geometry.rankme(Z)
            t1 = time.perf_counter()
            naive_v = naive_rankme(Z)
            t2 = time.perf_counter()
            if r >= warm:
                ours_t.append(t1 - t0)
                naive_t.append(t2 - t1)
        row = {"n": n, "d": d, "method": method, "repeats": reps, "warmup": warm,
               "geomcap_s": statistics.median(ours_t), "naive_s": statistics.median(naive_t),
               "speedup": statistics.median([b / a for a, b in zip(ours_t, naive_t)]),
               "geomcap_value": ours_v, "naive_value": naive_v, "abs_diff": abs(ours_v - naive_v),
               "rel_diff": abs(ours_v - naive_v) / abs(naive_v)}
        rows.append(row)
        _log(progress, f"rankme {n} x {d} ({method}, {reps} repeats): geomcap {row['geomcap_s']:.3f} s, "
             f"naive {row['naive_s']:.3f} s, speedup {row['speedup']:.2f}, |diff| {row['abs_diff']:.1e}")
        del Z
        if on_progress is not None:
            on_progress(out)
    return out


# --- the book and the test suite ---------------------------------------------

def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def book_build_times(repo=None, timeout_s: int = 1800, progress: bool = True) -> dict:
    """Wall seconds of a cold, then a warm, ``jupyter-book build REPO -W -n`` into a fresh temporary folder.

    Cold: empty output folder, so every notebook executes (no execution
    cache). Warm: the same command again (Jupyter Book's cache: nothing
    re-executes). Same as ``make book`` minus the venv check.
    """
    repo = Path(repo or _repo_root())
    jb = Path(sys.executable).with_name("jupyter-book")
    if not jb.exists():
        jb = shutil.which("jupyter-book")
        if jb is None:
            raise FileNotFoundError("jupyter-book is not installed next to this Python")
    out = Path(tempfile.mkdtemp(prefix="geomcap-bench-book-"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = {"command": "jupyter-book build . -W -n --path-output TMP", "timeout_s": timeout_s}
    try:
        for label in ("cold", "warm"):
            _log(progress, f"book: {label} build")
            t0 = time.perf_counter()
            proc = subprocess.run([str(jb), "build", str(repo), "--path-output", str(out), "-W", "-n"],
                                  capture_output=True, text=True, timeout=timeout_s, env=env)
            result[f"{label}_s"] = time.perf_counter() - t0
            result[f"{label}_returncode"] = proc.returncode
            if proc.returncode != 0:
                result[f"{label}_tail"] = (proc.stdout + proc.stderr)[-2000:]
            _log(progress, f"book: {label} build {result[f'{label}_s']:.0f} s (exit {proc.returncode})")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return result


def make_test_time(repo=None, timeout_s: int = 7200, progress: bool = True) -> dict:
    """Wall seconds and exit status of ``make test`` in the repository."""
    repo = Path(repo or _repo_root())
    _log(progress, "make test")
    t0 = time.perf_counter()
    proc = subprocess.run(["make", "test"], cwd=repo, capture_output=True, text=True, timeout=timeout_s)
    seconds = time.perf_counter() - t0
    return {"command": "make test", "seconds": seconds, "returncode": proc.returncode,
            "tail": (proc.stdout + proc.stderr)[-2000:]}


# --- targets and projections --------------------------------------------------

def check_targets(result: dict) -> list[dict]:
    """The issue's targets against a bench result: one row per target and preset/size.

    Each row: target, subject, value, threshold, met (bool), and ``by``: the
    value over (for a minimum) or under (for a maximum) the threshold as a
    fraction of the threshold (negative = missed by that much).
    """
    rows = []

    def add(target, subject, value, threshold, kind):
        if value is None:
            return
        met = value >= threshold if kind == "min" else value <= threshold
        by = (value - threshold) / threshold if kind == "min" else (threshold - value) / threshold
        rows.append({"target": target, "subject": subject, "value": value, "threshold": threshold,
                     "kind": kind, "met": bool(met), "by": by})

    tp = result.get("throughput") or {}
    presets = tp.get("presets", [])
    for row in presets:
        add("geomcap / peer tokens/s", row["preset"], row.get("peer_ratio"), TARGETS["peer_ratio_min"], "min")
    if len(presets) >= 2:
        second = presets[1]
        add("fraction of matmul peak", second["preset"], second["models"]["geomcap"]["peak_fraction"],
            TARGETS["peak_fraction_min"], "min")
    geo = result.get("geometry") or {}
    for row in geo.get("presets", []):
        sched = row["schedules"][0]
        add(f"geometry share ({sched['steps']}-step run)", row["preset"], sched["geometry_share"],
            TARGETS["geometry_share_max"], "max")
    rk = result.get("rankme") or {}
    for row in rk.get("sizes", []):
        subject = f"{row['n']} x {row['d']}"
        add("RankMe speedup over naive SVD", subject, row["speedup"], TARGETS["rankme_speedup_min"], "min")
        add("RankMe |difference|", subject, row["abs_diff"], TARGETS["rankme_abs_diff_max"], "max")
    return rows


def project_grid(result: dict, steps_by_level: dict | None = None, n_tasks: int = len(tasks.TASKS),
                 seeds: int = 1) -> dict:
    """Projected hours of the paper's grid (every preset x ``n_tasks`` tasks x 3 levels x ``seeds``) on this device.

    Per step: the measured ms/step of geomcap (eager) where the preset was
    timed; otherwise extrapolated as FLOPs per step / the achieved FLOP/s of
    the largest timed preset (larger models usually run closer to the peak,
    so this over-estimates). Plus the checkpoint overhead: the measured
    ``eval_share`` of the preset, or of the largest preset with one (it
    shrinks as models grow). Steps: ``steps_by_level`` (default the committed
    grid's 2000 / 4000 / 3000). The tokens per step are those of the bench's
    task; other tasks' sequences are 8 to 33 tokens.
    """
    steps_by_level = steps_by_level or GRID_STEPS
    tp = result.get("throughput") or {}
    measured = {r["preset"]: r for r in tp.get("presets", [])}
    if not measured:
        raise ValueError("the result has no throughput part to project from")
    seq_len = tp["seq_len"]
    tokens_per_step = tp["tokens_per_step"]
    largest = max(measured.values(), key=lambda r: r["parameters"])
    achieved = largest["models"]["geomcap"]["achieved_flops_per_s"]
    overhead = {r["preset"]: r["schedules"][0]["eval_share"] for r in (result.get("geometry") or {}).get("presets", [])}
    steps_per_run_set = sum(steps_by_level.values())
    rows = []
    for preset in PRESETS:
        if preset in measured:
            ms = measured[preset]["models"]["geomcap"]["ms_per_step"]
            source = "measured"
        else:
            ms = 1000 * flops_per_token(preset, tasks.VOCAB_SIZE, seq_len) * tokens_per_step / achieved
            source = f"extrapolated from {largest['preset']}"
        known = [p for p in PRESETS if p in overhead and list(PRESETS).index(p) <= list(PRESETS).index(preset)]
        share = overhead[known[-1]] if known else (overhead[next(iter(overhead))] if overhead else 0.0)
        total_steps = n_tasks * steps_per_run_set * seeds
        hours = total_steps * ms / 1000 * (1 + share) / 3600
        rows.append({"preset": preset, "ms_per_step": ms, "source": source, "checkpoint_overhead": share,
                     "runs": n_tasks * len(steps_by_level) * seeds, "steps": total_steps, "hours": hours})
    return {"steps_by_level": dict(steps_by_level), "tasks": n_tasks, "seeds": seeds,
            "device": (result.get("machine") or {}).get("device"), "presets": rows,
            "total_hours": sum(r["hours"] for r in rows)}


# --- the whole bench ------------------------------------------------------------

def parse_parts(text) -> list[str]:
    """'default', 'all', 'none' or a comma-separated list of parts -> list (checked).

    'none' runs no part (with ``--update --make-test-s``: only record that figure).
    """
    if isinstance(text, str):
        if text == "default":
            return list(DEFAULT_PARTS)
        if text == "all":
            return list(ALL_PARTS)
        if text == "none":
            return []
        text = [t.strip() for t in text.split(",") if t.strip()]
        if not text:
            raise ValueError(f"no bench part given; choose from: {', '.join(ALL_PARTS)}, or default, all, none")
    parts = list(text)
    unknown = [p for p in parts if p not in ALL_PARTS]
    if unknown:
        raise ValueError(f"unknown bench part {unknown[0]!r}; choose from: {', '.join(ALL_PARTS)}")
    return parts


def parse_sizes(n_text, d_text) -> list[tuple[int, int]]:
    """'512,4096' and '128,768' -> every (N, d) pair, checked positive."""
    def ints(text, name):
        try:
            values = [int(x) for x in str(text).split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"{name} must be comma-separated positive integers, got {text!r}") from None
        if not values or min(values) < 1:
            raise ValueError(f"{name} must be comma-separated positive integers, got {text!r}")
        return values
    return [(n, d) for n in ints(n_text, "rankme N") for d in ints(d_text, "rankme d")]


def run_bench(out, parts=DEFAULT_PARTS, device: str = "auto", presets="auto", task: str = "add",
              level: str = "hard", batch_size: int = 128, rounds: int = 7, block_s: float = 1.5,
              max_step_s: float = 2.0, peer: str | None = "gpt2", compile_presets=(),
              rankme_sizes=None, rankme_repeats: int | None = None, costly_repeats: int = 3,
              peak_n: int | None = None, threads: int | None = None, make_test_s: float | None = None,
              command: str | None = None, update: bool = False, progress: bool = True) -> dict:
    """Run the chosen parts in one process and write the result to the JSON file ``out``.

    The file is rewritten after every part (a long bench killed midway keeps
    what it measured). Returns the result dict: machine, load averages,
    settings, one entry per part, the targets (``check_targets``) and the
    projection of the paper's grid (``project_grid``). ``make_test_s``
    records a ``make test`` time measured elsewhere (when the part is not run).
    ``update``: when ``out`` already holds a result (of the same device), run
    only ``parts`` and replace those entries, keeping the others; the update's
    command, settings, machine and load averages go to ``result["updates"]``.

    ``threads``: torch intra-op threads and BLAS threads (numpy's too) for
    the whole bench (default: torch's default, one per core). On a CPU that
    other processes share, one thread per process is the setting that does not
    collapse: a 2-thread OpenMP/BLAS region waits for its slowest thread, and
    a descheduled thread stalls every parallel region (measured here with
    other work on both cores: a 405k step took ~15x longer with 2 threads than
    with 1). ``geomcap sweep`` runs its workers with one thread each for the
    same reason.
    """
    from geomcap.train import check_writable, resolve_device

    parts = parse_parts(parts)
    dev = resolve_device(device)
    tasks.check_task_level(task, level)
    if peak_n is None:
        peak_n = 8192 if dev.type == "cuda" else 2048  # a GPU needs a larger product to approach its peak
    for name, value in (("rounds", rounds), ("batch_size", batch_size), ("costly_repeats", costly_repeats),
                        ("peak_n", peak_n)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not block_s > 0 or not max_step_s > 0:
        raise ValueError("block_s and max_step_s must be positive")
    if peer is not None and peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; choose one of: {', '.join(PEERS)}")
    if presets != "auto":
        select_presets(presets, dev, 1.0, 1, 1)  # validates names
    compile_presets = [p.strip() for p in compile_presets.split(",") if p.strip()] \
        if isinstance(compile_presets, str) else list(compile_presets)
    for p in compile_presets:
        check_preset(p)
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    rankme_sizes = list(rankme_sizes) if rankme_sizes is not None else [(n, d) for n in RANKME_N for d in RANKME_D]
    out = Path(out)
    if out.suffix != ".json":
        raise ValueError(f"--out must name a .json file, got {out}")
    check_writable(out.parent)
    out.parent.mkdir(parents=True, exist_ok=True)
    if threads is None:
        return _run_bench(**locals())
    from threadpoolctl import threadpool_limits

    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            return _run_bench(**locals())
    finally:
        torch.set_num_threads(saved)


def _run_bench(out, parts, dev, presets, task, level, batch_size, rounds, block_s, max_step_s, peer,
               compile_presets, rankme_sizes, rankme_repeats, costly_repeats, peak_n, threads, make_test_s,
               command, progress, update, **_) -> dict:
    import json

    t_start = time.perf_counter()

    def now():
        return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    record = {
        "command": command,
        "started_at": now(),
        "machine": machine_info(dev),
        "load_average_start": load_average(),
        "settings": {"parts": parts, "device": str(dev), "presets": presets, "task": task, "level": level,
                     "batch_size": batch_size, "rounds": rounds, "block_s": block_s, "max_step_s": max_step_s,
                     "peer": peer, "compile_presets": compile_presets, "rankme_sizes": rankme_sizes,
                     "costly_repeats": costly_repeats, "peak_n": peak_n, "threads": threads,
                     "torch_threads": torch.get_num_threads()},
    }
    previous = json.loads(out.read_text()) if update and out.exists() else None
    if previous is None:
        result = {"schema": 1, **record,
                  "shared_machine_note": ("load averages are recorded per part: other work (a training sweep) "
                                          "may share the cores; compare the ratios, which are measured side by side"),
                  "part_load_average": {}, "part_seconds": {}}
        target = result  # where the run's wall time and end load go
    else:
        if not isinstance(previous, dict) or previous.get("schema") != 1:
            raise ValueError(f"{out} is not a geomcap bench result: cannot update it")
        if previous["machine"]["device"] != dev.type:
            raise ValueError(f"{out} was measured on {previous['machine']['device']}, not {dev.type}: "
                             "write a new file instead of updating it")
        result = previous
        result.setdefault("updates", []).append(record)
        target = record

    def save():
        target["load_average_end"] = load_average()
        target["wall_s"] = time.perf_counter() - t_start
        result["targets"] = check_targets(result)
        if result.get("throughput"):
            result["projection"] = project_grid(result)
        store.atomic_write_json(out, result)

    chosen = None
    if previous is None or any(p in ("throughput", "geometry") for p in parts):
        _log(progress, f"matmul peak ({peak_n}^2, {peak_dtype(dev)})")
        peak = matmul_peak(dev, n=peak_n)
        where = result if previous is None or "throughput" in parts else record
        where["matmul_peak"] = peak
        if dev.type == "cuda":
            where["matmul_peak_float32"] = matmul_peak(dev, n=peak_n, dtype=torch.float32)
        _log(progress, f"matmul peak {peak['flops_per_s'] / 1e9:.0f} GFLOP/s")
        probe = tasks.make_task(task, level, seed=0, n_train=16, n_test=16)
        seq_len = probe.prompt_len + probe.answer_len - 1
        chosen = select_presets(presets, dev, peak["flops_per_s"], seq_len, batch_size, max_step_s)
        target["settings"]["presets_timed"] = chosen
    save()

    for part in parts:
        t0 = time.perf_counter()
        load0 = load_average()
        _log(progress, f"part {part} (load average {load0})")

        def partial(value, part=part):  # a part killed midway keeps what it finished, marked incomplete
            result[part] = {**value, "incomplete": True}
            save()

        if part == "throughput":
            result[part] = throughput(chosen, dev, task=task, level=level, batch_size=batch_size, rounds=rounds,
                                      block_s=block_s, peer=peer, compile_presets=compile_presets,
                                      peak_n=peak_n, progress=progress, on_progress=partial)
        elif part == "geometry":
            result[part] = geometry_cost(chosen, dev, task=task, level=level, rounds=max(1, min(rounds, 3)),
                                         block_s=block_s, progress=progress, on_progress=partial)
        elif part == "costly":
            try:
                result[part] = costly_cost(task=task, level=level, repeats=costly_repeats, block_s=block_s,
                                           progress=progress)
            except ImportError as exc:  # devinterp / datasets are optional
                result[part] = {"skipped": f"missing dependency: {exc}"}
        elif part == "rankme":
            result[part] = rankme_vs_naive(rankme_sizes, repeats=rankme_repeats, progress=progress,
                                           on_progress=partial)
        elif part == "book":
            result[part] = book_build_times(progress=progress)
        elif part == "make_test":
            result[part] = make_test_time(progress=progress)
        elif part == "threads":
            result[part] = thread_contention(progress=progress, on_progress=partial)
        result[part]["measured_at"] = now()
        result["part_seconds"][part] = time.perf_counter() - t0
        result["part_load_average"][part] = {"start": load0, "end": load_average()}
        save()
    if make_test_s is not None and "make_test" not in parts:
        result["make_test"] = {"command": "make test", "seconds": float(make_test_s), "measured_at": now(),
                               "source": "measured separately and passed in with --make-test-s"}
    target["finished_at"] = now()
    save()
    _log(progress, f"done in {target['wall_s']:.0f} s: {out}")
    return result


def thread_contention(task: str = "copy", level: str = "easy", steps: int = 200, busy: int = 1, rounds: int = 2,
                      progress: bool = True, on_progress=None) -> dict:
    """Wall seconds of one ``geomcap train`` run while ``busy`` processes each keep a core busy, per thread
    setting: the default flags, ``--threads 1``, and ``--threads <cores>`` (torch's own default, which
    ``geomcap train`` used before it had ``--threads``). Interleaved rounds; medians and their ratios to
    ``--threads 1`` (> 1: slower than one thread). Each run is a fresh process in a fresh directory, data
    generation and start-up included: what a user waits for. ``on_progress(result)`` after each round
    (a long measurement stopped midway keeps its finished rounds).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    settings = {"default": [], "threads_1": ["--threads", "1"], f"threads_{cores}": ["--threads", str(cores)]}
    seconds = {name: [] for name in settings}
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(rounds):
                for name, flags in settings.items():
                    command = [sys.executable, "-m", "geomcap.cli", "train", "--task", task, "--level", level,
                               "--steps", str(steps), "--quiet", "--device", "cpu",
                               "--out", str(Path(tmp) / f"{name}-{r}"), *flags]
                    t0 = time.perf_counter()
                    subprocess.run(command, check=True, capture_output=True)
                    seconds[name].append(time.perf_counter() - t0)
                    _log(progress, f"threads: {name} round {r}: {seconds[name][-1]:.1f} s")
                if on_progress is not None and r + 1 < rounds:
                    on_progress(_contention_result(task, level, steps, cores, busy, r + 1, seconds))
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    return _contention_result(task, level, steps, cores, busy, rounds, seconds)


def _contention_result(task, level, steps, cores, busy, rounds, seconds) -> dict:
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    return {"command": f"geomcap train --task {task} --level {level} --steps {steps} [flags]", "cores": cores,
            "busy_processes": busy, "rounds": rounds, "seconds": seconds, "median_s": medians,
            "ratio_to_threads_1": {name: medians[name] / medians["threads_1"] for name in medians}}


# --- reading results --------------------------------------------------------------

def load_results(folder=None) -> list[dict]:
    """Every bench result (``*.json``) in ``folder`` (default ``data_dir()``), with its file name as ``file``."""
    import json

    folder = Path(folder or data_dir())
    results = []
    for path in sorted(folder.glob("*.json")):
        result = json.loads(path.read_text())
        if isinstance(result, dict) and result.get("schema") == 1:
            result["file"] = path.name
            results.append(result)
    return results


def figures_table(result: dict):
    """The closing-note table of one result: figure, value, unit (a pandas DataFrame)."""
    import pandas as pd

    rows = []

    def add(figure, value, unit=""):
        if value is not None:
            rows.append({"figure": figure, "value": value, "unit": unit})

    contention = result.get("threads") or {}
    for name, ratio in (contention.get("ratio_to_threads_1") or {}).items():
        if name != "threads_1":
            add(f"geomcap train, {name.replace('_', ' ')} / threads 1, one core busy", ratio, "ratio")

    add("matmul peak", result["matmul_peak"]["flops_per_s"] / 1e9, f"GFLOP/s ({result['matmul_peak']['dtype']})")
    for row in (result.get("throughput") or {}).get("presets", []):
        p = row["preset"]
        for name, m in row["models"].items():
            add(f"{p} {name} tokens/s", m["tokens_per_s"], "tokens/s")
            add(f"{p} {name} ms/step", m["ms_per_step"], "ms")
        add(f"{p} geomcap fraction of matmul peak", row["models"]["geomcap"]["peak_fraction"], "ratio")
        add(f"{p} geomcap / peer tokens/s", row.get("peer_ratio"), "ratio")
        add(f"{p} compiled / eager tokens/s", row.get("compile_ratio"), "ratio")
        add(f"{p} compile warm-up", row.get("compile_warmup_s"), "s")
        add(f"{p} data share of a step", row.get("data_share"), "ratio")
    for row in (result.get("geometry") or {}).get("presets", []):
        s = row["schedules"][0]
        add(f"{row['preset']} geometry per checkpoint", row["geometry_s"], "s")
        add(f"{row['preset']} whole checkpoint (eval + geometry)", row["eval_s"], "s")
        add(f"{row['preset']} geometry share ({s['steps']} steps, {s['checkpoints']} checkpoints)",
            s["geometry_share"], "ratio")
        add(f"{row['preset']} checkpoint share ({s['steps']} steps)", s["eval_share"], "ratio")
    costly = result.get("costly") or {}
    for row in costly.get("measures", []):
        add(f"{costly['size']} {row['measure']} per evaluation", row["seconds"], "s")
        add(f"{costly['size']} {row['measure']} in training steps", row["step_equivalents"], "steps")
    if costly.get("run"):
        add(f"{costly['size']} costly measures share (every {costly['run']['costly_every']}th checkpoint, "
            f"{costly['run']['steps']} steps)", costly["run"]["run_share"], "ratio")
    for row in (result.get("rankme") or {}).get("sizes", []):
        add(f"RankMe {row['n']} x {row['d']} speedup over naive ({row['method']})", row["speedup"], "ratio")
    book = result.get("book") or {}
    for label in ("cold", "warm"):
        if book.get(f"{label}_returncode") == 0:
            add(f"book build, {label}", book.get(f"{label}_s"), "s")
        elif f"{label}_s" in book:
            add(f"book build, {label}: FAILED (exit {book.get(f'{label}_returncode')}) after", book[f"{label}_s"], "s")
    add("make test", (result.get("make_test") or {}).get("seconds"), "s")
    return pd.DataFrame(rows)
