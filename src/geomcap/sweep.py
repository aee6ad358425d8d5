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
error and does not stop the others. :func:`plan` says, before anything trains,
which runs a sweep will train, which exist, and how long it should take
(``geomcap sweep`` and a notebook's recompute print it, :func:`train_missing`).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import threading
import time
import traceback
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm  # text bars: tqdm.auto would need ipywidgets in Jupyter (and warns without it)

from geomcap import store
from geomcap.config import DEFAULT_LEVEL_STEPS, SETTINGS, TrainConfig
from geomcap.config import parse_steps  # noqa: F401 (sweep.parse_steps: the notebooks' and results')
from geomcap.tasks import LEVELS, TASKS


@dataclass(frozen=True)
class RunResult:
    config: TrainConfig
    run_dir: Path
    error: str | None = None       # the failing run's traceback (one line when locked), None on success
    seconds: float | None = None
    locked: bool = False           # skipped: another process is writing its directory

    @property
    def ok(self) -> bool:
        return self.error is None


def grid(tasks=None, levels=None, sizes=("405k",), seeds=(0,), steps=None, **overrides) -> list[TrainConfig]:
    """The cartesian product tasks x levels x sizes x seeds as TrainConfigs.

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
    return configs


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

    if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
        raise ValueError(f"pack must be a positive integer, got {pack!r}")
    groups: dict = {}
    for i, cfg in enumerate(configs):
        groups.setdefault(pack_key(cfg), []).append(i)
    return [idx[j:j + pack] for idx in groups.values() for j in range(0, len(idx), pack)]


def run_sweep(configs, root=None, executor=None, device: str = "cpu", workers: int | None = None,
              progress: bool = True, poll_s: float = 0.5, threads: int | None = None,
              pack: int | None = None, plan: Plan | None = None) -> list[RunResult]:
    """Run every config (skipping complete ones) and return one RunResult per config, in order.

    With no executor, ``workers`` local processes (default: one per core), each a
    ProcessPoolExecutor of its own (:class:`LocalWorkers`: a worker that dies takes
    down only the run it was training, reported with the cause; the others go on),
    with ``threads`` torch threads in each (default 1: a multi-threaded step waits
    for its descheduled threads when other work shares the cores, and a run's
    metrics are byte-identical only at a fixed thread count, which its config.json
    records). A run that another process is writing is skipped (``RunResult.locked``).
    With ``pack`` = K, runs that share a preset, steps and batch size train in packs of up to K,
    each pack one batched computation in one worker (``geomcap.packed``); a RunResult's
    ``seconds`` is then its pack's wall time. With ``progress``, one bar over the sweep (runs done; with a
    ``plan`` (:func:`plan`) the ETA its projection gives) and one per run in training (steps, last accuracy).
    """
    root = Path(root if root is not None else store.default_root())
    configs = list(configs)
    results: list[RunResult | None] = [None] * len(configs)
    pending = []
    for i, cfg in enumerate(configs):
        run_dir = store.run_dir_for(cfg.to_dict(), root)
        if store.is_complete(run_dir):
            results[i] = RunResult(cfg, run_dir, seconds=0.0)
        else:
            pending.append(i)

    own_executor = executor is None
    workers = workers or os.cpu_count() or 1
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    threads = (threads or 1) if own_executor else None
    local = LocalWorkers(workers) if own_executor else None
    bar = _Bars(configs, root, plan, len(configs) - len(pending), progress)
    queue = deque(tuple(u) for u in ([[i] for i in pending] if not pack else [
        [pending[j] for j in group] for group in pack_groups([configs[i] for i in pending], pack)]))
    futures = {}
    try:
        while queue or futures:
            while queue and (local is None or local.free()):  # an outside executor queues every unit at once
                unit = queue.popleft()
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
                    bar.end(i)
                    cfg = result.config
                    if result.locked:
                        bar.write(f"SKIPPED {cfg.task}/{cfg.level} {cfg.size} seed {cfg.seed}: {result.error}")
                    elif not result.ok:
                        bar.write(f"FAILED {cfg.task}/{cfg.level} {cfg.size} seed {cfg.seed}: "
                                  f"{result.error.splitlines()[-1]}")
                    bar.update(1)
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
    return results


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
            self.pools[slot] = ProcessPoolExecutor(max_workers=1, initializer=_exit_with_parent,
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
        return [_locked_result(configs[0], run_dirs[0], exc)]
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc)).strip()
        return [RunResult(cfg, run_dir, error=detail) for cfg, run_dir in zip(configs, run_dirs)]
    seconds, locked = value[1], value[2] if len(value) > 2 else {}
    return [_locked_result(cfg, run_dir, locked[k]) if k in locked else RunResult(cfg, run_dir, seconds=seconds)
            for k, (cfg, run_dir) in enumerate(zip(configs, run_dirs))]


def _locked_result(cfg: TrainConfig, run_dir: Path, exc: store.RunLockedError) -> RunResult:
    owner = f" ({exc.owner})" if exc.owner else ""
    return RunResult(cfg, run_dir, error=f"{run_dir} is being written by another process{owner}; rerun the sweep "
                                         "once it is done", locked=True)


def train_missing(configs, stores, progress: bool = True, **kwargs) -> list[RunResult]:
    """Train the configs that are complete in none of ``stores`` (run store roots) into the last of them,
    with :func:`run_sweep` (``kwargs``: its options); returns their RunResults. A notebook's recompute cell
    (stores: :func:`geomcap.results.section_stores`). With ``progress``, the plan (:func:`plan`: the runs it
    will train, those that exist, the projected time) is printed first, then the sweep's bars."""
    stores = [Path(s) for s in stores]
    if not stores:
        raise ValueError("stores is empty: give at least the run store to train into")
    configs = list(configs)
    the_plan = plan(configs, stores, workers=kwargs.get("workers"), pack=kwargs.get("pack"))
    if progress:
        print("\n".join(the_plan.lines()), flush=True)
    missing = [r.config for r in the_plan.runs if r.state != "exists"]
    return run_sweep(missing, root=stores[-1], progress=progress, plan=the_plan, **kwargs)


