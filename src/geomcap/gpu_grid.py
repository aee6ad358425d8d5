"""The paper's grid on one GPU: the plan, its projected time, the run, and what comes back.

``scripts/gpu_grid.sh OUT`` drives this module::

    python -m geomcap.gpu_grid plan   [--mode grid|c8] ...       # the dry run: packs, processes, projection
    python -m geomcap.gpu_grid measure --out costs.json          # per-step costs on this CPU
    python -m geomcap.gpu_grid run    --root R --part I --of P   # one process's share of the packs
    python -m geomcap.gpu_grid collect --root R --out OUT        # <= 8 compressed files + bench.json

Two modes: ``grid`` -- the six presets x 8 tasks x 3 levels, seed 0 (144 runs); ``c8`` -- the six
presets on one task and level with seeds 0, 1, 2 (18 runs), for the small-proxy claim.

The projection is a *projection*, not a measurement. Per pack and step the GPU time is
``max(flops / (mfu * 790 TFLOP/s), kernels * launch_s)``: the arithmetic at an assumed achieved
fraction ``mfu`` of the H200's bf16 peak, or the kernel launches when those take longer (small
models); ``kernels`` is counted on the CPU (the operators one packed step dispatches: an upper
bound, views launch nothing). Each checkpoint adds, per run, the evaluation forward passes (FLOPs
at ``mfu``) and the geometry on the device: :func:`decompositions_per_checkpoint` float64 SVDs,
eigendecompositions and probe solves at an assumed ``decomposition_ms`` each (the figure a GPU
run replaces with its measurement). Processes share the GPU; the projected wall time is the
larger of the GPU's total busy time and the longest process's sequential time. Without early
stops every run trains its whole budget (an upper bound); with ``plan --stops ROOT`` each run
stops where the runs of the smallest preset in that store stopped (:func:`measured_stops`), and a
pack's step costs only its runs still active.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import torch

from geomcap import models, store, tasks
from geomcap.sweep import grid, pack_groups
from geomcap.config import DEFAULT_LEVEL_STEPS, TrainConfig, checkpoint_steps, parse_steps

H200_BF16_FLOPS = 790e12
MODES = ("grid", "c8", "scale")
#: the scale mode's settings (scripts/scale_grid.sh --device cuda): stage 1's four tasks at medium, seed 0,
#: and their shuffled-answer controls (stopped at a quarter of the budget: step 1000 of 4000, as on the CPU)
SCALE_TASKS = ("copy", "add", "mod", "parity")
#: the most files a device check writes back (one metrics pack per preset, plus bench.json)
MAX_FILES = 8


def grid_configs(mode: str = "grid", steps=None, task: str = "add", level: str = "hard", presets=None,
                 **overrides) -> list[TrainConfig]:
    """The runs of a mode: ``grid`` = presets x tasks x levels, seed 0; ``c8`` = presets x seeds 0-2 on
    one (task, level); ``scale`` = presets x :data:`SCALE_TASKS` at medium, seed 0, then the same with
    shuffled answers (``control``, stopped at a quarter of the medium budget: step 1000 of 4000, as on the CPU). ``steps``: int or {level: steps} (default
    :data:`geomcap.config.DEFAULT_LEVEL_STEPS`, the CPU re-run's); ``presets``: default the six of
    :data:`geomcap.presets.PRESETS`; ``overrides``: further TrainConfig fields (e.g. ``precision``)."""
    steps = DEFAULT_LEVEL_STEPS if steps is None else steps
    sizes = list(models.PRESETS) if presets is None else list(presets)
    for size in sizes:
        models.check_preset(size)
    if mode == "scale":
        real = grid(tasks=SCALE_TASKS, levels=["medium"], sizes=sizes, seeds=[0], steps=steps, **overrides)
        medium = steps["medium"] if isinstance(steps, dict) else steps
        controls = grid(tasks=SCALE_TASKS, levels=["medium"], sizes=sizes, seeds=[0], steps=steps,
                        control="shuffled_answers", stop_at=max(1, medium // 4), **overrides)
        return real + controls
    if mode == "grid":
        return grid(sizes=sizes, seeds=[0], steps=steps, **overrides)
    if mode == "c8":
        return grid(tasks=[task], levels=[level], sizes=sizes, seeds=[0, 1, 2], steps=steps, **overrides)
    raise ValueError(f"mode must be one of: {', '.join(MODES)}; got {mode!r}")


def measured_stops(root, size: str = "405k") -> dict:
    """Where runs of ``size`` in the run store ``root`` stopped: {(task, level): step}.

    The median over seeds of each complete run's last step (its early stop, or its whole budget
    when it never acquired). It feeds the projection's early-stop estimate: the GPU grid uses the
    same stop rule, but a larger preset may acquire at other steps, so it stays an estimate.
    """
    by_pair: dict = {}
    for cfg_path in sorted(Path(root).glob(f"*/{store.CONFIG_FILE}")):
        config = json.loads(cfg_path.read_text())
        status = store.read_status(cfg_path.parent)
        if config.get("size") != size or not status or not status.get("complete"):
            continue
        last = status.get("stopped_at") or config["steps"]
        by_pair.setdefault((config["task"], config["level"]), []).append(int(last))
    return {pair: int(np.median(steps)) for pair, steps in by_pair.items()}


def expected_last_steps(configs, stops: dict | None) -> list[int]:
    """Each config's last trained step under ``stops`` (:func:`measured_stops`), capped at its own
    budget; its whole budget where ``stops`` has no entry (or is None: no early stop)."""
    stops = stops or {}
    return [min(cfg.steps, stops.get((cfg.task, cfg.level), cfg.steps)) for cfg in configs]


def step_flops(cfg: TrainConfig) -> float:
    """Training FLOPs of one step of one run (forward + backward = 3 x forward): the matrix products
    of the blocks and the unembedding (2 per multiply-add) and the attention scores and mixing."""
    m = models.ALL_PRESETS[cfg.size]
    T = tasks.sequence_length(cfg.task, cfg.level, cfg.task_params)
    d, L = m.d_model, m.n_layer
    per_token = L * (4 * d * d + 2 * m.mlp_ratio * d * d) + d * tasks.VOCAB_SIZE  # multiply-adds
    attention = L * 2 * T * T * d / 2  # causal: half of QK^T and of AV
    return 3 * 2 * (cfg.batch_size * T * per_token + cfg.batch_size * attention)


def plan(configs, pack: int = 8, processes: int = 6, stops: dict | None = None) -> list[dict]:
    """The packs (``sweep.pack_groups``), largest first, each given to the process with the least
    work so far (by FLOPs): [{"process", "size", "steps", "runs": [(task, level, seed)], "flops",
    "last_steps"}]. ``stops`` (:func:`measured_stops`) gives each run's expected last step: a packed
    run leaves its pack's computation when it stops, so FLOPs count each run up to its own stop."""
    last = expected_last_steps(configs, stops)
    packs = []
    for group in pack_groups(configs, pack):
        cfgs = [configs[i] for i in group]
        packs.append({"size": cfgs[0].size, "steps": cfgs[0].steps,
                      "runs": [(c.task, c.level, c.seed) for c in cfgs], "last_steps": [last[i] for i in group],
                      "flops": float(sum(step_flops(configs[i]) * last[i] for i in group)), "configs": cfgs})
    packs.sort(key=lambda p: -p["flops"])
    load = [0.0] * processes
    for p in packs:
        p["process"] = int(np.argmin(load))
        load[p["process"]] += p["flops"]
    return packs


