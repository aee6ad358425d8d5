"""The plan of a sweep, before anything trains: which runs it will train, which exist already, which another
process is writing (skipped), and a projected time from measured per-step costs of each preset on this machine
(finished runs that name this CPU, else the benchmarks in data/bench). :func:`geomcap.sweep.train_missing` and
``geomcap sweep`` print the plan; :mod:`geomcap.sweep_progress` shows the sweep's progress against it."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from geomcap import store
from geomcap.config import TrainConfig
from geomcap.progress import duration


@dataclass(frozen=True)
class PlannedRun:
    """One run of a :class:`Plan`: ``state`` "exists" (complete in a store), "resume" (begun: measured up to
    step ``reached``), "train", or "locked" (another process writes it, ``owner``: "pid N on HOST"; skipped);
    ``steps`` the steps it is expected to reach (its budget, or where like runs stopped early: ``like``
    names which, "its other seeds" or "its task and level at 14m", say), ``seconds`` the projected time
    (None: no measurement for its preset, or skipped)."""
    config: TrainConfig
    run_dir: Path
    state: str
    steps: int
    reached: int = 0
    seconds: float | None = None
    owner: str | None = None
    like: str | None = None

    @property
    def name(self) -> str:
        return run_name(self.config)


#: a task's factor the plan's lines name (:class:`TaskFactor`): 20% or more off its preset's costs
NOTED_FACTOR = 0.2


@dataclass(frozen=True)
class Plan:
    """What a sweep will do (:func:`plan`): its runs, the costs the projection used ((preset, precision) ->
    :class:`StepCost`; (task, level) -> :class:`TaskFactor`), the workers."""
    runs: list
    costs: dict
    workers: int
    pack: int | None = None
    root: Path | None = None
    factors: dict = dataclasses.field(default_factory=dict)

    @property
    def to_train(self) -> list:
        """The runs it trains or resumes (not those that exist, nor those another process is writing)."""
        return [r for r in self.runs if r.state in ("train", "resume")]

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
        locked = [r for r in self.runs if r.state == "locked"]
        where = f" into {self.root}" if self.root is not None else ""
        how = f"{self.workers} worker{'s' if self.workers != 1 else ''}" + (f", packs of {self.pack}" if self.pack
                                                                             else "")
        runs = f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''}"
        out = [f"plan: {runs}; {len(self.runs) - len(todo) - len(locked)} exist, {len(todo)} to "
               f"train{f', {len(locked)} locked (skipped)' if locked else ''}{where} ({how})"]
        for r in self.runs:
            if r.state == "exists":
                out.append(f"  exists  {r.name:<28} {r.run_dir}")
                continue
            if r.state == "locked":
                out.append(f"  locked  {r.name:<28} by {r.owner}: skipped")
                continue
            verb = f"resume  {r.name:<28} from step {r.reached}," if r.state == "resume" else f"train   {r.name:<28}"
            budget = budget_steps(r.config)
            of = f"{budget} steps" + (f" (stop_at, of a {r.config.steps}-step schedule)" if budget < r.config.steps
                                      else "")
            steps = f"~{r.steps} of {of}, where {r.like} stopped" if r.steps < budget else of
            out.append(f"  {verb} {steps}, {duration(r.seconds) if r.seconds is not None else 'no projection'}")
        for key in sorted({(r.config.size, r.config.precision) for r in todo}):
            cost = self.costs.get(key)
            step = ("" if cost is None else f"{cost.per_step_s:.3f} s per training step" if cost.line is None else
                    f"{cost.line['intercept_s']:.3f} s + {1000 * cost.line['per_token_s']:.1f} ms per token of a "
                    "sequence per training step")
            out.append(f"  {key[0]} {key[1]}: " + (f"{step}, {cost.per_checkpoint_s:.2f} s per checkpoint "
                                                   f"({'' if cost.extrapolated else 'measured: '}{cost.source})"
                                                   if cost else
                                                   "no measurement of this preset on this machine: not projected"))
        for key in sorted({(r.config.task, r.config.level) for r in todo} & set(self.factors)):
            factor = self.factors[key]
            if max(abs(factor.step - 1), abs(factor.checkpoint - 1)) >= NOTED_FACTOR:
                out.append(f"  {key[0]}/{key[1]}: x{factor.step:.2f} per step, x{factor.checkpoint:.2f} per "
                           f"checkpoint of its preset's (measured: {factor.runs} runs)")
        if any(r.config.measures for r in todo):
            out.append("  the costly measures (--measures) are not in the projection")
        known = [r for r in todo if r.seconds is not None]
        if known:
            out.append(f"projected: {duration(self.projected_s(known))} on {how}" + (
                f", for {len(known)} of the {len(todo)} runs (the others have no measurement)"
                if len(known) < len(todo) else ""))
        elif todo:
            out.append("projected: unknown (no measurement of these presets on this machine)")
        return out


def stored_runs(roots) -> list[tuple[dict, dict]]:
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


@dataclass(frozen=True)
class StepCost:
    """What one preset at one precision costs on this machine, one torch thread: ``per_step_s`` seconds per
    training step (at any sequence length, or, with ``line``, at the length :func:`step_seconds` is given),
    ``per_checkpoint_s`` seconds per checkpoint (evaluation and writing), ``source`` where they were measured.
    ``line``: {"intercept_s", "per_token_s"}, seconds per step as a line in the sequence length
    (``geomcap bench --parts scale``: ``geomcap.bench.scale.fit_seconds``); ``extrapolated``: from another
    preset's measurement (:func:`extrapolated_costs`), not this one's."""
    per_step_s: float
    per_checkpoint_s: float
    source: str
    line: dict | None = None
    extrapolated: bool = False

    def step_seconds(self, seq_len: int) -> float:
        """Seconds per step of a run whose sequences are ``seq_len`` tokens (prompt + answer - 1); the line
        is never read below a tenth of its intercept (fitted on a few lengths, it is not trusted to reach 0)."""
        if self.line is None:
            return self.per_step_s
        return max(self.line["intercept_s"] + self.line["per_token_s"] * seq_len, 0.1 * abs(self.line["intercept_s"]))


def _bench_costs(cpu: str) -> dict:
    """(preset, precision) -> :class:`StepCost` from the benchmarks in data/bench made on a CPU named ``cpu``:
    the ``scale`` part's one-thread lines (``geomcap bench --parts scale``), else the ``geometry`` part of a
    bench run on one thread (float32, one length)."""
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
        if machine.get("cpu_model") != cpu or machine.get("device") != "cpu":
            continue
        where = f"data/bench/{path.name} on {cpu}"
        for row in (result.get("scale") or {}).get("presets", []):
            for fit in row["fits"]:
                if fit["threads"] == 1:
                    costs[(row["preset"], fit["precision"])] = StepCost(
                        fit["intercept_s"], row["eval_s"], where,
                        {"intercept_s": fit["intercept_s"], "per_token_s": fit["per_token_s"]})
        if machine.get("torch_threads") != 1:
            continue
        for row in (result.get("geometry") or {}).get("presets", []):
            costs.setdefault((row["preset"], "fp32"), StepCost(row["ms_per_step"] / 1000, row["eval_s"], where))
    return costs


@dataclass(frozen=True)
class TimedRun:
    """What one complete run cost, as its status.json records it (:func:`timed_runs`): ``step_s`` training
    seconds per step over its ``steps`` (to where it stopped), ``checkpoint_s`` seconds per checkpoint
    (evaluation and writing) over its ``checkpoints``, on ``cpu`` at one torch thread; ``length`` its
    sequences' tokens (prompt + answer - 1)."""
    cpu: str
    size: str
    precision: str
    task: str
    level: str
    length: int
    step_s: float
    checkpoint_s: float
    steps: int
    checkpoints: int
    config: dict

    @property
    def key(self) -> tuple:
        """(preset, precision): what :func:`step_costs` prices."""
        return self.size, self.precision


