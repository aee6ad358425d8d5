"""Time the repository's book build and test suite, and record them in a bench result.

    python benchmarks/suite_times.py --book --out data/bench/cpu-2core.json             # cold + warm book build
    python benchmarks/suite_times.py --make-test --out data/bench/cpu-2core.json        # `make test`
    python benchmarks/suite_times.py --make-test-s 447 --out data/bench/cpu-2core.json  # a time measured elsewhere

These time the checkout (its book, its tests), not the library, so they live here and not in
``geomcap bench``. ``--out`` is an existing ``geomcap bench`` result; the script writes its
``book`` and ``make_test`` entries (which ``geomcap.bench.figures_table`` and the book's
performance page read) and lists the run under the result's ``updates`` with its command,
machine and load averages. Works from a checkout without installing the package.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from geomcap import bench, store  # noqa: E402


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _log(message: str) -> None:
    print(f"[suite {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def book_build_times(repo=REPO, timeout_s: int = 1800) -> dict:
    """Wall seconds of a cold, then a warm, ``jupyter-book build REPO -W -n`` into a fresh temporary folder.

    Cold: empty output folder, so every notebook executes (no execution cache). Warm: the same
    command again (Jupyter Book's cache: nothing re-executes). Same as ``make book`` minus the
    venv check.
    """
    jb = Path(sys.executable).with_name("jupyter-book")
    if not jb.exists():
        jb = shutil.which("jupyter-book")
        if jb is None:
            raise FileNotFoundError("jupyter-book is not installed next to this Python")
    out = Path(tempfile.mkdtemp(prefix="geomcap-suite-book-"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = {"command": "jupyter-book build . -W -n --path-output TMP", "timeout_s": timeout_s}
    try:
        for label in ("cold", "warm"):
            _log(f"book: {label} build")
            t0 = time.perf_counter()
            proc = subprocess.run([str(jb), "build", str(repo), "--path-output", str(out), "-W", "-n"],
                                  capture_output=True, text=True, timeout=timeout_s, env=env)
            result[f"{label}_s"] = time.perf_counter() - t0
            result[f"{label}_returncode"] = proc.returncode
            if proc.returncode != 0:
                result[f"{label}_tail"] = (proc.stdout + proc.stderr)[-2000:]
            _log(f"book: {label} build {result[f'{label}_s']:.0f} s (exit {proc.returncode})")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return result


def make_test_time(repo=REPO, timeout_s: int = 7200) -> dict:
    """Wall seconds and exit status of ``make test`` in the repository."""
    _log("make test")
    t0 = time.perf_counter()
    proc = subprocess.run(["make", "test"], cwd=repo, capture_output=True, text=True, timeout=timeout_s)
    return {"command": "make test", "seconds": time.perf_counter() - t0, "returncode": proc.returncode,
            "tail": (proc.stdout + proc.stderr)[-2000:]}


def load_result(out) -> dict:
    """The bench result in ``out``; ValueError when it is not one."""
    result = json.loads(Path(out).read_text()) if Path(out).is_file() else None
    if not isinstance(result, dict) or result.get("schema") != 1:
        raise ValueError(f"--out {out} is not a geomcap bench result: run `geomcap bench --out {out}` first")
    return result


def record(out, entries: dict, command: str, started_at: str, load_average_start, wall_s: float) -> dict:
    """Write ``entries`` (``book``, ``make_test``) into the bench result ``out`` and list the run under
    ``updates`` with the keys ``geomcap bench --update`` writes (the performance page reads them);
    returns the result. ValueError when ``out`` is not a bench result."""
    result = load_result(out)
    for name, value in entries.items():
        result[name] = {**value, "measured_at": _now()}
    result.setdefault("updates", []).append(
        {"command": command, "started_at": started_at, "finished_at": _now(), "parts": sorted(entries),
         "machine": bench.machine_info(torch.device("cpu")), "load_average_start": load_average_start,
         "load_average_end": bench.load_average(), "wall_s": wall_s})
    store.atomic_write_json(out, result)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="an existing geomcap bench result (JSON)")
    parser.add_argument("--book", action="store_true", help="time a cold and a warm book build")
    parser.add_argument("--make-test", action="store_true", help="time `make test` (long)")
    parser.add_argument("--make-test-s", type=float, default=None,
                        help="record a `make test` wall time measured separately (seconds)")
    args = parser.parse_args(argv)
    if args.make_test and args.make_test_s is not None:
        parser.error("--make-test and --make-test-s: give one")
    if args.make_test_s is not None and not args.make_test_s > 0:
        parser.error(f"--make-test-s must be positive, got {args.make_test_s}")
    if not (args.book or args.make_test or args.make_test_s is not None):
        parser.error("nothing to do: give --book, --make-test or --make-test-s")
    try:
        load_result(args.out)  # before timing anything
    except ValueError as exc:
        parser.error(str(exc))
    started_at, load_average_start, t_start = _now(), bench.load_average(), time.perf_counter()
    entries = {}
    if args.book:
        entries["book"] = book_build_times()
    if args.make_test:
        entries["make_test"] = make_test_time()
    elif args.make_test_s is not None:
        entries["make_test"] = {"command": "make test", "seconds": args.make_test_s,
                                "source": "measured separately and passed in with --make-test-s"}
    command = shlex.join(["python", "benchmarks/suite_times.py", *(argv if argv is not None else sys.argv[1:])])
    record(args.out, entries, command, started_at, load_average_start, time.perf_counter() - t_start)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
