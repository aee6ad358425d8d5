"""Training with checkpointed geometry captures.

One run = one (task, level, size, seed). The loop is a plain PyTorch loop:
AdamW, linear warmup then cosine decay, gradient clipping, batches drawn
with a seeded generator from pre-generated tensors on the device.

Defaults (the paper does not state its optimizer; these are our choices):

=================  ============================================================
optimizer          AdamW, lr 1e-3, betas (0.9, 0.98), weight decay 0.1
                   (1.0 for ``mod``, the usual grokking setting)
schedule           linear warmup over ``min(100, steps // 10)`` steps, then
                   cosine decay to 0.1 x lr at the last step
batch              128 sequences; gradient norm clipped at 1.0
precision          float32 on CPU; bf16 autocast on CUDA (float32 master weights)
=================  ============================================================

Checkpoints (``checkpoint_steps``): every step over the first ``dense_steps``
(128) -- the collapse happens there, and a floor that falls between two
checkpoints cannot be located -- then ``n_linear_checkpoints`` (150) evenly
spaced up to ``steps``. (The first grid used ~20 log-spaced plus 40 linear
checkpoints; its configs say so with ``dense_steps = 0``.)

Early stop: with ``stop_margin`` set, a run stops at the first checkpoint at
or after ``acquisition + max(stop_margin * acquisition, stop_min_steps)``
(acquisition: chance-corrected test accuracy > 0.5 at 3 consecutive
checkpoints, decided on the checkpoints seen so far). The learning-rate
schedule and the checkpoints are fixed by ``steps``, so everything before the
stop is what the full run would have recorded; status.json says ``stopped_at``.

At every checkpoint the run records (tidy rows ``step, layer, measure, value``):

* ``loss``, ``train_accuracy`` -- on a fixed batch of training examples (in the
  dense part only at 0 and the powers of two, ``thinned_steps(..., every=1)``);
* ``test_loss``, ``accuracy`` -- exact match on the whole test set;
  ``first_token_accuracy`` -- the model's accuracy on the first answer token
  alone (the probes' target, so the fair baseline for them);
* per layer, from the hidden states of the fixed probe batch (the first
  ``probe_size`` test prompts): ``rankme`` (the primary measure: uncentred,
  answer position), and for the sensitivity analysis ``rankme_centred``
  (answer position, centred), and, at the checkpoints of
  ``thinned_steps(..., every=2)`` only (their SVDs cost ten times the rest of the geometry),
  ``rankme_all_positions`` (every position of every probe sequence stacked)
  and ``rankme_mean_pooled`` (mean over positions);
  ``probe_accuracy`` (linear probe to the first answer token);
  ``mean_energy_share`` (``geometry.mean_energy_share`` at the answer position:
  how much of the uncentred energy the mean direction carries);
* at layer L (the last): ``rankme_residual``, ``rankme_centred_residual`` and
  ``mean_energy_share_residual`` of the last block's residual stream *before*
  the final LayerNorm (layers 1..L-1 are pre-LayerNorm residuals, layer L is
  after it: these make the last block comparable with the others).

With ``measures`` the costly measures (of the training dynamics) run on a subset of the
checkpoints (``thinned_steps(..., every=costly_every)``: powers of two over the
dense part, then every ``costly_every``-th linear checkpoint, and the last), on a fixed batch of
``dynamics_size`` training examples: ``grad_rank``, ``grad_cov_rank``,
``hessian_top`` and ``llc`` (see ``geomcap.dynamics``), and at every checkpoint of
``costly_window`` (a step range, e.g. around a run's acquisition), each with its health:
``hessian_residual`` (||Hv - lambda v|| / lambda, Lanczos's convergence) and
``hessian_matvecs`` (Hessian-vector products used; Lanczos starts from the
previous checkpoint's eigenvector with ``hessian_warm_start``), and
``llc_trace_drift`` (how much the SGLD chains still moved; > 0.2: not flat). (config.json spells
``hessian_top`` as ``hessian``, the name the first runs were hashed with.)

Every measure, with where and when it is recorded, is listed once in :mod:`geomcap.measures`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from tqdm import tqdm  # text bars: tqdm.auto would need ipywidgets in Jupyter (and warns without it)

from geomcap import events, geometry, measures, probes, store, tasks
from geomcap.models import answer_logits, answer_loss, build, check_preset, count_parameters

COSTLY_MEASURES = measures.COSTLY_MEASURES
WEIGHT_DECAY_BY_TASK = {"mod": 1.0}
#: the step budget per level of the committed runs: the notebooks' ``steps`` parameter and the default of
#: ``geomcap sweep --steps``
DEFAULT_LEVEL_STEPS = {"easy": 2000, "medium": 4000, "hard": 8000}
#: :data:`DEFAULT_LEVEL_STEPS` as text, as ``--steps`` and the notebooks' ``steps`` parameter write it
DEFAULT_LEVEL_STEPS_TEXT = ",".join(f"{level}:{steps}" for level, steps in DEFAULT_LEVEL_STEPS.items())
DEFAULT_WEIGHT_DECAY = 0.1
#: config fields that choose what is measured, never how the model trains: two runs whose configs
#: differ only in these trained the same model (``test_costly_measures_leave_the_training_metrics_unchanged``)
MEASUREMENT_ONLY_FIELDS = ("measures", "costly_every", "dynamics_size", "hessian_warm_start", "costly_window")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a run's metrics (its hash names the run directory)."""
    task: str
    level: str
    size: str = "405k"
    seed: int = 0
    steps: int = 2000
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float | None = None  # None -> WEIGHT_DECAY_BY_TASK or DEFAULT_WEIGHT_DECAY
    beta1: float = 0.9
    beta2: float = 0.98
    warmup_steps: int | None = None    # None -> min(100, steps // 10)
    min_lr_ratio: float = 0.1
    grad_clip: float | None = 1.0      # None: no clipping
    n_log_checkpoints: int = 0
    n_linear_checkpoints: int = 150
    dense_steps: int = 128             # a checkpoint at every step up to here
    n_train: int = 100_000
    n_test: int = 512
    probe_size: int = 512
    train_eval_size: int = 512
    measures: tuple[str, ...] = ()
    costly_every: int = 4
    dynamics_size: int = 256
    answer_order: str = "msd"          # "lsd": add, mod, mul answers least significant digit first
    task_params: dict | None = None    # None -> tasks.LEVEL_TABLE[task][level]
    stop_margin: float | None = 1.0    # None: train all `steps`; see the module docstring
    stop_min_steps: int = 500
    hessian_warm_start: bool = True    # Lanczos starts from the previous checkpoint's top eigenvector
    costly_window: tuple[int, int] | None = None  # (first, last) step: the costly measures at every checkpoint in it
    control: str | None = None         # "shuffled_answers": the negative control (see CONTROLS)
    schedule: str = "cosine"           # "constant": linear warmup, then lr held (see SCHEDULES)
    full_batch: bool = False           # every step on the whole training set (batch_size then sets evaluation chunks)
    stop_at: int | None = None         # stop at this step; the schedule and checkpoints still span `steps`
    perturb: float = 0.0               # relative size of seeded noise on the initial weights (twins)
    perturb_seed: int = 0              # the seed of that noise

    def __post_init__(self):
        tasks.check_task_level(self.task, self.level)
        check_preset(self.size)
        tasks.check_answer_order(self.task, self.answer_order)
        if isinstance(self.measures, str) or not all(isinstance(m, str) for m in self.measures):
            raise ValueError(f"measures must be a sequence of names, got {self.measures!r}")
        object.__setattr__(self, "measures", tuple(measures.costly_option(m) for m in self.measures))
        for name, (kind, interval) in FIELD_RANGES.items():
            value = getattr(self, name)
            if not (value is None and name in ("weight_decay", "warmup_steps", "stop_margin", "stop_at", "grad_clip")):
                object.__setattr__(self, name, check_field(name, value, kind, interval))
        # resolve the task-dependent defaults so config.json states what was used
        if self.weight_decay is None:
            object.__setattr__(self, "weight_decay", WEIGHT_DECAY_BY_TASK.get(self.task, DEFAULT_WEIGHT_DECAY))
        if self.warmup_steps is None:
            object.__setattr__(self, "warmup_steps", min(100, self.steps // 10))
        object.__setattr__(self, "measures", tuple(sorted(set(self.measures))))
        if self.warmup_steps > self.steps:
            raise ValueError(f"warmup_steps must be at most steps ({self.steps}), got {self.warmup_steps}")
        params = tasks.level_params(self.task, self.level) if self.task_params is None else self.task_params
        object.__setattr__(self, "task_params", tasks.check_params(self.task, params))
        if not isinstance(self.hessian_warm_start, bool):
            raise ValueError(f"hessian_warm_start must be True or False, got {self.hessian_warm_start!r}")
        if self.costly_window is not None:
            object.__setattr__(self, "costly_window", check_window(self.costly_window))
        for name, value, allowed in (("control", self.control, (None, *CONTROLS)),
                                     ("schedule", self.schedule, SCHEDULES)):
            if value not in allowed:
                choices = ", ".join("none" if a is None else a for a in allowed)
                raise ValueError(f"unknown {name} {value!r}; choose one of: {choices}")
        if not isinstance(self.full_batch, bool):
            raise ValueError(f"full_batch must be True or False, got {self.full_batch!r}")
        if self.stop_at is not None and self.stop_at > self.steps:
            raise ValueError(f"stop_at must be at most steps ({self.steps}), got {self.stop_at}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["measures"] = [measures.CONFIG_SPELLING.get(m, m) for m in self.measures]  # the hashed spelling
        # fields added after the first committed runs enter the dict (and so the run's hash) only
        # when they differ from the value those runs used, so that those runs keep their names
        for name, value in legacy_values(self.task, self.level).items():
            if d[name] == value:
                del d[name]
        if "hessian" not in d["measures"]:  # the Hessian's start vector changes nothing then
            d.pop("hessian_warm_start", None)
        if not d["measures"]:  # nor does a window for costly measures that are not taken
            d.pop("costly_window", None)
        if not self.perturb:  # nor the seed of a perturbation that is not applied
            d.pop("perturb_seed", None)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """The config a config.json (or ``to_dict``) describes; a field it lacks takes the value
        of the runs written before that field existed (:func:`legacy_values`)."""
        names = {f.name for f in fields(cls)}
        kwargs = {**legacy_values(d["task"], d["level"]), **{k: v for k, v in d.items() if k in names}}
        kwargs["measures"] = tuple(kwargs.get("measures", ()))
        return cls(**kwargs)


def legacy_values(task: str, level: str) -> dict:
    """Fields added after the first grid, with the values that grid's runs used."""
    return {"answer_order": "msd", "dense_steps": 0, "stop_margin": None, "stop_min_steps": 500,
            "task_params": tasks.level_params(task, level, legacy=True), "hessian_warm_start": False,
            "costly_window": None, "control": None, "schedule": "cosine", "full_batch": False, "stop_at": None,
            "perturb": 0.0, "perturb_seed": 0}


#: negative controls (``TrainConfig.control``): "shuffled_answers" permutes the answers across prompts, in the
#: training and the test set alike (:func:`task_data`): the answer marginals, and so the early loss drop, stay;
#: nothing that generalises can be learnt
CONTROLS = ("shuffled_answers",)
#: learning-rate schedules (``TrainConfig.schedule``): both start with a linear warmup over ``warmup_steps``
SCHEDULES = ("cosine", "constant")


def check_window(window) -> tuple[int, int]:
    """``costly_window`` as a (first, last) pair of steps with 0 <= first <= last, else ValueError."""
    try:
        first, last = window
    except (TypeError, ValueError):
        raise ValueError(f"costly_window must be two steps (first, last), got {window!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (first, last)) or not 0 <= first <= last:
        raise ValueError(f"costly_window must be two whole steps with 0 <= first <= last, got {window!r}")
    return int(first), int(last)


#: The numeric TrainConfig fields: (type, allowed interval). Every value must also be finite. A new
#: numeric field gets one line here (tests check that every field is covered here or by its own check).
FIELD_RANGES = {
    "seed": (int, "[0, 4294967295]"),     # numpy, torch and scikit-learn seeds all accept 32 bits
    "steps": (int, "[1, inf)"),
    "batch_size": (int, "[1, inf)"),
    "lr": (float, "(0, inf)"),
    "weight_decay": (float, "[0, inf)"),
    "beta1": (float, "[0, 1)"),
    "beta2": (float, "[0, 1)"),
    "warmup_steps": (int, "[0, inf)"),    # and at most steps
    "min_lr_ratio": (float, "[0, 1]"),
    "grad_clip": (float, "(0, inf)"),      # or None: no clipping
    "n_log_checkpoints": (int, "[0, inf)"),
    "dense_steps": (int, "[0, inf)"),
    "stop_margin": (float, "[0, inf)"),   # or None: never stop early
    "stop_min_steps": (int, "[0, inf)"),
    "n_linear_checkpoints": (int, "[1, inf)"),
    "n_train": (int, "[1, inf)"),
    "n_test": (int, "[1, inf)"),
    "probe_size": (int, "[1, inf)"),
    "train_eval_size": (int, "[1, inf)"),
    "costly_every": (int, "[1, inf)"),
    "dynamics_size": (int, "[1, inf)"),
    "stop_at": (int, "[1, inf)"),          # or None: the run's own end (steps, or the early stop)
    "perturb": (float, "[0, 1)"),
    "perturb_seed": (int, "[0, 4294967295]"),
}


def field_type(name: str) -> type:
    """The type of a :class:`TrainConfig` field's values: int or float for the numeric fields
    (:data:`FIELD_RANGES`), else str, bool, tuple (``measures``) or dict (``task_params``), read from the
    field's annotation. ValueError for a name that is no field."""
    if name in FIELD_RANGES:
        return FIELD_RANGES[name][0]
    annotations = {f.name: f.type for f in fields(TrainConfig)}
    if name not in annotations:
        raise ValueError(f"{name!r} is not a TrainConfig field; fields: {', '.join(annotations)}")
    return {"str": str, "str | None": str, "float | None": float, "bool": bool, "tuple[str, ...]": tuple, "dict | None": dict,
            "tuple[int, int] | None": tuple}[annotations[name]]


def check_field(name: str, value, kind: type, interval: str):
    """``value`` as ``kind`` (int or float) if it is a finite number in ``interval``, else ValueError.

    ``interval`` is written as in mathematics, e.g. ``"[0, 1)"`` or ``"(0, inf)"``. An int field takes
    integers only (not bools, not 2.0); a float field takes any real number and returns a float, so
    that ``lr=1`` and ``lr=1.0`` name the same run.
    """
    integral = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    real = integral or (isinstance(value, (float, np.floating)) and not isinstance(value, bool))
    what = {(int, "[1, inf)"): "a positive integer", (int, "[0, inf)"): "a non-negative integer"}.get(
        (kind, interval), f"{'an integer' if kind is int else 'a number'} in {interval}")
    low_text, high_text = (part.strip() for part in interval[1:-1].split(","))
    low, high = float(low_text), float(high_text)
    if (not (integral if kind is int else real) or not math.isfinite(value)
            or (value < low if interval[0] == "[" else value <= low)
            or (value > high if interval[-1] == "]" else value >= high)):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return kind(value)


def checkpoint_steps(steps: int, n_log: int = 0, n_linear: int = 150, dense: int = 128) -> np.ndarray:
    """Checkpoint schedule: every step in [0, dense], ~n_log log-spaced steps in [1, steps/10],
    and n_linear evenly spaced steps from ``dense`` to ``steps``.

    Returns sorted unique ints, always including 0 and ``steps``. The first grid's
    schedule is ``n_log=20, n_linear=40, dense=0``.
    """
    dense = min(dense, steps)
    log_part = (np.round(np.logspace(0, np.log10(max(steps / 10, 1)), n_log)).astype(int)
                if n_log else np.zeros(0, dtype=int))
    linear_part = np.round(np.linspace(dense, steps, n_linear + 1)).astype(int)
    return np.unique(np.concatenate([np.arange(dense + 1), log_part, linear_part, [steps]]).clip(0, steps))


def thinned_steps(schedule: np.ndarray, dense: int, every: int) -> set[int]:
    """A subset of the checkpoints: 0 and the powers of two up to ``dense``, then every ``every``-th
    later checkpoint, and the last. With ``dense = 0`` (the first grid): every ``every``-th checkpoint
    and the last.

    The dense part has a checkpoint at every step to locate the collapse; the measures that are
    not needed at that resolution are taken on such a subset (see the module docstring).
    """
    schedule = np.asarray(schedule)
    if dense == 0:
        return set(schedule[::every].tolist()) | {int(schedule[-1])}
    early = {0} | {2**k for k in range(int(math.log2(dense)) + 1)}
    return ({int(s) for s in schedule if s in early} | set(schedule[schedule > dense][::every].tolist())
            | {int(schedule[-1])})


def recorded_at(when: str, schedule, cfg: "TrainConfig") -> set[int]:
    """The checkpoints of ``schedule`` at which the measures recorded ``when`` are taken
    (:data:`geomcap.measures.RECORDED`): every one, or a :func:`thinned_steps` subset (training-set
    evaluation: ``every=1``; RankMe variants: ``every=2``, 1 with ``dense_steps = 0``; costly measures:
    ``every=costly_every``, plus every checkpoint of ``costly_window``)."""
    if when == "every":
        return {int(s) for s in schedule}
    every = {"train_eval": 1, "variants": 2 if cfg.dense_steps else 1, "costly": cfg.costly_every}.get(when)
    if every is None:
        raise ValueError(f"when must be one of {', '.join(measures.RECORDED)}, got {when!r}")
    steps = thinned_steps(schedule, cfg.dense_steps, every)
    if when == "costly" and cfg.costly_window is not None:
        first, last = cfg.costly_window
        steps |= {int(s) for s in schedule if first <= s <= last}
    return steps


def stop_step(acquisition: int, cfg: "TrainConfig") -> int | None:
    """The step at or after which a run acquired at ``acquisition`` may stop (None: never)."""
    if cfg.stop_margin is None:
        return None
    return acquisition + max(int(math.ceil(cfg.stop_margin * acquisition)), cfg.stop_min_steps)


def lr_schedule(step: int, lr: float, warmup_steps: int, steps: int, min_lr_ratio: float) -> float:
    """The learning rate for the update that takes the model from ``step`` to ``step + 1`` (steps
    count from 0): linear warmup to ``lr`` over ``warmup_steps`` updates, then cosine decay to
    ``min_lr_ratio * lr`` at ``steps``, held there after. The one schedule of geomcap: the
    training loop (:func:`learning_rate`) and the Pythia stand-in use it."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, steps - warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * cosine)


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """LR for the update that takes the model from ``step`` to ``step + 1`` (:func:`lr_schedule`
    with the config's lr, warmup_steps, steps and min_lr_ratio; ``schedule="constant"``: no decay,
    min_lr_ratio 1)."""
    min_lr_ratio = 1.0 if cfg.schedule == "constant" else cfg.min_lr_ratio
    return lr_schedule(step, cfg.lr, cfg.warmup_steps, cfg.steps, min_lr_ratio)


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' -> cuda when present, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise ValueError(f"unknown device {device!r}; use auto, cpu or cuda")
    return torch.device(device)


def autocast(device: torch.device):
    """bf16 autocast on CUDA (float32 master weights); nothing on the CPU."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float,
                   betas: tuple[float, float]) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (weights of linear layers and embeddings),
    not on biases and LayerNorm gains; tied weights once."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
                              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                             lr=lr, betas=betas)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, prompts: torch.Tensor,
               answers: torch.Tensor, lr: float, grad_clip: float, device: torch.device,
               step_model=None) -> torch.Tensor:
    """One optimizer step on a batch: cross-entropy over the answer tokens
    (:func:`geomcap.models.answer_loss`) under :func:`autocast`, gradient norm clipped at
    ``grad_clip``, the learning rate set to ``lr``. prompts (B, Tp), answers (B, Ta) int64 on
    ``device``; ``step_model`` (default ``model``) computes the loss, e.g. a torch.compile'd
    ``model``. Returns the loss (before the step). The one training step of geomcap: the training
    loop and the benchmarks both call it."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast(device):
        loss = answer_loss(model if step_model is None else step_model, prompts, answers)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


@torch.no_grad()
def _scored_forward(model, prompts, answers, chunk: int, device, keep_hidden: int = 0, hidden_to="cpu"):
    """Answer logits (N, Ta, V) in float32, computed ``chunk`` rows at a time.

    Chunks of the training batch size keep evaluation's memory footprint that
    of a training step (one big forward would make the allocator hand memory
    back and forth, which slows the next training steps). With
    ``keep_hidden = n`` also the hidden states of the first n rows: the model's
    n_layer + 1 hidden states, then the last block's pre-LayerNorm residual, in float32 on
    ``hidden_to`` (the host by default).
    """
    logits, hidden = [], []
    for i in range(0, prompts.shape[0], chunk):
        p, a = prompts[i:i + chunk].to(device), answers[i:i + chunk].to(device)
        with autocast(device):
            out, states, residual = answer_logits(model, p, a, return_hidden=True, return_residual=True)
        logits.append(out.float().cpu())
        if i < keep_hidden:
            hidden.append([h[: keep_hidden - i].float().to(hidden_to) for h in (*states, residual)])
    hidden = [torch.cat(layer) for layer in zip(*hidden)] if hidden else []
    return torch.cat(logits), hidden


def evaluate(model, data: tasks.TaskData, cfg: TrainConfig, device: torch.device,
             variants: bool = True, train_eval: bool = True, geometry_on_device: bool = False) -> tuple[list, float]:
    """Model-level measures and per-layer geometry at one checkpoint (``variants``: also the
    all-positions and mean-pooled RankMe; ``train_eval``: also loss and accuracy on training examples).
    ``geometry_on_device``: the hidden states stay on ``device`` and the geometry and probes are
    computed there in float64 (``_geometry_rows_device``); only the scalars come back.

    Returns (rows without the step column: (layer, measure, value)), seconds spent on geometry).
    """
    model.eval()
    rows = []
    if train_eval:
        n_fit = min(cfg.train_eval_size, data.n_train)
        tr_a = data.train_answers[:n_fit]
        logits, _ = _scored_forward(model, data.train_prompts[:n_fit], tr_a, cfg.batch_size, device)
        rows.append((-1, "loss", _cross_entropy(logits, tr_a)))
        rows.append((-1, "train_accuracy", tasks.exact_match(logits.argmax(-1), tr_a).float().mean().item()))

    n_probe = min(cfg.probe_size, data.n_test)
    te_a = data.test_answers
    logits, hidden = _scored_forward(model, data.test_prompts, te_a, cfg.batch_size, device, keep_hidden=n_probe,
                                     hidden_to=device if geometry_on_device else "cpu")
    rows.append((-1, "test_loss", _cross_entropy(logits, te_a)))
    rows.append((-1, "accuracy", tasks.exact_match(logits.argmax(-1), te_a).float().mean().item()))
    # the probes' target: the model's own accuracy on the first answer token is their fair baseline
    rows.append((-1, "first_token_accuracy", (logits[:, 0].argmax(-1) == te_a[:, 0]).float().mean().item()))
    rows.append((-1, "param_norm", parameter_norm(model)))

    t0 = time.perf_counter()
    labels = te_a[:n_probe, 0].numpy()
    control = probes.control_labels(data.test_prompts[:n_probe].numpy(), labels, seed=cfg.seed)
    if geometry_on_device:
        rows += _geometry_rows_device(hidden[:-1], hidden[-1], data.answer_position, labels, cfg.seed,
                                      variants=variants, control=control)
        return rows, time.perf_counter() - t0
    with threadpool_limits(limits=1, user_api="blas"):
        rows += _geometry_rows(hidden[:-1], hidden[-1], data.answer_position, labels, cfg.seed,
                               variants=variants, control=control)
    return rows, time.perf_counter() - t0


@torch.no_grad()
def parameter_norm(model: torch.nn.Module) -> float:
    """The L2 norm of all the model's parameters (tied weights once), in float64: the weight norm that
    Omnigrok (Liu et al. 2022) ties grokking's timing to."""
    return math.sqrt(sum(float(p.detach().double().pow(2).sum()) for p in model.parameters()))


