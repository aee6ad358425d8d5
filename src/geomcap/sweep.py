"""Sweeps: a grid of runs on any executor with a concurrent.futures-style ``submit``::

    from geomcap.sweep import grid, run_sweep
    configs = grid(tasks=["add", "mod"], levels=["hard"], sizes=["405k"], seeds=[0, 1],
                   steps={"easy": 1000, "medium": 3000, "hard": 6000})
    results = run_sweep(configs, root="data/runs")          # local processes, one per core

Executors: anything whose ``submit(fn, *args)`` returns an object with
``done()`` and ``result()`` -- local worker processes (the default: one
``ProcessPoolExecutor`` each, so a worker that dies fails only the run it was
training), a ``concurrent.futures.ProcessPoolExecutor``, submitit's
``AutoExecutor`` (Slurm) or ``DebugExecutor``, a ``dask.distributed.Client``. Each run is written to the run store under its
config hash, so a sweep is resumable: finished runs are reused, interrupted
ones resume from their last saved state. A failing run is reported with its
error and does not stop the others. :func:`~geomcap.planning.plan` says, before anything trains,
which runs a sweep will train, which exist, and how long it should take
(``geomcap sweep`` and a notebook's recompute print it, :func:`train_missing`).
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
import traceback
import warnings
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path

from geomcap import store
from geomcap.config import DEFAULT_LEVEL_STEPS, SETTINGS, SWEEP_SETTABLE, TrainConfig
from geomcap.config import parse_steps  # noqa: F401 (sweep.parse_steps: the notebooks' and results')
from geomcap.parameters import SWEEP
from geomcap.planning import Plan, PlannedRun, budget_steps, distinct, plan, step_costs  # noqa: F401 (sweep.plan ...)
from geomcap.sweep_progress import SweepBars, metrics_tail  # noqa: F401 (sweep.metrics_tail)
from geomcap.tasks import LEVELS, TASKS


@dataclass(frozen=True)
class RunResult:
    config: TrainConfig
    run_dir: Path
    error: str | None = None       # the failing run's traceback (one line when locked), None on success
    seconds: float | None = None
    locked: bool = False           # skipped: another process is writing its directory
    deferred: bool = False         # not started: projected to end after the sweep's ``until``

    @property
    def ok(self) -> bool:
        return self.error is None


def grid(tasks=None, levels=None, sizes=("405k",), seeds=(0,), steps=None, **overrides) -> list[TrainConfig]:
    """The cartesian product tasks x levels x sizes x seeds as TrainConfigs, each run once.

    ``steps`` is an int or a {level: steps} dict (default :data:`geomcap.config.DEFAULT_LEVEL_STEPS`, the
    committed runs' budgets); ``overrides`` are further
    TrainConfig fields. Defaults: every task, every level. Invalid values
    raise ValueError before anything runs.
    """
    tasks = TASKS if tasks is None else tasks
    levels = LEVELS if levels is None else levels
    steps = DEFAULT_LEVEL_STEPS if steps is None else steps
    for axis, values in (("tasks", tasks), ("levels", levels), ("sizes", sizes), ("seeds", seeds)):
        if isinstance(values, str) or len(values) == 0:
            raise ValueError(f"{axis} must be a non-empty list, got {values!r}")
    if isinstance(steps, dict) and [lvl for lvl in levels if lvl not in steps]:
        missing = [lvl for lvl in levels if lvl not in steps]
        raise ValueError(f"--steps gives no value for level(s): {', '.join(missing)}")
    configs = []
    for task, level, size, seed in itertools.product(tasks, levels, sizes, seeds):
        n_steps = steps[level] if isinstance(steps, dict) else steps
        configs.append(TrainConfig(task=task, level=level, size=size, seed=seed, steps=n_steps, **overrides))
    return distinct(configs)  # a value given twice (--seeds 0,0) asks for the same runs again


def _run_one(config: dict, root: str, device: str, threads: int | None) -> tuple[str, float]:
    """Worker entry point (top level so executors can pickle it)."""
    from geomcap.train import TrainConfig, train

    t0 = time.perf_counter()
    cfg = TrainConfig.from_dict(config)
    run_dir = train(cfg, out=store.run_dir_for(cfg.to_dict(), root), device=device, progress=False,
                    threads=threads or None)  # None: an outside executor's workers keep their own setting
    return str(run_dir), time.perf_counter() - t0


def _run_pack(configs: list, root: str, device: str, threads: int | None) -> tuple[list, float, dict]:
    """Worker entry point of a pack: the configs trained as one batched computation. A run whose directory
    another process is writing is left out and the others packed again: returns (run directories, seconds,
    {index of a run left out: its store.RunLockedError})."""
    import torch

    from geomcap.packed import train_packed
    from geomcap.train import TrainConfig

    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    run_dirs = [store.run_dir_for(c, root) for c in configs]
    todo, locked = list(range(len(configs))), {}
    while todo:
        try:  # train_packed takes every lock before it writes anything
            train_packed([TrainConfig.from_dict(configs[i]) for i in todo], root=root, device=device, progress=False)
            break
        except store.RunLockedError as exc:
            held = [i for i in todo if run_dirs[i] == exc.run_dir]
            if not held:
                raise
            locked[held[0]] = exc
            todo.remove(held[0])
    return [str(d) for d in run_dirs], time.perf_counter() - t0, locked


def pack_groups(configs, pack: int) -> list[list[int]]:
    """Indices of ``configs`` in packs of at most ``pack`` that may share one computation
    (``packed.pack_key``: the same preset, steps, batch size and checkpoint schedule), in order
    of first appearance."""
    from geomcap.packed import pack_key

    replace(SWEEP["pack"], none=None).check(pack)  # its row, None not taken: "pack must be a positive integer, got 0"
    groups: dict = {}
    for i, cfg in enumerate(configs):
        groups.setdefault(pack_key(cfg), []).append(i)
    return [idx[j:j + pack] for idx in groups.values() for j in range(0, len(idx), pack)]


def run_sweep(configs, root=None, executor=None, device: str = SWEEP["device"].default,
              workers: int | None = SWEEP["workers"].default, progress: bool = True, poll_s: float = 0.5,
              threads: int | None = SWEEP["threads"].default, pack: int | None = SWEEP["pack"].default,
              plan: Plan | None = None, bars: bool | None = None,
              until: float | str | None = SWEEP["until"].default,
              until_margin: float = SWEEP["until_margin"].default) -> list[RunResult]:
    """Run every config (skipping complete ones) and return one RunResult per config, in order. A config
    given twice is one run (:func:`~geomcap.planning.distinct`), its RunResult given for both.

    With no executor, ``workers`` local processes (default: one per core), each a
    ProcessPoolExecutor of its own (:class:`LocalWorkers`: a worker that dies takes
    down only the run it was training, reported with the cause; the others go on),
    with ``threads`` torch threads in each (default 1: a multi-threaded step waits
    for its descheduled threads when other work shares the cores, and a run's
    metrics are byte-identical only at a fixed thread count, which its config.json
    records, and reliably only at one thread). A run that another process is writing is skipped (``RunResult.locked``): those the ``plan``
    found locked are not started at all.
    With ``pack`` = K, runs that share a preset, steps and batch size train in packs of up to K,
    each pack one batched computation in one worker (``geomcap.packed``); a RunResult's
    ``seconds`` is then its pack's wall time. With ``progress``, its progress (:class:`~geomcap.sweep_progress.SweepBars`:
    bars on a terminal, else one line per run as it starts and ends and a summary now and then; ``bars`` True
    or False chooses), with the ETA the projection of a ``plan`` (:func:`~geomcap.planning.plan`) gives.

    With ``until`` (a deadline: Unix seconds, or as ``geomcap sweep --until`` takes it: ``geomcap.parameters.deadline``),
    a unit is started only if the plan's projection of its runs (:attr:`PlannedRun.seconds <geomcap.planning.PlannedRun>`;
    a pack's, their sum), times ``until_margin``, ends before it, read as a worker frees; one that would not,
    or has no projection, is deferred (``RunResult.deferred``, named in one line) and the sweep goes on to the
    next: a sweep in a session or a job that ends at a known time leaves no run half-trained where its state
    may be lost. Its own workers only: an outside executor takes every run at once.

    ``workers``, ``threads``, ``pack``, ``until``, ``until_margin`` and, with no executor, ``device`` are
    checked through the rows of ``geomcap sweep``'s options of the same names (``geomcap.parameters.SWEEP``,
    which also gives the defaults) before anything is read or trained: a ValueError of one line (an outside
    executor's workers may run where this machine has no CUDA: its device is theirs to check).
    """
    for name, value in (("workers", workers), ("threads", threads), ("pack", pack),
                        ("until_margin", until_margin)) + (
            (("device", device),) if executor is None else ()):
        SWEEP[name].check(value)  # each through its row: "workers must be a positive integer, got 0"
    until = SWEEP["until"].check(until)
    if until is None and until_margin != SWEEP["until_margin"].default:
        raise ValueError("until_margin applies to a deadline: give until as well")
    if until is not None and executor is not None:
        raise ValueError("until needs the sweep's own workers: an outside executor takes every run at once")
    root = Path(root if root is not None else store.default_root())
    asked = list(configs)
    configs = distinct(asked)
    if until is not None and plan is None:
        from geomcap.planning import plan as make_plan  # the keyword ``plan`` hides the function here

        plan = make_plan(configs, [root], workers=workers, pack=pack)
    projected = {store.config_hash(r.config.to_dict()): r.seconds for r in (plan.runs if plan is not None else ())}
    skipped = {store.config_hash(r.config.to_dict()): r.owner for r in (plan.runs if plan is not None else ())
               if r.state == "locked"}
    results: list[RunResult | None] = [None] * len(configs)
    pending, locked = [], []
    for i, cfg in enumerate(configs):
        run_dir = store.run_dir_for(cfg.to_dict(), root)
        if store.is_complete(run_dir):
            results[i] = RunResult(cfg, run_dir, seconds=0.0)
        elif store.config_hash(cfg.to_dict()) in skipped:  # the plan said so: not started
            results[i] = _locked_result(cfg, run_dir, skipped[store.config_hash(cfg.to_dict())])
            locked.append(i)
        else:
            pending.append(i)

    own_executor = executor is None
    workers = workers or os.cpu_count() or 1
    threads = (threads or 1) if own_executor else None
    local = LocalWorkers(workers) if own_executor else None
    bar = SweepBars(configs, root, plan, len(configs) - len(pending) - len(locked), progress, bars, until=until,
                    until_margin=until_margin)
    for i in locked:
        bar.end(i, results[i])
    queue = deque(tuple(u) for u in ([[i] for i in pending] if not pack else [
        [pending[j] for j in group] for group in pack_groups([configs[i] for i in pending], pack)]))
    futures = {}
    try:
        while queue or futures:
            while queue and (local is None or local.free()):  # an outside executor queues every unit at once
                unit = queue.popleft()
                late = _past_deadline([configs[i] for i in unit], projected, until, root, until_margin)
                if late:
                    for i, result in zip(unit, late):
                        results[i] = result
                        bar.end(i, result)
                    continue
                call = ((_run_pack, [configs[i].to_dict() for i in unit]) if pack else
                        (_run_one, configs[unit[0]].to_dict()))
                futures[unit] = (local or executor).submit(*call, str(root), device, threads)
                bar.start(unit)
            finished = [unit for unit, f in futures.items() if f.done()]
            for unit in finished:
                future = futures.pop(unit)
                death = local.release(future) if local is not None else None
                unit_configs = [configs[i] for i in unit]
                for i, result in zip(unit, _died_results(unit_configs, death, root) if death else
                                     _unit_results(unit_configs, future, root)):
                    results[i] = result
                    bar.end(i, result)
            bar.poll()
            if futures and not finished:
                time.sleep(poll_s)
    except BaseException:  # Ctrl-C (here or in a worker), SystemExit: stop the sweep, start no further run
        for future in futures.values():
            future.cancel()
        if local is not None:
            local.terminate()
        raise
    finally:
        bar.close()
        if local is not None:
            local.shutdown()
    by_run = {store.config_hash(r.config.to_dict()): r for r in results}
    return [by_run[store.config_hash(c.to_dict())] for c in asked]


class LocalWorkers:
    """A sweep's own worker processes: ``n`` ProcessPoolExecutors of one process each.

    One pool of ``n`` processes fails every run it holds, started or not, with
    ``BrokenProcessPool`` when one of its processes dies (kill -9, the
    out-of-memory killer), and terminates its other workers. Here a worker that
    dies breaks only its own pool, which held only the unit (a run, or a pack) it was
    training: :meth:`release` names the cause, and the next :meth:`submit` on that
    slot starts a fresh process. ``submit`` takes a unit only while a slot is free.
    """

    def __init__(self, n: int):
        self.pools: list[ProcessPoolExecutor | None] = [None] * n
        self.held: dict[int, tuple] = {}  # slot -> (its future, its worker process or None)

    def free(self) -> bool:
        """Whether a worker is idle."""
        return len(self.held) < len(self.pools)

    def submit(self, fn, *args):
        """Run ``fn(*args)`` on an idle worker (started if need be); returns its future."""
        slot = next(k for k in range(len(self.pools)) if k not in self.held)
        if self.pools[slot] is None:
            self.pools[slot] = ProcessPoolExecutor(max_workers=1, initializer=_start_worker,
                                                   initargs=(os.getpid(),))
        future = self.pools[slot].submit(fn, *args)
        processes = getattr(self.pools[slot], "_processes", None) or {}  # started by submit
        self.held[slot] = (future, next(iter(processes.values()), None))
        return future

    def release(self, future) -> str | None:
        """Free the worker of a finished ``future``. None if its process lives; if it died, its pool is
        dropped and the cause returned ("its worker process (pid N) was killed by SIGKILL")."""
        slot = next(k for k, (f, _) in self.held.items() if f is future)
        _, process = self.held.pop(slot)
        if not isinstance(future.exception(), BrokenProcessPool):
            return None
        self.pools[slot].shutdown(wait=False)
        self.pools[slot] = None
        code = _exit_code(process)
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}" if code else "ended abruptly"
        return f"its worker process{f' (pid {process.pid})' if process is not None else ''} {how}"

    def terminate(self) -> None:
        """SIGTERM every worker: the runs they hold stop at once, each resumable from its last checkpoint."""
        for pool in self.pools:
            if pool is not None:
                _terminate_workers(pool)

    def shutdown(self) -> None:
        """Let the workers finish what they hold (nothing queued is started), then end them."""
        for pool in self.pools:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)


def _exit_code(process, timeout_s: float = 5.0) -> int | None:
    """The exit code of a dead worker process (None if unknown). Its pool's manager thread may be reaping
    it at the same moment; then ``exitcode`` reads None until that thread has stored the code."""
    deadline = time.monotonic() + timeout_s
    while process is not None and process.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return getattr(process, "exitcode", None)


def _died_results(configs, death: str, root: Path) -> list[RunResult]:
    """The RunResults of a unit whose worker process died while training it (``death``: how)."""
    what = "this run" if len(configs) == 1 else f"this pack of {len(configs)} runs"
    error = f"{death} while training {what}; rerun the sweep to resume it from its last checkpoint"
    return [RunResult(cfg, store.run_dir_for(cfg.to_dict(), root), error=error) for cfg in configs]


def _unit_results(configs, future, root: Path) -> list[RunResult]:
    """The RunResults of one submitted unit (a run, or a pack) from its finished future. A run another
    process is writing is skipped with one line (the other runs of its pack trained without it); a failing
    run (or pack) carries its traceback, and does not stop the others (Ctrl-C does: it is not caught here)."""
    run_dirs = [store.run_dir_for(cfg.to_dict(), root) for cfg in configs]
    try:
        value = future.result()
    except store.RunLockedError as exc:  # a run alone: its lock is held by another process
        return [_locked_result(configs[0], run_dirs[0], exc.owner)]
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc)).strip()
        return [RunResult(cfg, run_dir, error=detail) for cfg, run_dir in zip(configs, run_dirs)]
    seconds, locked = value[1], value[2] if len(value) > 2 else {}
    return [_locked_result(cfg, run_dir, locked[k].owner) if k in locked else RunResult(cfg, run_dir, seconds=seconds)
            for k, (cfg, run_dir) in enumerate(zip(configs, run_dirs))]


def _past_deadline(configs, projected: dict, until: float | None, root: Path,
                   margin: float = 1.0) -> list[RunResult]:
    """The deferred RunResults of a unit (a run, or a pack) that the projection (``projected``: config hash ->
    seconds or None), times ``margin``, does not end before ``until`` (Unix seconds) if it starts now; [] when
    it does, or when there is no deadline."""
    if until is None:
        return []
    seconds = [projected.get(store.config_hash(c.to_dict())) for c in configs]
    ends = None if None in seconds else time.time() + margin * sum(seconds)
    if ends is not None and ends <= until:
        return []
    at = time.strftime("%H:%M", time.localtime(until))
    why = (f"not started before --until {at}: no projection of its time on this machine (no run or benchmark of "
           "its preset here: train one run without --until, or run `geomcap bench --parts scale`)" if ends is None else
           f"not started: projected to end at {time.strftime('%H:%M', time.localtime(ends))}"
           f"{f' (x{margin:g} margin)' if margin != 1 else ''}, after --until {at}; "
           "rerun the sweep to train it")
    return [RunResult(cfg, store.run_dir_for(cfg.to_dict(), root), error=why, deferred=True) for cfg in configs]


def _locked_result(cfg: TrainConfig, run_dir: Path, owner: str | None) -> RunResult:
    """The RunResult of a run skipped because another process writes it (``owner``: "pid N on HOST")."""
    by = f" ({owner})" if owner else ""
    return RunResult(cfg, run_dir, error=f"{run_dir} is being written by another process{by}; rerun the sweep "
                                         "once it is done", locked=True)


def train_missing(configs, stores, progress: bool = True, **kwargs) -> list[RunResult]:
    """Train the configs that are complete in none of ``stores`` (run store roots) into the last of them,
    with :func:`run_sweep` (``kwargs``: its options); returns their RunResults. A notebook's recompute cell
    (stores: :func:`geomcap.results.section_stores`). With ``progress``, the plan (:func:`~geomcap.planning.plan`: the runs it
    will train, those that exist, those another process writes, the projected time) is printed first, then
    the sweep's progress."""
    stores = [Path(s) for s in stores]
    if not stores:
        raise ValueError("stores is empty: give at least the run store to train into")
    configs = list(configs)
    the_plan = plan(configs, stores, workers=kwargs.get("workers"), pack=kwargs.get("pack"))
    if progress:
        print("\n".join(the_plan.lines()), flush=True)
    missing = [r.config for r in the_plan.runs if r.state != "exists"]
    return run_sweep(missing, root=stores[-1], progress=progress, plan=the_plan, **kwargs)


def _start_worker(parent_pid: int) -> None:
    """Initializer of a sweep's own worker process: it ends with the sweep's process (:func:`_exit_with_parent`),
    and warns nothing about a run's unreadable files (the sweep's process read them before it started the run,
    and warned once)."""
    warnings.simplefilter("ignore", store.StoreWarning)
    _exit_with_parent(parent_pid)


def _exit_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Worker initializer: end this worker once the sweep's process is gone. A parent killed with
    SIGKILL cannot tell its workers, which would otherwise wait for work forever (an interrupted run
    resumes from its last checkpoint at the next sweep)."""
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="geomcap-exit-with-parent").start()


def _terminate_workers(executor: ProcessPoolExecutor) -> None:
    """SIGTERM the worker processes of a local pool: the runs they hold stop at once (each resumes from
    its last checkpoint; its lock dies with the process) instead of the pool finishing them."""
    terminate = getattr(executor, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        process.terminate()


#: TrainConfig fields a sweep may set for every run, {name: type}: the parameter rows flagged
#: ``sweep_settable`` (:data:`geomcap.config.SWEEP_SETTABLE`)
SETTABLE_FIELDS = SWEEP_SETTABLE


def parse_settings(items) -> dict:
    """['warmup_steps=0', 'lr=3e-4'] -> {'warmup_steps': 0, 'lr': 0.0003}: TrainConfig overrides for
    :func:`grid`. Only :data:`SETTABLE_FIELDS`; a value is read as the field's schema row reads text
    (:meth:`geomcap.schema.Param.parse`: ``none`` where None is allowed), and checked by TrainConfig."""
    settings = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. warmup_steps=0")
        if key not in SETTABLE_FIELDS:
            raise ValueError(f"--set {key}: not a settable field; choose from: {', '.join(SETTABLE_FIELDS)}")
        try:
            settings[key] = SETTINGS[key].parse(value)
        except ValueError:
            kind = {int: "an integer", float: "a number", bool: "true or false"}[SETTINGS[key].type]
            raise ValueError(f"--set {key}: {value!r} is not {kind}") from None
    return settings
