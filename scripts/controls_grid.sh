#!/usr/bin/env bash
# The runs of the controls issue: negative controls (answers shuffled across prompts: nothing can be learnt),
# the same settings trained for real, and a warmup_steps=0 arm of them, on the two depth variants, four tasks
# at their medium level, seeds 0-2 (see data/README.md). Resumable: rerun the same command.
#   RUNS      run store of the real runs (default data/runs: the new seeds join the grid)
#   CONTROLS  run store of the controls and the warmup-0 arm (default data/controls)
#   STAGES    which stages to run (default: all, in order)
# A control stops at step 1000 of the 4000-step schedule of the real medium runs (stop_at): the same
# learning rate at every step it trains, and past everything C1-C3 read (the collapse window is 300 steps).
set -euo pipefail
cd "$(dirname "$0")/.."
GEOMCAP=${GEOMCAP:-.venv/bin/geomcap}
RUNS=${RUNS:-data/runs}
CONTROLS=${CONTROLS:-data/controls}
STAGES=${STAGES:-1 2 3 4 5 6}
sweep() { "$GEOMCAP" sweep --tasks copy,add,mod,parity --levels medium --seeds 0,1,2 --steps medium=4000 \
            --workers 1 --threads 1 --quiet "$@"; }
control="--set control=shuffled_answers --set stop_at=1000"

for stage in $STAGES; do
  case $stage in
    1) sweep --sizes 405k-deep --root "$CONTROLS" $control ;;        # controls, smallest depth variant
    2) sweep --sizes 405k-deep --root "$RUNS" ;;                     # the same settings, real (seed 0 exists)
    3) sweep --sizes 405k-deep --root "$CONTROLS" --set warmup_steps=0 ;;  # real, no warmup
    4) sweep --sizes 1.3m-deep --root "$CONTROLS" $control ;;
    5) sweep --sizes 1.3m-deep --root "$RUNS" ;;
    6) sweep --sizes 1.3m-deep --root "$CONTROLS" --set warmup_steps=0 ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