def _geometry_rows(hidden, residual, pos, labels, seed, variants: bool = True, control=None) -> list:
    """Per-layer RankMe variants, mean energy share and probe accuracy from the probe batch's
    hidden states (hidden: n_layer + 1 tensors (N, T, d)); the last block's pre-LayerNorm
    ``residual`` (N, T, d) adds the ``*_residual`` rows at the last layer; ``control`` (N,), the
    control task's labels (:func:`geomcap.probes.control_labels`), adds ``probe_control_accuracy``.

    Runs with one BLAS thread: the matrices are small, and an idle multi-threaded
    BLAS pool keeps spinning for a while after each call, stealing the cores
    from the next training steps (measured: +60-90 ms on the first step after
    each checkpoint of the 405k model).
    """
    rows = []
    answer_states = [h[:, pos].numpy() for h in hidden]
    for layer, (h, h_full) in enumerate(zip(answer_states, hidden)):
        rows.append((layer, "rankme", geometry.rankme(h)))
        rows.append((layer, "rankme_centred", geometry.rankme(h, centre=True)))
        if variants:
            rows.append((layer, "rankme_all_positions", geometry.rankme(h_full.reshape(-1, h_full.shape[-1]))))
            rows.append((layer, "rankme_mean_pooled", geometry.rankme(h_full.mean(dim=1))))
        rows.append((layer, "mean_energy_share", geometry.mean_energy_share(h)))
    last, r = len(hidden) - 1, residual[:, pos].numpy()
    rows.append((last, "rankme_residual", geometry.rankme(r)))
    rows.append((last, "rankme_centred_residual", geometry.rankme(r, centre=True)))
    rows.append((last, "mean_energy_share_residual", geometry.mean_energy_share(r)))
    for layer, acc in enumerate(probes.probe_accuracy_by_layer(answer_states, labels, seed=seed)):
        rows.append((layer, "probe_accuracy", acc))
    if control is not None:
        for layer, acc in enumerate(probes.probe_accuracy_by_layer(answer_states, control, seed=seed)):
            rows.append((layer, "probe_control_accuracy", acc))
    return rows


