"""Timing the book build and the test suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from geomcap import store
from geomcap.bench.machine import _log


# --- the book and the test suite ---------------------------------------------

def _repo_root() -> Path:
    return store.committed_data().parent


def book_build_times(repo=None, timeout_s: int = 1800, progress: bool = True) -> dict:
    """Wall seconds of a cold, then a warm, ``jupyter-book build REPO -W -n`` into a fresh temporary folder.

    Cold: empty output folder, so every notebook executes (no execution
    cache). Warm: the same command again (Jupyter Book's cache: nothing
    re-executes). Same as ``make book`` minus the venv check.
    """
    repo = Path(repo or _repo_root())
    jb = Path(sys.executable).with_name("jupyter-book")
    if not jb.exists():
        jb = shutil.which("jupyter-book")
        if jb is None:
            raise FileNotFoundError("jupyter-book is not installed next to this Python")
    out = Path(tempfile.mkdtemp(prefix="geomcap-bench-book-"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = {"command": "jupyter-book build . -W -n --path-output TMP", "timeout_s": timeout_s}
    try:
        for label in ("cold", "warm"):
            _log(progress, f"book: {label} build")
            t0 = time.perf_counter()
            proc = subprocess.run([str(jb), "build", str(repo), "--path-output", str(out), "-W", "-n"],
                                  capture_output=True, text=True, timeout=timeout_s, env=env)
            result[f"{label}_s"] = time.perf_counter() - t0
            result[f"{label}_returncode"] = proc.returncode
            if proc.returncode != 0:
                result[f"{label}_tail"] = (proc.stdout + proc.stderr)[-2000:]
            _log(progress, f"book: {label} build {result[f'{label}_s']:.0f} s (exit {proc.returncode})")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return result


def make_test_time(repo=None, timeout_s: int = 7200, progress: bool = True) -> dict:
    """Wall seconds and exit status of ``make test`` in the repository."""
    repo = Path(repo or _repo_root())
    _log(progress, "make test")
    t0 = time.perf_counter()
    proc = subprocess.run(["make", "test"], cwd=repo, capture_output=True, text=True, timeout=timeout_s)
    seconds = time.perf_counter() - t0
    return {"command": "make test", "seconds": seconds, "returncode": proc.returncode,
            "tail": (proc.stdout + proc.stderr)[-2000:]}
