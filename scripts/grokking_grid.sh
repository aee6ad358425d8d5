#!/usr/bin/env bash
# The runs of the grokking issue (see data/README.md). Resumable: rerun the same command.
#   GROKKING  run store of the grokking runs (default data/grokking)
#   RUNS      run store of the grid (default data/runs): the third seed of every pair classed hard on 405k-deep
#   TWINS     run store of the twins (default data/twins)
#   STAGES    which stages to run (default: all, in order)
set -euo pipefail
cd "$(dirname "$0")/.."
GEOMCAP=${GEOMCAP:-.venv/bin/geomcap}
GROKKING=${GROKKING:-data/grokking}
RUNS=${RUNS:-data/runs}
TWINS=${TWINS:-data/twins}
STAGES=${STAGES:-1 2 3 4}
# Nanda et al. (2023): p = 113, 30% of the pairs, "a b =" with one token per number, one layer (width 128,
# 4 heads, MLP 512, ReLU, no LayerNorm, untied), full batch, AdamW lr 1e-3, weight decay 1, betas (0.9, 0.98),
# 10 warmup steps then constant, no gradient clipping. Checkpoints: every step to 128, then every 50 steps
# (600 over 30,000); the whole training set evaluated at each; stop a quarter of the acquisition step after it.
grokking() {
  GEOMCAP_RUNS="$GROKKING" "$GEOMCAP" train --task mod --level hard --size grok-1l \
    --task-params p=113,train_fraction=0.3,number_tokens=true --full-batch true --schedule constant \
    --warmup-steps 10 --weight-decay 1.0 --beta1 0.9 --beta2 0.98 --lr 1e-3 --grad-clip none \
    --steps 30000 --n-linear-checkpoints 600 --train-eval-size 100000 --stop-margin 0.25 --threads 1 --quiet "$@"
}
sweep() { "$GEOMCAP" sweep --steps easy=2000,medium=4000,hard=8000 --workers 1 --threads 1 --quiet "$@"; }

for stage in $STAGES; do
  case $stage in
    # seed 0 with the LLC (and its health) at every second checkpoint (every 100 steps after step 128)
    1) grokking --seed 0 --measures llc --costly-every 2 ;;
    2) grokking --seed 1
       grokking --seed 2 ;;
    # the pairs classed hard on 405k-deep (add easy/medium, mod easy/medium/hard, mul medium, parity
    # medium/hard) to three seeds; add, mod and parity medium seeds 1-2 come from scripts/controls_grid.sh
    3) sweep --root "$RUNS" --sizes 405k-deep --tasks add,mod --levels easy --seeds 1,2
       sweep --root "$RUNS" --sizes 405k-deep --tasks mul --levels medium --seeds 1,2
       sweep --root "$RUNS" --sizes 405k-deep --tasks mod,parity --levels hard --seeds 2 ;;
    # twins: add medium and hard on 405k, seeds 0-2, each three times with its initial weights multiplied
    # by 1 + 1e-6 z (perturb_seed 1, 2, 3): the same run but for the accident of rounding
    4) for twin in 1 2 3; do
         sweep --root "$TWINS" --sizes 405k --tasks add --levels medium,hard --seeds 0,1,2 \
           --set perturb=1e-6 --set perturb_seed="$twin"
       done ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
