#!/usr/bin/env bash
# The CPU-scale reproduction committed under data/runs (see data/README.md).
# Resumable: rerun the same script and finished runs are reused, interrupted
# ones resume from their last checkpoint. Two worker processes (one per core).
set -euo pipefail
cd "$(dirname "$0")/.."
GEOMCAP=${GEOMCAP:-.venv/bin/geomcap}
ROOT=${ROOT:-data/runs}
STEPS="easy=2000,medium=4000,hard=3000"

# 1. seed 0 of every task x level on the smallest preset; the easy and hard levels
#    also record the costly training-dynamics measures (every 4th checkpoint)
"$GEOMCAP" sweep --tasks all --levels medium --sizes 405k --seeds 0 --steps "$STEPS" --root "$ROOT" --workers 2 --quiet
"$GEOMCAP" sweep --tasks all --levels easy,hard --sizes 405k --seeds 0 --steps "$STEPS" --root "$ROOT" --workers 2 \
    --measures grad_rank,grad_cov_rank,hessian,llc --quiet
# 2. the second preset on the hard level of every task, seed 0 (the first preset with three
#    blocks, so the first where the top-down ordering of C3 can be graded)
"$GEOMCAP" sweep --tasks all --levels hard --sizes 1.3m --seeds 0 --steps "$STEPS" --root "$ROOT" --workers 2 --quiet
# 3. two more seeds of the whole grid on the smallest preset
"$GEOMCAP" sweep --tasks all --levels all --sizes 405k --seeds 1,2 --steps "$STEPS" --root "$ROOT" --workers 2 --quiet
# 4. a second seed of the second preset
"$GEOMCAP" sweep --tasks all --levels hard --sizes 1.3m --seeds 1 --steps "$STEPS" --root "$ROOT" --workers 2 --quiet