# --- the plan of a sweep: what it will train, and for how long ------------------------------------

@dataclass(frozen=True)
class PlannedRun:
    """One run of a :class:`Plan`: ``state`` "exists" (complete in a store), "resume" (begun: measured up to
    step ``reached``) or "train"; ``steps`` the steps it is expected to reach (its budget, or where the runs of
    the same settings stopped early), ``seconds`` the projected time (None: no measurement for its preset)."""
    config: TrainConfig
    run_dir: Path
    state: str
    steps: int
    reached: int = 0
    seconds: float | None = None

    @property
    def name(self) -> str:
        c = self.config
        return f"{c.task}/{c.level} {c.size} seed {c.seed}"


@dataclass(frozen=True)
class Plan:
    """What a sweep will do (:func:`plan`): its runs, the per-preset costs the projection used
    (preset -> (seconds per step, seconds per checkpoint, where they were measured)), the workers."""
    runs: list
    costs: dict
    workers: int
    pack: int | None = None
    root: Path | None = None

    @property
    def to_train(self) -> list:
        return [r for r in self.runs if r.state != "exists"]

    def projected_s(self, runs=None) -> float | None:
        """The projected wall time of ``runs`` (default: those to train) on the plan's workers (each run on
        one worker, the longest first); None when a run has no projection."""
        seconds = sorted((r.seconds for r in (self.to_train if runs is None else runs)), key=lambda x: -(x or 0))
        if any(x is None for x in seconds):
            return None
        load = [0.0] * max(1, self.workers)
        for x in seconds:
            load[load.index(min(load))] += x
        return max(load)

    def lines(self) -> list[str]:
        """The plan as a reader sees it before anything trains: one line per run, then the projection."""
        todo = self.to_train
        where = f" into {self.root}" if self.root is not None else ""
        how = f"{self.workers} worker{'s' if self.workers != 1 else ''}" + (f", packs of {self.pack}" if self.pack
                                                                             else "")
        out = [f"plan: {len(self.runs)} runs; {len(self.runs) - len(todo)} exist, {len(todo)} to train{where} "
               f"({how})"]
        for r in self.runs:
            if r.state == "exists":
                out.append(f"  exists  {r.name:<28} {r.run_dir}")
                continue
            verb = f"resume  {r.name:<28} from step {r.reached}," if r.state == "resume" else f"train   {r.name:<28}"
            steps = (f"~{r.steps} of {r.config.steps} steps (where its other seeds stopped)"
                     if r.steps < r.config.steps else f"{r.steps} steps")
            out.append(f"  {verb} {steps}, {_duration(r.seconds) if r.seconds is not None else 'no projection'}")
        for preset in sorted({r.config.size for r in todo}):
            cost = self.costs.get(preset)
            out.append(f"  {preset}: " + (f"{cost[0]:.3f} s per training step, {cost[1]:.2f} s per checkpoint "
                                          f"(measured: {cost[2]})" if cost else
                                          "no measurement of this preset on this machine: not projected"))
        if any(r.config.measures for r in todo):
            out.append("  the costly measures (--measures) are not in the projection")
        known = [r for r in todo if r.seconds is not None]
        if known:
            out.append(f"projected: {_duration(self.projected_s(known))} on {how}" + (
                f", for {len(known)} of the {len(todo)} runs (the others have no measurement)"
                if len(known) < len(todo) else ""))
        elif todo:
            out.append("projected: unknown (no measurement of these presets on this machine)")
        return out


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _stored_runs(roots) -> list[tuple[dict, dict]]:
    """(config.json, status.json) of every complete run under ``roots`` (unreadable ones left out)."""
    found = []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for run_dir in root.iterdir():
            try:
                config, status = store.read_config(run_dir, required=()), store.read_status(run_dir)
            except (ValueError, FileNotFoundError, NotADirectoryError):
                continue
            if status and status.get("complete"):
                found.append((config, status))
    return found


