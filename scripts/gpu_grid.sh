#!/usr/bin/env bash
# The paper's grid on one GPU, in one command: packs of runs that share a preset trained as one
# batched computation (geomcap.packed), several processes sharing the device.
#
#   scripts/gpu_grid.sh OUT [--dry-run] [--mode grid|c8|scale] [--task T --level L] [--steps S]
#                       [--presets P,...] [--precision fp32|bf16] [--device cuda|cpu]
#
#   --mode grid   the six presets x 8 tasks x 3 levels, seed 0 (144 runs; default)
#   --mode c8     the six presets on one task and level (--task, --level; default add/hard), seeds 0-2
#   --mode scale  copy, add, mod, parity at medium, seed 0, and their shuffled-answer controls
#                 (scripts/scale_grid.sh --device cuda calls this)
#   --presets     the presets (default: the six); --precision the training step's (default bf16)
#   --device      where the runs train (default cuda; cpu: the same path at toy size, for the tests)
#   --dry-run     print the plan (packs, processes, runs) and the projected time, train nothing
#
# OUT receives at most 8 files: one runs-<preset>.tar.gz per preset (config.json, metrics.csv and
# status.json of each run: the run store, no weights), bench.json (tokens/s, achieved FLOP/s
# against 790 TFLOP/s bf16, geometry share and seconds per preset, wall time) and log.txt.
# Environment: PACK (runs per pack, 8), PROCESSES (6), LIMIT_S (the training stops at this many
# seconds so that the files come back inside the command's limit; 540), MFU and LAUNCH_US (the
# projection's assumptions), PYTHON (default: the repository's .venv, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/gpu_grid.sh OUT [--dry-run] [--mode grid|c8|scale] [--task T --level L] [--steps S] [--presets P,...] [--precision fp32|bf16] [--device cuda|cpu]}
shift
DRY=0
DEVICE=cuda
ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1; shift ;;
    --mode|--task|--level|--steps|--presets|--precision) ARGS+=("$1" "$2"); shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
PACK=${PACK:-8}
PROCESSES=${PROCESSES:-6}
LIMIT_S=${LIMIT_S:-540}
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
COMMON=(--pack "$PACK" --processes "$PROCESSES" "${ARGS[@]}")

if [ "$DRY" = 1 ]; then
  exec "$PYTHON" -m geomcap.gpu_grid plan "${COMMON[@]}" --costs data/gpu/cpu_costs.json --stops data/runs \
       --mfu "${MFU:-0.3}" --launch-us "${LAUNCH_US:-6}"
fi

"$PYTHON" -m geomcap.gpu_grid plan "${COMMON[@]}" --costs data/gpu/cpu_costs.json > /dev/null || exit 2  # bad input
mkdir -p "$OUT"
ROOT=$(mktemp -d)/runs
export PYTORCH_NVML_BASED_CUDA_CHECK=1 OMP_NUM_THREADS=2
START=$(date +%s)
{
  nvidia-smi || true
  "$PYTHON" -m geomcap.gpu_grid plan "${COMMON[@]}" --costs data/gpu/cpu_costs.json
  pids=()
  for ((part = 0; part < PROCESSES; part++)); do
    timeout --signal=INT "$LIMIT_S" "$PYTHON" -m geomcap.gpu_grid run "${COMMON[@]}" --root "$ROOT" --part "$part" \
      --device "$DEVICE" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || echo "process $pid ended with status $?"; done
} > "$OUT/log.txt" 2>&1
"$PYTHON" -m geomcap.gpu_grid collect --root "$ROOT" --out "$OUT" --wall-s "$(( $(date +%s) - START ))" >> "$OUT/log.txt" 2>&1
ls -l "$OUT"