def timed_runs(stored) -> list[TimedRun]:
    """The runs of ``stored`` (:func:`stored_runs`: (config.json, status.json) pairs) whose times can be
    read as a preset's cost: trained on a named CPU, one torch thread, without costly measures, with
    checkpoints."""
    from geomcap.tasks import sequence_length

    out = []
    for config, status in stored:
        prov = config.get("provenance") or {}
        if (not prov.get("cpu_model") or prov.get("device") != "cpu" or prov.get("threads") != 1
                or config.get("measures") or not status.get("checkpoints")):
            continue
        steps = status.get("stopped_at") or config.get("steps")
        out.append(TimedRun(prov["cpu_model"], config["size"], config.get("precision", "fp32"), config["task"],
                            config["level"],
                            sequence_length(config["task"], config["level"], config.get("task_params")),
                            status["train_s"] / max(steps, 1),
                            (status.get("eval_s", 0) + status.get("write_s", 0)) / status["checkpoints"], steps,
                            status["checkpoints"], config))
    return out


#: the runs of a preset on a CPU that rescale its benchmark line to what runs there take (:func:`step_costs`)
MIN_CALIBRATION_RUNS = 3


def step_costs(stored, cpu: str | None = None, calibrate: bool = True) -> dict:
    """(preset, precision) -> :class:`StepCost` on this machine. The complete runs in ``stored``
    (:func:`stored_runs`) trained on a CPU of this model (``cpu``, default :func:`geomcap.store.cpu_model`;
    :func:`timed_runs`) give the seconds per checkpoint (their median) and the seconds per step: the
    benchmarks' line in the sequence length (``_bench_costs``) rescaled by the median ratio of the runs' step
    times to it, where at least ``MIN_CALIBRATION_RUNS`` runs have one (a benchmark times a quiet machine; a
    sweep's lanes share it); else their median seconds per step and token, times the run's length. A preset
    no run here has: the benchmarks made on this CPU alone. ``calibrate`` False: the benchmark line as
    measured."""
    import statistics

    cpu = cpu or store.cpu_model()
    per: dict = {}
    for run in timed_runs(stored):
        if run.cpu == cpu:
            per.setdefault(run.key, []).append(run)
    costs = _bench_costs(cpu)
    for key, runs in per.items():
        source = f"{len(runs)} run{'s' if len(runs) != 1 else ''} on {cpu}"
        per_checkpoint = statistics.median(r.checkpoint_s for r in runs)
        bench = costs.get(key)
        if bench is not None and bench.line is not None:
            scale, how = 1.0, ""
            if calibrate and len(runs) >= MIN_CALIBRATION_RUNS:
                scale = statistics.median(r.step_s / bench.step_seconds(r.length) for r in runs)
                how = f", x{scale:.2f} to the runs' steps"
            costs[key] = StepCost(bench.per_step_s * scale, per_checkpoint,
                                  f"steps: {bench.source}{how}; checkpoints: {source}",
                                  {k: v * scale for k, v in bench.line.items()})
        else:
            per_token = statistics.median(r.step_s / r.length for r in runs)
            costs[key] = StepCost(per_token, per_checkpoint, source, {"intercept_s": 0.0, "per_token_s": per_token})
    return costs