def _bench_costs(cpu: str) -> dict:
    """preset -> (s per step, s per checkpoint, source) from the benchmarks in data/bench (``geomcap bench``'s
    ``geometry`` part) made on a CPU named ``cpu``."""
    import json

    costs = {}
    try:
        files = sorted(store.committed_data("bench").glob("*.json"))
    except FileNotFoundError:
        return costs
    for path in files:
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        machine = result.get("machine") or {}
        if machine.get("cpu_model") != cpu or machine.get("device") != "cpu" or machine.get("torch_threads") != 1:
            continue
        for row in (result.get("geometry") or {}).get("presets", []):
            costs.setdefault(row["preset"], (row["ms_per_step"] / 1000, row["eval_s"],
                                             f"data/bench/{path.name} on {cpu}"))
    return costs


def step_costs(stored, cpu: str | None = None) -> dict:
    """preset -> (seconds per training step, seconds per checkpoint, where measured) on this machine: the
    medians over the complete runs in ``stored`` (``_stored_runs``) that config.json says were trained on
    a CPU of this model (``cpu``, default :func:`geomcap.store.cpu_model`), one torch thread, without costly
    measures; else the benchmarks in data/bench made on it (``_bench_costs``)."""
    import statistics

    cpu = cpu or store.cpu_model()
    per: dict = {}
    for config, status in stored:
        prov = config.get("provenance") or {}
        if (prov.get("cpu_model") != cpu or prov.get("device") != "cpu" or prov.get("threads") != 1
                or config.get("measures") or not status.get("checkpoints")):
            continue
        steps = status.get("stopped_at") or config.get("steps")
        measuring = status.get("eval_s", 0) + status.get("write_s", 0)
        per.setdefault(config["size"], []).append((status["train_s"] / max(steps, 1),
                                                   measuring / status["checkpoints"]))
    costs = _bench_costs(cpu)
    for preset, pairs in per.items():
        costs[preset] = (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs),
                         f"{len(pairs)} run{'s' if len(pairs) != 1 else ''} on {cpu}")
    return costs


def _same_settings(config: dict) -> tuple:
    """A run's settings but its seed (and provenance): runs alike but for the seed stop alike."""
    return tuple(sorted((k, str(v)) for k, v in config.items() if k not in ("seed", "provenance", "perturb_seed")))


def plan(configs, stores, workers: int | None = None, pack: int | None = None, cpu: str | None = None) -> Plan:
    """The plan of training ``configs`` into the last of ``stores`` (a run complete in any store exists): per
    run, whether it exists, resumes or trains, the steps it is expected to reach (the median stop of complete
    runs of the same settings in the stores and the committed data/runs, else its budget) and a projected
    time from measured costs of its preset on this machine (:func:`step_costs`: the runs' per-step and
    per-checkpoint seconds; None where there is no measurement). Reads the stores; trains nothing."""
    import statistics

    from geomcap.config import checkpoint_steps

    stores = [Path(s) for s in stores]
    if not stores:
        raise ValueError("stores is empty: give at least the run store to train into")
    roots = list(dict.fromkeys(stores + _committed_runs()))
    stored = _stored_runs(roots)
    costs = step_costs(stored, cpu)
    stops: dict = {}
    for config, status in stored:
        stops.setdefault(_same_settings(config), []).append(status.get("stopped_at") or config.get("steps"))
    runs = []
    for cfg in configs:
        dirs = [store.run_dir_for(cfg.to_dict(), s) for s in stores]
        done = next((d for d in dirs if store.is_complete(d)), None)
        if done is not None:
            runs.append(PlannedRun(cfg, done, "exists", cfg.steps))
            continue
        like = stops.get(_same_settings(cfg.to_dict()))
        steps = min(cfg.steps, int(statistics.median(like))) if like else cfg.steps
        reached = store.last_metrics_step(dirs[-1]) or 0
        seconds = None
        if cfg.size in costs:
            per_step, per_checkpoint, _ = costs[cfg.size]
            schedule = checkpoint_steps(cfg.steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints, cfg.dense_steps)
            left = int(((schedule > reached) & (schedule <= steps)).sum())
            seconds = float(max(steps - reached, 0) * per_step + left * per_checkpoint)
        runs.append(PlannedRun(cfg, dirs[-1], "resume" if reached else "train", steps, reached, seconds))
    return Plan(runs, costs, workers or os.cpu_count() or 1, pack, stores[-1])


