"""Packed training: up to K runs of one preset trained as one batched computation.

A small model on a large accelerator is bound by kernel launches, not by
arithmetic. Packing K runs that share a preset, ``steps`` and batch size into
one model with a leading *run* dimension turns every matrix product of a step
into one batched product (``baddbmm``) over the K runs, and every attention
call into one call over K x B sequences::

    from geomcap.packed import train_packed
    run_dirs = train_packed([cfg_add, cfg_mod, cfg_copy], root="runs", device="cuda")

Each run keeps everything that makes it *that* run: its data, initialisation, optimizer state and seeded
batch generator (``train.training_setup``, as ``train.train``: the same draws), AdamW with its own weight
decay (implemented on the stacked tensors, the same update as ``torch.optim.AdamW``), gradient-norm
clipping on its own gradient, the learning-rate schedule ``config.learning_rate``, the checkpoint
schedule and its recorder (``recorders.CheckpointRecorder`` on a per-run module holding the run's current
weights; on a GPU its geometry and probes run on the device in float64 and only the scalars come back).
Only the forward pass and the update are the pack's own. Each run's directory is written by ``train``'s
functions, as ``train.train`` writes it: config.json (provenance says ``pack``: how many runs shared the
computation), metrics.csv, state.pt while in progress (the same format, so a packed run resumes alone and
an alone run resumes packed), status.json. A complete run is reused; a run stops at its own early stop,
and from there its slot is dropped from the pack.

Tasks of different lengths share the computation by padding each input on the
right to the longest one. Attention is causal, so positions after the answer
change nothing at or before it: the logits the loss reads are those of the
unpadded input (up to floating-point rounding).

Equivalence with training alone is up to rounding: a batched product sums in
another order than the unbatched one, and training dynamics may amplify the
difference. Measured on the CPU (405k, batch 64, 600 steps, packs of three
tasks): RankMe, centred RankMe, the losses and the mean energy share within
~1e-6 relative of the run trained alone at every checkpoint, accuracy and
probe accuracy identical, for runs that learn smoothly (copy, reverse); a run
passing through an unstable transition (mod, weight decay 1.0, accuracy rising
from 0.04 to 0.26) kept that agreement for 150 steps, then the difference grew
~40-fold every 50 steps (1e-6 at step 156, 1e-3 at 255) and the two
trajectories separated (final accuracy 0.26 alone, 0.30 packed): there, as
between two machines or a compiled and an eager run, only the statistics
agree, not the trajectory. The tests hold the first checkpoints to accuracy
within one test example and RankMe within 1e-3 relative.

``status.json``'s ``train_s`` of a packed run is its share of the pack's
training time (the wall time of each interval divided by the runs trained in
it), so that the runs' times add up to the wall time.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from geomcap import store, tasks
from geomcap.config import TrainConfig, config_checkpoints, learning_rate
from geomcap.models import ALL_PRESETS, ModelConfig, answer_inputs, autocast, resolve_device, warn_slow_precision
from geomcap.progress import run_progress
from geomcap.recorders import CheckpointRecorder
from geomcap.train import (CheckpointWriter, claim_run_dir, decays_weight, finish, progress_summary, restore_state,
                           stop_due, training_setup, write_config)

ADAM_EPS = 1e-8  # torch.optim.AdamW's default, which train.make_optimizer uses
#: the config fields every run of a pack must share (one step loop, one checkpoint schedule)
SHARED_FIELDS = ("size", "steps", "batch_size", "n_log_checkpoints", "n_linear_checkpoints", "dense_steps",
                 "beta1", "beta2", "precision")


# --- the model with a leading run dimension --------------------------------

def stack_parameters(modules) -> dict[str, torch.Tensor]:
    """K models of one preset -> ``{name: (K, *shape)}`` leaf tensors requiring grad.

    Names are ``named_parameters()``'s: the tied unembedding is the token embedding."""
    named = [dict(m.named_parameters()) for m in modules]
    return {name: torch.stack([n[name].detach() for n in named]).requires_grad_() for name in named[0]}


def _linear(x, P, name):
    """x (K, B, T, C_in) @ P[name.weight] (K, C_out, C_in)^T + P[name.bias] (K, C_out)."""
    K, B, T, C = x.shape
    W, b = P[name + ".weight"], P[name + ".bias"]
    return torch.baddbmm(b[:, None, :], x.reshape(K, B * T, C), W.transpose(1, 2)).view(K, B, T, -1)