@dataclass(frozen=True)
class TaskFactor:
    """How much more (or less) a task and level's runs cost than their preset's projection
    (:func:`task_factors`): ``step`` times its seconds per step at their length, ``checkpoint`` times its
    seconds per checkpoint; medians over ``runs`` runs."""
    step: float
    checkpoint: float
    runs: int


#: the runs of a task and level a :class:`TaskFactor` needs (one run's time may be another process's doing)
MIN_FACTOR_RUNS = 2


def task_factors(stored) -> dict:
    """(task, level) -> :class:`TaskFactor` from the complete runs in ``stored`` (:func:`timed_runs`, on any
    CPU and preset): each run's step and checkpoint times over its own CPU's :func:`step_costs` of its
    preset, each divided by the median of those ratios over the runs of that CPU and preset (so a CPU or
    preset that runs slow as a whole adds nothing), then the median per task and level, where at least
    ``MIN_FACTOR_RUNS`` runs have one. A parity checkpoint (45-token sequences) and a hard MOD one (every
    held-out pair scored: 6,587 prompts, against 512 for most tasks) cost several times their preset's median
    checkpoint, and the per-token step line misses attention's growth
    on long sequences."""
    import statistics

    runs = timed_runs(stored)
    costs = {cpu: step_costs(stored, cpu) for cpu in {r.cpu for r in runs}}
    ratios: dict = {}
    for run in runs:
        cost = costs[run.cpu].get(run.key)
        if cost is not None:
            ratios.setdefault((run.cpu, run.key), []).append(
                (run, run.step_s / cost.step_seconds(run.length), run.checkpoint_s / cost.per_checkpoint_s))
    by_task: dict = {}
    for group in ratios.values():
        step_median = statistics.median(g[1] for g in group)
        checkpoint_median = statistics.median(g[2] for g in group)
        for run, step, checkpoint in group:
            by_task.setdefault((run.task, run.level), []).append((step / step_median, checkpoint / checkpoint_median))
    return {key: TaskFactor(statistics.median(v[0] for v in values), statistics.median(v[1] for v in values),
                            len(values))
            for key, values in by_task.items() if len(values) >= MIN_FACTOR_RUNS}


