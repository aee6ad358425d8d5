"""Timing the scale grid's presets before planning it: seconds per training step by preset, sequence length,
threads and precision; two runs on one thread each against one run on two; one checkpoint's evaluation.

``geomcap bench --parts scale`` (:func:`scale_steps`). For each preset and each shape of :data:`SCALE_SHAPES`
(the tasks' real prompt + answer lengths, shortest to longest), one model is timed in ``rounds`` interleaved
rounds over every (threads, precision) pair: per pair, one untimed step, then ``steps`` timed steps; the
figure is the median over rounds. ``pair``: two processes with one thread each train the same preset at the
same time (a start barrier, so their timed steps overlap), the way two sweep lanes share the two cores;
their per-step seconds against one process on two threads say which uses the cores better
(:func:`threads_decision`). ``eval_s``: one checkpoint of ``geomcap.train.evaluate`` on one thread (float32
whatever the training precision), the run's own test and probe sizes.

Seconds per step are then a line in the sequence length (:func:`fit_seconds`), which the sweep's plan reads
for a run's own shape (:func:`geomcap.planning.step_costs`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from geomcap import tasks
from geomcap.bench.machine import log_progress, time_once
from geomcap.bench.step import make_train_step
from geomcap.config import PRECISIONS
from geomcap.models import build, check_preset, count_parameters

#: the presets the scale grid trains on the CPU
SCALE_PRESETS = ("4m", "14m", "48m")
#: (task, level) shapes timed: the shortest sequence of the grid (mod, 8 tokens), add medium's (15) and
#: parity medium's (45); the grid's longest, parity hard, is 53
SCALE_SHAPES = (("mod", "medium"), ("add", "medium"), ("parity", "medium"))
THREADS = (1, 2)


def _check_scale_args(presets, shapes, threads, precisions, rounds, steps) -> None:
    for preset in presets:
        check_preset(preset)
    for task, level in shapes:
        tasks.check_task_level(task, level)
    for n in threads:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"threads must be positive integers, got {n!r}")
    for precision in precisions:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)}")
    for name, value in (("rounds", rounds), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _task_tensors(task: str, level: str, n_train: int = 2048):
    data = tasks.make_task(task, level, seed=0, n_train=n_train, n_test=16)
    return data.train_prompts, data.train_answers


def shape_seconds(preset: str, task: str, level: str, threads=THREADS, precisions=PRECISIONS, rounds: int = 2,
                  steps: int = 1, batch_size: int = 128) -> list[dict]:
    """Seconds per training step of ``preset`` on (task, level)'s shape, for every (threads, precision):
    rows {threads, precision, s_per_step (median over rounds), s_per_step_rounds}. CPU only."""
    dev = torch.device("cpu")
    prompts, answers = _task_tensors(task, level)
    torch.manual_seed(0)
    model = build(preset, tasks.VOCAB_SIZE)
    runs = {p: make_train_step(model, prompts, answers, batch_size, dev, precision=p) for p in precisions}
    settings = [(n, p) for n in threads for p in precisions]
    seconds = {s: [] for s in settings}
    saved = torch.get_num_threads()
    try:
        for r in range(rounds):
            for n, p in settings[r % len(settings):] + settings[:r % len(settings)]:
                torch.set_num_threads(n)
                runs[p](1)  # untimed: the first step after a switch pays for idle threads and cold caches
                seconds[(n, p)].append(time_once(lambda: runs[p](steps), dev) / steps)
    finally:
        torch.set_num_threads(saved)
    return [{"threads": n, "precision": p, "s_per_step": statistics.median(v), "s_per_step_rounds": v}
            for (n, p), v in seconds.items()]


def pair_seconds(preset: str, task: str, level: str, precision: str, steps: int = 3, processes: int = 2) -> dict:
    """Two (``processes``) fresh processes with one torch thread each, training ``preset`` on (task, level)
    at ``precision`` at the same time: each one's seconds per step over ``steps`` steps timed after all
    have warmed up. {"s_per_step": the median over processes, "s_per_step_processes": each one's}."""
    with tempfile.TemporaryDirectory() as barrier:
        command = [sys.executable, "-c", "import sys; from geomcap.bench.scale import _pair_worker; "
                   "_pair_worker(*sys.argv[1:])", preset, task, level, precision, str(steps), barrier, str(processes)]
        workers = [subprocess.Popen(command + [str(i)], stdout=subprocess.PIPE, text=True) for i in range(processes)]
        outputs = [w.communicate()[0] for w in workers]
        if any(w.returncode for w in workers):
            raise RuntimeError(f"a timing process failed: {command}")
    per = [json.loads(out.strip().splitlines()[-1])["s_per_step"] for out in outputs]
    return {"s_per_step": statistics.median(per), "s_per_step_processes": per}


def _pair_worker(preset: str, task: str, level: str, precision: str, steps: str, barrier: str, processes: str,
                 index: str) -> None:
    """One process of :func:`pair_seconds` (its arguments as the command line gives them)."""
    steps, processes = int(steps), int(processes)
    torch.set_num_threads(1)
    prompts, answers = _task_tensors(task, level)
    torch.manual_seed(0)
    run = make_train_step(build(preset, tasks.VOCAB_SIZE), prompts, answers, 128, torch.device("cpu"),
                          precision=precision)
    run(1)
    Path(barrier, f"ready-{index}").touch()
    while len(list(Path(barrier).glob("ready-*"))) < processes:
        time.sleep(0.01)
    run(1)  # the other process may still be finishing its own warm-up step
    t0 = time.perf_counter()
    run(steps)
    print(json.dumps({"s_per_step": (time.perf_counter() - t0) / steps}))


def eval_seconds(preset: str, task: str = "add", level: str = "medium", repeats: int = 2) -> float:
    """Seconds of one checkpoint (``geomcap.train.evaluate``: accuracy and loss on the run's train and test
    examples, every layer's RankMe variants and probes) of ``preset`` on one thread; the median of
    ``repeats`` after one untimed call."""
    from geomcap.train import TrainConfig, evaluate, task_data

    cfg = TrainConfig(task=task, level=level, size=preset)
    data = task_data(cfg)
    torch.manual_seed(0)
    model = build(preset, tasks.VOCAB_SIZE)
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        evaluate(model, data, cfg, torch.device("cpu"))
        times = [time_once(lambda: evaluate(model, data, cfg, torch.device("cpu"))) for _ in range(repeats)]
    finally:
        torch.set_num_threads(saved)
    return statistics.median(times)


def fit_seconds(rows) -> dict:
    """Least-squares line of seconds per step in the sequence length, for rows of one (threads, precision):
    {"intercept_s", "per_token_s"} (per_token_s 0 from a single length)."""
    lengths = np.array([r["seq_len"] for r in rows], dtype=float)
    seconds = np.array([r["s_per_step"] for r in rows], dtype=float)
    if len(set(lengths)) < 2:
        return {"intercept_s": float(seconds.mean()), "per_token_s": 0.0}
    slope, intercept = np.polyfit(lengths, seconds, 1)
    return {"intercept_s": float(intercept), "per_token_s": float(slope)}


def threads_decision(preset_row: dict) -> dict:
    """One run on two threads against two runs on one thread each (``pair``), per precision, on the pair's
    shape: steps per second through both cores each way, and which is higher."""
    out = {}
    for pair in preset_row.get("pair", []):
        single = next((r for r in preset_row["shapes"] if r["task"] == pair["task"] and r["level"] == pair["level"]
                       and r["threads"] == 2 and r["precision"] == pair["precision"]), None)
        if single is None:
            continue
        one_on_two = 1 / single["s_per_step"]
        two_on_one = 2 / pair["s_per_step"]
        out[pair["precision"]] = {"one_run_two_threads_steps_per_s": one_on_two,
                                  "two_runs_one_thread_steps_per_s": two_on_one,
                                  "ratio_two_runs_to_one": two_on_one / one_on_two,
                                  "better": "two runs on one thread" if two_on_one >= one_on_two
                                  else "one run on two threads"}
    return out


def scale_steps(presets=SCALE_PRESETS, shapes=SCALE_SHAPES, threads=THREADS, precisions=PRECISIONS,
                rounds: int = 2, steps: int = 1, pair_shape=("add", "medium"), pair_steps: int = 3,
                progress: bool = True, on_progress=None) -> dict:
    """The ``scale`` part of ``geomcap bench``: per preset, :func:`shape_seconds` on every shape, a line per
    (threads, precision) in the sequence length (:func:`fit_seconds`), :func:`pair_seconds` on ``pair_shape``
    per precision with :func:`threads_decision`, and :func:`eval_seconds`. ``on_progress(out)`` after each
    preset (a long measurement stopped midway keeps its finished presets)."""
    presets, shapes = list(presets), [tuple(s) for s in shapes]
    _check_scale_args(presets, shapes + [tuple(pair_shape)], threads, precisions, rounds, steps)
    lengths = {shape: tasks.sequence_length(*shape) for shape in shapes + [tuple(pair_shape)]}
    out = {"shapes": [{"task": t, "level": lv, "seq_len": lengths[(t, lv)]} for t, lv in shapes],
           "threads": list(threads), "precisions": list(precisions), "rounds": rounds, "steps": steps,
           "batch_size": 128, "presets": []}
    for preset in presets:
        with torch.device("meta"):
            row = {"preset": preset, "parameters": count_parameters(build(preset, tasks.VOCAB_SIZE)), "shapes": []}
        for task, level in shapes:
            for r in shape_seconds(preset, task, level, threads, precisions, rounds, steps):
                row["shapes"].append({"task": task, "level": level, "seq_len": lengths[(task, level)], **r})
                log_progress(progress, f"scale {preset} {task}/{level} (T={lengths[(task, level)]}) {r['threads']} "
                             f"thread(s) {r['precision']}: {r['s_per_step']:.3f} s/step")
        row["fits"] = [{"threads": n, "precision": p,
                        **fit_seconds([r for r in row["shapes"] if r["threads"] == n and r["precision"] == p])}
                       for n in threads for p in precisions]
        row["pair"] = []
        if 1 in threads:
            for p in precisions:
                pair = pair_seconds(preset, *pair_shape, p, steps=pair_steps)
                row["pair"].append({"task": pair_shape[0], "level": pair_shape[1],
                                    "seq_len": lengths[tuple(pair_shape)], "precision": p, **pair})
                log_progress(progress, f"scale {preset} two processes of one thread, {p}: "
                                       f"{pair['s_per_step']:.3f} s/step")
        row["threads_decision"] = threads_decision(row)
        row["eval_s"] = eval_seconds(preset)
        log_progress(progress, f"scale {preset}: one checkpoint {row['eval_s']:.2f} s (one thread)")
        out["presets"].append(row)
        if on_progress is not None:
            on_progress(out)
    return out