def _geometry_rows_device(hidden, residual, pos, labels, seed, variants: bool = True, control=None) -> list:
    """:func:`_geometry_rows` computed where the hidden states are (torch.linalg, float64): the same
    rows in the same order, the values equal up to float64 round-off; one copy of the scalars
    to the host at the end."""
    names, values = [], []
    answer_states = [h[:, pos] for h in hidden]
    for layer, (h, h_full) in enumerate(zip(answer_states, hidden)):
        names += [(layer, "rankme"), (layer, "rankme_centred")]
        values += [geometry.rankme_torch(h), geometry.rankme_torch(h, centre=True)]
        if variants:
            names += [(layer, "rankme_all_positions"), (layer, "rankme_mean_pooled")]
            values += [geometry.rankme_torch(h_full.reshape(-1, h_full.shape[-1])),
                       geometry.rankme_torch(h_full.mean(dim=1))]
        names.append((layer, "mean_energy_share"))
        values.append(geometry.mean_energy_share_torch(h))
    last, r = len(hidden) - 1, residual[:, pos]
    names += [(last, "rankme_residual"), (last, "rankme_centred_residual"), (last, "mean_energy_share_residual")]
    values += [geometry.rankme_torch(r), geometry.rankme_torch(r, centre=True), geometry.mean_energy_share_torch(r)]
    probe = [probes.probe_accuracy_by_layer_torch(answer_states, labels, seed=seed)]
    names += [(layer, "probe_accuracy") for layer in range(len(answer_states))]
    if control is not None:
        probe.append(probes.probe_accuracy_by_layer_torch(answer_states, control, seed=seed))
        names += [(layer, "probe_control_accuracy") for layer in range(len(answer_states))]
    scalars = torch.cat([torch.stack(values), *probe]).cpu().tolist()
    return [(layer, measure, value) for (layer, measure), value in zip(names, scalars)]