def run_seconds(config: TrainConfig, cost: StepCost, factor: TaskFactor | None, steps: int, reached: int = 0) -> float:
    """Projected seconds of training ``config`` from step ``reached`` to step ``steps`` at ``cost`` (its
    preset's :class:`StepCost`), each part times its task and level's ``factor`` (:func:`task_factors`;
    None: 1)."""
    from geomcap.config import checkpoint_steps
    from geomcap.tasks import sequence_length

    schedule = checkpoint_steps(config.steps, config.n_log_checkpoints, config.n_linear_checkpoints,
                                config.dense_steps)
    left = int(((schedule > reached) & (schedule <= steps)).sum())
    per_step = cost.step_seconds(sequence_length(config.task, config.level, config.task_params))
    step_factor, checkpoint_factor = (1.0, 1.0) if factor is None else (factor.step, factor.checkpoint)
    return float(max(steps - reached, 0) * per_step * step_factor + left * cost.per_checkpoint_s * checkpoint_factor)


#: the columns of :func:`projection_errors`
PROJECTION_COLUMNS = ("cpu", "size", "precision", "task", "level", "seed", "steps", "expected_steps", "real_s",
                      "projected_s", "projected_by_preset_s", "projected_at_expected_s")


def projection_errors(roots):
    """How well a plan projects the complete runs in the run stores ``roots``: for each run :func:`timed_runs`
    reads, its time projected from every other run (left out of its own projection) and the benchmarks. At
    the ``steps`` it really trained: ``projected_s`` as :func:`plan` projects it (calibrated
    :func:`step_costs`, :func:`task_factors`), ``projected_by_preset_s`` as it did before task factors (one
    cost per preset, the benchmark line as measured). At the ``expected_steps`` the others say it would reach
    (:func:`expected_steps`), what a plan made before it trained projects: ``projected_at_expected_s``.
    ``real_s`` its training, evaluation and writing seconds. A tidy DataFrame (``PROJECTION_COLUMNS``), a row
    per run with a projection."""
    import pandas as pd

    stored, rows = stored_runs([Path(r) for r in roots]), []
    for i, pair in enumerate(stored):
        timed = timed_runs([pair])
        if not timed:
            continue
        run, others = timed[0], stored[:i] + stored[i + 1:]
        config = TrainConfig.from_dict(run.config)
        cost = step_costs(others, run.cpu).get(run.key)
        plain = step_costs(others, run.cpu, calibrate=False).get(run.key)
        if cost is None or plain is None:
            continue
        factor = task_factors(others).get((run.task, run.level))
        expected = expected_steps(config, stop_tables(others))[0]
        rows.append((run.cpu, run.size, run.precision, run.task, run.level, config.seed, run.steps, expected,
                     run.step_s * run.steps + run.checkpoint_s * run.checkpoints,
                     run_seconds(config, cost, factor, run.steps), run_seconds(config, plain, None, run.steps),
                     run_seconds(config, cost, factor, expected)))
    return pd.DataFrame(rows, columns=list(PROJECTION_COLUMNS))


#: real over projected time beyond which :func:`projection_summary` counts a run as projected short
SHORT_BY = 1.25


def projection_summary(errors):
    """:func:`projection_errors` in three rows, the projection with one cost per preset and with task
    factors at the steps each run trained, and the plan's whole projection (task factors, at the expected
    stop): runs, then the ratio real / projected time per run: its median, 10th and 90th percentiles and
    maximum, and the share of runs projected short by more than ``SHORT_BY`` (a deadline's risk: a run
    started on such a projection may end past it)."""
    import pandas as pd

    rows = []
    for name, column in (("one cost per preset", "projected_by_preset_s"), ("with task factors", "projected_s"),
                         ("with task factors, at the expected stop", "projected_at_expected_s")):
        ratio = errors["real_s"] / errors[column]
        rows.append({"projection": name, "runs": len(ratio), "median": ratio.median(),
                     "10th pct": ratio.quantile(0.1), "90th pct": ratio.quantile(0.9), "max": ratio.max(),
                     f"share over {SHORT_BY}x": (ratio > SHORT_BY).mean()})
    return pd.DataFrame(rows)