def decompositions_per_checkpoint(n_layer: int, variants: bool) -> int:
    """Matrix decompositions of one checkpoint's geometry: per hidden state RankMe, centred
    RankMe and the probe's solve (and the two variants' RankMe where taken), plus the
    residual's two RankMe."""
    return (n_layer + 1) * (3 + (2 if variants else 0)) + 2


def project(packs, costs: dict, mfu: float = 0.3, launch_us: float = 6.0, processes: int = 6,
            decomposition_ms: float = 3.0) -> dict:
    """Projected seconds per pack, per preset and in all (see the module docstring).

    costs: :func:`measure_costs`'s output (``kernels_fixed``, ``kernels_per_layer``, ``kernels_per_run``)."""
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}")
    busy, per_process, per_preset = 0.0, [0.0] * processes, {}
    for p in packs:
        cfg = p["configs"][0]
        m = models.ALL_PRESETS[cfg.size]
        last_steps = p.get("last_steps") or [cfg.steps] * len(p["configs"])
        schedule = checkpoint_steps(cfg.steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints, cfg.dense_steps)
        # training: between consecutive stops the runs still active share each step
        order = np.argsort(last_steps, kind="stable")
        train_s, start, bound_flops = 0.0, 0, 0
        for j, i in enumerate(order):
            active = [p["configs"][a] for a in order[j:]]
            flop_s = sum(step_flops(c) for c in active) / (mfu * H200_BF16_FLOPS)
            kernels = (costs["kernels_fixed"] + costs["kernels_per_layer"] * m.n_layer
                       + costs["kernels_per_run"] * len(active))
            step_s = max(flop_s, kernels * launch_us * 1e-6)
            if j == 0:
                p["step_s"] = step_s  # the full pack's step
                bound_flops = flop_s >= kernels * launch_us * 1e-6
            train_s += step_s * (last_steps[i] - start)
            start = last_steps[i]
        # evaluation, per run up to its own stop: forward passes over train_eval_size + n_test
        # sequences (a third of a training step's FLOPs per sequence), then the decompositions
        # (variants at about half the checkpoints)
        decompositions = (decompositions_per_checkpoint(m.n_layer, True)
                          + decompositions_per_checkpoint(m.n_layer, False)) / 2
        eval_s = 0.0
        for c, last in zip(p["configs"], last_steps):
            forward_s = step_flops(c) / 3 / c.batch_size * (c.train_eval_size + c.n_test)
            n_ckpt = int(np.sum(schedule <= last))
            eval_s += n_ckpt * (forward_s / (mfu * H200_BF16_FLOPS) + decompositions * decomposition_ms * 1e-3)
        p.update(train_s=train_s, eval_s=eval_s, checkpoints=len(schedule), last_step=int(max(last_steps)),
                 bound="flops" if bound_flops else "launches")
        busy += p["train_s"] + eval_s
        per_process[p["process"]] += p["train_s"] + eval_s
        row = per_preset.setdefault(cfg.size, {"runs": 0, "train_s": 0.0, "eval_s": 0.0, "flops": 0.0})
        row["runs"] += len(p["configs"])
        row["train_s"] += p["train_s"]
        row["eval_s"] += eval_s
        row["flops"] += p["flops"]
    early_stop = any(last < c.steps for p in packs for c, last in zip(p["configs"], p.get("last_steps") or []))
    return {"gpu_busy_s": busy, "process_s": per_process, "wall_s": max(busy, max(per_process)),
            "per_preset": per_preset, "mfu": mfu, "launch_us": launch_us, "decomposition_ms": decomposition_ms,
            "early_stop": early_stop}


