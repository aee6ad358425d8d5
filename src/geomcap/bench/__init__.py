"""Benchmarks: how fast geomcap trains and measures, against a peer and this machine's limits.

``geomcap bench`` (``run_bench``) measures, in one process, each figure as
the median of several timed repetitions after a warm-up:

* ``throughput`` -- training throughput (tokens/s) of each preset that fits
  the device, for geomcap's model and for a *peer*: the same shape built
  from ``transformers`` (GPT-2: same width, depth, heads, MLP ratio,
  vocabulary, context and tied embeddings; exact GELU, no dropout; the
  parameter count is identical). Both go through one shared loop
  (``make_train_step``: the loop of ``geomcap.train.train`` -- batch drawn
  from pre-generated tensors on the device, bf16 autocast on CUDA,
  cross-entropy on the answer tokens, AdamW, gradient clipping). The models
  are timed in interleaved *rounds* (geomcap, peer, [compiled geomcap], a
  matmul-peak sample, then again), so a change in the machine's load hits
  all of them alike; each ratio is the median of the per-round ratios.
  Achieved FLOP/s = ``flops_per_token`` x tokens/s, as a fraction of the
  matmul peak sampled in the same round.
* ``geometry`` -- the cost of one checkpoint of ``geomcap.train.evaluate``
  (the model-level evaluation, and inside it the geometry: four RankMe
  variants on every layer + the linear probes), as a share of the training
  time of a run at the default checkpoint schedule; training steps and
  checkpoints are again timed in alternation.
* ``costly`` -- seconds per evaluation of each costly training-dynamics
  measure (per-example gradients, gradient effective rank, gradient
  covariance rank, Hessian top-k, LLC) on the 405k model, as training-step
  equivalents and as a share of a run that records them on every 4th checkpoint.
* ``rankme`` -- ``geomcap.geometry.rankme`` against a naive float64 SVD
  (``numpy.linalg.svd(Z.astype(float64), compute_uv=False)``) for N x d
  matrices; times and the largest difference in value.
* ``threads`` (optional) -- one ``geomcap train`` run per thread setting
  while other processes keep cores busy.
* ``llc_calibration`` (optional) -- the LLC estimated with fewer SGLD chains and
  draws than ``LLC_DEFAULTS``, at checkpoints of one grid run, over several
  SGLD seeds: the cost of each setting against its noise and its bias
  (``benchmarks/llc_settings.py`` then trains a setting on whole grid runs and
  compares it with their LLC: ``llc_setting_agreement``).

The book build and ``make test`` time the checkout, not the library:
``benchmarks/suite_times.py`` records them (``book``, ``make_test``) in a
result, and ``figures_table`` reads them there.

The machines are shared: the result records the load average at the start
and end of every part, and the ratios -- measured side by side -- are the
figures to compare across machines; absolute figures are given beside them.

FLOPs (``flops_per_token``): 6 N + 12 L d T per trained token (the
"model FLOPs" of Chowdhery et al. 2022, PaLM appendix B: N = parameters
that take part in matrix products, i.e. all but the position table, the tied
embedding counted once as the output layer; L layers, width d, sequence
length T; the attention term as non-causal). Matmul peak: a square
``peak_n`` x ``peak_n`` product (2 n^3 FLOPs; n = 2048 on the CPU, 8192 on
CUDA by default) in float32 on the CPU, in bf16 on CUDA (the dtype training
runs its matrix products in under autocast).
"""

from __future__ import annotations

from geomcap.bench.machine import (committed_results_dir, default_output_name, load_average, machine_info, matmul_peak,
                                   peak_dtype, summarize, time_once, time_repeats)
from geomcap.bench.step import (GRID_STEPS, PEERS, build_peer, flops_per_token, make_train_step,
                                select_presets, thread_contention, throughput)
from geomcap.bench.measures import (COSTLY_PARTS, LLC_CALIBRATION_STEPS, LLC_MAX_BIAS, LLC_MIN_SIGNAL_TO_NOISE,
                                    LLC_SETTINGS, RANKME_D, RANKME_N, cheapest_adequate_llc,
                                    costly_checkpoint_fraction, costly_cost, geometry_cost, llc_calibration,
                                    llc_setting_agreement, llc_settings_table, naive_rankme, rankme_test_matrix,
                                    rankme_vs_naive)
from geomcap.bench.projections import TARGETS, check_targets, project_grid
from geomcap.bench.report import (ALL_PARTS, DEFAULT_PARTS, OPTIONAL_PARTS, figures_table, load_results, parse_parts,
                                  parse_sizes, run_bench)

__all__ = [
    "committed_results_dir", "load_average", "machine_info", "default_output_name", "time_once",
    "time_repeats",
    "summarize", "peak_dtype", "matmul_peak", "PEERS", "GRID_STEPS", "flops_per_token",
    "build_peer", "make_train_step", "select_presets", "throughput", "thread_contention", "RANKME_N", "RANKME_D",
    "COSTLY_PARTS", "LLC_SETTINGS", "LLC_CALIBRATION_STEPS", "llc_calibration", "llc_settings_table", "llc_setting_agreement",
    "LLC_MIN_SIGNAL_TO_NOISE", "LLC_MAX_BIAS", "cheapest_adequate_llc", "costly_checkpoint_fraction",
    "geometry_cost", "costly_cost", "naive_rankme", "rankme_test_matrix", "rankme_vs_naive",
    "TARGETS", "check_targets", "project_grid", "DEFAULT_PARTS",
    "OPTIONAL_PARTS", "ALL_PARTS", "parse_parts", "parse_sizes", "run_bench", "load_results", "figures_table",
]