def _layer_norm(x, P, name):
    w, b = P[name + ".weight"], P[name + ".bias"]
    return F.layer_norm(x, x.shape[-1:]) * w[:, None, None, :] + b[:, None, None, :]


def packed_logits(P: dict, idx: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """The forward pass of ``models.GPT`` for K runs at once.

    P: stacked parameters ({name: (K, ...)}, see :func:`stack_parameters`);
    idx: (K, B, T) int64 token ids. Returns logits (K, B, T, vocab_size).
    """
    K, B, T = idx.shape
    if T > cfg.block_size:
        raise ValueError(f"sequence length {T} exceeds block_size {cfg.block_size}")
    C, H = cfg.d_model, cfg.n_head
    runs = torch.arange(K, device=idx.device)[:, None, None]
    x = P["tok_emb.weight"][runs, idx] + P["pos_emb.weight"][:, None, :T]
    for i in range(cfg.n_layer):
        block = f"blocks.{i}."
        q, k, v = _linear(_layer_norm(x, P, block + "ln1"), P, block + "attn.qkv").split(C, dim=3)
        q, k, v = (t.reshape(K * B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + _linear(y.transpose(1, 2).reshape(K, B, T, C), P, block + "attn.proj")
        h = F.gelu(_linear(_layer_norm(x, P, block + "ln2"), P, block + "mlp.fc"))
        x = x + _linear(h, P, block + "mlp.proj")
    x = _layer_norm(x, P, "ln_f")
    return torch.bmm(x.reshape(K, B * T, C), P["tok_emb.weight"].transpose(1, 2)).view(K, B, T, -1)


def pad_right(inputs: torch.Tensor, length: int, pad_id: int = tasks.PAD_ID) -> torch.Tensor:
    """(N, T) token ids -> (N, length), filled on the right with ``pad_id``."""
    if inputs.shape[1] > length:
        raise ValueError(f"length must be >= the inputs' length {inputs.shape[1]}, got {length}")
    return F.pad(inputs, (0, length - inputs.shape[1]), value=pad_id)


def packed_answer_losses(logits: torch.Tensor, answers, prompt_lens) -> torch.Tensor:
    """Each run's mean answer cross-entropy (``models.answer_loss``) -> (K,).

    logits: (K, B, T, V) of right-padded inputs; answers: K tensors (B, Ta_k);
    prompt_lens: K prompt lengths (run k's answer logits sit at Tp_k - 1 .. Tp_k + Ta_k - 2).
    """
    losses = []
    for k, (a, tp) in enumerate(zip(answers, prompt_lens)):
        lg = logits[k, :, tp - 1: tp - 1 + a.shape[1]]
        losses.append(F.cross_entropy(lg.transpose(1, 2).float(), a, reduction="none").mean(dim=1).mean())
    return torch.stack(losses)


# --- per-run clipping and AdamW on stacked tensors --------------------------

def _per_run(values, like):
    """(K,) -> shape (K, 1, ..., 1) broadcasting against ``like`` (K, ...)."""
    return values.view(-1, *([1] * (like.ndim - 1)))


@torch.no_grad()
def clip_grad_norms_(grads: list, max_norm: torch.Tensor) -> torch.Tensor:
    """Scale each run's gradient so its norm is at most ``max_norm[k]`` (``clip_grad_norm_`` per run).

    grads: stacked gradients (K, ...) modified in place. Returns the K norms before clipping."""
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads], dim=1)
    total = torch.linalg.vector_norm(norms, dim=1)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(_per_run(coef, g))
    return total


@torch.no_grad()
def adamw_step_(params: list, grads: list, exp_avg: list, exp_avg_sq: list, *, lr, weight_decay, decayed,
                beta1: float, beta2: float, step: int, eps: float = ADAM_EPS) -> None:
    """One AdamW update of stacked tensors (K, ...), run k with its own lr and weight decay.

    The arithmetic of ``torch.optim.AdamW`` (decoupled weight decay, bias-corrected moments).
    lr, weight_decay: (K,) float64 tensors; beta1, beta2 and ``step`` (the update's number,
    >= 1) are shared; decayed: per tensor, whether weight decay applies to it.
    """
    bias1, bias2_sqrt = 1 - beta1 ** step, (1 - beta2 ** step) ** 0.5
    for p, g, m, v, decay in zip(params, grads, exp_avg, exp_avg_sq, decayed):
        if decay:
            p.mul_(_per_run((1 - lr * weight_decay).to(p.dtype), p))
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = (v.sqrt() / bias2_sqrt).add_(eps)
        p.add_(m * _per_run((-lr / bias1).to(p.dtype), m) / denom)  # addcdiv's order: (value * m) / denom


# --- the runs -----------------------------------------------------------------

@dataclass(eq=False)
class _Run:
    """One run of a pack: its config, data, per-run module and optimizer (the canonical state
    between intervals), batch generator, recorder (its metrics so far) and step."""
    cfg: TrainConfig
    run_dir: Path
    data: tasks.TaskData
    model: torch.nn.Module
    optimizer: torch.optim.AdamW
    batch_gen: torch.Generator
    recorder: CheckpointRecorder
    inputs: torch.Tensor          # (n_train, T_pack) right-padded training inputs, on the device
    answers: torch.Tensor         # (n_train, Ta) on the device
    writer: CheckpointWriter | None = None
    step: int = 0
    stopped: bool = False


def check_packable(configs) -> None:
    """Raise ValueError unless the configs can share one packed computation."""
    if not configs:
        raise ValueError("configs must hold at least one TrainConfig")
    for name in SHARED_FIELDS:
        values = sorted({str(getattr(c, name)) for c in configs})
        if len(values) > 1:
            raise ValueError(f"packed runs must share {name}; got {', '.join(values)}")
    for c in configs:  # what the packed forward pass and update do not implement: train these alone
        model = ALL_PRESETS[c.size]
        if (c.full_batch or c.grad_clip is None or c.task_params.get("number_tokens")
                or (model.activation, model.layer_norm, model.tied) != ("gelu", True, True)):
            raise ValueError(f"{c.task}/{c.level} {c.size} seed {c.seed} cannot be packed (full batch, no "
                             "clipping, number tokens or a ReLU/no-LayerNorm/untied model): train it alone")


def pack_key(cfg: TrainConfig) -> tuple:
    """Configs with equal keys may share a pack."""
    return tuple(getattr(cfg, name) for name in SHARED_FIELDS)


def _open_run(cfg: TrainConfig, run_dir: Path, dev, seq_len: int, pack: int, schedule) -> _Run:
    """A claimed run ready to train (resumed from its state.pt if there is one), as ``train.train`` opens it."""
    data, model, optimizer, batch_gen = training_setup(cfg, dev, positions=seq_len)
    run = _Run(cfg=cfg, run_dir=run_dir, data=data, model=model, optimizer=optimizer, batch_gen=batch_gen,
               recorder=CheckpointRecorder(cfg, data, dev, schedule, geometry_on_device=dev.type == "cuda"),
               inputs=pad_right(answer_inputs(data.train_prompts, data.train_answers), seq_len).to(dev),
               answers=data.train_answers.to(dev))
    step = restore_state(run_dir, model, optimizer, batch_gen, run.recorder)
    if step is None:
        write_config(run_dir, cfg, dev, pack=pack)
    run.step = step or 0
    run.writer = CheckpointWriter(run_dir, run.recorder)
    return run


def _checkpoint(run: _Run, save: bool = True) -> dict:
    """train.train's checkpoint: the run's recorder on its per-run module, then its writer (metrics, and the
    state when due; not with ``save=False``); returns the progress bar's summary."""
    step_rows = run.recorder.update(run.model, run.step)
    if save:
        run.writer(run.step, run.model, run.optimizer, run.batch_gen)
    return progress_summary(step_rows)


@dataclass(eq=False)
class StackedRuns:
    """K runs of one preset as one computation: their weights and AdamW moments stacked along a leading run
    dimension (``params``: {name: (K, ...)} in ``named_parameters`` order; ``exp_avg``, ``exp_avg_sq`` in the
    same order), and what their step needs besides: each run's weight decay and clipping norm ((K,) float64),
    the betas they share, which tensors decay (:func:`geomcap.train.decays_weight`), each run's prompt length,
    the model's shape and the step's precision. Built by :func:`stack_runs`, trained by :func:`packed_step`."""
    model: ModelConfig
    params: dict
    exp_avg: list
    exp_avg_sq: list
    decayed: list
    weight_decay: torch.Tensor
    grad_clip: torch.Tensor
    beta1: float
    beta2: float
    prompt_lens: list
    precision: str


def stack_runs(modules, optimizers, configs, prompt_lens, dev) -> StackedRuns:
    """The :class:`StackedRuns` of K runs: their modules' weights, their optimizers' moments (zeros before a
    run's first step) and their configs' settings, on ``dev``. The configs must share :data:`SHARED_FIELDS`."""
    named = dict(modules[0].named_parameters())
    moments = {"exp_avg": [], "exp_avg_sq": []}
    for name in named:
        for key, out in moments.items():
            per_run = []
            for module, optimizer in zip(modules, optimizers):
                p = dict(module.named_parameters())[name]
                state = optimizer.state.get(p, {})
                per_run.append(state[key] if key in state else torch.zeros_like(p))
            out.append(torch.stack(per_run).to(dev))
    settings = {key: torch.tensor([getattr(c, key) for c in configs], dtype=torch.float64, device=dev)
                for key in ("weight_decay", "grad_clip")}
    return StackedRuns(model=modules[0].cfg, params=stack_parameters(modules), **moments,
                       decayed=[decays_weight(p) for p in named.values()], **settings, beta1=configs[0].beta1,
                       beta2=configs[0].beta2, prompt_lens=list(prompt_lens), precision=configs[0].precision)


@torch.no_grad()
def unstack_runs(stacked: StackedRuns, modules, optimizers, adam_step: int) -> None:
    """Write the stacked weights and moments back into each run's module and optimizer (``adam_step``: the
    updates made so far, AdamW's count)."""
    for k, (module, optimizer) in enumerate(zip(modules, optimizers)):
        params = dict(module.named_parameters())
        for i, name in enumerate(stacked.params):
            p = params[name]
            p.copy_(stacked.params[name][k])
            if adam_step > 0:
                optimizer.state[p] = {"step": torch.tensor(float(adam_step)),
                                      "exp_avg": stacked.exp_avg[i][k].clone(),
                                      "exp_avg_sq": stacked.exp_avg_sq[i][k].clone()}


def packed_step(stacked: StackedRuns, inputs: torch.Tensor, answers, lr: torch.Tensor, step: int) -> torch.Tensor:
    """One optimizer step of K runs at once: the forward pass (:func:`packed_logits`, under
    :func:`~geomcap.models.autocast` at the runs' precision), each run's answer loss, its gradient clipped to its
    own norm (:func:`clip_grad_norms_`), AdamW with its own lr and weight decay (:func:`adamw_step_`). inputs
    (K, B, T) right-padded token ids, answers K tensors (B, Ta_k), ``lr`` (K,) float64 on the device, ``step``
    the step being taken (from 0: AdamW's count is ``step + 1``). Returns the K losses (before the step). The
    packed counterpart of :func:`geomcap.train.train_step`: packed training and the GPU cost model
    (``geomcap.gpu_grid.measure_costs``) run it."""
    params = list(stacked.params.values())
    with autocast(inputs.device, stacked.precision):
        logits = packed_logits(stacked.params, inputs, stacked.model)
    losses = packed_answer_losses(logits, answers, stacked.prompt_lens)
    grads = torch.autograd.grad(losses.sum(), params)
    clip_grad_norms_(grads, stacked.grad_clip.float())
    adamw_step_(params, grads, stacked.exp_avg, stacked.exp_avg_sq, lr=lr, weight_decay=stacked.weight_decay,
                decayed=stacked.decayed, beta1=stacked.beta1, beta2=stacked.beta2, step=step + 1)
    return losses


def _to_device(t: torch.Tensor, dev) -> torch.Tensor:
    """A host tensor on ``dev`` without making the host wait for the device's queue
    (a copy from pageable memory would: pinned memory and ``non_blocking`` avoid it)."""
    return t.pin_memory().to(dev, non_blocking=True) if dev.type == "cuda" else t


def train_interval(runs, start: int, end: int, dev) -> float:
    """Train a pack's runs (all at step ``start``) together up to ``end``, each step's batches drawn with each
    run's own generator (:func:`packed_step`); returns the wall seconds."""
    t0 = time.perf_counter()
    modules, optimizers = [r.model for r in runs], [r.optimizer for r in runs]
    stacked = stack_runs(modules, optimizers, [r.cfg for r in runs], [r.data.prompt_len for r in runs], dev)
    B = runs[0].cfg.batch_size
    for step in range(start, end):
        # no host synchronisation inside the step: the draws and rates go over pinned memory, nothing comes back
        lr = _to_device(torch.tensor([learning_rate(step, r.cfg) for r in runs], dtype=torch.float64), dev)
        idx = [_to_device(torch.randint(r.inputs.shape[0], (B,), generator=r.batch_gen), dev) for r in runs]
        x = torch.stack([r.inputs[i] for r, i in zip(runs, idx)])
        packed_step(stacked, x, [r.answers[i] for r, i in zip(runs, idx)], lr, step)
    unstack_runs(stacked, modules, optimizers, end)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def train_packed(configs, outs=None, root=None, device: str = "auto", progress: bool = True,
                 keep_state: bool = False, save_state: bool = True, bars: bool | None = None) -> list[Path]:
    """Train the configs as one pack; returns their run directories, in order.

    ``outs``: one run directory per config (default: the run store ``root``'s directory for
    its config hash). The configs must share :data:`SHARED_FIELDS`. A complete run is reused,
    an interrupted one resumes from its last saved state (runs at different checkpoints join
    the pack when it reaches theirs). ``save_state=False`` writes no state.pt and the metrics only
    at the end (for a single uninterrupted call where rewriting both at every checkpoint would cost
    more than the training: a 151m run's state is ~1.8 GB); such a run cannot resume. ``progress``, ``bars``:
    as :func:`geomcap.train.train`'s.
    """
    configs = list(configs)
    check_packable(configs)
    if outs is None:
        outs = [store.run_dir_for(c.to_dict(), root) for c in configs]
    outs = [Path(o) for o in outs]
    if len(outs) != len(configs):
        raise ValueError(f"outs must hold one directory per config ({len(configs)}), got {len(outs)}")
    if len(set(outs)) != len(outs):
        raise ValueError("outs must be distinct: two configs of the pack would share a run directory")
    dev = resolve_device(device)
    warn_slow_precision(dev, configs[0].precision)  # a pack shares its precision (SHARED_FIELDS)
    seq_len = max(tasks.sequence_length(c.task, c.level, c.task_params) for c in configs)
    schedule = config_checkpoints(configs[0])
    with contextlib.ExitStack() as locks:  # one writer per run directory, for as long as the pack trains
        todo = [(c, o) for c, o in zip(configs, outs) if claim_run_dir(c, o, locks)]  # every lock before any write
        runs = [_open_run(c, o, dev, seq_len, len(configs), schedule) for c, o in todo]
        if runs:
            _train_runs(runs, schedule, dev, progress, keep_state, save_state, bars)
    return outs


def _train_runs(runs: list, schedule, dev, progress: bool, keep_state: bool, save_state: bool,
                bars: bool | None) -> None:
    """The body of :func:`train_packed`: train the opened (and locked) runs to their end."""
    chance = {id(r): tasks.chance_accuracy(r.data.test_answers) for r in runs}
    bar = run_progress(int(schedule[-1]), min(r.step for r in runs), f"pack of {len(runs)} {runs[0].cfg.size}",
                       progress, bars)
    try:
        for r in runs:
            if not r.recorder.rows:  # a fresh run: the checkpoint at step 0
                _checkpoint(r, save_state)
        for start, end in zip(schedule[:-1].tolist(), schedule[1:].tolist()):
            waiting = [r for r in runs if r.step == start and not r.stopped]
            for r in waiting:
                r.stopped = stop_due(r.recorder.rows, chance[id(r)], r.cfg, start)
            active = [r for r in waiting if not r.stopped]
            if not active:
                continue
            for r in active:
                r.model.train()
            seconds = train_interval(active, start, end, dev)
            summary = {}
            for r in active:
                r.recorder.timers["train_s"] += seconds / len(active)
                r.step = end
                summary = _checkpoint(r, save_state)
            bar.set_postfix({"active": len(active), **summary}, refresh=False)  # before the update, as in train
            bar.update(end - bar.n)
    finally:  # without state, what was measured before an interruption is kept as metrics.csv
        if not save_state:
            for r in runs:
                if r.recorder.rows:
                    store.write_metrics(r.run_dir, r.recorder.rows)
    bar.close()
    for r in runs:
        if keep_state and save_state and r.writer.saved_step != r.step:
            r.writer(r.step, r.model, r.optimizer, r.batch_gen, force=True)
        finish(r.run_dir, r.cfg, r.step, schedule, r.recorder, r.model, keep_state)
