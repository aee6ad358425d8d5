#!/usr/bin/env bash
# The GPU check, prepared for a lent GPU machine (made for one H200 + 16 cores; any CUDA GPU works).
# In under 8 minutes, from a copy of the repository:
#   0. finds a Python whose torch sees CUDA (.venv, then python3), or makes .venv-gpu and installs
#      requirements.txt into it (needs a package index or a wheel cache);
#   1. `geomcap bench` on CUDA: throughput of every preset that fits (geomcap vs its transformers
#      peer vs torch.compile for two presets), bf16 autocast, fraction of the bf16 matmul peak;
#   2. one short hard-task run (add/hard) of the largest preset timed in 1, with few checkpoints;
#   3. with the time left: the cost of per-checkpoint geometry per preset on this machine, then
#      the CPU-side parts (RankMe vs naive SVD, costly measures) on its cores.
# Every step has a timeout from one overall deadline; a bench killed by its timeout keeps what it
# finished (the JSON is rewritten after each preset / size / part; an unfinished part is marked
# "incomplete"), and the training run keeps its metrics up to its last checkpoint. Results, under OUT_DIR:
#   cuda.json                                  the bench result: steps 1 and 3 in one file (step 3 with
#                                              --update); copy it to data/bench/cuda-<gpu>.json
#   run-add-hard-<preset>/                     the training run (config.json, metrics.csv, status.json)
#   gpu_check.log, nvidia-smi.txt, python.txt  what ran, on what
#
# Usage: bash scripts/gpu_check.sh [OUT_DIR]     (default: $OUT when set, else _build/gpu_check)
# A dry run of the same steps on a CPU (small, to check the script itself):
#   DEVICE=cpu PRESETS=405k COMPILE= STEPS=20 BUDGET_S=300 bash scripts/gpu_check.sh /tmp/gpu_check_dry
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-_build/gpu_check}}
BUDGET_S=${BUDGET_S:-470}          # 8 minutes minus a margin
DEVICE=${DEVICE:-cuda}
PRESETS=${PRESETS:-auto}           # presets to time (auto: every one whose step fits 0.5 s)
COMPILE=${COMPILE-1.3m,151m}       # presets also timed under torch.compile (empty: none)
STEPS=${STEPS:-1000}               # steps of the short hard-task run
mkdir -p "$OUT_DIR"
START=$(date +%s)
DEADLINE=$((START + BUDGET_S))
export HF_HUB_OFFLINE=1 TQDM_DISABLE=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

log() { echo "[gpu_check +$(( $(date +%s) - START ))s] $*" | tee -a "$OUT_DIR/gpu_check.log"; }
left() { echo $(( DEADLINE - $(date +%s) )); }
# run_for SECONDS CMD...: run CMD with a timeout of min(SECONDS, time left - 5 s); skip it when < 20 s are left
run_for() {
  local want=$1; shift
  local budget; budget=$(( $(left) - 5 ))
  (( budget < want )) || budget=$want
  if (( budget < 20 )); then log "skipped (time is up): $*"; return 124; fi
  log "run (timeout ${budget}s): $*"
  timeout --signal=INT --kill-after=10 "$budget" "$@" >>"$OUT_DIR/gpu_check.log" 2>&1
  local rc=$?
  log "exit $rc"
  return $rc
}

# --- 0. a Python with a CUDA torch ---------------------------------------------------------------
has_cuda() {  # (on a CPU dry run: any Python with torch)
  "$1" -c "import torch, sys; sys.exit(0 if '$DEVICE' == 'cpu' or torch.cuda.is_available() else 1)" >/dev/null 2>&1
}
PY=""
for candidate in .venv/bin/python .venv-gpu/bin/python python3 python; do
  if command -v "$candidate" >/dev/null 2>&1 && has_cuda "$candidate"; then PY=$candidate; break; fi
done
if [ -z "$PY" ]; then
  log "no Python with a CUDA torch: making .venv-gpu and installing requirements.txt"
  python3 -m venv --system-site-packages .venv-gpu
  run_for 240 .venv-gpu/bin/python -m pip install --quiet -r requirements.txt
  PY=.venv-gpu/bin/python
  has_cuda "$PY" || { log "torch does not see a GPU: stopping"; exit 1; }
fi
# the packages the bench imports, installed at the pinned versions when missing (best effort)
missing=$("$PY" - <<'EOF'
import importlib.util
names = {"numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "tqdm": "tqdm", "threadpoolctl": "threadpoolctl",
         "transformers": "transformers", "devinterp": "devinterp", "datasets": "datasets"}
print(" ".join(pkg for mod, pkg in names.items() if importlib.util.find_spec(mod) is None))
EOF
)
if [ -n "$missing" ]; then
  pins=$(for pkg in $missing; do grep -i "^$pkg==" requirements.txt || echo "$pkg"; done)
  log "installing missing packages: $pins"
  # shellcheck disable=SC2086
  run_for 120 "$PY" -m pip install --quiet $pins || log "could not install all of: $pins (parts that need them are skipped)"
fi
PEER=gpt2
"$PY" -c "import transformers" >/dev/null 2>&1 || { PEER=none; log "no transformers: the peer is skipped"; }
nvidia-smi >"$OUT_DIR/nvidia-smi.txt" 2>&1 || true
"$PY" - >"$OUT_DIR/python.txt" 2>&1 <<'EOF'
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
print("gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "cores", __import__("os").cpu_count())
EOF
log "python: $PY ($(head -1 "$OUT_DIR/python.txt"))"

# --- 1. throughput on the GPU ------------------------------------------------------------------
run_for 240 "$PY" -m geomcap.cli bench --device "$DEVICE" --parts throughput --presets "$PRESETS" --max-step-s 0.5 \
  --rounds 5 --block-s 0.5 --peer "$PEER" --compile "$COMPILE" --out "$OUT_DIR/$DEVICE.json" --quiet

# --- 2. one short hard-task run of the largest preset that fits ----------------------------------
SIZE=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['settings']['presets_timed'][-1])" \
       "$OUT_DIR/$DEVICE.json" 2>/dev/null || echo 151m)
run_for 110 "$PY" - "$SIZE" "$OUT_DIR/run-add-hard-$SIZE" "$DEVICE" "$STEPS" <<'EOF'
import json, sys
from geomcap import store
from geomcap.train import TrainConfig, train
size, out, device, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# few checkpoints: each one runs the geometry of every layer on the CPU (the GPU trains in milliseconds)
cfg = TrainConfig(task="add", level="hard", size=size, steps=steps, n_log_checkpoints=3, n_linear_checkpoints=3)
run_dir = train(cfg, out=out, device=device, progress=False, threads=None)  # a GPU machine: torch's own CPU threads
print(json.dumps(store.read_status(run_dir), indent=1))
EOF

# --- 3. the cost of measuring, then the CPU-side parts, with the time left -------------------------
run_for 400 "$PY" -m geomcap.cli bench --device "$DEVICE" --parts geometry,rankme,costly --presets "$PRESETS" \
  --max-step-s 0.5 --rounds 3 --block-s 0.5 --costly-repeats 2 --update --out "$OUT_DIR/$DEVICE.json" --quiet

log "done in $(( $(date +%s) - START )) s; results in $OUT_DIR:"
ls -la "$OUT_DIR" | tee -a "$OUT_DIR/gpu_check.log"
