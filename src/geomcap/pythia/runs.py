"""The run: every (revision, benchmark) of a model scored into the run store, resumable."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from geomcap import diagnostics, store
from geomcap.analysis.integrity import copies_line, earlier_copy, integrity_table
from geomcap.analysis.pythia_revisions import (SCHEDULE_STEPS, TOKENS_PER_STEP, available_revisions, check_model,
                                               model_label, revision_step, select_revisions, standin_info)
from geomcap.analysis.pythia_runs import committed_runs_root
from geomcap.digests import revision_digest, weight_files
from geomcap.models import resolve_device
from geomcap.parameters import PARAMETERS
from geomcap.pythia.loading import (RevisionUnavailable, default_dtype, delete_cached_revision, hub_record,
                                    load_revision, load_tokenizer, revision_folder)
from geomcap.pythia.scoring import benchmark_rows, encode_items, fitting_items, score_items
from geomcap.pythia.standin import recorded_build

#: bump when the scoring changes: it is part of every run's config
SCORING = "loglik-v1: <|endoftext|> + context + choice, right padding; sum and per byte; pairs whole sentence"
MEASURES = ("accuracy", "accuracy_norm", "nll", "rankme", "rankme_centred")


def run_config(model, benchmark: str, label: str | None = None, benchmark_dir=None) -> dict:
    """The config of one (model, benchmark) run: what its run directory's hash is made of."""
    name, size = model_label(model, label)
    items = diagnostics.load_benchmark(benchmark, benchmark_dir)
    local = check_model(model) == "local"
    info = standin_info(model) if local else None
    bench = diagnostics.BENCHMARKS[benchmark]
    # steps: the model's training length, as in an algorithmic run's config; a local root without
    # standin.json is taken to be Pythia's (143000 steps of 1024 x 2048 tokens), however many revisions it holds
    steps = info["steps"] if info else SCHEDULE_STEPS[-1]
    return {"family": "pythia", "model": name, "size": size, "task": benchmark, "level": bench.level,
            "seed": bench.seed, "steps": steps, "measures": list(MEASURES),
            "benchmark_sha": diagnostics.file_sha(benchmark, benchmark_dir),
            "n_items": len(items), "chance": diagnostics.chance(items),
            "tokens_per_step": info["tokens_per_step"] if info else TOKENS_PER_STEP,
            "standin": recorded_build(info) if info else None, "scoring": SCORING}


def _stored_steps(run_dir: Path) -> set[int]:
    if not (run_dir / store.METRICS_FILE).exists():
        return set()
    m = store.read_metrics(run_dir)
    return set(int(s) for s in m.loc[m["measure"] == "accuracy", "step"])


