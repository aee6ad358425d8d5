"""Pythia checkpoints (hub or local root), diagnostic scoring, hidden-state geometry (claim C7).

The paper's Pythia validation: for each training revision of a Pythia model,
the accuracy on seven easy diagnostics and one hard logical-deduction task
(:mod:`geomcap.diagnostics`) and the RankMe of the hidden states at the scored
position, per layer; then acquisition and the RankMe precursor gap with the
same events code as the algorithmic runs (:mod:`geomcap.events`). The names of the revisions and the readers
of the stored runs are :mod:`geomcap.analysis`'s (torch-free, importable from here as well); the gap table and
C7's row are :mod:`geomcap.claims.c7`'s.

    from geomcap import pythia
    pythia.run("EleutherAI/pythia-160m", revisions="log", root="data/pythia/runs")   # the hub
    pythia.run("/data/pythia-160m", revisions="all", root="data/pythia/runs")         # a local root
    pythia.build_standin("/tmp/standin")                                              # offline stand-in

Sources. ``model`` is a hub name (``EleutherAI/pythia-160m``, ``-deduped``
variants too) or a local checkpoint root: a folder with one subfolder per
revision named as on the hub (``step0``, ``step1``, ... ``step143000``), each
holding what ``save_pretrained`` writes for a GPTNeoXForCausalLM and its
tokenizer (what ``geomcap pythia standin`` writes). Both go through
``GPTNeoXForCausalLM.from_pretrained`` (float32 on CPU, bfloat16 on GPU; no
remote code); the tokenizer is loaded once, from ``main`` on the hub (some
step branches ship tokenizer files without special tokens) and from the
latest revision of a local root. A revision that cannot be loaded (absent,
truncated, non-finite or missing weights) raises :class:`RevisionUnavailable`,
which :func:`run` reports and skips.

Revision integrity. A revision's name does not guarantee its content (on the hub, most of pythia-2.8b's
early branches serve the final model's file: ``data/pythia/README.md``). :func:`run` records the content
digest of each revision it loads (:mod:`geomcap.digests`: the sha256 of each weight file and of its tensors,
and the hub commit) in each run's ``digests.json``, does not score a revision that holds an earlier one's
weights, and pins each hub revision to its commit (:func:`hub_record`, :func:`revision_folder`); the readers
leave such copies out and refuse a gap measured across them (:mod:`geomcap.analysis.integrity`).

Scoring (:func:`score_items`). Every sequence starts with ``<|endoftext|>``
(id 0, Pythia's document separator), then the context, then one choice;
sequences are right-padded (GPT-NeoX takes positions from arange, so left
padding would shift the rotary positions). One forward pass of the base model
(``model.gpt_neox``) gives every layer's hidden state; the output head is
applied only at the positions that predict scored tokens, never to the whole
(batch, time, 50304) block. For a ``choice`` item the score is the summed
log-probability of the choice's tokens given the context (``accuracy``) and
the same per UTF-8 byte of the choice (``accuracy_norm``, as lm-eval-harness's
acc_norm); for a ``pair`` item, the whole sentence's log-probability (every
token after ``<|endoftext|>``), and per byte of the sentence. The hidden
states kept for RankMe are those at the last context token (the position that
predicts the first answer token), one row per item: N = items, d = width.

Run store. One run directory per (model, benchmark) under ``root`` (named by
the hash of its config, :mod:`geomcap.store`): ``config.json`` with
``family="pythia"``, ``model``, ``size``, ``task`` (the benchmark), ``level``
(easy or hard), ``seed`` (the benchmark's), ``steps`` (the model's training
length: 143000 for Pythia), ``measures``, the benchmark file's hash, the number of items,
chance accuracy and tokens per step; a tidy ``metrics.csv``
(``step`` = the revision's training step; ``accuracy``, ``accuracy_norm``,
``nll`` at layer -1; ``rankme`` and ``rankme_centred`` per layer, 0 =
embeddings, the last after the final LayerNorm); ``status.json`` last. A
revision's metrics are written for every benchmark before the next revision
is loaded; rerunning skips what is stored, so an interrupted run resumes.
"""

from __future__ import annotations

from geomcap.analysis.pythia_revisions import (HUB_NAME, REVISIONS, SCHEDULE_STEPS, SIZES, STANDIN_FILE, STANDIN_NAME,
                                               TOKENS_PER_STEP, available_revisions, check_model, local_revisions,
                                               model_label, revision_name, revision_spec, revision_step,
                                               select_revisions, standin_info)
from geomcap.analysis.pythia_runs import (CPU_FORWARD_SECONDS, check_section, committed_runs_root, cost_estimate,
                                          describe, load_benchmark_runs, model_runs, section_root, select_metrics,
                                          timing_table)
from geomcap.analysis.selection import check_layers
from geomcap.pythia.loading import (RevisionUnavailable, default_dtype, delete_cached_revision, hub_record,
                                    load_pretrained, load_revision, load_tokenizer, revision_folder)
from geomcap.pythia.runs import MEASURES, SCORING, run, run_config
from geomcap.pythia.scoring import Scores, accuracy, benchmark_rows, encode_items, fitting_items, score_items
from geomcap.pythia.standin import (STANDIN_BUILD_KEYS, build_standin, standin_corpus, standin_steps,
                                    train_tokenizer)

__all__ = [
    # names and schedule, sources (geomcap.analysis.pythia_revisions)
    "SCHEDULE_STEPS", "REVISIONS", "TOKENS_PER_STEP", "SIZES", "STANDIN_NAME", "RevisionUnavailable",
    "revision_step", "revision_name", "check_model", "model_label", "local_revisions", "available_revisions",
    "revision_spec", "select_revisions", "standin_info",
    # loading
    "load_tokenizer", "load_revision", "load_pretrained", "default_dtype", "delete_cached_revision",
    "revision_folder", "hub_record",
    # scoring
    "Scores", "encode_items", "fitting_items", "score_items", "accuracy", "benchmark_rows",
    # the run into the store
    "MEASURES", "committed_runs_root", "run_config", "run",
    # the offline stand-in
    "build_standin", "standin_corpus", "standin_steps", "train_tokenizer",
    # reading the store (geomcap.analysis.pythia_runs, torch-free); C7's gap table and row: geomcap.claims.c7
    "load_benchmark_runs", "check_layers", "section_root", "check_section", "model_runs", "select_metrics",
    "timing_table", "describe", "CPU_FORWARD_SECONDS", "cost_estimate",
]
