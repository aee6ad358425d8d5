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
from geomcap.bench.step import select_presets, thread_contention, throughput
from geomcap.parameters import BENCH, DEFAULT_BENCH_PARTS, OPTIONAL_BENCH_PARTS

DEFAULT_PARTS = DEFAULT_BENCH_PARTS
OPTIONAL_PARTS = OPTIONAL_BENCH_PARTS
ALL_PARTS = BENCH["parts"].choices


# --- the whole bench ------------------------------------------------------------

def parse_parts(value) -> list[str]:
    """'default', 'all' or parts (comma-separated text or a list) -> list, checked through the ``parts`` row
    (``geomcap.parameters.BENCH``)."""
    parts = BENCH["parts"].chosen(value)
    return list(DEFAULT_PARTS) if parts == "default" else parts


def parse_sizes(n_values, d_values) -> list[tuple[int, int]]:
    """RankMe sizes N and d (comma-separated text such as '512,4096', or lists) -> every (N, d) pair, each
    checked through its row."""
    return [(n, d) for n in BENCH["rankme_n"].read(n_values) for d in BENCH["rankme_d"].read(d_values)]


_DEFAULT = {name: row.default for name, row in BENCH.items()}


def run_bench(out, parts=_DEFAULT["parts"], device: str = _DEFAULT["device"], presets=_DEFAULT["presets"],
              task: str = _DEFAULT["task"], level: str = _DEFAULT["level"], batch_size: int = _DEFAULT["batch_size"],
              rounds: int = _DEFAULT["rounds"], block_s: float = _DEFAULT["block_s"],
              max_step_s: float = _DEFAULT["max_step_s"], peer: str | None = _DEFAULT["peer"],
              compile_presets=_DEFAULT["compile"], rankme_sizes=None,
              rankme_repeats: int | None = _DEFAULT["rankme_repeats"], costly_repeats: int = _DEFAULT["costly_repeats"],
              peak_n: int | None = _DEFAULT["peak_n"], threads: int | None = _DEFAULT["threads"],
              command: str | None = None, update: bool = False, progress: bool = True) -> dict:
    """Run the chosen parts in one process and write the result to the JSON file ``out``.

    Each argument but ``out``, ``rankme_sizes`` and the last three is checked through its row
    (``geomcap.parameters.BENCH``, which also gives the defaults; ``compile_presets``: the ``compile`` row),
    before anything is measured: a ValueError of one line.

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
    for name, value in (("device", device), ("presets", presets), ("max_step_s", max_step_s), ("task", task),
                        ("level", level), ("batch_size", batch_size), ("rounds", rounds), ("block_s", block_s),
                        ("peer", peer), ("rankme_repeats", rankme_repeats), ("costly_repeats", costly_repeats),
                        ("peak_n", peak_n), ("threads", threads)):
        BENCH[name].check(value)  # each through its row: "rounds must be a positive integer, got 0"
    compile_presets = BENCH["compile"].check(compile_presets)
    dev = resolve_device(device)
    if peak_n is None:
        peak_n = 8192 if dev.type == "cuda" else 2048  # a GPU needs a larger product to approach its peak
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
