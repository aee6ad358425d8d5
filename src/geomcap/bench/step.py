"""Timing the training step: geomcap's model against a transformers peer, and whole runs under thread contention."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn

from geomcap import tasks
from geomcap.bench.machine import log_progress, matmul_peak, memory_gib, peak_dtype, time_once, time_repeats
from geomcap.models import PRESETS, LogitsOnly, build, check_preset, count_parameters
from geomcap.parameters import BENCH

#: the peers ``build_peer`` builds: the choices of ``geomcap bench --peer`` (its row)
PEERS = BENCH["peer"].choices
# the step budget of the committed grid (scripts/cpu_grid.sh), used for projections
GRID_STEPS = {"easy": 2000, "medium": 4000, "hard": 3000}


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
                    device: torch.device, seed: int = 0, lr: float = 1e-3, weight_decay: float = 0.1,
                    precision: str = "fp32"):
    """The training steps of ``geomcap.train.train`` for any model mapping token ids to logits.

    model: ``model(idx)`` -> logits (B, T, V); prompts (n, Tp), answers (n, Ta)
    int64 tensors already on ``device``. Returns ``run(n_steps)``, which does
    n_steps of :func:`geomcap.train.train_step` (the training loop's own step:
    answer cross-entropy at ``precision`` (fp32, or bf16 autocast), AdamW from
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
            loss = train_step(model, optimizer, prompts[idx], answers[idx], lr, defaults.grad_clip, device,
                              precision=precision)
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
              else (memory_gib() or 8) * 2**30)
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
        log_progress(progress, f"throughput {preset}: building models")
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
            log_progress(progress, f"throughput {preset} round {r + 1}/{rounds}: "
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
    # each busy process spins while this one lives: one killed without its cleanup leaves none behind
    spin = f"import os\nwhile os.getppid() == {os.getpid()}: pass"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(busy)]
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
                    log_progress(progress, f"threads: {name} round {r}: {seconds[name][-1]:.1f} s")
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
