"""The recorders: where each measure of the registry (:mod:`geomcap.measures`) is computed, once.

At every checkpoint a run records (tidy rows ``step, layer, measure, value``):

* ``loss``, ``train_accuracy`` -- on a fixed batch of training examples (in the
  dense part only at 0 and the powers of two, ``thinned_steps(..., every=1)``);
* ``test_loss``, ``accuracy`` -- exact match on the whole test set;
  ``first_token_accuracy`` -- the model's accuracy on the first answer token
  alone (the probes' target, so the fair baseline for them); ``param_norm``;
* per layer, from the hidden states of the fixed probe batch (the first
  ``probe_size`` test prompts): the measures of hidden states, each computed from its ``source`` by its
  ``statistic`` (:func:`state_rows`): ``rankme`` (the primary measure: uncentred, answer position),
  ``rankme_centred``, at the checkpoints of ``thinned_steps(..., every=2)`` only (their SVDs cost ten
  times the rest of the geometry) ``rankme_all_positions`` and ``rankme_mean_pooled``,
  ``mean_energy_share``, ``probe_accuracy`` (linear probe to the first answer token) and
  ``probe_control_accuracy`` (the same probe on the control task's labels);
* at layer L (the last): ``rankme_residual``, ``rankme_centred_residual`` and
  ``mean_energy_share_residual`` of the last block's residual stream *before*
  the final LayerNorm (layers 1..L-1 are pre-LayerNorm residuals, layer L is
  after it: these make the last block comparable with the others).

With ``measures`` the costly measures (of the training dynamics) run on a subset of the
checkpoints (``recorded_at("costly", ...)``: powers of two over the dense part, then every
``costly_every``-th linear checkpoint, and the last, and every checkpoint of ``costly_window``), on a fixed
batch of ``dynamics_size`` training examples (:func:`costly_measures`): ``grad_rank``, ``grad_cov_rank``,
``hessian_top`` and ``llc`` (see ``geomcap.dynamics``), each with its health: ``hessian_residual``
(||Hv - lambda v|| / lambda, Lanczos's convergence) and ``hessian_matvecs`` (Hessian-vector products
used; Lanczos starts from the previous checkpoint's eigenvector with ``hessian_warm_start``), and
``llc_trace_drift`` (how much the SGLD chains still moved; > 0.2: not flat). (config.json spells
``hessian_top`` as ``hessian``, the name the first runs were hashed with.)

Who calls what: a training loop (:func:`geomcap.train.train`, :func:`geomcap.packed.train_packed`) holds
one :class:`CheckpointRecorder` per run and calls its ``update`` at each checkpoint; the monitor of any
model (:class:`geomcap.monitor.GeometryMonitor`) calls :func:`state_rows` on the states it captures.
"""

from __future__ import annotations

import math
import time
from functools import partial

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from geomcap import geometry, probes, tasks
from geomcap.config import TrainConfig, recorded_at
from geomcap.measures import MEASURES, RECORDED
from geomcap.models import answer_logits

#: the statistics of one layer's matrix of hidden states Z (N, d): name -> (on the host: Z, a numpy array
#: or CPU tensor -> float; on the device: Z, a tensor -> a 0-dim float64 tensor there, nothing copied back)
STATISTICS = {
    "rankme": (geometry.rankme, geometry.rankme_torch),
    "rankme_centred": (partial(geometry.rankme, centre=True), partial(geometry.rankme_torch, centre=True)),
    "mean_energy_share": (geometry.mean_energy_share, geometry.mean_energy_share_torch),
}
#: the probes' statistics, each fit to its own labels (``labels`` of :func:`state_rows`)
PROBES = ("probe", "control_probe")


