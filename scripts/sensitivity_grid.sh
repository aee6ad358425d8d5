#!/usr/bin/env bash
# How much do the settings the paper leaves unstated move the claims? (book page "Sensitivity").
# Three hard tasks (mod, add, sort: acquired at the defaults, and cheap) on the smallest preset,
# seeds 0, 1 and 2, 3000 steps -- the committed grid's hard runs in data/runs are the baseline (warmup min(100, steps/10), lr 1e-3, weight decay 0.1, 1.0 for mod) --
# each rerun with one setting changed, into data/sensitivity; and the answer format: add, mod and mul
# (mul hard is never acquired at the defaults) with answers least significant digit first.
# Resumable, like cpu_grid.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
GEOMCAP=${GEOMCAP:-.venv/bin/geomcap}
ROOT=${ROOT:-data/sensitivity}
WORKERS=${WORKERS:-2}
COMMON=(--levels hard --sizes 405k --seeds 0,1,2 --steps 3000 --root "$ROOT" --workers "$WORKERS" --threads 1 --quiet)
"$GEOMCAP" sweep --tasks mod,add,sort "${COMMON[@]}" --set warmup_steps=0     # no warmup (a first probe of grokking on mod had none)
"$GEOMCAP" sweep --tasks mod,add,sort "${COMMON[@]}" --set lr=3e-4            # a third of the learning rate
"$GEOMCAP" sweep --tasks mod,add,sort "${COMMON[@]}" --set weight_decay=0     # no weight decay
"$GEOMCAP" sweep --tasks add,mod,mul "${COMMON[@]}" --set answer_order=lsd  # answers least significant digit first (numeric tasks only)
