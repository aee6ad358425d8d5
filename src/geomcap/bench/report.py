"""The whole bench in one process into one JSON file, and reading results back."""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path

import torch

from geomcap import store, tasks
from geomcap.bench.machine import (committed_results_dir, load_average, log_progress, machine_info, matmul_peak,
                                   peak_dtype)
from geomcap.bench.measures import RANKME_D, RANKME_N, costly_cost, geometry_cost, llc_calibration, rankme_vs_naive
from geomcap.bench.projections import check_targets, project_grid
from geomcap.bench.scale import SCALE_PRESETS, scale_steps
from geomcap.bench.step import PEERS, select_presets, thread_contention, throughput
from geomcap.models import check_preset

DEFAULT_PARTS = ("throughput", "geometry", "costly", "rankme")
OPTIONAL_PARTS = ("threads", "llc_calibration", "scale")
ALL_PARTS = DEFAULT_PARTS + OPTIONAL_PARTS


# --- the whole bench ------------------------------------------------------------

def parse_parts(text) -> list[str]:
    """'default', 'all' or a comma-separated list of parts -> list (checked)."""
    if isinstance(text, str):
        if text == "default":
            return list(DEFAULT_PARTS)
        if text == "all":
            return list(ALL_PARTS)
        text = [t.strip() for t in text.split(",") if t.strip()]
        if not text:
            raise ValueError(f"no bench part given; choose from: {', '.join(ALL_PARTS)}, or default, all")
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
              peak_n: int | None = None, threads: int | None = None,
              command: str | None = None, update: bool = False, progress: bool = True) -> dict:
    """Run the chosen parts in one process and write the result to the JSON file ``out``.

    The file is rewritten after every part (a long bench killed midway keeps
    what it measured). Returns the result dict: machine, load averages,
    settings, one entry per part, the targets (``check_targets``) and the
    projection of the paper's grid (``project_grid``). The book build and
    the test suite are timed by ``benchmarks/suite_times.py`` in a checkout, not here.
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
               compile_presets, rankme_sizes, rankme_repeats, costly_repeats, peak_n, threads,
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
        log_progress(progress, f"matmul peak ({peak_n}^2, {peak_dtype(dev)})")
        peak = matmul_peak(dev, n=peak_n)
        where = result if previous is None or "throughput" in parts else record
        where["matmul_peak"] = peak
        if dev.type == "cuda":
            where["matmul_peak_float32"] = matmul_peak(dev, n=peak_n, dtype=torch.float32)
        log_progress(progress, f"matmul peak {peak['flops_per_s'] / 1e9:.0f} GFLOP/s")
        probe = tasks.make_task(task, level, seed=0, n_train=16, n_test=16)
        seq_len = probe.prompt_len + probe.answer_len - 1
        chosen = select_presets(presets, dev, peak["flops_per_s"], seq_len, batch_size, max_step_s)
        target["settings"]["presets_timed"] = chosen
    save()

    for part in parts:
        t0 = time.perf_counter()
        load0 = load_average()
        log_progress(progress, f"part {part} (load average {load0})")

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
        elif part == "threads":
            result[part] = thread_contention(progress=progress, on_progress=partial)
        elif part == "llc_calibration":  # the grid's run of task x level on 405k, seed 0
            from geomcap.train import DEFAULT_LEVEL_STEPS, TrainConfig

            cfg = TrainConfig(task=task, level=level, steps=DEFAULT_LEVEL_STEPS[level])
            result[part] = llc_calibration(cfg, progress=progress, on_progress=partial)
        elif part == "scale":  # the scale grid's presets unless --presets names others
            scale_presets = SCALE_PRESETS if presets == "auto" else select_presets(presets, dev, 1.0, 1, 1)
            result[part] = scale_steps(scale_presets, rounds=max(1, min(rounds, 3)), progress=progress,
                                       on_progress=partial)
        result[part]["measured_at"] = now()
        result["part_seconds"][part] = time.perf_counter() - t0
        result["part_load_average"][part] = {"start": load0, "end": load_average()}
        save()
    target["finished_at"] = now()
    save()
    log_progress(progress, f"done in {target['wall_s']:.0f} s: {out}")
    return result



# --- reading results --------------------------------------------------------------

def load_results(folder=None) -> list[dict]:
    """Every bench result (``*.json``) in ``folder`` (default ``committed_results_dir()``), with its file name as ``file``."""
    import json

    folder = Path(folder or committed_results_dir())
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
    for row in (result.get("scale") or {}).get("presets", []):
        p = row["preset"]
        for r in row["shapes"]:
            add(f"{p} {r['task']}/{r['level']} (T={r['seq_len']}), {r['threads']} thread(s), {r['precision']}",
                r["s_per_step"], "s/step")
        for precision, d in row["threads_decision"].items():
            add(f"{p} two runs on one thread / one run on two threads, {precision}", d["ratio_two_runs_to_one"],
                "ratio of steps/s")
        add(f"{p} one checkpoint, one thread", row["eval_s"], "s")
    book = result.get("book") or {}
    for label in ("cold", "warm"):
        if book.get(f"{label}_returncode") == 0:
            add(f"book build, {label}", book.get(f"{label}_s"), "s")
        elif f"{label}_s" in book:
            add(f"book build, {label}: FAILED (exit {book.get(f'{label}_returncode')}) after", book[f"{label}_s"], "s")
    add("make test", (result.get("make_test") or {}).get("seconds"), "s")
    return pd.DataFrame(rows)