def _cross_entropy(logits, answers) -> float:
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), answers).item()


def dynamics_examples(data: tasks.TaskData, cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed batch the costly measures are taken on: the first ``cfg.dynamics_size`` training
    examples (prompts (N, Tp), answers (N, Ta))."""
    n = min(cfg.dynamics_size, data.n_train)
    return data.train_prompts[:n], data.train_answers[:n]


def costly_measures(model, data: tasks.TaskData, cfg: TrainConfig, carry: dict | None = None) -> list:
    """The costly measures ``cfg.measures`` requests, on a fixed batch of training examples -> rows
    (layer, measure, value): each option's rows, in the order of
    :data:`COSTLY_RECORDERS`.

    ``carry`` holds what one checkpoint hands the next (the Hessian's top eigenvector under
    ``hessian_warm_start``); it is updated in place.
    """
    prompts, answers = dynamics_examples(data, cfg)
    model = model.float().cpu()
    model.eval()
    carry = {} if carry is None else carry
    rows = []
    for options, record in COSTLY_RECORDERS:
        wanted = [o for o in options if o in cfg.measures]
        if wanted:
            rows += record(model, prompts, answers, cfg, carry, wanted)
    return rows


def _gradient_rows(model, prompts, answers, cfg, carry, wanted) -> list:
    from geomcap import dynamics  # imported lazily: devinterp is heavy and optional for quick runs

    G = dynamics.per_example_gradients(model, prompts, answers)  # once for both ranks
    rank = {"grad_rank": dynamics.gradient_effective_rank, "grad_cov_rank": dynamics.gradient_covariance_rank}
    return [(-1, name, rank[name](G)) for name in wanted]


def _hessian_rows(model, prompts, answers, cfg, carry, wanted) -> list:
    from geomcap import dynamics

    if not cfg.hessian_warm_start:  # the first grid's rule: the eigenvalue alone, from a random start
        return [(-1, "hessian_top", float(dynamics.hessian_top_eigenvalues(model, prompts, answers, k=1,
                                                                          seed=cfg.seed)[0]))]
    top = dynamics.hessian_top_eigenpair(model, prompts, answers, v0=carry.get("hessian_vector"), seed=cfg.seed)
    carry["hessian_vector"] = top["vector"]
    return [(-1, "hessian_top", top["value"]), (-1, "hessian_residual", top["residual"]),
            (-1, "hessian_matvecs", float(top["matvecs"]))]


def _llc_rows(model, prompts, answers, cfg, carry, wanted) -> list:
    from geomcap import dynamics

    result = dynamics.local_learning_coefficient(model, prompts, answers, seed=cfg.seed)
    return [(-1, "llc", result["llc_post_burnin"]), (-1, "llc_trace_drift", result["trace_drift"])]


#: the costly options (:data:`geomcap.measures.COSTLY_MEASURES`) and the function that records them, in the
#: order of their rows: ``record(model, prompts, answers, cfg, carry, options requested) -> rows``
COSTLY_RECORDERS = ((("grad_rank", "grad_cov_rank"), _gradient_rows), (("hessian_top",), _hessian_rows),
                    (("llc",), _llc_rows))


def _prepare_run_dir(cfg: TrainConfig, out) -> Path:
    if isinstance(out, str) and not out.strip():  # Path("") would be the current directory
        raise ValueError("out is an empty path; give a run directory, or None for the run store")
    run_dir = Path(out) if out is not None else store.run_dir_for(cfg.to_dict())
    if run_dir.exists() and not run_dir.is_dir():
        raise ValueError(f"cannot write run directory {run_dir}: it exists and is not a directory")
    if (run_dir / store.CONFIG_FILE).exists():
        existing = store.read_config(run_dir)
        existing.pop("provenance", None)
        wanted = json.loads(json.dumps(cfg.to_dict()))  # as config.json holds it: tuples read back as lists
        if existing != wanted:
            diff = sorted(k for k in set(existing) | set(wanted) if existing.get(k) != wanted.get(k))
            raise ValueError(f"{run_dir} holds a different run (differs in: {', '.join(diff)}); choose another --out")
    return run_dir


class ThreadsWarning(UserWarning):
    """A run resumed with another number of torch threads than it was started with."""


def check_writable(path) -> None:
    """Raise ValueError if a run directory could not be created/written at ``path`` (creates nothing)."""
    path = Path(path).resolve()
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write run directory {path}: {probe} is not a writable directory")


def train(cfg: TrainConfig, out=None, device: str = "auto", progress: bool = True,
          keep_state: bool = False, compile: bool | str = False, threads: int | None = 1) -> Path:
    """Train one run, recording metrics at every checkpoint; returns the run directory.

    ``out`` is the run directory itself (default: the run store's root / config hash).
    A complete run there with the same config is reused; an interrupted one resumes
    from its last checkpoint and ends with the same metrics as an uninterrupted run.

    ``compile``: run the training steps through ``torch.compile`` (True: the
    default inductor backend; a string names another backend). Evaluation and
    the measures use the plain model (the same weights). It is not part of
    the config (nor its hash): compiled kernels change floating-point rounding
    only, so a compiled run's metrics equal an eager run's up to round-off, not
    byte for byte; ``provenance.compile`` in config.json records it.
    The first steps include the compilation (tens of seconds).

    ``threads``: torch's CPU threads for the run (restored afterwards); None keeps
    the current setting. The default, 1, does not collapse when other processes
    share the cores (a multi-threaded step waits for its descheduled threads:
    see the benchmarks), and makes a run's metrics the same on every machine:
    they are byte-identical only at a fixed thread count, which
    ``provenance.threads`` in config.json records; resuming a run with another
    count warns (``ThreadsWarning``, one line naming both counts).
    """
    if compile is not True and compile is not False and not (isinstance(compile, str) and compile):
        raise ValueError(f"compile must be True, False or a torch.compile backend name, got {compile!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    run_dir = _prepare_run_dir(cfg, out)
    if store.is_complete(run_dir):
        return run_dir
    check_writable(run_dir)
    dev = resolve_device(device)
    run_dir.mkdir(parents=True, exist_ok=True)
    saved_threads = torch.get_num_threads()
    try:
        with store.run_lock(run_dir):  # one writer per run directory (raises store.RunLockedError)
            _prepare_run_dir(cfg, run_dir)  # again, under the lock: another writer may have started it
            if store.is_complete(run_dir):
                return run_dir
            store.remove_temporary_files(run_dir)  # left by a writer killed mid-write (we hold the lock)
            if threads is not None:
                torch.set_num_threads(threads)
            return _train_locked(cfg, run_dir, dev, progress, keep_state, compile)
    finally:
        torch.set_num_threads(saved_threads)


def task_data(cfg: TrainConfig) -> tasks.TaskData:
    """The run's task data: its training, test and probe examples (under ``control="shuffled_answers"``
    each set's answer rows permuted across its prompts, with a generator seeded by the run's seed)."""
    data = tasks.make_task(cfg.task, cfg.level, seed=cfg.seed, n_train=cfg.n_train, n_test=cfg.n_test,
                           answer_order=cfg.answer_order, params=cfg.task_params)
    if cfg.control == "shuffled_answers":
        gen = torch.Generator().manual_seed(cfg.seed)
        data = dataclasses.replace(
            data, train_answers=data.train_answers[torch.randperm(data.n_train, generator=gen)],
            test_answers=data.test_answers[torch.randperm(data.n_test, generator=gen)])
    return data


def perturb_weights(model: torch.nn.Module, size: float, seed: int) -> None:
    """Multiply every initial weight by ``1 + size * z``, z standard normal from a generator seeded with
    ``seed`` (in parameter order): twins of a run that differ by far less than any setting."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + size * torch.randn(p.shape, generator=gen, dtype=p.dtype))


def _training_setup(cfg: TrainConfig, dev: torch.device):
    """A run's task data, its model at initialisation (on ``dev``), optimizer and batch generator."""
    data = task_data(cfg)
    max_len = data.prompt_len + data.answer_len - 1
    torch.manual_seed(cfg.seed)
    model = build(cfg.size, data.vocab_size)
    if max_len > model.cfg.block_size:
        raise ValueError(f"{cfg.task}/{cfg.level} needs {max_len} positions, more than block_size {model.cfg.block_size}")
    if cfg.perturb:
        perturb_weights(model, cfg.perturb, cfg.perturb_seed)
    model.to(dev)
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2))
    return data, model, optimizer, torch.Generator().manual_seed(cfg.seed)


