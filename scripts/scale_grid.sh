#!/usr/bin/env bash
# The scale grid (data/README.md, "scale/"): the protocol's runs at 4m (9.7x 405k), 14m (35x) and 48m (117x),
# in stages ordered so that each stage alone gives a verdict. Resumable: rerun the same command and
# finished runs are reused by their hash; run it from a frozen worktree (git worktree add) of the commit
# that defines it, and copy complete runs into data/scale/ (scripts/copy_runs.sh).
#
#   scripts/scale_grid.sh [STAGE ...]          # default: stages p 1 2 3 4 5, in order
#   scripts/scale_grid.sh --dry-run [STAGE ...]  # each sweep's plan (runs to train, those stored, projected
#                                              # hours) and nothing trained
#   scripts/scale_grid.sh --device cuda --presets 48m,151m [--out OUT] [--dry-run] [gpu_grid.sh options]
#                                              # stage 1's settings and controls at the paper's scale, on
#                                              # one GPU: scripts/gpu_grid.sh --mode scale (its packs and
#                                              # processes; OUT default gpu-scale/)
#
#   p  the precision check (geomcap.analysis.precision): add medium seed 0 on 4m and 14m, two float32 twins
#      (perturb 1e-6, perturb_seed 1, 2) and the same run in bf16 autocast; on 4m a third twin, held out,
#      read by the same rule as the bf16 run (stage 1 trains the unperturbed float32 runs)
#   1  14m and 4m, seed 0: copy, add, mod, parity at medium; their shuffled-answer controls at 14m
#   2  14m and 4m, seed 0: every task's easy level
#   3  14m and 4m, seed 0: the remaining task x level settings (medium and hard of the other tasks,
#      hard of stage 1's); 14m's hard level stopped at step HARD_STOP_14M of its 8000-step schedule
#      (stop_at: the protocol's learning rate and checkpoints up to there; the measured cost)
#   4  14m, seeds 1-2: the settings stages 1-3 class hard (HARD_SETTINGS, task:level,...) and stage 1's
#      four settings with their controls
#   5  48m, seed 0: add and mod at medium, mul hard
#
# Environment:
#   RUNS, CONTROLS   run stores of the real runs and the controls (default runs-scale/, runs-scale-controls/)
#   PRECISION        run store of stage p's twins and bf16 runs (default runs-scale-precision/)
#   LANE             a (default) or b: b takes every stage's tasks and sizes in reverse order, so that two
#                    lanes (one torch thread each, one per core) share a stage; run locks keep one writer per run
#   THREADS          torch threads per run (default 1: two lanes on the two cores; see the performance page)
#   HARD_STOP_14M    where 14m's hard level stops (default step 3000 of the protocol's 8000)
#   PYTHON           the interpreter that asks whether this CPU has native bf16 kernels (default: beside GEOMCAP);
#                    stage p's bf16 runs are skipped, with a line, where it has none
#   HARD_SETTINGS    stage 4's settings (default add:hard,mul:hard: the levels the 405k grid classes hard)
#   UNTIL            a deadline (HH:MM, +2h40m from the script's start, or an ISO date and time: geomcap sweep
#                    --until): no run is started that its plan projects to end later; the lane goes on to the
#                    runs that fit. For a session that ends at a known time: a run cut off there loses its
#                    training if its store does not outlive the machine; the projection is a median stop at a
#                    measured cost, so leave a margin (MARGIN)
#   MARGIN           with UNTIL: a run starts only where MARGIN times its projection ends before it (geomcap
#                    sweep --until-margin; default 1; the book's performance page measures how far real times exceed
#                    the projections: its 90th percentile is a fair MARGIN)
#   DONE             run stores whose complete runs count as trained, comma-separated (default the committed
#                    data/scale, data/scale-controls, data/scale-precision: a fresh worktree does not retrain
#                    what has landed; "" for none)
# A control stops at step 1000 of the 4000-step medium schedule (stop_at), as scripts/controls_grid.sh's.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --device ]; then  # the GPU path: the one GPU runner, in its scale mode
  DEVICE=${2:?--device needs a value}; shift 2
  OUT=gpu-scale
  ARGS=()
  while [ $# -gt 0 ]; do
    case $1 in
      --out) OUT=$2; shift 2 ;;
      --dry-run) ARGS+=("$1"); shift ;;
      --presets|--steps|--precision) ARGS+=("$1" "$2"); shift 2 ;;
      *) echo "unknown option $1 (--device path: --presets, --steps, --precision, --out, --dry-run)" >&2; exit 2 ;;
    esac
  done
  exec scripts/gpu_grid.sh "$OUT" --mode scale --device "$DEVICE" "${ARGS[@]}"
