"""The training loop: one run = one :class:`~geomcap.config.TrainConfig`, recorded at its checkpoints.

A plain PyTorch loop, read top to bottom: the run's data and model (:func:`training_setup`: data from the
config's seed, the model initialised under ``torch.manual_seed(seed)``, AdamW, a seeded batch generator),
then between consecutive checkpoints the optimizer steps (:func:`train_until`: batches drawn from
pre-generated tensors on the device, :func:`train_step`), at each checkpoint the run's
:class:`~geomcap.recorders.CheckpointRecorder` (every measure of the registry due there) and its
:class:`CheckpointWriter` (the rows appended to metrics.csv; now and then the state, :func:`save_state`:
weights, optimizer, batch generator, rows), until the last checkpoint or the early
stop (:func:`stop_due`); status.json last (:func:`finish`).

A run directory has one writer (:func:`claim_run_dir`); a complete run is reused; an interrupted one
resumes from its last saved state (:func:`restore_state`) and ends with the same metrics as an
uninterrupted run. :mod:`geomcap.packed` trains several runs as one batched computation with the same
pieces. The config, its hash and its schedules are :mod:`geomcap.config`'s; what is measured,
:mod:`geomcap.recorders`'; the names below are importable from here as well (``from geomcap.train import
TrainConfig, train, checkpoint_steps, learning_rate``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from geomcap import events, store, tasks
from geomcap.config import TrainConfig, config_checkpoints, learning_rate, stop_step
from geomcap.models import answer_loss, autocast, build, count_parameters, resolve_device, warn_slow_precision
from geomcap.progress import run_progress
from geomcap.recorders import CheckpointRecorder
from geomcap.store import check_writable

# the names the notebooks, the tests and the other modules import from here, defined where they live
from geomcap.config import (CONTROLS, DEFAULT_LEVEL_STEPS, DEFAULT_LEVEL_STEPS_TEXT,  # noqa: F401, E402
                            DEFAULT_WEIGHT_DECAY, MEASUREMENT_ONLY_FIELDS, SCHEDULES, SETTINGS,
                            WEIGHT_DECAY_BY_TASK, checkpoint_steps, legacy_values, lr_schedule, recorded_at,
                            thinned_steps)
from geomcap.measures import COSTLY_MEASURES  # noqa: F401
from geomcap.recorders import costly_measures, dynamics_examples, evaluate, parameter_norm  # noqa: F401

__all__ = ["train", "models_at", "training_setup", "train_until", "train_step", "make_optimizer", "decays_weight",
           "task_data", "perturb_weights", "stop_due", "ThreadsWarning", "torch_threads", "prepare_run_dir",
           "claim_run_dir",
           "write_config", "restore_state", "save_state", "CheckpointWriter", "STATE_EVERY_S", "finish", "task_facts", "write_status",
           "progress_summary"]


# --- one optimizer step ------------------------------------------------------------------------

def decays_weight(param: torch.Tensor) -> bool:
    """Whether AdamW's weight decay applies to a parameter: the matrices (weights of linear layers and
    embeddings), not biases and LayerNorm gains. The one policy: :func:`make_optimizer` and the packed step
    (:func:`geomcap.packed.stack_runs`) read it."""
    return param.ndim >= 2


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float,
                   betas: tuple[float, float]) -> torch.optim.AdamW:
    """AdamW with weight decay where :func:`decays_weight` says (the matrices); tied weights once."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW([{"params": [p for p in params if decays_weight(p)], "weight_decay": weight_decay},
                              {"params": [p for p in params if not decays_weight(p)], "weight_decay": 0.0}],
                             lr=lr, betas=betas)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, prompts: torch.Tensor,
               answers: torch.Tensor, lr: float, grad_clip: float, device: torch.device,
               step_model=None, precision: str = "fp32") -> torch.Tensor:
    """One optimizer step on a batch: cross-entropy over the answer tokens
    (:func:`geomcap.models.answer_loss`) under :func:`~geomcap.models.autocast` at ``precision``, gradient norm clipped at
    ``grad_clip`` (None: not clipped), the learning rate set to ``lr``. prompts (B, Tp), answers (B, Ta)
    int64 on ``device``; ``step_model`` (default ``model``) computes the loss, e.g. a torch.compile'd
    ``model``. Returns the loss (before the step). The one training step of geomcap: the training
    loop, the Pythia stand-in and the benchmarks call it."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast(device, precision):
        loss = answer_loss(model if step_model is None else step_model, prompts, answers)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss


# --- a run's data, model and optimizer ---------------------------------------------------------

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


def training_setup(cfg: TrainConfig, dev: torch.device, positions: int | None = None):
    """A run's task data, its model at initialisation (on ``dev``), optimizer and batch generator.
    ``positions``: the sequence length the model must hold (default: the task's prompt and answer)."""
    data = task_data(cfg)
    positions = positions or data.prompt_len + data.answer_len - 1
    torch.manual_seed(cfg.seed)
    model = build(cfg.size, data.vocab_size)
    if positions > model.cfg.block_size:
        raise ValueError(f"{cfg.task}/{cfg.level} needs {positions} positions, more than block_size "
                         f"{model.cfg.block_size}")
    if cfg.perturb:
        perturb_weights(model, cfg.perturb, cfg.perturb_seed)
    model.to(dev)
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2))
    return data, model, optimizer, torch.Generator().manual_seed(cfg.seed)