def _train_until(until: int, step: int, model, optimizer, train_p, train_a, batch_gen, cfg: TrainConfig,
                 dev: torch.device, step_model=None) -> int:
    """Optimizer steps ``step`` .. ``until - 1`` of the run; returns ``until``."""
    model.train()
    while step < until:
        if cfg.full_batch:
            prompts, answers = train_p, train_a
        else:
            idx = torch.randint(train_p.shape[0], (cfg.batch_size,), generator=batch_gen).to(dev)
            prompts, answers = train_p[idx], train_a[idx]
        train_step(model, optimizer, prompts, answers, learning_rate(step, cfg), cfg.grad_clip, dev, step_model)
        step += 1
    return step


def models_at(cfg: TrainConfig, steps, device: str = "cpu", threads: int | None = 1):
    """The run's model after each of ``steps`` (ascending, 0 = initialisation): yields (step, model).

    Trained as :func:`train` trains it (the same data, initialisation, optimizer, learning rate
    and batches), without evaluating or writing anything, so the weights equal those of the run
    at that checkpoint (byte for byte at the same thread count). The same model object is yielded
    each time, trained further in between: copy it to keep one.
    """
    steps = [int(s) for s in steps]
    if any(s < 0 for s in steps) or steps != sorted(steps) or (steps and steps[-1] > cfg.steps):
        raise ValueError(f"steps must ascend within 0..{cfg.steps}, got {steps}")
    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        dev = resolve_device(device)
        data, model, optimizer, batch_gen = _training_setup(cfg, dev)
        train_p, train_a = data.train_prompts.to(dev), data.train_answers.to(dev)
        step = 0
        for target in steps:
            step = _train_until(target, step, model, optimizer, train_p, train_a, batch_gen, cfg, dev)
            yield step, model
    finally:
        torch.set_num_threads(saved)