def state_rows(sources: dict, layers: int, names, labels: dict | None = None, seed: int = 0,
               on_device: bool = False, skip=()) -> list[tuple[int, str, float]]:
    """The measures ``names`` of hidden states -> rows (layer, measure, value), in the registry's order: per
    layer its per-layer measures, then the last layer's, then each probe's rows.

    ``sources``: source name (:data:`geomcap.measures.SOURCES`) -> a function of the layer index (0 ..
    ``layers - 1``; the last layer for ``residual``) giving that layer's matrix (N, d) (a numpy array or a
    CPU tensor; a tensor on the device with ``on_device``: then the statistics run there in float64 and
    the scalars come back in one copy). ``labels``: statistic -> (N,) ints, ``probe`` (the answer's first
    token) and ``control_probe`` (the control task's); a probe without labels is not recorded. ``skip``:
    layers whose states are not finite: their values are NaN, and the probes are fit on the other layers.
    """
    if on_device and skip:
        raise ValueError("skip: the statistics on the device take finite states only")
    names = set(names)
    chosen = [m for m in MEASURES if m.name in names and m.statistic is not None]
    labels = labels or {}
    keys, values = [], []
    for layer in range(layers):
        for m in chosen:
            if m.layers == "each" and m.statistic in STATISTICS:
                keys.append((layer, m.name))
                values.append(math.nan if layer in skip else STATISTICS[m.statistic][on_device](
                    sources[m.source](layer)))
    for m in chosen:
        if m.layers == "last":
            keys.append((layers - 1, m.name))
            values.append(STATISTICS[m.statistic][on_device](sources[m.source](layers - 1)))
    kept = [layer for layer in range(layers) if layer not in skip]
    fitted = []  # on the device: each probe's (len(kept),) tensor, copied back with the rest
    for m in chosen:
        if m.statistic in PROBES and labels.get(m.statistic) is not None:
            by_layer = probes.probe_accuracy_by_layer_torch if on_device else probes.probe_accuracy_by_layer
            accuracy = by_layer([sources[m.source](layer) for layer in kept], labels[m.statistic], seed=seed)
            if on_device:
                fitted.append(accuracy)
                keys += [(layer, m.name) for layer in kept]
            else:
                by_kept = dict(zip(kept, map(float, accuracy)))
                keys += [(layer, m.name) for layer in range(layers)]
                values += [by_kept.get(layer, math.nan) for layer in range(layers)]
    if on_device:
        values = torch.cat([torch.stack(values), *fitted]).cpu().tolist()
    return [(layer, measure, value) for (layer, measure), value in zip(keys, values)]


def geometry_rows(hidden, residual, pos: int, labels, seed: int, variants: bool = True, control=None,
                  on_device: bool = False) -> list:
    """A checkpoint's measures of the probe batch's hidden states: :func:`state_rows` of the registry's
    measures due there (the RankMe variants with ``variants``; ``probe_control_accuracy`` with ``control``).

    hidden: n_layer + 1 tensors (N, T, d) (float32: on the host, or on the device with ``on_device``);
    residual: the last block's pre-LayerNorm residual (N, T, d); pos: the answer position; labels (N,):
    the answers' first tokens; control (N,): the control task's labels
    (:func:`geomcap.probes.control_labels`).
    """
    answer = [h[:, pos] if on_device else h[:, pos].numpy() for h in hidden]
    last = residual[:, pos] if on_device else residual[:, pos].numpy()
    sources = {"answer": answer.__getitem__,
               "all_positions": lambda layer: hidden[layer].reshape(-1, hidden[layer].shape[-1]),
               "mean_pooled": lambda layer: hidden[layer].mean(dim=1),
               "residual": lambda layer: last}
    due = [m.name for m in MEASURES if m.statistic is not None and (m.recorded == "every" or variants)]
    return state_rows(sources, len(hidden), due, {"probe": labels, "control_probe": control}, seed, on_device)


# --- behaviour, the parameter norm, and the geometry: one checkpoint's evaluation ---------------------

@torch.inference_mode()  # no autograd bookkeeping at all (the states feed closed-form measures only)
def scored_forward(model, prompts, answers, chunk: int, device, keep_hidden: int = 0, hidden_to="cpu"):
    """Answer logits (N, Ta, V) in float32 on the host, computed ``chunk`` rows at a time.

    prompts (N, Tp), answers (N, Ta): int64 token ids. Chunks of the training batch size keep evaluation's
    memory footprint that of a training step (one big forward would make the allocator hand memory back
    and forth, which slows the next training steps). With ``keep_hidden = n`` also the hidden states of the
    first n rows: the model's n_layer + 1 hidden states, then the last block's pre-LayerNorm residual, each
    (n, Tp + Ta - 1, d) in float32 on ``hidden_to`` (the host by default).
    """
    logits, hidden = [], []
    for i in range(0, prompts.shape[0], chunk):
        p, a = prompts[i:i + chunk].to(device), answers[i:i + chunk].to(device)
        # float32 whatever the training precision: the measures read these states
        out, states, residual = answer_logits(model, p, a, return_hidden=True, return_residual=True)
        logits.append(out.float().cpu())
        if i < keep_hidden:
            hidden.append([h[: keep_hidden - i].float().to(hidden_to) for h in (*states, residual)])
    hidden = [torch.cat(layer) for layer in zip(*hidden)] if hidden else []
    return torch.cat(logits), hidden


def cross_entropy(logits: torch.Tensor, answers: torch.Tensor) -> float:
    """Mean cross-entropy (nats per answer token) of logits (N, Ta, V) against answers (N, Ta)."""
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), answers).item()