#: the sequence length at which :func:`extrapolated_costs` compares two presets' FLOPs per token (the attention
#: term is ~1% of the whole at the scale grid's lengths, so the ratio barely depends on it)
EXTRAPOLATION_SEQ_LEN = 16


def extrapolated_costs(costs: dict, keys) -> dict:
    """For each (preset, precision) of ``keys`` that ``costs`` (:func:`step_costs`) lacks, a :class:`StepCost`
    from the measured preset of the same precision nearest to it (:func:`nearest_preset`), its steps and
    checkpoints scaled by the ratio of their training FLOPs per token (``geomcap.bench.step.flops_per_token``). A larger
    model uses the cores better than a smaller one, so a cost extrapolated upward errs long. Presets outside
    ``geomcap.presets.PRESETS``, or with no measured preset of their precision, are left out."""
    from geomcap import tasks
    from geomcap.bench.step import flops_per_token
    from geomcap.models import PRESETS

    def flops(preset):
        return flops_per_token(preset, tasks.VOCAB_SIZE, EXTRAPOLATION_SEQ_LEN)

    out = {}
    for size, precision in keys:
        measured = [k for k, c in costs.items() if k[1] == precision and k[0] in PRESETS and not c.extrapolated]
        if (size, precision) in costs or size not in PRESETS or not measured:
            continue
        ref = (nearest_preset(size, [k[0] for k in measured]), precision)
        ratio, cost = flops(size) / flops(ref[0]), costs[ref]
        line = None if cost.line is None else {k: v * ratio for k, v in cost.line.items()}
        out[(size, precision)] = StepCost(cost.per_step_s * ratio, cost.per_checkpoint_s * ratio,
                                          f"extrapolated from {ref[0]} ({cost.source}) by training FLOPs per token, "
                                          f"x{ratio:.2f}", line, extrapolated=True)
    return out

def _same_settings(config: dict, ignore=()) -> tuple:
    """A run's settings but its seed (and provenance) and ``ignore``: runs alike but for the seed stop alike."""
    left_out = ("seed", "provenance", "perturb_seed", *ignore)
    return tuple(sorted((k, json.dumps(v, sort_keys=True, default=str)) for k, v in config.items()
                        if k not in left_out))  # json: a task_params dict compares whatever its key order


#: what a run's settings may differ in from runs of other presets whose stops estimate its own
_OTHER_PRESETS = ("size", "stop_at", "n_train", "n_test")


def budget_steps(config: TrainConfig) -> int:
    """The steps a run trains at most: its schedule's ``steps``, or ``stop_at`` where it stops before."""
    return config.steps if config.stop_at is None else min(config.steps, config.stop_at)


def distinct(configs) -> list:
    """``configs`` with each run once (a config asked twice is one run: the same hash), in order of first
    appearance."""
    return list({store.config_hash(c.to_dict()): c for c in configs}.values())



def nearest_preset(size: str, sizes) -> str | None:
    """The preset of ``sizes`` nearest ``size`` in the blocks' parameters (layers x width squared, on a log
    scale): where a run stops moves with size, so its stop is read off the preset most like it. None when
    ``size`` or none of ``sizes`` is a known preset."""
    import math

    from geomcap.models import ALL_PRESETS

    def scale(preset):
        cfg = ALL_PRESETS.get(preset)
        return None if cfg is None else cfg.n_layer * cfg.d_model ** 2

    target = scale(size)
    known = [s for s in sizes if scale(s)]
    if target is None or not known:
        return None
    return min(known, key=lambda s: abs(math.log(target / scale(s))))