def _train_locked(cfg: TrainConfig, run_dir: Path, dev: torch.device, progress: bool, keep_state: bool,
                  compile: bool | str) -> Path:
    """The body of :func:`train`, run while holding the run directory's lock."""

    data, model, optimizer, batch_gen = _training_setup(cfg, dev)
    chance = tasks.chance_accuracy(data.test_answers)
    step_model = torch.compile(model, backend="inductor" if compile is True else compile) if compile else model
    schedule = checkpoint_steps(cfg.steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints, cfg.dense_steps)
    at = {when: recorded_at(when, schedule, cfg) for when in measures.RECORDED}  # checkpoints of each kind
    if not cfg.measures:
        at["costly"] = set()

    rows: list = []
    carry: dict = {}  # what the costly measures hand from one checkpoint to the next
    start_step, timers = 0, {"train_s": 0.0, "eval_s": 0.0, "geometry_s": 0.0, "costly_s": 0.0}
    state_path = run_dir / store.STATE_FILE
    state = store.read_state(state_path)  # None when absent, or unreadable (discarded with a warning)
    if state is not None:
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            batch_gen.set_state(state["batch_gen"])
        except (RuntimeError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{state_path} does not fit this run ({type(exc).__name__}); delete it to train "
                             "the run from step 0") from None
        recorded = (store.read_config(run_dir).get("provenance") or {}).get("threads")
        if recorded is not None and recorded != torch.get_num_threads():
            warnings.warn(f"resuming {run_dir} with {torch.get_num_threads()} torch thread(s), started with "
                          f"{recorded}: its metrics will not be byte-identical to an uninterrupted run's "
                          f"(pass threads={recorded}, --threads {recorded}, for that)", ThreadsWarning, stacklevel=3)
        start_step = int(state["step"])
        rows = [tuple(r) for r in state["rows"]]
        timers.update(state["timers"])
        carry = {k: v.numpy() for k, v in state.get("carry", {}).items()}
    else:
        provenance = store.provenance(dev.type)
        if compile:
            provenance["compile"] = "inductor" if compile is True else compile
        store.atomic_write_json(run_dir / store.CONFIG_FILE, {**cfg.to_dict(), "provenance": provenance})

    train_p, train_a = data.train_prompts.to(dev), data.train_answers.to(dev)
    todo = [int(s) for s in schedule if s >= start_step and not (s == start_step and rows)]

    def checkpoint(step):
        t0 = time.perf_counter()
        step_rows, geo_s = evaluate(model, data, cfg, dev, variants=step in at["variants"],
                                    train_eval=step in at["train_eval"])
        t1 = time.perf_counter()
        if step in at["costly"]:
            step_rows += costly_measures(model, data, cfg, carry)
            model.to(dev)
        timers["eval_s"] += t1 - t0
        timers["geometry_s"] += geo_s
        timers["costly_s"] += time.perf_counter() - t1
        # plain Python types: the state is reloaded with torch.load(weights_only=True)
        rows.extend((int(step), int(layer), str(measure), float(value)) for layer, measure, value in step_rows)
        store.atomic_torch_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                 "batch_gen": batch_gen.get_state(), "step": step, "rows": rows,
                                 "timers": timers, "carry": {k: torch.from_numpy(v) for k, v in carry.items()}},
                                state_path)
        store.write_metrics(run_dir, rows)
        return dict(_progress_summary(step_rows))

    bar = tqdm(total=cfg.steps, initial=start_step, disable=not progress,
               desc=f"{cfg.task}/{cfg.level} {cfg.size} s{cfg.seed}", unit="step")
    step = start_step
    if todo and todo[0] == step:
        bar.set_postfix(checkpoint(step))
        todo.pop(0)
    for next_ckpt in todo:
        if stop_due(rows, chance, cfg, step):
            break
        t0 = time.perf_counter()
        step = _train_until(next_ckpt, step, model, optimizer, train_p, train_a, batch_gen, cfg, dev, step_model)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        timers["train_s"] += time.perf_counter() - t0
        bar.update(next_ckpt - bar.n)
        bar.set_postfix(checkpoint(step))
    bar.close()

    write_status(run_dir, cfg, step, schedule, timers, count_parameters(model),
                 data.prompt_len + data.answer_len - 1, task_facts(data, cfg))
    if not keep_state:
        state_path.unlink(missing_ok=True)
    return run_dir