@torch.no_grad()
def parameter_norm(model: torch.nn.Module) -> float:
    """The L2 norm of all the model's parameters (tied weights once), in float64: the weight norm that
    Omnigrok (Liu et al. 2022) ties grokking's timing to."""
    return math.sqrt(sum(float(p.detach().double().pow(2).sum()) for p in model.parameters()))


def evaluate(model, data: tasks.TaskData, cfg: TrainConfig, device: torch.device,
             variants: bool = True, train_eval: bool = True, geometry_on_device: bool = False) -> tuple[list, float]:
    """Model-level measures and per-layer geometry at one checkpoint (``variants``: also the
    all-positions and mean-pooled RankMe; ``train_eval``: also loss and accuracy on training examples).
    ``geometry_on_device``: the hidden states stay on ``device`` and the geometry and probes are
    computed there in float64; only the scalars come back.

    Returns (rows without the step column: (layer, measure, value), seconds spent on geometry).
    """
    model.eval()
    rows = []
    if train_eval:
        n_fit = min(cfg.train_eval_size, data.n_train)
        tr_a = data.train_answers[:n_fit]
        logits, _ = scored_forward(model, data.train_prompts[:n_fit], tr_a, cfg.batch_size, device)
        rows.append((-1, "loss", cross_entropy(logits, tr_a)))
        rows.append((-1, "train_accuracy", tasks.exact_match(logits.argmax(-1), tr_a).float().mean().item()))

    n_probe = min(cfg.probe_size, data.n_test)
    te_a = data.test_answers
    logits, hidden = scored_forward(model, data.test_prompts, te_a, cfg.batch_size, device, keep_hidden=n_probe,
                                    hidden_to=device if geometry_on_device else "cpu")
    rows.append((-1, "test_loss", cross_entropy(logits, te_a)))
    rows.append((-1, "accuracy", tasks.exact_match(logits.argmax(-1), te_a).float().mean().item()))
    # the probes' target: the model's own accuracy on the first answer token is their fair baseline
    rows.append((-1, "first_token_accuracy", (logits[:, 0].argmax(-1) == te_a[:, 0]).float().mean().item()))
    rows.append((-1, "param_norm", parameter_norm(model)))

    t0 = time.perf_counter()
    labels = te_a[:n_probe, 0].numpy()
    control = probes.control_labels(data.test_prompts[:n_probe].numpy(), labels, seed=cfg.seed)
    if geometry_on_device:
        rows += geometry_rows(hidden[:-1], hidden[-1], data.answer_position, labels, cfg.seed, variants=variants,
                              control=control, on_device=True)
        return rows, time.perf_counter() - t0
    # one BLAS thread: the matrices are small, and an idle multi-threaded BLAS pool keeps spinning for a while
    # after each call, stealing the cores from the next training steps (measured: +60-90 ms on the first step
    # after each checkpoint of the 405k model)
    with threadpool_limits(limits=1, user_api="blas"):
        rows += geometry_rows(hidden[:-1], hidden[-1], data.answer_position, labels, cfg.seed, variants=variants,
                              control=control)
    return rows, time.perf_counter() - t0


# --- the costly measures ------------------------------------------------------------------------