def stop_tables(stored) -> tuple[dict, dict]:
    """Where the complete runs of ``stored`` (:func:`stored_runs`) stopped: by their settings but the seed, and
    by their settings but the preset (preset -> stops; runs cut by ``stop_at`` left out: they say nothing of
    where a run would stop)."""
    stops: dict = {}
    elsewhere: dict = {}
    for config, status in stored:
        stop = status.get("stopped_at") or config.get("stop_at") or config.get("steps")
        stops.setdefault(_same_settings(config), []).append(stop)
        if config.get("stop_at") is None:
            elsewhere.setdefault(_same_settings(config, _OTHER_PRESETS), {}).setdefault(
                config.get("size"), []).append(stop)
    return stops, elsewhere


def expected_steps(config: TrainConfig, tables) -> tuple[int, str | None]:
    """(the steps ``config`` is expected to reach, which runs say so) from ``tables`` (:func:`stop_tables`): the
    median stop of its other seeds; else of its task and level at the nearest other preset
    (:func:`nearest_preset`), same schedule; else its budget, :func:`budget_steps` (the protocol's early stop
    ends an acquired run soon after acquisition, so a budget alone over-projects); never past the budget."""
    import statistics

    stops, elsewhere = tables
    budget = budget_steps(config)
    seeds = stops.get(_same_settings(config.to_dict()))
    by_size = elsewhere.get(_same_settings(config.to_dict(), _OTHER_PRESETS))
    if seeds:
        return min(budget, int(statistics.median(seeds))), "its other seeds"
    if by_size:
        nearest = nearest_preset(config.size, by_size)
        found = by_size[nearest] if nearest else [x for xs in by_size.values() for x in xs]
        return (min(budget, int(statistics.median(found))),
                f"its task and level at {nearest}" if nearest else "its task and level at other presets")
    return budget, None


def plan(configs, stores, workers: int | None = None, pack: int | None = None, cpu: str | None = None) -> Plan:
    """The plan of training ``configs`` (each run once: :func:`distinct`) into the last of ``stores`` (a run
    complete in any store exists): per run, whether it exists, resumes or trains, or is skipped because
    another process is writing it (:func:`geomcap.store.lock_owner`), the steps it is expected to reach
    (:func:`expected_steps` from the complete runs in the stores and the committed data/runs) and a projected
    time from measured costs of its preset on this machine (:func:`step_costs`: the runs' per-step and
    per-checkpoint seconds; for a preset this machine has not run, another preset's scaled by
    their FLOPs, :func:`extrapolated_costs`; None where there is no measurement at all), each part times its
    task and level's :func:`task_factors` (:func:`run_seconds`). Reads the stores; trains nothing."""
    stores = [Path(s) for s in stores]
    if not stores:
        raise ValueError("stores is empty: give at least the run store to train into")
    roots = list(dict.fromkeys(stores + _committed_runs()))
    stored = stored_runs(roots)
    costs = step_costs(stored, cpu)
    costs.update(extrapolated_costs(costs, {(c.size, c.precision) for c in configs}))
    factors = task_factors(stored)
    stops = stop_tables(stored)
    runs = []
    for cfg in distinct(configs):
        dirs = [store.run_dir_for(cfg.to_dict(), s) for s in stores]
        done = next((d for d in dirs if store.is_complete(d)), None)
        if done is not None:
            runs.append(PlannedRun(cfg, done, "exists", cfg.steps))
            continue
        steps, like = expected_steps(cfg, stops)
        reached = store.last_metrics_step(dirs[-1]) or 0
        owner = store.lock_owner(dirs[-1])
        if owner is not None:  # another sweep writes it: skipped, and not in the projection
            runs.append(PlannedRun(cfg, dirs[-1], "locked", steps, reached, owner=owner, like=like))
            continue
        cost = costs.get((cfg.size, cfg.precision))
        seconds = None if cost is None else run_seconds(cfg, cost, factors.get((cfg.task, cfg.level)), steps, reached)
        runs.append(PlannedRun(cfg, dirs[-1], "resume" if reached else "train", steps, reached, seconds, like=like))
    return Plan(runs, costs, workers or os.cpu_count() or 1, pack, stores[-1], factors)


def _committed_runs() -> list[Path]:
    try:
        return [store.committed_data("runs")]
    except FileNotFoundError:
        return []


def run_name(c: TrainConfig) -> str:
    """A run as the plan and the sweep's lines name it: "add/hard 14m seed 1"."""
    return f"{c.task}/{c.level} {c.size} seed {c.seed}"