def stop_due(rows, chance: float, cfg: TrainConfig, step: int) -> bool:
    """Whether a run with these metrics rows (step, layer, measure, value) may stop at ``step``."""
    if cfg.stop_at is not None and step >= cfg.stop_at:
        return True
    if cfg.stop_margin is None:
        return False
    at = np.array([s for s, _, m, _ in rows if m == "accuracy"])
    acc = np.array([v for _, _, m, v in rows if m == "accuracy"])
    acq = events.acquisition_step(at, events.chance_corrected(acc, chance)) if len(at) else None
    return acq is not None and step >= stop_step(acq, cfg)


def task_facts(data: tasks.TaskData, cfg: TrainConfig) -> dict:
    """What the analysis of a run needs to know of its data (written into status.json, so that it need
    not regenerate the data): ``batch_rows``, the examples in a training step; ``chance_accuracy``, the exact-match accuracy of the best constant answer on
    the test set, and ``majority_first_token``, the share of the test set's most common first answer token."""
    first = data.test_answers[:, 0]
    return {"batch_rows": data.n_train if cfg.full_batch else cfg.batch_size,
            "chance_accuracy": tasks.chance_accuracy(data.test_answers),
            "majority_first_token": float(torch.unique(first, return_counts=True)[1].max()) / len(first)}