def dynamics_examples(data: tasks.TaskData, cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed batch the costly measures are taken on: the first ``cfg.dynamics_size`` training
    examples (prompts (N, Tp), answers (N, Ta))."""
    n = min(cfg.dynamics_size, data.n_train)
    return data.train_prompts[:n], data.train_answers[:n]


def costly_measures(model, data: tasks.TaskData, cfg: TrainConfig, carry: dict | None = None) -> list:
    """The costly measures ``cfg.measures`` requests, on a fixed batch of training examples -> rows
    (layer, measure, value): each option's rows, in the order of :data:`COSTLY_RECORDERS`. The model is
    moved to the CPU in float32 (the caller moves it back).

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


def gradient_rows(model, prompts, answers, cfg, carry, wanted) -> list:
    """``grad_rank`` and ``grad_cov_rank`` (those in ``wanted``) of the per-example gradients, computed once."""
    from geomcap import dynamics  # imported lazily: devinterp is heavy and optional for quick runs

    G = dynamics.per_example_gradients(model, prompts, answers)  # once for both ranks
    rank = {"grad_rank": dynamics.gradient_effective_rank, "grad_cov_rank": dynamics.gradient_covariance_rank}
    return [(-1, name, rank[name](G)) for name in wanted]


def hessian_rows(model, prompts, answers, cfg, carry, wanted) -> list:
    """``hessian_top`` (with its health under ``hessian_warm_start``, from ``carry``'s eigenvector)."""
    from geomcap import dynamics

    if not cfg.hessian_warm_start:  # the first grid's rule: the eigenvalue alone, from a random start
        return [(-1, "hessian_top", float(dynamics.hessian_top_eigenvalues(model, prompts, answers, k=1,
                                                                          seed=cfg.seed)[0]))]
    top = dynamics.hessian_top_eigenpair(model, prompts, answers, v0=carry.get("hessian_vector"), seed=cfg.seed)
    carry["hessian_vector"] = top["vector"]
    return [(-1, "hessian_top", top["value"]), (-1, "hessian_residual", top["residual"]),
            (-1, "hessian_matvecs", float(top["matvecs"]))]


def llc_rows(model, prompts, answers, cfg, carry, wanted) -> list:
    """``llc`` and ``llc_trace_drift`` (SGLD, :func:`geomcap.dynamics.local_learning_coefficient`, with the
    config's ``llc_chains`` and ``llc_draws``)."""
    from geomcap import dynamics

    result = dynamics.local_learning_coefficient(model, prompts, answers, seed=cfg.seed, num_chains=cfg.llc_chains,
                                                 num_draws=cfg.llc_draws)
    return [(-1, "llc", result["llc_post_burnin"]), (-1, "llc_trace_drift", result["trace_drift"])]


#: the costly options (:data:`geomcap.measures.COSTLY_MEASURES`) and the function that records them, in the
#: order of their rows: ``record(model, prompts, answers, cfg, carry, options requested) -> rows``
COSTLY_RECORDERS = ((("grad_rank", "grad_cov_rank"), gradient_rows), (("hessian_top",), hessian_rows),
                    (("llc",), llc_rows))


# --- a run's recorder -----------------------------------------------------------------------------

class CheckpointRecorder:
    """What one run records at its checkpoints: every measure due there (:func:`geomcap.config.recorded_at`),
    as devinterp's estimators are called: :meth:`update` at each checkpoint, ``rows`` (step, layer, measure,
    value) so far at any time, :meth:`state` / :meth:`restore` what a run's state.pt keeps of it.

    ``timers`` (seconds): ``train_s`` (the loop adds its own), ``eval_s``, ``geometry_s``, ``costly_s``,
    ``write_s`` (the loop's :class:`geomcap.train.CheckpointWriter` adds its own);
    ``carry``: what the costly measures hand from one checkpoint to the next.
    ``geometry_on_device``: the geometry and the probes run where the model is (:func:`evaluate`).
    """

    def __init__(self, cfg: TrainConfig, data: tasks.TaskData, device, schedule, geometry_on_device: bool = False):
        self.cfg, self.data, self.device = cfg, data, device
        self.geometry_on_device = geometry_on_device
        self.at = {when: recorded_at(when, schedule, cfg) for when in RECORDED}  # the checkpoints of each kind
        self.rows: list[tuple[int, int, str, float]] = []
        self.timers = {"train_s": 0.0, "eval_s": 0.0, "geometry_s": 0.0, "costly_s": 0.0, "write_s": 0.0}
        self.carry: dict[str, np.ndarray] = {}

    def update(self, model, step: int) -> list[tuple[int, str, float]]:
        """Record the measures due at ``step`` on ``model`` (left on the device, in eval mode); returns them
        as rows (layer, measure, value)."""
        t0 = time.perf_counter()
        step_rows, geo_s = evaluate(model, self.data, self.cfg, self.device, variants=step in self.at["variants"],
                                    train_eval=step in self.at["train_eval"],
                                    geometry_on_device=self.geometry_on_device)
        t1 = time.perf_counter()
        if step in self.at["costly"]:
            step_rows += costly_measures(model, self.data, self.cfg, self.carry)
            model.to(self.device)
        self.timers["eval_s"] += t1 - t0
        self.timers["geometry_s"] += geo_s
        self.timers["costly_s"] += time.perf_counter() - t1
        # plain Python types: the state is reloaded with torch.load(weights_only=True)
        self.rows.extend((int(step), int(layer), str(measure), float(value)) for layer, measure, value in step_rows)
        return step_rows

    def state(self) -> dict:
        """What state.pt keeps of the recorder: ``rows``, ``timers`` and ``carry`` (as tensors)."""
        return {"rows": self.rows, "timers": self.timers,
                "carry": {k: torch.from_numpy(v) for k, v in self.carry.items()}}

    def restore(self, state: dict) -> None:
        """Continue from a state.pt's :meth:`state`."""
        self.rows = [tuple(r) for r in state["rows"]]
        self.timers.update(state["timers"])
        self.carry = {k: v.numpy() for k, v in state.get("carry", {}).items()}