def measure_costs(presets=("405k", "1.3m"), steps: int = 3, pack: int = 8, batch_size: int = 128) -> dict:
    """Per-step costs on this CPU (one thread): a run alone and a pack of ``pack`` runs of each preset (the
    first ``pack`` tasks at hard), each timed through the packed training step itself
    (:func:`geomcap.packed.packed_step`, with the runs' own learning rate, weight decay and betas, on random
    tokens), the operators a packed step dispatches (counted with the profiler, fitted as fixed + per layer +
    per run), and the geometry's cost per unit of hidden-state size."""
    from geomcap import packed
    from geomcap.config import learning_rate
    from geomcap.recorders import geometry_rows
    from geomcap.train import make_optimizer

    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    out = {"threads": 1, "batch_size": batch_size, "presets": {}}
    counts = {}
    for size in presets:
        cfgs = [TrainConfig(task=t, level="hard", size=size, batch_size=batch_size) for t in tasks.TASKS[:pack]]
        T = max(tasks.sequence_length(c.task, c.level, c.task_params) for c in cfgs)
        ms = []
        for i, c in enumerate(cfgs):
            torch.manual_seed(i)
            ms.append(models.build(size, tasks.VOCAB_SIZE))
        row = {}
        for k in (1, len(cfgs)):
            optimizers = [make_optimizer(m, c.lr, c.weight_decay, (c.beta1, c.beta2)) for m, c in zip(ms[:k], cfgs)]
            stacked = packed.stack_runs(ms[:k], optimizers, cfgs[:k], [T - 4] * k, cpu)
            x = torch.randint(0, tasks.VOCAB_SIZE, (k, batch_size, T))
            answers = [x[j, :, -4:] for j in range(k)]
            lr = torch.tensor([learning_rate(0, c) for c in cfgs[:k]], dtype=torch.float64)

            def one_step():
                packed.packed_step(stacked, x, answers, lr, 0)
            one_step()
            t0 = time.perf_counter()
            for _ in range(steps):
                one_step()
            seconds = (time.perf_counter() - t0) / steps
            flops = sum(step_flops(c) for c in cfgs[:k])
            row[f"pack{k}_ms_per_step"] = round(1000 * seconds, 2)
            row[f"pack{k}_gflops"] = round(flops / seconds / 1e9, 2)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                one_step()
            counts[(ms[0].cfg.n_layer, k)] = sum(e.count for e in prof.key_averages() if e.key.startswith("aten::")
                                                 and e.cpu_time_total == e.self_cpu_time_total)
        out["presets"][size] = row
    # operators = fixed + per_layer * n_layer + per_run * k, fitted on the counts
    keys = sorted(counts)
    A = np.array([[1.0, L, k] for L, k in keys])
    coef, *_ = np.linalg.lstsq(A, np.array([counts[key] for key in keys], dtype=float), rcond=None)
    out.update(kernels_fixed=round(float(coef[0]), 1), kernels_per_layer=round(float(coef[1]), 1),
               kernels_per_run=round(float(coef[2]), 1), operator_counts={f"L{L}_K{k}": c for (L, k), c in counts.items()})
    # geometry: the per-checkpoint rows of evaluate on random hidden states of the largest measured preset
    m = models.ALL_PRESETS[presets[-1]]
    N, T = 512, 20
    hidden = [torch.randn(N, T, m.d_model) for _ in range(m.n_layer + 1)]
    labels = np.random.default_rng(0).integers(0, 10, N)
    t0 = time.perf_counter()
    geometry_rows(hidden, torch.randn(N, T, m.d_model), T - 5, labels, 0, variants=True)
    geo_s = time.perf_counter() - t0
    unit = (m.n_layer + 1) * N * m.d_model * min(N, m.d_model)
    out.update(geometry_s_per_checkpoint={presets[-1]: round(geo_s, 3)}, geometry_s_per_unit=geo_s / unit)
    return out


