#!/usr/bin/env bash
# The CPU-scale re-run under the stated protocol (dense checkpoints, redefined levels, depth
# variants, early stop after acquisition), committed under data/runs (see data/README.md).
# Resumable: rerun the same script and finished runs are reused, interrupted ones resume from
# their last checkpoint. Two worker processes with one thread each (one per core).
#   ROOT          run store (default data/runs)
#   STAGES        which stages to run, e.g. "1 2" (default: all, in order)
#   COSTLY_TASKS  tasks whose hard level gets the costly measures in stage 6 (default add)
set -euo pipefail
cd "$(dirname "$0")/.."
GEOMCAP=${GEOMCAP:-.venv/bin/geomcap}
ROOT=${ROOT:-data/runs}
STAGES=${STAGES:-1 2 3 4 5 6 7}
COSTLY_TASKS=${COSTLY_TASKS:-add}
STEPS="easy=2000,medium=4000,hard=8000"
sweep() { "$GEOMCAP" sweep --steps "$STEPS" --root "$ROOT" --workers 2 --threads 1 --quiet "$@"; }

for stage in $STAGES; do
  case $stage in
    # 1. the pilot: seed 0 of every task x level on the smallest preset, the least certain levels first
    1) sweep --tasks parity,mul,mod,add --levels hard,easy,medium --sizes 405k --seeds 0
       sweep --tasks copy,reverse,compare,sort --levels all --sizes 405k --seeds 0 ;;
    # 2. the depth variant of the smallest preset (6 blocks): every task x level, seed 0
    2) sweep --tasks all --levels all --sizes 405k-deep --seeds 0 ;;
    # 3. two more seeds of the smallest preset
    3) sweep --tasks all --levels all --sizes 405k --seeds 1,2 ;;
    # 4. the second preset, hard level, two seeds (for C8), and a second seed of the depth variant
    4) sweep --tasks all --levels hard --sizes 1.3m --seeds 0,1
       sweep --tasks all --levels hard --sizes 405k-deep --seeds 1 ;;
    # 5. the deeper variant of the second preset (8 blocks), hard level, seed 0
    5) sweep --tasks all --levels hard --sizes 1.3m-deep --seeds 0 ;;
    # 6. the costly training-dynamics measures on three seeds of the levels the pilot classed hard from
    #    behaviour (add medium and hard; mod and mul hard came out intermediate, parity is hard on 405k-deep only)
    6) sweep --tasks "$COSTLY_TASKS" --levels hard --sizes 405k --seeds 0,1,2 \
           --measures grad_rank,grad_cov_rank,hessian,llc
       sweep --tasks add --levels medium --sizes 405k --seeds 0,1,2 --measures grad_rank,grad_cov_rank,hessian,llc ;;
    # 7. the costly measures at every checkpoint of a window around acquisition (costly_window) on add hard
    #    seeds 0-2, so that a lead shorter than costly_every checkpoints can be told from synchrony. Training
    #    is deterministic, so the window is placed from the acquisition step of the seed's run from stage 3/6:
    #    750 steps before it (past the costly checkpoint before the earliest LLC transition stage 6 found,
    #    525 steps ahead) to 110 steps after it (two checkpoints)
    7) for seed in 0 1 2; do
         acq=$(.venv/bin/python -c "from geomcap import results as r
print(int(r.summary_table(r.load_runs('$ROOT', task='add', level='hard', size='405k', seed=$seed))['acquisition_step'].iloc[0]))")
         GEOMCAP_RUNS="$ROOT" "$GEOMCAP" train --task add --level hard --size 405k --seed "$seed" --steps 8000 \
           --measures grad_rank,grad_cov_rank,hessian,llc --costly-window "$((acq - 750)),$((acq + 110))" --threads 1 --quiet
       done ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
