"""A sweep's progress while it trains (:mod:`geomcap.progress` for what a person sees): bars on a terminal, one
over the sweep's plan (:class:`geomcap.planning.Plan`) and one per run in training, read from each run's
metrics.csv as its worker writes it; lines in a log off one."""

from __future__ import annotations

import dataclasses
import heapq
import os
import time
from pathlib import Path

from tqdm import tqdm  # text bars: tqdm.auto would need ipywidgets in Jupyter (and warns without it)

from geomcap import store
from geomcap.planning import Plan, run_name
from geomcap.progress import SUMMARY_EVERY_S, duration, on_terminal


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


class SweepBars:
    """A sweep's progress (:mod:`geomcap.progress`). As bars (on a terminal, or ``bars=True``): one over the plan
    (runs done, the ETA from the plan's projection) and one per run in training (its steps, its last test
    accuracy, read from its metrics.csv as its worker writes it). As lines (off a terminal, or ``bars=False``),
    on stdout: one as each run starts and as it ends, and every ``summary_every_s`` seconds the runs done, those
    in training and the ETA. A run that failed or was skipped is named in one line either way; with
    ``enabled`` False only those."""

    def __init__(self, configs, root: Path, the_plan: Plan | None, done: int, enabled: bool, bars: bool | None = None,
                 summary_every_s: float = SUMMARY_EVERY_S, until: float | None = None, until_margin: float = 1.0):
        self.configs, self.root, self.summary_every_s = configs, root, summary_every_s
        self.until, self.until_margin = until, until_margin
        self.bars = enabled and (on_terminal() if bars is None else bars)
        self.lines = enabled and not self.bars
        key = lambda c: store.config_hash(c.to_dict())  # noqa: E731
        projected = {key(r.config): r for r in the_plan.runs} if the_plan is not None else {}
        self.planned = [projected.get(key(c)) for c in configs]
        self.workers = the_plan.workers if the_plan is not None else 1
        self.done: set[int] = set()
        self.finished = done  # runs done, those that existed included
        self.training: set[int] = set()
        self.t0 = self.summarised = time.monotonic()
        self.bar = tqdm(total=len(configs), initial=done, disable=not self.bars, unit="run", desc="sweep",
                        bar_format="{desc}: {n_fmt}/{total_fmt} runs |{bar}| {elapsed} elapsed{postfix}")
        self.run_bars: dict[int, tqdm] = {}

    def start(self, unit) -> None:
        """The runs of ``unit`` (indices of ``configs``: a run, or a pack) start training."""
        for i in unit:
            c = self.configs[i]
            self.training.add(i)
            if self.lines:
                self.write(f"start   {run_name(c)}" + (f" (pack of {len(unit)})" if len(unit) > 1 else ""))
            self.run_bars[i] = tqdm(total=c.steps, disable=not self.bars, leave=False, unit="step",
                                    desc=f"  {c.task}/{c.level} {c.size} s{c.seed}", position=len(self.run_bars) + 1)

    def end(self, i: int, result) -> None:
        """Run ``i`` ended with ``result`` (a :class:`geomcap.sweep.RunResult`): its line, and the count."""
        self.done.add(i)
        self.training.discard(i)
        bar = self.run_bars.pop(i, None)
        if bar is not None:
            bar.close()
        name = run_name(result.config)
        if result.locked:
            self.write(f"SKIPPED {name}: {result.error}")
        elif getattr(result, "deferred", False):
            self.write(f"DEFERRED {name}: {result.error}")
        elif not result.ok:
            self.write(f"FAILED {name}: {result.error.splitlines()[-1]}")
        elif self.lines:
            self.write(f"done    {name} in {duration(result.seconds)}")
        self.finished += 1
        self.bar.update(1)

    def poll(self) -> None:
        """Bars: each running run's bar from its metrics.csv, and the plan's bar's ETA. Lines: the summary line,
        when one is due."""
        if self.lines and time.monotonic() - self.summarised >= self.summary_every_s:
            self.summarised = time.monotonic()
            self.write(f"sweep: {self.finished}/{len(self.configs)} runs done, {len(self.training)} training, "
                       f"{duration(self.summarised - self.t0)} elapsed, {self._eta(self._reached())}")
        if not self.bars:
            return
        reached = self._reached()
        for i, bar in self.run_bars.items():
            step, accuracy = reached.get(i, (None, None))
            if step is not None:
                bar.update(step - bar.n)
                if accuracy is not None:
                    bar.set_postfix_str(f"acc {accuracy:.3f}", refresh=False)
                bar.refresh()
        self.bar.set_postfix_str(self._eta(reached))

    def _reached(self) -> dict:
        """{index of a run in training: (its last step, its last test accuracy)} from its metrics.csv."""
        return {i: metrics_tail(store.run_dir_for(self.configs[i].to_dict(), self.root)) for i in self.training}

    def _eta(self, reached: dict) -> str:
        """The time left as the plan projects it, each run in training shortened by its share done. With a
        deadline (``until``), the runs not yet started are taken in order as a worker frees, as the sweep takes
        them, and those it would defer (``until_margin`` times their projection ending after ``until``) add
        nothing."""
        left = []
        for i, planned in enumerate(self.planned):
            if i in self.done or planned is None or planned.state in ("exists", "locked"):
                continue
            if planned.seconds is None:
                return "ETA unknown (no measurement)"
            step = reached.get(i, (None, None))[0]
            span = max(planned.steps - planned.reached, 1)
            share = min(max((planned.reached if step is None else step) - planned.reached, 0) / span, 1.0)
            left.append((i, dataclasses.replace(planned, seconds=planned.seconds * (1 - share))))
        if self.until is None:
            runs = [run for _, run in left]
            return f"ETA ~{duration(Plan(runs, {}, self.workers).projected_s() if runs else 0.0)} (projected)"
        now = time.time()
        free = [now + run.seconds for i, run in left if i in self.training]
        free += [now] * max(self.workers - len(free), 0)
        heapq.heapify(free)
        for i, run in left:
            if i in self.training:
                continue
            start = heapq.heappop(free)
            heapq.heappush(free, start if start + self.until_margin * run.seconds > self.until else start + run.seconds)
        return f"ETA ~{duration(max(free) - now)} (projected; runs that would end after --until are deferred)"

    def write(self, line: str) -> None:
        """One line on stdout (between the bars, when there are bars)."""
        if self.bars:
            self.bar.write(line)
        else:
            print(line, flush=True)

    def close(self) -> None:
        for i in list(self.run_bars):
            self.run_bars.pop(i).close()
        self.bar.close()