def train_until(until: int, step: int, model, optimizer, train_p, train_a, batch_gen, cfg: TrainConfig,
                dev: torch.device, step_model=None) -> int:
    """Optimizer steps ``step`` .. ``until - 1`` of the run (train_p (n_train, Tp), train_a (n_train, Ta) on
    ``dev``; each step's batch drawn with ``batch_gen``, or the whole set with ``full_batch``); returns
    ``until``."""
    model.train()
    while step < until:
        if cfg.full_batch:
            prompts, answers = train_p, train_a
        else:
            idx = torch.randint(train_p.shape[0], (cfg.batch_size,), generator=batch_gen).to(dev)
            prompts, answers = train_p[idx], train_a[idx]
        train_step(model, optimizer, prompts, answers, learning_rate(step, cfg), cfg.grad_clip, dev, step_model,
                   cfg.precision)
        step += 1
    return step


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """torch's CPU threads set to ``threads`` (None: left as they are) for the block, restored after."""
    saved = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        yield
    finally:
        torch.set_num_threads(saved)


# --- a run directory: claimed, its config, its state, its status -----------------------------------

def prepare_run_dir(cfg: TrainConfig, out) -> Path:
    """The run directory of ``cfg``: ``out``, or the run store's directory for its hash (None). ValueError
    when ``out`` is an empty path, a file, or holds another run's config."""
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


def claim_run_dir(cfg: TrainConfig, out, locks: contextlib.ExitStack) -> Path | None:
    """The run directory of ``cfg`` (:func:`prepare_run_dir`) created and locked for training, its lock
    (``store.run_lock``) entered into ``locks``; None when the run there is complete. Raises
    ``store.RunLockedError`` when another process writes it."""
    run_dir = prepare_run_dir(cfg, out)
    if store.is_complete(run_dir):
        return None
    check_writable(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    locks.enter_context(store.run_lock(run_dir))
    prepare_run_dir(cfg, run_dir)  # again, under the lock: another writer may have started it
    if store.is_complete(run_dir):
        return None
    store.remove_temporary_files(run_dir)  # left by a writer killed mid-write (we hold the lock)
    return run_dir


def write_config(run_dir: Path, cfg: TrainConfig, dev: torch.device, **provenance) -> None:
    """config.json of a run starting now: the config and its ``provenance`` (:func:`geomcap.store.provenance`,
    plus e.g. ``compile`` or ``pack``)."""
    store.atomic_write_json(run_dir / store.CONFIG_FILE,
                            {**cfg.to_dict(), "provenance": {**store.provenance(dev.type), **provenance}})


class ThreadsWarning(UserWarning):
    """A run resumed with another number of torch threads than it was started with."""


def restore_state(run_dir: Path, model, optimizer, batch_gen, recorder: CheckpointRecorder) -> int | None:
    """Load the run's state.pt into the model, optimizer, batch generator and recorder; returns its step, or
    None when there is none (or it was unreadable: discarded with a warning by ``store.read_state``).
    ValueError naming the file when it does not fit the run; :class:`ThreadsWarning` when the run resumes
    with another thread count than it started with."""
    state_path = run_dir / store.STATE_FILE
    state = store.read_state(state_path)
    if state is None:
        return None
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
                      f"(pass threads={recorded}, --threads {recorded}, for that)", ThreadsWarning, stacklevel=4)
    recorder.restore(state)
    store.write_metrics(run_dir, recorder.rows)  # the rows appended after the state was saved are measured again
    return int(state["step"])