fi
DRY_RUN=()
if [ "${1:-}" = --dry-run ]; then DRY_RUN=(--dry-run); shift; fi
GEOMCAP=${GEOMCAP:-.venv/bin/geomcap}
RUNS=${RUNS:-runs-scale}
CONTROLS=${CONTROLS:-runs-scale-controls}
PRECISION=${PRECISION:-runs-scale-precision}
LANE=${LANE:-a}
THREADS=${THREADS:-1}
HARD_STOP_14M=${HARD_STOP_14M:-3000}
HARD_SETTINGS=${HARD_SETTINGS:-add:hard,mul:hard}
STAGE1_TASKS=copy,add,mod,parity
OTHER_TASKS=reverse,compare,sort,mul
STEPS=easy=2000,medium=4000,hard=8000
control="--set control=shuffled_answers --set stop_at=1000"
PYTHON=${PYTHON:-$(dirname "$GEOMCAP")/python}
bf16_native='import sys, torch; from geomcap.models import bf16_matmul_native; sys.exit(not bf16_matmul_native(torch.device("cpu")))'
DONE=${DONE-data/scale,data/scale-controls,data/scale-precision}
case $LANE in a|b) ;; *) echo "LANE must be a or b, got $LANE" >&2; exit 2 ;; esac
until=()
if [ -n "${UNTIL:-}" ]; then  # read once, here: a time from now (+2h40m) must not move with each sweep
  UNTIL=$("$PYTHON" -c 'import sys, datetime; from geomcap.parameters import deadline
try: print(datetime.datetime.fromtimestamp(deadline(sys.argv[1])).isoformat(timespec="seconds"))
except ValueError as exc: sys.exit(f"UNTIL: {exc}")' "$UNTIL") || exit 2
  until=(--until "$UNTIL" --until-margin "${MARGIN:-1}")
fi
done_stores=()
for store in ${DONE//,/ }; do
  [ -d "$store" ] && done_stores+=(--done "$store")
done
status=0

ordered() {  # a comma-separated list, reversed on lane b
  if [ "$LANE" = b ]; then tr ',' '\n' <<<"$1" | tac | paste -sd, -; else echo "$1"; fi
}
sweep() {  # sweep TASKS LEVELS SIZES SEEDS [geomcap sweep options]: one worker, a lane of its own
  local tasks=$1 levels=$2 sizes=$3 seeds=$4; shift 4
  "$GEOMCAP" sweep --tasks "$(ordered "$tasks")" --levels "$levels" --sizes "$(ordered "$sizes")" \
    --seeds "$seeds" --steps "$STEPS" --workers 1 --threads "$THREADS" --quiet "${DRY_RUN[@]}" "${until[@]}" "${done_stores[@]}" "$@" || status=1
}
for stage in "${@:-p 1 2 3 4 5}"; do
  for s in $stage; do
    echo "== stage $s (lane $LANE) $(date -u +%FT%TZ)"
    case $s in
      p) for size in 4m 14m; do
           for twin in 1 2; do
             sweep add medium "$size" 0 --root "$PRECISION" --set perturb=1e-6 --set perturb_seed="$twin"
           done
           if "$PYTHON" -c "$bf16_native"; then
             sweep add medium "$size" 0 --root "$PRECISION" --set precision=bf16
           else  # an AVX2-only CPU runs bf16 products through a reference GEMM: a 14m step took ~50 s
             echo "skipped: add medium $size in bf16 (this CPU has no native bf16 kernels: geomcap.models.bf16_matmul_native)"
           fi
         done
         sweep add medium 4m 0 --root "$PRECISION" --set perturb=1e-6 --set perturb_seed=3 ;;
      1) sweep "$STAGE1_TASKS" medium 14m,4m 0 --root "$RUNS"
         sweep "$STAGE1_TASKS" medium 14m 0 --root "$CONTROLS" $control ;;
      2) sweep "$STAGE1_TASKS,$OTHER_TASKS" easy 14m,4m 0 --root "$RUNS" ;;
      3) sweep "$OTHER_TASKS" medium 14m,4m 0 --root "$RUNS"
         sweep "$STAGE1_TASKS,$OTHER_TASKS" hard 4m 0 --root "$RUNS"
         sweep "$STAGE1_TASKS,$OTHER_TASKS" hard 14m 0 --root "$RUNS" --set stop_at="$HARD_STOP_14M" ;;
      4) for setting in ${HARD_SETTINGS//,/ }; do
           level=${setting#*:}
           stop=()
           [ "$level" = hard ] && stop=(--set stop_at="$HARD_STOP_14M")
           sweep "${setting%%:*}" "$level" 14m 1,2 --root "$RUNS" "${stop[@]}"
         done
         sweep "$STAGE1_TASKS" medium 14m 1,2 --root "$RUNS"
         sweep "$STAGE1_TASKS" medium 14m 1,2 --root "$CONTROLS" $control ;;
      5) sweep add,mod medium 48m 0 --root "$RUNS"
         sweep mul hard 48m 0 --root "$RUNS" ;;
      *) echo "unknown stage $s (stages p, 1-5)" >&2; exit 2 ;;
    esac
  done
done
exit $status
