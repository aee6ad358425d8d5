#!/usr/bin/env bash
# Copy the complete runs of a run store into a committed store under data/ (config.json, metrics.csv,
# status.json: never weights or training state), leaving runs that are there already, then rewrite its
# index (geomcap runs --csv).
#
#   scripts/copy_runs.sh STORE DEST        e.g. scripts/copy_runs.sh ../scale-lane/runs-scale data/scale
set -euo pipefail
cd "$(dirname "$0")/.."
STORE=${1:?usage: scripts/copy_runs.sh STORE DEST}
DEST=${2:?usage: scripts/copy_runs.sh STORE DEST}
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
[ -d "$STORE" ] || { echo "no run store at $STORE" >&2; exit 2; }
mkdir -p "$DEST"
"$PYTHON" - "$STORE" "$DEST" <<'PY'
import shutil, sys
from pathlib import Path
from geomcap import store

source, dest = Path(sys.argv[1]), Path(sys.argv[2])
copied = 0
for run in sorted(p for p in source.iterdir() if p.is_dir()):
    if (dest / run.name).exists() or not store.is_complete(run):
        continue
    (dest / run.name).mkdir()
    for name in (store.CONFIG_FILE, store.METRICS_FILE, store.STATUS_FILE):
        shutil.copy2(run / name, dest / run.name / name)
    copied += 1
print(f"{copied} complete run(s) copied from {source} into {dest}")
PY
"$PYTHON" -m geomcap.cli runs --root "$DEST" --csv "$DEST/index.csv" > /dev/null