def write_status(run_dir, cfg: TrainConfig, step: int, schedule, timers: dict, parameters: int,
                 seq_len: int, facts: dict | None = None) -> None:
    """status.json of a run that ended at ``step`` (written last: it marks the run complete); ``facts``:
    :func:`task_facts`."""
    tokens = step * (facts or {}).get("batch_rows", cfg.batch_size) * seq_len
    store.atomic_write_json(run_dir / store.STATUS_FILE, {
        "complete": True,
        **(facts or {}),
        "stopped_at": step if step < cfg.steps else None,
        "parameters": parameters,
        "checkpoints": int(np.count_nonzero(schedule <= step)),
        **{k: round(v, 3) for k, v in timers.items()},
        "tokens_per_s": round(tokens / timers["train_s"], 1) if timers["train_s"] > 0 else None,
        "ms_per_step": round(1000 * timers["train_s"] / max(step, 1), 3),
        "geometry_share": round(timers["geometry_s"] / timers["train_s"], 4) if timers["train_s"] > 0 else None,
        "eval_share": round(timers["eval_s"] / timers["train_s"], 4) if timers["train_s"] > 0 else None,
    })


def _progress_summary(step_rows):
    """Progress-bar summary of a checkpoint: test accuracy and final-layer RankMe."""
    last_layer = max(layer for layer, _, _ in step_rows)
    for layer, measure, value in step_rows:
        if measure == "accuracy":
            yield "acc", f"{value:.3f}"
        elif measure == "rankme" and layer == last_layer:
            yield "rankme", f"{value:.1f}"