def run(model, revisions="all", benchmarks="all", root=None, *, cache_dir=None, delete_downloads: bool = False,
        device: str = "auto", dtype=None, batch_tokens: int | None = PARAMETERS["batch_tokens"].default,
        label: str | None = None, benchmark_dir=None, progress: bool = True, log=None) -> dict:
    """Metrics of every (revision, benchmark) into the run store; resumable.

    For each revision in step order: skip it when every benchmark has it
    stored; else load it (one revision in memory at a time), record its
    content digest (:func:`geomcap.digests.revision_digest`: the sha256 of each
    weight file and of its tensors, and the hub commit it was downloaded
    from) in each run's ``digests.json``, score every benchmark still missing
    it, write each benchmark's metrics.csv, free the model and, with
    ``delete_downloads`` (hub only), remove the revision from the download
    cache. A revision that holds the same weights as an earlier one
    (:func:`geomcap.analysis.integrity.earlier_copy`) is not scored: it is
    recorded as a duplicate and named, with the others, in one line through
    ``log``. Where the hub answers (HF_HUB_OFFLINE unset), each revision is
    pinned to its commit and compared by the hub's record of its files before
    it is downloaded (:func:`hub_record`); a resumed run loads a revision at the
    commit it recorded. A revision that cannot be loaded is reported through
    ``log`` and skipped. ``status.json`` of each run is written at the end.

    Returns ``{"run_dirs": {benchmark: path}, "stored": [revisions computed now],
    "skipped": {revision: reason}, "duplicates": {revision: the earlier revision
    whose weights it holds}, "seconds": {revision: seconds}}``.

    ``batch_tokens`` (None: 4096 on the CPU, 16384 on CUDA) is checked through the row of ``geomcap pythia run
    --batch-tokens`` (``geomcap.parameters.PARAMETERS``) before anything is loaded or written: the same reason.
    """
    from tqdm import tqdm

    source = check_model(model)
    benchmarks = PARAMETERS["benchmarks"].chosen(benchmarks)
    batch_tokens = PARAMETERS["batch_tokens"].check(batch_tokens)  # "batch_tokens must be a positive integer, got 0"
    chosen = select_revisions(revisions, available_revisions(model))
    dev = resolve_device(device)
    dtype = default_dtype(dev) if dtype is None else dtype
    batch_tokens = batch_tokens or (16384 if dev.type == "cuda" else 4096)
    log = log or (lambda msg: tqdm.write(msg, file=sys.stderr))
    root = Path(root) if root is not None else committed_runs_root()
    name = model_label(model, label)[0]

    run_dirs, items, done, rows = {}, {}, {}, {}
    digests = {}  # revision -> content digest: one model, so the same in every benchmark's run
    for b in benchmarks:
        config = run_config(model, b, label, benchmark_dir)
        run_dir = store.run_dir_for(config, root)
        run_dir.mkdir(parents=True, exist_ok=True)
        if not (run_dir / store.CONFIG_FILE).exists():
            prov = {**store.provenance(str(dev)), "source": str(model), "dtype": str(dtype).replace("torch.", "")}
            store.atomic_write_json(run_dir / store.CONFIG_FILE, {**config, "provenance": prov})
        run_dirs[b], items[b], done[b] = run_dir, diagnostics.load_benchmark(b, benchmark_dir), _stored_steps(run_dir)
        old = store.read_metrics(run_dir) if done[b] else pd.DataFrame(columns=store.METRIC_COLUMNS)
        rows[b] = list(old.itertuples(index=False, name=None))
        digests.update(store.read_digests(run_dir))

    def record(revision: str, digest: dict) -> str | None:
        """Store a revision's digest in every run; the earlier revision whose weights it holds, if any."""
        digests[revision] = digest
        for b in benchmarks:
            store.write_digests(run_dirs[b], digests)
        return earlier_copy(digests, revision)

    def release(revision: str) -> None:
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        if delete_downloads and source == "hub":
            freed = delete_cached_revision(str(model), revision, cache_dir)
            log(f"{revision}: removed from the download cache ({freed / 1e9:.2f} GB)")

    tokenizer, sequences, scored_items, too_long = None, {}, {}, {}
    stored, skipped, duplicates, seconds, load_seconds = [], {}, {}, {}, {}
    score_seconds = {b: {} for b in benchmarks}
    bar = tqdm(chosen, desc=f"{name} revisions", unit="rev", disable=not progress)
    for revision in bar:
        step = revision_step(revision)
        todo = [b for b in benchmarks if step not in done[b]]
        known = earlier_copy(digests, revision) if revision in digests else None
        if known:  # a copy found before: not loaded again
            duplicates[revision] = known
            continue
        if not todo:
            folder = Path(str(model)).expanduser() / revision
            if source == "local" and revision not in digests and weight_files(folder):  # stored before digests were
                record(revision, revision_digest(folder, step))
            continue
        bar.set_postfix_str(revision)
        remote = hub_record(model, revision) if source == "hub" else None
        twin = record(revision, remote) if remote is not None else None
        if twin:  # the hub's record of its files shows a copy: nothing downloaded
            duplicates[revision] = twin
            continue
        pinned = (digests.get(revision) or {}).get("commit")
        try:
            if tokenizer is None:  # once, when the first revision is needed
                tokenizer = load_tokenizer(model, cache_dir)
            start = time.perf_counter()
            net = load_revision(model, revision, cache_dir=cache_dir, device=dev, dtype=dtype, commit=pinned)
            folder, commit = revision_folder(model, pinned or revision, cache_dir)
            twin = record(revision, revision_digest(folder, step, commit))
        except RevisionUnavailable as exc:
            skipped[revision] = str(exc)
            log(f"skipped: {exc}")
            if delete_downloads and source == "hub":  # a broken download must not stay in the cache
                delete_cached_revision(str(model), revision, cache_dir)
            continue
        load_seconds[revision] = time.perf_counter() - start
        if twin:  # the same weights as an earlier revision: nothing to score
            duplicates[revision] = twin
            del net
            release(revision)
            continue
        start = time.perf_counter()
        for b in todo:
            t_bench = time.perf_counter()
            if b not in sequences:  # items longer than the model's context are left out, counted and reported
                positions = net.config.max_position_embeddings
                scored_items[b], sequences[b], too_long[b] = fitting_items(
                    items[b], encode_items(tokenizer, items[b]), positions)
                if not scored_items[b]:
                    raise ValueError(f"benchmark {b}: none of its {len(items[b])} items fits the model's "
                                     f"{positions} positions")
                if too_long[b]:
                    log(f"{b}: {too_long[b]} of {len(items[b])} items are longer than the model's {positions} "
                        "positions: left out, the measures are over the others")
            scores = score_items(net, tokenizer, scored_items[b], batch_tokens=batch_tokens, sequences=sequences[b])
            rows[b] += benchmark_rows(step, scores)
            rows[b].sort(key=lambda r: (r[0], r[2], r[1]))
            store.write_metrics(run_dirs[b], rows[b])  # stored before the next revision is loaded
            done[b].add(step)
            score_seconds[b][revision] = round(time.perf_counter() - t_bench, 3)
        seconds[revision] = time.perf_counter() - start
        stored.append(revision)
        del net
        release(revision)

    line = copies_line(integrity_table(digests), name) if digests else None
    if line:
        log(f"warning: {line}")
    for b in benchmarks:
        old = store.read_status(run_dirs[b]) or {}
        status = {"complete": True, "revisions": sorted(done[b]),
                  "skipped": {**old.get("skipped", {}), **skipped},
                  "duplicates": {**old.get("duplicates", {}), **duplicates},
                  "score_seconds": {**old.get("score_seconds", {}), **score_seconds[b]},
                  "load_seconds": {**old.get("load_seconds", {}), **{r: round(s, 3) for r, s in load_seconds.items()}},
                  "device": str(dev), "dtype": str(dtype).replace("torch.", ""), "batch_tokens": batch_tokens,
                  "items_too_long": too_long.get(b, old.get("items_too_long", 0))}
        for r in [*status["revisions"], *(revision_step(d) for d in status["duplicates"])]:
            status["skipped"].pop(f"step{r}", None)
        store.atomic_write_json(run_dirs[b] / store.STATUS_FILE, status)
    return {"run_dirs": run_dirs, "stored": stored, "skipped": skipped, "duplicates": duplicates,
            "seconds": seconds}