def format_plan(configs, packs, projection, processes: int) -> str:
    lines = [f"{len(configs)} runs in {len(packs)} packs on {processes} processes "
             f"(presets: {', '.join(dict.fromkeys(c.size for c in configs))})"]
    for p in sorted(packs, key=lambda p: (p["process"], -p["flops"])):
        runs = ", ".join(f"{t}/{lv}/s{s}" for t, lv, s in p["runs"])
        lines.append(f"  process {p['process']}: {p['size']:>5} x {len(p['runs'])} runs, {p['last_step']}/{p['steps']} steps, "
                     f"{p['checkpoints']} checkpoints, {p['step_s'] * 1e3:.2f} ms/step ({p['bound']}-bound): "
                     f"train {p['train_s']:.0f} s + evaluation {p['eval_s']:.0f} s  [{runs}]")
    lines.append(f"PROJECTION (not a measurement): {projection['mfu']:.0%} of 790 TFLOP/s bf16 achieved, "
                 f"{projection['launch_us']} us per kernel launch, {projection['decomposition_ms']} ms per float64 "
                 f"decomposition of the geometry on the device; "
                 + ("each run stops where the CPU re-run's runs of the smallest preset stopped (an estimate: a "
                    "larger preset may acquire at other steps)" if projection["early_stop"]
                    else "no early stop (an upper bound)"))
    for size, row in projection["per_preset"].items():
        lines.append(f"  {size:>5}: {row['runs']:3d} runs, {row['flops'] / 1e15:9.1f} PFLOP, "
                     f"train {row['train_s']:7.0f} s, evaluation {row['eval_s']:8.0f} s")
    lines.append(f"  GPU busy {projection['gpu_busy_s']:.0f} s; longest process {max(projection['process_s']):.0f} s; "
                 f"projected wall time {projection['wall_s']:.0f} s (one device command allows 600 s)")
    return "\n".join(lines)


def run_part(root, part: int, of: int, mode: str, pack: int, device: str = "cuda", **kw) -> None:
    """Train this process's packs (``plan``'s ``process == part``), one after the other."""
    from geomcap.packed import train_packed

    configs = grid_configs(mode, **kw)
    for p in plan(configs, pack, of):
        if p["process"] == part:
            train_packed(p["configs"], root=root, device=device, progress=False, save_state=False)


def collect(root, out, bench: dict) -> list[Path]:
    """The run store under ``root`` (config, metrics, status; never state.pt) as one tar.gz per
    preset under ``out``, plus bench.json: at most :data:`MAX_FILES` files."""
    root, out = Path(root), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    by_size: dict = {}
    for cfg_path in sorted(root.glob(f"*/{store.CONFIG_FILE}")):
        by_size.setdefault(json.loads(cfg_path.read_text())["size"], []).append(cfg_path.parent)
    if len(by_size) + 1 > MAX_FILES:
        raise ValueError(f"{len(by_size)} presets + bench.json exceed {MAX_FILES} files")
    written = []
    for size, dirs in by_size.items():
        path = out / f"runs-{size}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            for d in dirs:
                for name in (store.CONFIG_FILE, store.METRICS_FILE, store.STATUS_FILE):
                    if (d / name).exists():
                        tar.add(d / name, arcname=f"{d.name}/{name}")
        written.append(path)
    store.atomic_write_json(out / "bench.json", bench)
    return written + [out / "bench.json"]