def save_state(run_dir: Path, step: int, model, optimizer, batch_gen, recorder: CheckpointRecorder) -> None:
    """state.pt (weights, optimizer, batch generator, step, the recorder's rows, timers and carry): what a
    resumed run continues from."""
    store.atomic_torch_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "batch_gen": batch_gen.get_state(), "step": step, **recorder.state()},
                            run_dir / store.STATE_FILE)


#: the least wall time (seconds) between two saves of a run's state.pt. metrics.csv receives every
#: checkpoint's rows as they are measured; the state (the weights, the optimizer and all the rows so far,
#: which cost more to write than a checkpoint's measures) is saved at the run's first checkpoint, then at
#: the first checkpoint at least this long after the last save. A run killed or interrupted resumes from it,
#: measuring the checkpoints after it again: the same metrics, byte for byte, at most this much work lost.
STATE_EVERY_S = 60.0


class CheckpointWriter:
    """What a run writes at its checkpoints (``__call__``): the new rows appended to metrics.csv (the
    whole file written at the first), state.pt at most every :data:`STATE_EVERY_S` seconds
    (:func:`save_state`), the time spent in the recorder's ``write_s`` timer."""

    def __init__(self, run_dir: Path, recorder: CheckpointRecorder):
        self.run_dir, self.recorder = run_dir, recorder
        self.written = len(recorder.rows)  # a resumed run's metrics.csv holds its state's rows (restore_state)
        self.saved_at: float | None = None  # perf_counter of the last save
        self.saved_step: int | None = None

    def __call__(self, step: int, model, optimizer, batch_gen, force: bool = False) -> None:
        """The checkpoint at ``step`` was recorded: write it (and the state when due, or with ``force``)."""
        t0 = time.perf_counter()
        if force or self.saved_at is None or t0 - self.saved_at >= STATE_EVERY_S:  # first: rows imply a state
            save_state(self.run_dir, step, model, optimizer, batch_gen, self.recorder)
            self.saved_at, self.saved_step = t0, step
        rows = self.recorder.rows
        (store.append_metrics if self.written else store.write_metrics)(self.run_dir, rows[self.written:])
        self.written = len(rows)
        self.recorder.timers["write_s"] += time.perf_counter() - t0


def task_facts(data: tasks.TaskData, cfg: TrainConfig) -> dict:
    """What the analysis of a run needs to know of its data (written into status.json, so that it need
    not regenerate the data): ``batch_rows``, the examples in a training step; ``chance_accuracy``, the
    exact-match accuracy of the best constant answer on the test set, and ``majority_first_token``, the share
    of the test set's most common first answer token."""
    first = data.test_answers[:, 0]
    return {"batch_rows": data.n_train if cfg.full_batch else cfg.batch_size,
            "chance_accuracy": tasks.chance_accuracy(data.test_answers),
            "majority_first_token": float(torch.unique(first, return_counts=True)[1].max()) / len(first)}


def write_status(run_dir, cfg: TrainConfig, step: int, schedule, timers: dict, parameters: int,
                 seq_len: int, facts: dict | None = None) -> None:
    """status.json of a run that ended at ``step`` (written last: it marks the run complete); ``facts``:
    :func:`task_facts`; ``timers`` in seconds."""
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


def finish(run_dir: Path, cfg: TrainConfig, step: int, schedule, recorder: CheckpointRecorder, model,
           keep_state: bool = False) -> None:
    """A run that ended at ``step``: status.json (:func:`write_status`), and state.pt removed unless
    ``keep_state`` (the store keeps metrics, not weights)."""
    data = recorder.data
    write_status(run_dir, cfg, step, schedule, recorder.timers, count_parameters(model),
                 data.prompt_len + data.answer_len - 1, task_facts(data, cfg))
    if not keep_state:
        (run_dir / store.STATE_FILE).unlink(missing_ok=True)


def progress_summary(step_rows) -> dict:
    """The progress bar's summary of a checkpoint's rows (layer, measure, value): test accuracy and
    final-layer RankMe."""
    last_layer = max(layer for layer, _, _ in step_rows)
    summary = {}
    for layer, measure, value in step_rows:
        if measure == "accuracy":
            summary["acc"] = f"{value:.3f}"
        elif measure == "rankme" and layer == last_layer:
            summary["rankme"] = f"{value:.1f}"
    return summary


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