def _committed_runs() -> list[Path]:
    try:
        return [store.committed_data("runs")]
    except FileNotFoundError:
        return []


def metrics_tail(run_dir) -> tuple[int | None, float | None]:
    """(the last step, its test accuracy) in a run's metrics.csv, read from the file's end: what a run's
    progress bar shows while a worker trains it. (None, None) before its first checkpoint."""
    path = Path(run_dir) / store.METRICS_FILE
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            lines = f.read().decode(errors="replace").split("\n")[1:-1]  # whole lines only
    except OSError:
        return None, None
    step = accuracy = None
    for line in reversed(lines):
        fields = line.split(",")
        if len(fields) != 4 or not fields[0].isdigit():
            continue
        step = int(fields[0]) if step is None else step
        if fields[2] == "accuracy" and fields[1] == "-1":
            accuracy = float(fields[3])
            break
    return step, accuracy


class _Bars:
    """A sweep's bars: one over the plan (runs done, the ETA from the plan's projection) and one per run in
    training (its steps, its last test accuracy, read from its metrics.csv as its worker writes it)."""

    def __init__(self, configs, root: Path, the_plan: Plan | None, done: int, enabled: bool):
        self.configs, self.root, self.enabled = configs, root, enabled
        key = lambda c: store.config_hash(c.to_dict())  # noqa: E731
        projected = {key(r.config): r for r in the_plan.runs} if the_plan is not None else {}
        self.planned = [projected.get(key(c)) for c in configs]
        self.workers = the_plan.workers if the_plan is not None else 1
        self.done: set[int] = set()
        self.bar = tqdm(total=len(configs), initial=done, disable=not enabled, unit="run", desc="sweep",
                        bar_format="{desc}: {n_fmt}/{total_fmt} runs |{bar}| {elapsed} elapsed{postfix}")
        self.run_bars: dict[int, tqdm] = {}

    def start(self, unit) -> None:
        for i in unit:
            c = self.configs[i]
            self.run_bars[i] = tqdm(total=c.steps, disable=not self.enabled, leave=False, unit="step",
                                    desc=f"  {c.task}/{c.level} {c.size} s{c.seed}", position=len(self.run_bars) + 1)

    def end(self, i: int) -> None:
        self.done.add(i)
        bar = self.run_bars.pop(i, None)
        if bar is not None:
            bar.close()

    def poll(self) -> None:
        """Each running run's bar from its metrics.csv; the plan's bar's ETA."""
        if not self.enabled:
            return
        reached = {}
        for i, bar in self.run_bars.items():
            step, accuracy = metrics_tail(store.run_dir_for(self.configs[i].to_dict(), self.root))
            if step is not None:
                reached[i] = step
                bar.update(step - bar.n)
                if accuracy is not None:
                    bar.set_postfix_str(f"acc {accuracy:.3f}", refresh=False)
                bar.refresh()
        left = []
        for i, planned in enumerate(self.planned):
            if i in self.done or planned is None or planned.state == "exists":
                continue
            if planned.seconds is None:
                self.bar.set_postfix_str("ETA unknown (no measurement)")
                return
            span = max(planned.steps - planned.reached, 1)
            share = min(max(reached.get(i, planned.reached) - planned.reached, 0) / span, 1.0)
            left.append(dataclasses.replace(planned, seconds=planned.seconds * (1 - share)))
        eta = Plan(left, {}, self.workers).projected_s() if left else 0.0
        self.bar.set_postfix_str(f"ETA ~{_duration(eta)} (projected)")

    def write(self, line: str) -> None:
        self.bar.write(line)

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def close(self) -> None:
        for i in list(self.run_bars):
            self.end(i)
        self.bar.close()


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


#: TrainConfig fields a sweep may set for every run (the optimizer and schedule settings the paper
#: leaves unstated, the negative control, a stop step, the twins' perturbation); the grid's own axes and
#: the measures have their own options.
SETTABLE_FIELDS = {name: SETTINGS[name].type for name in (
    "lr", "weight_decay", "beta1", "beta2", "warmup_steps", "min_lr_ratio", "grad_clip", "batch_size", "answer_order",
    "schedule", "control", "stop_at", "perturb", "perturb_seed")}


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
