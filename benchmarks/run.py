"""Run the benchmark suite: the same as ``geomcap bench`` (every option passes through).

    python benchmarks/run.py                          # default parts, JSON into data/bench/<device>.json
    python benchmarks/run.py --threads 1              # as committed on the shared 2-core machine
    python benchmarks/run.py --help                   # every option

Works from a checkout without installing the package (it puts ``src`` on the path).
The book build and ``make test`` are timed by ``benchmarks/suite_times.py``. See
data/bench/README.md for the committed results and book/performance.md for the page.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from geomcap.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