# --- the loop ------------------------------------------------------------------------------------

def train(cfg: TrainConfig, out=None, device: str = "auto", progress: bool = True,
          keep_state: bool = False, compile: bool | str = False, threads: int | None = 1,
          bars: bool | None = None) -> Path:
    """Train one run, recording metrics at every checkpoint; returns the run directory.

    ``out`` is the run directory itself (default: the run store's root / config hash).
    A complete run there with the same config is reused; an interrupted one resumes
    from its last saved state (:data:`STATE_EVERY_S`) and ends with the same metrics
    as an uninterrupted run.

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
    see the benchmarks), and makes a rerun on the same kind of CPU byte-identical:
    at more threads a rerun may differ by round-off; the count is what
    ``provenance.threads`` in config.json records; resuming a run with another
    count warns (``ThreadsWarning``, one line naming both counts).

    ``progress``: a bar on a terminal, else lines in the log (:func:`geomcap.progress.run_progress`; ``bars``
    True or False chooses); nothing without it.
    """
    if compile is not True and compile is not False and not (isinstance(compile, str) and compile):
        raise ValueError(f"compile must be True, False or a torch.compile backend name, got {compile!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
    run_dir = prepare_run_dir(cfg, out)
    if store.is_complete(run_dir):
        return run_dir
    check_writable(run_dir)
    dev = resolve_device(device)
    warn_slow_precision(dev, cfg.precision)
    with torch_threads(None), contextlib.ExitStack() as locks:  # one writer per run directory
        if claim_run_dir(cfg, run_dir, locks) is None:
            return run_dir
        if threads is not None:
            torch.set_num_threads(threads)
        return _train_locked(cfg, run_dir, dev, progress, keep_state, compile, bars)


def _train_locked(cfg: TrainConfig, run_dir: Path, dev: torch.device, progress: bool, keep_state: bool,
                  compile: bool | str, bars: bool | None) -> Path:
    """The body of :func:`train`, run while holding the run directory's lock."""
    data, model, optimizer, batch_gen = training_setup(cfg, dev)
    step_model = torch.compile(model, backend="inductor" if compile is True else compile) if compile else model
    schedule = config_checkpoints(cfg)
    recorder = CheckpointRecorder(cfg, data, dev, schedule)
    chance = tasks.chance_accuracy(data.test_answers)
    start_step = restore_state(run_dir, model, optimizer, batch_gen, recorder)
    if start_step is None:  # a fresh run
        start_step = 0
        write_config(run_dir, cfg, dev, **({"compile": "inductor" if compile is True else compile} if compile else {}))
    train_p, train_a = data.train_prompts.to(dev), data.train_answers.to(dev)
    todo = [int(s) for s in schedule if s >= start_step and not (s == start_step and recorder.rows)]

    writer = CheckpointWriter(run_dir, recorder)

    def checkpoint(step: int) -> dict:
        step_rows = recorder.update(model, step)
        writer(step, model, optimizer, batch_gen)
        return progress_summary(step_rows)

    bar = run_progress(cfg.steps, start_step, f"{cfg.task}/{cfg.level} {cfg.size} s{cfg.seed}", progress, bars)
    step = start_step
    if todo and todo[0] == step:
        bar.set_postfix(checkpoint(step))
        todo.pop(0)
    for next_ckpt in todo:
        if stop_due(recorder.rows, chance, cfg, step):
            break
        t0 = time.perf_counter()
        step = train_until(next_ckpt, step, model, optimizer, train_p, train_a, batch_gen, cfg, dev, step_model)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        recorder.timers["train_s"] += time.perf_counter() - t0
        bar.set_postfix(checkpoint(step), refresh=False)  # before the update: a log's summary line shows it
        bar.update(next_ckpt - bar.n)
    bar.close()
    if keep_state and writer.saved_step != step:
        writer(step, model, optimizer, batch_gen, force=True)
    finish(run_dir, cfg, step, schedule, recorder, model, keep_state)
    return run_dir


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
    with torch_threads(threads):
        dev = resolve_device(device)
        data, model, optimizer, batch_gen = training_setup(cfg, dev)
        train_p, train_a = data.train_prompts.to(dev), data.train_answers.to(dev)
        step = 0
        for target in steps:
            step = train_until(target, step, model, optimizer, train_p, train_a, batch_gen, cfg, dev)
            yield step, model