def bench_table(root) -> dict:
    """Per preset from the runs' status.json: runs, tokens/s, achieved FLOP/s against 790 TFLOP/s,
    geometry share and the summed training and evaluation seconds."""
    rows: dict = {}
    for cfg_path in sorted(Path(root).glob(f"*/{store.CONFIG_FILE}")):
        status = store.read_status(cfg_path.parent)
        if not status:
            continue
        cfg = TrainConfig.from_dict({k: v for k, v in json.loads(cfg_path.read_text()).items() if k != "provenance"})
        steps = status["stopped_at"] or cfg.steps
        row = rows.setdefault(cfg.size, {"runs": 0, "train_s": 0.0, "eval_s": 0.0, "geometry_s": 0.0,
                                         "tokens": 0.0, "flops": 0.0})
        row["runs"] += 1
        for key in ("train_s", "eval_s", "geometry_s"):
            row[key] += status[key]
        row["tokens"] += (status["tokens_per_s"] or 0) * status["train_s"]
        row["flops"] += step_flops(cfg) * steps
    for row in rows.values():
        row["tokens_per_s"] = row["tokens"] / row["train_s"] if row["train_s"] else None
        row["achieved_flops"] = row["flops"] / row["train_s"] if row["train_s"] else None
        row["fraction_of_790T"] = row["achieved_flops"] / H200_BF16_FLOPS if row["train_s"] else None
        row["geometry_share"] = row["geometry_s"] / row["train_s"] if row["train_s"] else None
    return rows


def _parse_steps(text):
    return None if text is None else parse_steps(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m geomcap.gpu_grid")
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("plan", "run"):
        p = sub.add_parser(name)
        p.add_argument("--mode", default="grid", choices=MODES)
        p.add_argument("--pack", type=int, default=8)
        p.add_argument("--processes", type=int, default=6)
        p.add_argument("--steps", default=None, help="steps, or per level: easy=...,medium=...,hard=...")
        p.add_argument("--task", default="add")
        p.add_argument("--level", default="hard")
        p.add_argument("--presets", default=None, help="comma-separated presets (default: the six)")
        p.add_argument("--precision", default="bf16", help="the training step's precision (default bf16)")
    plan_p = sub._name_parser_map["plan"]
    plan_p.add_argument("--costs", required=True, help="measure's JSON")
    plan_p.add_argument("--mfu", type=float, default=0.3)
    plan_p.add_argument("--launch-us", type=float, default=6.0)
    plan_p.add_argument("--decomposition-ms", type=float, default=3.0)
    plan_p.add_argument("--stops", default=None, help="a run store whose 405k runs give each task and level's "
                        "expected early stop (e.g. data/runs); without it, no early stop")
    run_p = sub._name_parser_map["run"]
    run_p.add_argument("--root", required=True)
    run_p.add_argument("--part", type=int, required=True)
    run_p.add_argument("--device", default="cuda")
    m = sub.add_parser("measure")
    m.add_argument("--out", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--root", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--wall-s", type=float, default=None)
    args = ap.parse_args(argv)
    scope = {}
    if args.command in ("plan", "run"):
        scope = {"presets": None if args.presets is None else args.presets.split(","),
                 "precision": args.precision}
        try:  # bad presets, precisions or steps: one line, before anything trains
            grid_configs(args.mode, _parse_steps(args.steps), args.task, args.level, **scope)
        except ValueError as exc:
            print(f"gpu_grid: error: {exc}", file=sys.stderr)
            return 2

    if args.command == "plan":
        configs = grid_configs(args.mode, _parse_steps(args.steps), args.task, args.level, **scope)
        costs = json.loads(Path(args.costs).read_text())
        projections = []
        for stops in ([None, measured_stops(args.stops)] if args.stops else [None]):
            packs = plan(configs, args.pack, args.processes, stops)
            projections.append(project(packs, costs, args.mfu, args.launch_us, args.processes, args.decomposition_ms))
        print(format_plan(configs, packs, projections[-1], args.processes))
        if len(projections) == 2:
            print(f"  without the early stop (an upper bound): projected wall time {projections[0]['wall_s']:.0f} s")
    elif args.command == "run":
        run_part(args.root, args.part, args.processes, args.mode, args.pack, args.device,
                 steps=_parse_steps(args.steps), task=args.task, level=args.level, **scope)
    elif args.command == "measure":
        costs = measure_costs()
        store.atomic_write_json(Path(args.out), costs)
        print(json.dumps(costs, indent=2))
    elif args.command == "collect":
        bench = {"per_preset": bench_table(args.root), "wall_s": args.wall_s, "peak_flops": H200_BF16_FLOPS,
                 "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}
        for path in collect(args.root, args.out, bench):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
