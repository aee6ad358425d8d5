"""Progress as a person reads it: bars on a terminal, lines in a log.

On a terminal (or in a Jupyter kernel) a run and a sweep draw tqdm bars. Off one -- the output going to a
file, as a sweep left running in the background writes it -- every redraw of a bar would be a line of the
file, so they print lines instead: one as a run starts, one as it ends, and a summary every
:data:`SUMMARY_EVERY_S` seconds in between. ``geomcap train --quiet`` and ``geomcap sweep --quiet`` print
those lines on a terminal too (no bars); the plan, the run directory and the errors are printed either way.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm  # text bars: tqdm.auto would need ipywidgets in Jupyter (and warns without it)

#: seconds between two summary lines of a run or a sweep in a log
SUMMARY_EVERY_S = 300.0


def on_terminal(stream=None) -> bool:
    """Whether ``stream`` (default: stderr, where the bars are drawn) shows a bar as a bar: a terminal, or a
    Jupyter kernel's output (not a terminal, but it redraws a line in place)."""
    stream = sys.stderr if stream is None else stream
    if type(stream).__module__.startswith("ipykernel"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def duration(seconds: float | None) -> str:
    """Seconds as a person reads them: "42 s", "17 min", "3.2 h" ("?" for None)."""
    if seconds is None:
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


class ProgressLines:
    """A run's progress as lines of a log (on stderr, as its bar would be), with the part of tqdm's interface
    the training loops use (``n``, ``set_postfix``, ``update``, ``close``): "DESC: starts at step N of TOTAL",
    then at most every ``every_s`` seconds "DESC: step N/TOTAL, KEY VALUE, ... (T elapsed, ~T left)", and
    "DESC: ended at step N of TOTAL in T, KEY VALUE, ..." (the postfix: the last checkpoint's values)."""

    def __init__(self, total: int, initial: int = 0, desc: str = "", every_s: float = SUMMARY_EVERY_S, file=None):
        self.total, self.n, self.desc, self.every_s = total, initial, desc, every_s
        self.file = sys.stderr if file is None else file
        self.postfix: dict = {}
        self.t0 = self.last = time.monotonic()
        self.first = initial
        self._print(f"{'resumes' if initial else 'starts'} at step {initial} of {total}")

    def set_postfix(self, postfix=None, refresh: bool = True, **kwargs) -> None:
        self.postfix = {**(postfix or {}), **kwargs}

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            rate = (now - self.t0) / max(self.n - self.first, 1)
            self._print(f"step {self.n}/{self.total}{self._values()} ({duration(now - self.t0)} elapsed, "
                        f"~{duration(rate * max(self.total - self.n, 0))} left)")

    def close(self) -> None:
        self._print(f"ended at step {self.n} of {self.total} in {duration(time.monotonic() - self.t0)}"
                    f"{self._values()}")

    def _values(self) -> str:
        return "".join(f", {key} {value}" for key, value in self.postfix.items())

    def _print(self, text: str) -> None:
        print(f"{self.desc}: {text}", file=self.file, flush=True)


def run_progress(total: int, initial: int, desc: str, enabled: bool = True, bars: bool | None = None):
    """A run's progress: a tqdm bar on a terminal (``bars`` None: :func:`on_terminal`; True or False to choose),
    else :class:`ProgressLines`; a disabled bar without ``enabled``."""
    if enabled and not (on_terminal() if bars is None else bars):
        return ProgressLines(total, initial, desc)
    return tqdm(total=total, initial=initial, disable=not enabled, desc=desc, unit="step")
