"""Pythia checkpoints (hub or local root), diagnostic scoring, hidden-state geometry (claim C7).

The paper's Pythia validation: for each training revision of a Pythia model,
the accuracy on seven easy diagnostics and one hard logical-deduction task
(:mod:`geomcap.diagnostics`) and the RankMe of the hidden states at the scored
position, per layer; then acquisition and the RankMe precursor gap with the
same events code as the algorithmic runs (:mod:`geomcap.events`).

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

import gc
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from geomcap import diagnostics, events, geometry, store
from geomcap.parameters import ParameterError

__all__ = [
    "SCHEDULE_STEPS", "REVISIONS", "TOKENS_PER_STEP", "PAPER_GAP_STEPS", "PAPER_MODEL", "SIZES",
    "RevisionUnavailable", "hub_name", "revision_step", "check_model", "local_revisions",
    "select_revisions", "load_tokenizer", "load_revision", "load_pretrained", "delete_cached_revision", "Scores",
    "score_items", "accuracy", "benchmark_rows", "run", "build_standin", "standin_info", "load_runs",
    "summary_table", "section_runs", "claim_from_store", "select_metrics", "claim_c7", "describe", "timing_table", "cost_estimate",
    "check_benchmarks", "check_layers", "available_revisions", "data_root", "encode_items",
    "CPU_FORWARD_SECONDS",
]

#: Pythia's 154 checkpoints: step0, the log-spaced step1 .. step512, then every 1000 steps to 143000
SCHEDULE_STEPS = (0,) + tuple(2 ** k for k in range(10)) + tuple(range(1000, 143_001, 1000))
REVISIONS = tuple(f"step{s}" for s in SCHEDULE_STEPS)
#: one Pythia step = a batch of 1024 sequences of 2048 tokens
TOKENS_PER_STEP = 1024 * 2048
#: the paper's (v4) RankMe precursor gap on logical deduction, Pythia-2.8B
PAPER_GAP_STEPS = 49_000
PAPER_MODEL = "EleutherAI/pythia-2.8b"
SIZES = ("70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b")
HUB_NAME = re.compile(r"^EleutherAI/pythia-(70m|160m|410m|1b|1\.4b|2\.8b|6\.9b|12b)(-deduped)?$")
STANDIN_FILE = "standin.json"
#: the name a stand-in gives itself in the run store (``model`` field)
STANDIN_NAME = "standin"
#: bump when the scoring changes: it is part of every run's config
SCORING = "loglik-v1: <|endoftext|> + context + choice, right padding; sum and per byte; pairs whole sentence"
MEASURES = ("accuracy", "accuracy_norm", "nll", "rankme", "rankme_centred")


class RevisionUnavailable(Exception):
    """A revision that cannot be loaded: absent from the hub or the root, or broken."""


# ---------------------------------------------------------------------------
# names, schedule, sources
# ---------------------------------------------------------------------------


def hub_name(size: str, deduped: bool = False) -> str:
    """``hub_name("2.8b") -> "EleutherAI/pythia-2.8b"``."""
    if size not in SIZES:
        raise ValueError(f"unknown Pythia size {size!r}; choose from: {', '.join(SIZES)}")
    return f"EleutherAI/pythia-{size}" + ("-deduped" if deduped else "")


def revision_step(revision: str) -> int:
    """``"step3000" -> 3000``; ValueError for anything else (``main`` included: name the step)."""
    match = re.fullmatch(r"step(\d+)", str(revision))
    if not match:
        raise ValueError(f"revision {revision!r} is not of the form stepN (e.g. step0, step143000)")
    return int(match.group(1))


def _revision(value) -> str:
    """A revision name from 'step1000', '1000' or 1000."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return f"step{int(value)}"
    text = str(value).strip()
    if text.isdigit():
        return f"step{int(text)}"
    revision_step(text)
    return text


def local_revisions(root) -> list[str]:
    """The ``stepN`` subfolders of a local checkpoint root, by step."""
    root = Path(root)
    names = [p.name for p in root.iterdir() if p.is_dir() and re.fullmatch(r"step\d+", p.name)]
    return sorted(names, key=revision_step)


def is_local(model: str) -> bool:
    return Path(str(model)).expanduser().is_dir()


def check_model(model) -> str:
    """``"hub"`` or ``"local"``; ValueError (naming the parameter) for anything else."""
    if not isinstance(model, (str, os.PathLike)) or not str(model):
        raise ValueError(f"model: expected a hub name or a local checkpoint root, got {model!r}")
    path = Path(str(model)).expanduser()
    if path.is_dir():
        if not local_revisions(path):
            raise ValueError(f"model: {model} holds no stepN subfolder; a local checkpoint root has one "
                             "subfolder per revision (step0, step1000, ...), as `geomcap pythia standin` writes")
        return "local"
    if HUB_NAME.match(str(model)):
        return "hub"
    raise ValueError(f"model: {model!r} is neither a Pythia hub name (EleutherAI/pythia-SIZE[-deduped], "
                     f"SIZE in {', '.join(SIZES)}) nor an existing local checkpoint root")


def standin_info(model) -> dict | None:
    """The ``standin.json`` of a local root built by :func:`build_standin`, else None."""
    path = Path(str(model)).expanduser() / STANDIN_FILE
    return json.loads(path.read_text()) if path.exists() else None


def model_label(model, label: str | None = None) -> tuple[str, str]:
    """(model, size) as recorded in the run store: the hub name and its size suffix; for a local
    root ``label``, else the stand-in's name, else the folder's name (for both)."""
    if check_model(model) == "hub":
        return str(model), str(model).split("pythia-", 1)[1]
    info = standin_info(model)
    name = label or (info["name"] if info else Path(str(model)).expanduser().resolve().name)
    return name, name


def available_revisions(model) -> list[str]:
    """Revisions a model can have: the 154-step schedule on the hub, the subfolders of a local root."""
    return list(REVISIONS) if check_model(model) == "hub" else local_revisions(Path(str(model)).expanduser())


def _log_spaced(steps: list[int]) -> list[int]:
    """Step 0, then each step at least twice the last kept one, then the last step."""
    kept = []
    for s in steps:
        if not kept or s >= 2 * max(kept[-1], 1) or (kept[-1] == 0 and s > 0):
            kept.append(s)
    if steps and kept[-1] != steps[-1]:
        kept.append(steps[-1])
    return kept


def select_revisions(spec, available) -> list[str]:
    """Revision names from a specification, in step order.

    spec: ``"all"``; ``"log"`` (step 0, then each revision at least twice the
    previous one's step, then the last: 19 of Pythia's 154); ``"every:K"``
    (every revision below step K, the multiples of K, the last); or revisions
    as a list or a comma-separated string (``"step0,step1000"``, ints allowed).
    ``available``: the revisions to choose from (:func:`available_revisions`).
    Named revisions outside ``available`` are kept (a missing one is reported
    when it is loaded) unless ``available`` is the hub schedule, where such a
    name is a mistake: ValueError.
    """
    available = sorted(available, key=revision_step)
    steps = [revision_step(r) for r in available]
    if isinstance(spec, str) and spec.strip() == "all":
        return list(available)
    if isinstance(spec, str) and spec.strip() == "log":
        return [f"step{s}" for s in _log_spaced(steps)]
    if isinstance(spec, str) and spec.strip().startswith("every:"):
        text = spec.strip()[len("every:"):]
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"revisions: every:K needs a positive integer K, got {spec!r}")
        k = int(text)
        chosen = [s for s in steps if s < k or s % k == 0] + steps[-1:]
        return [f"step{s}" for s in sorted(set(chosen))]
    names = [r for r in spec.split(",") if r.strip()] if isinstance(spec, str) else list(spec)
    if not names:
        raise ValueError("revisions: empty selection")
    try:
        chosen = sorted({_revision(r) for r in names}, key=revision_step)
    except ValueError as exc:
        raise ValueError(f"revisions: {exc}; or use all, log, every:K") from None
    if list(available) == list(REVISIONS):
        outside = [r for r in chosen if r not in REVISIONS]
        if outside:
            raise ValueError(f"revisions: {', '.join(outside)} not in Pythia's schedule (step0, step1, step2, "
                             "step4, ..., step512, then step1000 ... step143000 every 1000)")
    return chosen


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------


def resolve_device(device: str = "auto") -> torch.device:
    from geomcap.train import resolve_device as _resolve

    return _resolve(device)


def default_dtype(device) -> torch.dtype:
    """float32 on CPU, bfloat16 on GPU (Pythia was trained in fp16; bf16 keeps its range)."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # "Writing model shards", "Loading weights": one line per revision is noise
    os.environ.setdefault("DISABLE_SAFETENSORS_CONVERSION", "1")  # no background conversion call to the hub


def load_tokenizer(model, cache_dir=None):
    """The tokenizer of a model: from ``main`` on the hub, from the latest revision of a local root."""
    from transformers import AutoTokenizer

    _quiet_transformers()
    try:
        if check_model(model) == "hub":
            return AutoTokenizer.from_pretrained(str(model), revision="main", cache_dir=cache_dir)
        root = Path(str(model)).expanduser()
        folder = root / "main" if (root / "main").is_dir() else root / local_revisions(root)[-1]
        return AutoTokenizer.from_pretrained(str(folder))
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - any loading failure is reported with its cause
        raise RevisionUnavailable(f"{model}: cannot load the tokenizer: {type(exc).__name__}: {exc}") from exc


def load_revision(model, revision: str, cache_dir=None, device="cpu", dtype=None):
    """One revision as a GPTNeoXForCausalLM in eval mode on ``device``.

    ``model``: a hub name (downloaded into ``cache_dir``, or read from it when
    the hub is unreachable and HF_HUB_OFFLINE=1) or a local root (``model/revision``).
    ``dtype``: default float32 on CPU, bfloat16 on GPU.

    Raises
    ------
    RevisionUnavailable
        The revision is absent (no such branch or folder), or its weights are
        incomplete (missing tensors) or non-finite; the message says which.
    """
    from transformers import GPTNeoXForCausalLM

    _quiet_transformers()
    revision = _revision(revision)
    device = torch.device(device)
    dtype = default_dtype(device) if dtype is None else dtype
    source = check_model(model)
    if source == "local":
        folder = Path(str(model)).expanduser() / revision
        if not folder.is_dir():
            have = local_revisions(Path(str(model)).expanduser())
            raise RevisionUnavailable(f"{model}: revision {revision} missing: no folder {folder} "
                                      f"({len(have)} revisions there, {have[0]} .. {have[-1]})")
        args, kwargs = (str(folder),), {}
    else:
        args, kwargs = (str(model),), {"revision": revision, "cache_dir": cache_dir}
    return load_pretrained(*args, model_class=GPTNeoXForCausalLM, device=device, dtype=dtype,
                           what=f"{model}: revision {revision}", **kwargs)


def load_pretrained(source, *, model_class=None, device="cpu", dtype=None, what=None, **kwargs):
    """A model saved with ``save_pretrained`` (a folder, or a hub name with ``revision=``), checked, in eval mode.

    The one loading path for checkpoints: :func:`load_revision` (Pythia) and
    ``geomcap checkpoints`` (any causal LM) call it. ``model_class``: default
    ``AutoModelForCausalLM`` (the architecture from the folder's config.json);
    no remote code. Weights load safely: safetensors, or ``torch.load`` with
    ``weights_only=True`` for a ``.bin`` file. ``what`` names the checkpoint in
    messages. ``dtype``: default float32 on CPU, bfloat16 on GPU.

    Raises
    ------
    RevisionUnavailable
        The checkpoint is absent or unreadable, or its weights are incomplete
        (missing tensors) or non-finite; the message says which.
    """
    if model_class is None:
        from transformers import AutoModelForCausalLM as model_class

    _quiet_transformers()
    device = torch.device(device)
    dtype = default_dtype(device) if dtype is None else dtype
    what = what or str(source)
    try:
        net, info = model_class.from_pretrained(str(source), dtype=dtype, output_loading_info=True,
                                                weights_only=True, trust_remote_code=False, **kwargs)
    except Exception as exc:  # noqa: BLE001 - absent branch, offline miss, truncated file, ...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RevisionUnavailable(f"{what} unavailable: {type(exc).__name__}: {reason}") from exc
    missing = [k for k in info.get("missing_keys", ()) if "inv_freq" not in k and "masked_bias" not in k]
    if missing:
        raise RevisionUnavailable(f"{what} broken: {len(missing)} weights missing "
                                  f"({', '.join(sorted(missing)[:3])}, ...)")
    if not all(bool(torch.isfinite(p).all()) for p in net.parameters()):
        raise RevisionUnavailable(f"{what} broken: non-finite weights")
    return net.to(device).eval()


def delete_cached_revision(model: str, revision: str, cache_dir=None) -> int:
    """Remove one hub revision from the download cache (blobs other revisions share are kept).

    Returns the bytes freed (0 when the revision is not cached)."""
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(cache_dir) if cache_dir is not None else scan_cache_dir()
    hashes = [rev.commit_hash for repo in info.repos if repo.repo_id == model and repo.repo_type == "model"
              for rev in repo.revisions if revision in rev.refs]
    if not hashes:
        return 0
    strategy = info.delete_revisions(*hashes)
    strategy.execute()
    return int(strategy.expected_freed_size)


# ---------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scores:
    """Scores of one benchmark at one revision (see :func:`score_items`).

    - ``logprob``: (n_items, max_choices) float64, summed log-probability in nats of each
      choice (pairs: of the whole sentence); NaN where an item has fewer choices.
    - ``n_tokens``, ``n_bytes``: (n_items, max_choices) tokens scored and UTF-8 bytes of the
      scored text.
    - ``answer``: (n_items,) int, the gold choice.
    - ``hidden``: (n_layers + 1, n_items, d) float32 hidden states at the last context token
      (0 = embeddings, the last after the final LayerNorm), or None.
    """

    logprob: np.ndarray
    n_tokens: np.ndarray
    n_bytes: np.ndarray
    answer: np.ndarray
    hidden: np.ndarray | None


def _special_ids(tokenizer) -> tuple[int, int]:
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if bos is None:
        raise ValueError("the tokenizer has neither a bos nor an eos token (Pythia's is <|endoftext|>, id 0)")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else bos
    return int(bos), int(pad)


def encode_items(tokenizer, items: list[dict]) -> list[dict]:
    """One sequence per (item, choice): ids, the first scored index, the scored position.

    ``ids = [<|endoftext|>] + context + choice``; tokens ``ids[score_from:]`` are
    scored (1 for pairs: the whole sentence; after the context for choices);
    ``position = len(context)`` is the last context token's index.
    """
    bos, _ = _special_ids(tokenizer)
    contexts = tokenizer([it["context"] for it in items], add_special_tokens=False)["input_ids"]
    flat_choices = [c for it in items for c in it["choices"]]
    choice_ids = iter(tokenizer(flat_choices, add_special_tokens=False)["input_ids"])
    sequences = []
    for i, (item, ctx) in enumerate(zip(items, contexts)):
        if not ctx:
            raise ValueError(f"item {item.get('id', i)}: empty context")
        for j, choice in enumerate(item["choices"]):
            ch = next(choice_ids)
            pair = item["kind"] == "pair"
            text = item["context"] + choice if pair else choice
            sequences.append({"item": i, "choice": j, "ids": [bos, *ctx, *ch], "position": len(ctx),
                              "score_from": 1 if pair else 1 + len(ctx), "n_bytes": len(text.encode())})
    return sequences


def fitting_items(items: list[dict], sequences: list[dict], max_positions: int) -> tuple[list[dict], list[dict], int]:
    """The items each of whose sequences (:func:`encode_items`) fits in ``max_positions`` tokens, their
    sequences (items renumbered in order), and the number of items left out (longer than the context)."""
    too_long = {s["item"] for s in sequences if len(s["ids"]) > max_positions}
    index = {old: new for new, old in enumerate(i for i in range(len(items)) if i not in too_long)}
    return ([items[i] for i in index], [{**s, "item": index[s["item"]]} for s in sequences if s["item"] in index],
            len(too_long))


def _batches(sequences: list[dict], batch_tokens: int) -> list[list[dict]]:
    """Longest first, as many sequences per batch as fit in batch_tokens (padded)."""
    order = sorted(sequences, key=lambda s: -len(s["ids"]))
    batches, current = [], []
    for seq in order:
        if current and (len(current) + 1) * len(current[0]["ids"]) > batch_tokens:
            batches.append(current)
            current = []
        current.append(seq)
    if current:
        batches.append(current)
    return batches


@torch.no_grad()
def score_items(model, tokenizer, items: list[dict], batch_tokens: int = 4096, hidden: bool = True,
                sequences: list[dict] | None = None, head_chunk: int = 2048) -> Scores:
    """Log-likelihood of every choice of every item, and the hidden states at the scored position.

    ``model``: a GPTNeoXForCausalLM on its device; ``batch_tokens``: padded
    tokens per forward pass (memory ~ batch_tokens x width x layers with
    ``hidden``); ``sequences``: :func:`encode_items` output, to reuse across revisions.
    The output head runs on ``head_chunk`` scored positions at a time.
    """
    device = next(model.parameters()).device
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    head_weight = head.weight.float()  # log-likelihoods in float32 even when the model runs in bf16
    head_bias = None if head.bias is None else head.bias.float()
    _, pad = _special_ids(tokenizer)
    sequences = encode_items(tokenizer, items) if sequences is None else sequences
    max_len = max(len(s["ids"]) for s in sequences)
    if max_len > model.config.max_position_embeddings:
        raise ValueError(f"a sequence of {max_len} tokens exceeds the model's "
                         f"{model.config.max_position_embeddings} positions")
    n_items, n_choices = len(items), max(len(it["choices"]) for it in items)
    logprob = np.full((n_items, n_choices), np.nan)
    n_tokens = np.zeros((n_items, n_choices), dtype=np.int64)
    n_bytes = np.zeros((n_items, n_choices), dtype=np.int64)
    states = None
    for batch in _batches(sequences, batch_tokens):
        width = len(batch[0]["ids"])
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, seq in enumerate(batch):
            ids[r, : len(seq["ids"])] = torch.tensor(seq["ids"])
            mask[r, : len(seq["ids"])] = 1
        keep = [r for r, seq in enumerate(batch) if seq["choice"] == 0] if hidden else []
        out = base(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=bool(keep),
                   use_cache=False)
        if keep:
            rows = torch.tensor(keep, device=device)
            cols = torch.tensor([batch[r]["position"] for r in keep], device=device)
            picked = torch.stack([h[rows, cols] for h in out.hidden_states]).float().cpu().numpy()
            if states is None:
                states = np.zeros((picked.shape[0], n_items, picked.shape[2]), dtype=np.float32)
            states[:, [batch[r]["item"] for r in keep]] = picked
        # the head only where a scored token is predicted: position t predicts token t + 1
        rows, cols, targets = [], [], []
        for r, seq in enumerate(batch):
            t = range(seq["score_from"] - 1, len(seq["ids"]) - 1)
            rows += [r] * len(t)
            cols += list(t)
            targets += seq["ids"][seq["score_from"]:]
        rows_t, cols_t = torch.tensor(rows, device=device), torch.tensor(cols, device=device)
        targets_t = torch.tensor(targets, device=device)
        token_lp = torch.empty(len(rows), dtype=torch.float64)
        for start in range(0, len(rows), head_chunk):
            sl = slice(start, start + head_chunk)
            logits = torch.nn.functional.linear(out.last_hidden_state[rows_t[sl], cols_t[sl]].float(),
                                                head_weight, head_bias)
            token_lp[sl] = logits.log_softmax(-1).gather(1, targets_t[sl, None])[:, 0].double().cpu()
        per_row = torch.zeros(len(batch), dtype=torch.float64).index_add_(0, torch.tensor(rows), token_lp)
        for r, seq in enumerate(batch):
            i, j = seq["item"], seq["choice"]
            logprob[i, j] = float(per_row[r])
            n_tokens[i, j] = len(seq["ids"]) - seq["score_from"]
            n_bytes[i, j] = seq["n_bytes"]
        del out
    answer = np.array([it["answer"] for it in items], dtype=np.int64)
    return Scores(logprob, n_tokens, n_bytes, answer, states)


def accuracy(scores: Scores) -> dict:
    """accuracy (argmax of the summed log-probability), accuracy_norm (per byte) and nll (mean
    per-token negative log-likelihood of the gold choice, nats)."""
    idx = np.arange(len(scores.answer))
    with np.errstate(invalid="ignore", divide="ignore"):
        per_byte = scores.logprob / scores.n_bytes
    gold_tokens = np.maximum(scores.n_tokens[idx, scores.answer], 1)
    return {"accuracy": float(np.mean(np.nanargmax(scores.logprob, axis=1) == scores.answer)),
            "accuracy_norm": float(np.mean(np.nanargmax(per_byte, axis=1) == scores.answer)),
            "nll": float(np.mean(-scores.logprob[idx, scores.answer] / gold_tokens))}


def benchmark_rows(step: int, scores: Scores) -> list[tuple]:
    """Tidy rows (step, layer, measure, value) of one benchmark at one revision."""
    rows = [(step, -1, name, value) for name, value in accuracy(scores).items()]
    if scores.hidden is not None:
        for centre, name in ((False, "rankme"), (True, "rankme_centred")):
            for layer, value in enumerate(geometry.rankme_by_layer(scores.hidden, centre=centre)):
                rows.append((step, layer, name, value))
    return rows


# ---------------------------------------------------------------------------
# the run: revisions x benchmarks into the run store
# ---------------------------------------------------------------------------


def data_root() -> Path:
    """The committed Pythia run store: <repository>/data/pythia/runs."""
    return Path(__file__).resolve().parents[2] / "data" / "pythia" / "runs"


def check_benchmarks(benchmarks) -> list[str]:
    if isinstance(benchmarks, str):
        benchmarks = list(diagnostics.BENCHMARKS) if benchmarks == "all" else \
            [b.strip() for b in benchmarks.split(",") if b.strip()]
    benchmarks = list(benchmarks)
    for b in benchmarks:
        if b not in diagnostics.BENCHMARKS:
            raise ValueError(f"benchmarks: unknown benchmark {b!r}; choose from: "
                             f"{', '.join(diagnostics.BENCHMARKS)} (or all)")
    if not benchmarks:
        raise ValueError("benchmarks: empty selection")
    return benchmarks


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
            "standin": {k: info[k] for k in STANDIN_BUILD_KEYS} if info else None, "scoring": SCORING}


def _stored_steps(run_dir: Path) -> set[int]:
    if not (run_dir / store.METRICS_FILE).exists():
        return set()
    m = store.read_metrics(run_dir)
    return set(int(s) for s in m.loc[m["measure"] == "accuracy", "step"])


def run(model, revisions="all", benchmarks="all", root=None, *, cache_dir=None, delete_downloads: bool = False,
        device: str = "auto", dtype=None, batch_tokens: int | None = None, label: str | None = None,
        benchmark_dir=None, progress: bool = True, log=None) -> dict:
    """Metrics of every (revision, benchmark) into the run store; resumable.

    For each revision in step order: skip it when every benchmark has it
    stored; else load it (one revision in memory at a time), score every
    benchmark still missing it, write each benchmark's metrics.csv, free the
    model and, with ``delete_downloads`` (hub only), remove the revision from
    the download cache. A revision that cannot be loaded is reported through
    ``log`` and skipped. ``status.json`` of each run is written at the end.

    Returns ``{"run_dirs": {benchmark: path}, "stored": [revisions computed now],
    "skipped": {revision: reason}, "seconds": {revision: seconds}}``.
    """
    from tqdm import tqdm

    source = check_model(model)
    benchmarks = check_benchmarks(benchmarks)
    chosen = select_revisions(revisions, available_revisions(model))
    dev = resolve_device(device)
    dtype = default_dtype(dev) if dtype is None else dtype
    batch_tokens = batch_tokens or (16384 if dev.type == "cuda" else 4096)
    log = log or (lambda msg: tqdm.write(msg, file=sys.stderr))
    root = Path(root) if root is not None else data_root()

    run_dirs, items, done, rows = {}, {}, {}, {}
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

    tokenizer, sequences, scored_items, too_long = None, {}, {}, {}
    stored, skipped, seconds, load_seconds = [], {}, {}, {}
    score_seconds = {b: {} for b in benchmarks}
    bar = tqdm(chosen, desc=f"{model_label(model, label)[0]} revisions", unit="rev", disable=not progress)
    for revision in bar:
        step = revision_step(revision)
        todo = [b for b in benchmarks if step not in done[b]]
        if not todo:
            continue
        bar.set_postfix_str(revision)
        try:
            if tokenizer is None:  # once, when the first revision is needed
                tokenizer = load_tokenizer(model, cache_dir)
            start = time.perf_counter()
            net = load_revision(model, revision, cache_dir=cache_dir, device=dev, dtype=dtype)
        except RevisionUnavailable as exc:
            skipped[revision] = str(exc)
            log(f"skipped: {exc}")
            if delete_downloads and source == "hub":  # a broken download must not stay in the cache
                delete_cached_revision(str(model), revision, cache_dir)
            continue
        load_seconds[revision] = time.perf_counter() - start
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
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        if delete_downloads and source == "hub":
            freed = delete_cached_revision(str(model), revision, cache_dir)
            log(f"{revision}: removed from the download cache ({freed / 1e9:.2f} GB)")

    for b in benchmarks:
        old = store.read_status(run_dirs[b]) or {}
        status = {"complete": True, "revisions": sorted(done[b]),
                  "skipped": {**old.get("skipped", {}), **skipped},
                  "score_seconds": {**old.get("score_seconds", {}), **score_seconds[b]},
                  "load_seconds": {**old.get("load_seconds", {}), **{r: round(s, 3) for r, s in load_seconds.items()}},
                  "device": str(dev), "dtype": str(dtype).replace("torch.", ""), "batch_tokens": batch_tokens,
                  "items_too_long": too_long.get(b, old.get("items_too_long", 0))}
        for r in status["revisions"]:
            status["skipped"].pop(f"step{r}", None)
        store.atomic_write_json(run_dirs[b] / store.STATUS_FILE, status)
    return {"run_dirs": run_dirs, "stored": stored, "skipped": skipped, "seconds": seconds}


# ---------------------------------------------------------------------------
# the offline stand-in
# ---------------------------------------------------------------------------

STANDIN_BUILD_KEYS = ("steps", "layers", "width", "heads", "vocab_size", "seq_len", "batch_size", "lr",
                      "every", "seed", "templates", "max_chars", "puzzles", "puzzle_objects")


#: one solved ordering puzzle in the stand-in's text (its share of the corpus is recorded)
_PUZZLE = re.compile(r"The following paragraphs each describe.*?\nAnswer: [^.]*\.", re.S)


def standin_steps(steps: int, every: int) -> list[int]:
    """Pythia-like checkpoint steps: 0, the powers of two below ``every``, then every ``every`` steps."""
    log_part = [0] + [2 ** k for k in range(20) if 2 ** k < min(every, steps)]
    return sorted(set(log_part + list(range(every, steps + 1, every)) + [steps]))


def standin_corpus(seed: int = 0, templates: int = 400, max_chars: int | None = None, puzzles: int | None = None,
                   puzzle_objects=(3, 5, 7)) -> list[str]:
    """Text available offline: Python's documentation topics (pydoc_data.topics, ~465K characters),
    ``templates`` correct sentences per easy benchmark family and ``puzzles`` solved ordering
    puzzles with ``puzzle_objects`` objects (default ``templates // 4``), generated with other seeds
    than the benchmarks' and never a benchmark item (:func:`geomcap.diagnostics.training_documents`).
    ``max_chars`` truncates the shuffled documents."""
    import random

    from pydoc_data.topics import topics

    docs = [topics[k] for k in sorted(topics)] + diagnostics.training_documents(
        seed=seed + 1, per_benchmark=templates, puzzles=puzzles, puzzle_objects=puzzle_objects)
    random.Random(seed).shuffle(docs)
    if max_chars is not None:
        kept, total = [], 0
        for d in docs:
            if total >= max_chars:
                break
            kept.append(d[: max_chars - total])
            total += len(kept[-1])
        docs = kept
    return docs


def train_tokenizer(docs: list[str], vocab_size: int):
    """A byte-level BPE tokenizer like Pythia's: <|endoftext|> = 0, <|padding|> = 1, no prefix space."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|padding|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(docs, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   unk_token="<|endoftext|>", pad_token="<|padding|>")


def build_standin(out, steps: int = 2000, layers: int = 2, width: int = 64, heads: int = 4,
                  vocab_size: int = 1024, seq_len: int = 128, batch_size: int = 16, lr: float = 3e-3,
                  every: int = 50, seed: int = 0, templates: int = 1500, max_chars: int | None = None,
                  puzzles: int | None = 3000, puzzle_objects=(3,), progress: bool = True) -> Path:
    """Train a small GPT-NeoX (Pythia's architecture: rotary on 25% of each head, parallel residual,
    untied embeddings) on offline text and save it at Pythia-like revisions under ``out/stepN``.

    Each revision folder holds ``save_pretrained`` output of the model and its
    tokenizer; ``out/standin.json`` (written last) records the build, the
    revisions and ``tokens_per_step`` (batch_size x seq_len). AdamW with 1%
    linear warmup then cosine decay to 10% of ``lr`` (Pythia's schedule).
    A folder already holding a stand-in with the same build is reused.

    The text (``standin_corpus``): Python's documentation, ``templates``
    sentences per easy family and ``puzzles`` solved ordering puzzles with
    ``puzzle_objects`` objects (None: ``templates // 4`` of 3, 5 and 7 objects,
    the first stand-in's text), none of them a benchmark item. The defaults mix
    3000 three-object puzzles into the text (41% of its tokens), meant to make
    a hard task (``logical_deduction_3``) learnable; ``seq_len`` 128 holds a
    whole puzzle (75 tokens on average, at most 92). Seeded: the same arguments
    on the same machine give the same weights.
    """
    build = {"steps": steps, "layers": layers, "width": width, "heads": heads, "vocab_size": vocab_size,
             "seq_len": seq_len, "batch_size": batch_size, "lr": lr, "every": every, "seed": seed,
             "templates": templates, "max_chars": max_chars, "puzzles": puzzles,
             "puzzle_objects": sorted(set(puzzle_objects)) if isinstance(puzzle_objects, (list, tuple)) else puzzle_objects}
    for key in ("steps", "layers", "width", "heads", "seq_len", "batch_size", "every", "templates"):
        if isinstance(build[key], bool) or not isinstance(build[key], int) or build[key] < 1:
            raise ValueError(f"{key} must be a positive integer, got {build[key]!r}")
    if puzzles is not None and (isinstance(puzzles, bool) or not isinstance(puzzles, int) or puzzles < 0):
        raise ValueError(f"puzzles must be a non-negative integer or None, got {puzzles!r}")
    if not isinstance(puzzle_objects, (list, tuple)) or not puzzle_objects or \
            any(n not in diagnostics.NUMBER_WORDS for n in puzzle_objects):
        raise ValueError(f"puzzle_objects must be a non-empty list of object counts among "
                         f"{sorted(diagnostics.NUMBER_WORDS)}, got {puzzle_objects!r}")
    if width % heads:
        raise ValueError(f"width {width} is not divisible by heads {heads}")
    if vocab_size < 300:
        raise ValueError(f"vocab_size must be >= 300 (256 bytes + 2 special tokens + merges), got {vocab_size}")
    out = Path(out)
    info = standin_info(out) if out.is_dir() else None
    if info is not None and {k: info.get(k) for k in STANDIN_BUILD_KEYS} == build:
        return out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out {out} exists and is not empty (nor a stand-in with this build): choose a new folder")
    from geomcap.train import check_writable

    check_writable(out)
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    _quiet_transformers()

    t0 = time.perf_counter()
    docs = standin_corpus(seed, templates, max_chars, puzzles, build["puzzle_objects"])
    tokenizer = train_tokenizer(docs, vocab_size)
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    stream = []
    for ids in tokenizer(docs, add_special_tokens=False)["input_ids"]:
        stream += [eot, *ids]
    stream = torch.tensor(stream, dtype=torch.long)
    if len(stream) <= seq_len + 1:
        raise ValueError(f"corpus of {len(stream)} tokens is shorter than seq_len {seq_len}")

    torch.manual_seed(seed)
    config = GPTNeoXConfig(vocab_size=64 * math.ceil(len(tokenizer) / 64), hidden_size=width,
                           num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * width,
                           rotary_pct=0.25, rotary_emb_base=10000, max_position_embeddings=2048,
                           use_parallel_residual=True, tie_word_embeddings=False, bos_token_id=eot,
                           eos_token_id=eot, attention_dropout=0.0, hidden_dropout=0.0)
    net = GPTNeoXForCausalLM(config)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    warmup = max(1, steps // 100)

    def lr_at(step):  # step counts from 1
        if step <= warmup:
            return lr * step / warmup
        progress_ = (step - warmup) / max(1, steps - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress_)))

    save_at = set(standin_steps(steps, every))
    gen = torch.Generator().manual_seed(seed)

    def save(step):
        folder = out / f"step{step}"
        net.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    from tqdm import tqdm

    t_train = time.perf_counter()
    save(0)
    net.train()
    losses = []
    for step in tqdm(range(1, steps + 1), desc="stand-in", unit="step", disable=not progress):
        starts = torch.randint(0, len(stream) - seq_len - 1, (batch_size,), generator=gen)
        batch = torch.stack([stream[s: s + seq_len] for s in starts.tolist()])
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = net(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if step in save_at:
            net.eval()
            save(step)
            net.train()
    info = {"name": STANDIN_NAME, **build, "tokens_per_step": batch_size * seq_len,
            "revisions": [f"step{s}" for s in sorted(save_at)],
            "parameters": sum(p.numel() for p in net.parameters()), "tokenizer_vocab": len(tokenizer),
            "corpus_chars": sum(map(len, docs)), "corpus_tokens": int(len(stream)),
            "puzzle_chars": sum(len(p) for d in docs for p in re.findall(_PUZZLE, d)),
            "final_loss": float(np.mean(losses[-10:])), "train_seconds": round(time.perf_counter() - t_train, 2),
            "build_seconds": round(time.perf_counter() - t0, 2), "provenance": store.provenance("cpu")}
    store.atomic_write_json(out / STANDIN_FILE, info)
    return out


# ---------------------------------------------------------------------------
# analysis: the notebook's tables
# ---------------------------------------------------------------------------


def load_runs(root=None, model=None, benchmarks="all") -> pd.DataFrame:
    """One row per complete Pythia run (one benchmark of one model) under ``root`` (default the
    committed data/pythia/runs), in the benchmarks' order. ValueError when a (model, benchmark)
    has several runs (e.g. two stand-ins built differently in one store)."""
    from geomcap import results

    benchmarks = check_benchmarks(benchmarks)
    root = Path(root) if root is not None else data_root()
    runs = results.load_runs(root, model=model, task=benchmarks) if root.exists() else pd.DataFrame()
    if runs.empty:
        return runs
    dup = runs[runs.duplicated(["model", "task"], keep=False)]
    if len(dup):
        raise ValueError(f"several runs for model {dup['model'].iloc[0]!r}, benchmark {dup['task'].iloc[0]!r} in "
                         f"{root} ({', '.join(dup['run'])}): use a store holding one")
    order = {b: i for i, b in enumerate(diagnostics.BENCHMARKS)}
    return runs.sort_values(["model", "task"], key=lambda c: c.map(order) if c.name == "task" else c
                            ).reset_index(drop=True)


def check_layers(layers, available) -> list[int]:
    """'final' -> [last], 'all' -> every layer, or a list of layer indices (0 = embeddings)."""
    available = sorted(int(a) for a in available)
    if isinstance(layers, str):
        if layers == "final":
            return available[-1:]
        if layers == "all":
            return available
        raise ParameterError(f"parameter layers: {layers!r}; use 'final', 'all' or a list of layer indices "
                         f"({available[0]} .. {available[-1]})")
    layers = [layers] if isinstance(layers, (int, np.integer)) else list(layers)
    bad = [l for l in layers if isinstance(l, bool) or not isinstance(l, (int, np.integer)) or int(l) not in available]
    if bad or not layers:
        raise ParameterError(f"parameter layers: {bad or layers} not among the recorded layers "
                         f"{available[0]} .. {available[-1]}")
    return sorted(int(l) for l in layers)


def summary_table(runs: pd.DataFrame, metrics: pd.DataFrame, layers="final", measure: str = "rankme",
                  threshold: float = 0.5, patience: int = 3, fraction: float = 0.5) -> pd.DataFrame:
    """Per benchmark and layer: acquisition, ``measure``'s transition and the precursor gap.

    Acquisition: chance-corrected accuracy ``(acc - chance) / (1 - chance) >
    threshold`` at ``patience`` consecutive revisions
    (:func:`geomcap.events.acquisition_step`); transition: half of the
    largest excursion from step 0 (:func:`geomcap.events.transition_step`);
    gap = acquisition - transition (:func:`geomcap.events.precursor`), also in
    tokens (x the run's tokens per step) and as a fraction of the last step.
    ``floor_step``: the step of the final layer's minimum after initialisation
    (:func:`geomcap.events.collapse`), and ``acquired_after_floor`` the
    project's data-driven "hard" (:func:`geomcap.results.difficulty_class`).
    """
    from geomcap import results

    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run]
        steps, acc = events.tidy_series(m, "accuracy")
        corrected = events.chance_corrected(acc, run.chance)
        r_layers, r_steps, values = events.layer_matrix(m, measure)
        if not np.array_equal(r_steps, steps):
            raise ValueError(f"run {run.run}: {measure} and accuracy recorded at different revisions")
        final = int(r_layers[-1])
        floor = events.collapse(steps, values[-1]) if len(steps) >= 2 else None
        for layer in check_layers(layers, r_layers):
            p = events.precursor(steps, values[list(r_layers).index(layer)], corrected, threshold=threshold,
                                 patience=patience, fraction=fraction)
            rows.append({
                "model": run.model, "benchmark": run.task, "level": run.level, "chance": run.chance,
                "revisions": len(steps), "last_step": int(steps[-1]), "final_accuracy": float(acc[-1]),
                "best_accuracy": float(np.max(acc)), "acquisition_step": p.acquisition_step,
                "layer": layer, "final_layer": layer == final, "transition_step": p.measure_step,
                "gap_steps": p.gap_steps, "gap_checkpoints": p.gap_checkpoints,
                "gap_tokens": None if p.gap_steps is None else p.gap_steps * int(run.tokens_per_step),
                "gap_fraction": None if p.gap_steps is None else p.gap_steps / int(steps[-1]),
                "is_precursor": p.is_precursor, "floor_step": floor.floor_step if floor else None,
                "rankme_floor_step": floor.floor_step if floor else None})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["data_class"] = results.difficulty_class(table).where(table["final_layer"])
    table = table.drop(columns="rankme_floor_step")
    for column in ("acquisition_step", "transition_step", "gap_steps", "gap_checkpoints", "gap_tokens",
                   "floor_step"):
        table[column] = table[column].astype("Int64")
    return table


def claim_c7(table: pd.DataFrame) -> dict:
    """The C7 row of the paper-vs-ours table: the hard task's gap at the final layer, and how many
    easy benchmarks show a precursor. The value is the hard gap in steps (NaN when undefined)."""
    from geomcap import results

    final = table[table["final_layer"]]
    if final.empty:
        return results.claim_row("C7", "no benchmark selected")
    model = final["model"].iloc[0]
    who = ("the offline stand-in (NOT Pythia)" if model == STANDIN_NAME else model)
    hard = final[final["level"] == "hard"]
    easy = final[final["level"] == "easy"]
    parts, value = [who + ":"], float("nan")
    for row in hard.itertuples():
        if pd.isna(row.acquisition_step):
            parts.append(f"{row.benchmark} never acquired (best accuracy {row.best_accuracy:.2f}, "
                         f"chance {row.chance:.2f}), so no gap;")
        else:
            parts.append(f"{row.benchmark} gap {row.gap_steps} steps ({row.gap_fraction:.0%} of training);")
            value = float(row.gap_steps)
    acquired = easy[easy["acquisition_step"].notna()]
    parts.append(f"easy benchmarks with a RankMe precursor: {int(acquired['is_precursor'].sum())}/{len(acquired)} "
                 f"acquired ({len(easy)} selected)")
    judged = results.claim_c7(table)  # the verdict and its rule: one rule for C7, in results
    return results.claim_row("C7", " ".join(parts), value, judged["verdict"], judged["rule"])


def claim_from_store(model: str = "standin", root="") -> dict:
    """The C7 row (:func:`claim_c7`) from the stored metrics of ``model`` at every stored revision,
    final layer ("" = the committed data/pythia/runs): the book's results page."""
    runs = section_runs(model, "all", "all", root=root, progress=False)
    from geomcap import results

    return claim_c7(summary_table(runs, select_metrics(results.load_metrics(runs), "all")))


def section_runs(model="standin", revisions="all", benchmarks="all", root="", device="auto",
                 delete_downloads: bool = False, cache_dir=None, progress: bool = True) -> pd.DataFrame:
    """Notebook 06's runs: validate its parameters, compute what is missing, return one row per run.

    ``model="standin"`` reads the stand-in's committed metrics (``root`` "" =
    data/pythia/runs); a hub name or a local root computes the missing
    (revision, benchmark) metrics into ``root`` first (:func:`run`), then reads
    them: root "" is then the user store ``~/.cache/geomcap/pythia-runs``
    (:func:`geomcap.store.user_root`), never the committed data/pythia/runs
    unless given explicitly. Bad values raise ValueError naming the parameter.
    """
    try:
        benchmarks = check_benchmarks(benchmarks)
    except ValueError as exc:
        raise ParameterError(f"parameter {exc}") from None
    if not isinstance(delete_downloads, bool):
        raise ParameterError(f"parameter delete_downloads: must be True or False, got {delete_downloads!r}")
    if model == STANDIN_NAME:
        root = Path(root) if root else data_root()
        name = STANDIN_NAME
    else:
        root = Path(root) if root else store.user_root("pythia-runs")
        try:
            check_model(model)
        except ValueError as exc:
            raise ParameterError(f"parameter {exc}; or 'standin' for the committed stand-in metrics") from None
        try:
            select_revisions(revisions, available_revisions(model))
        except ValueError as exc:
            raise ParameterError(f"parameter {exc}") from None
        run(model, revisions=revisions, benchmarks=benchmarks, root=root, device=device,
            delete_downloads=delete_downloads, cache_dir=cache_dir, progress=progress)
        name = model_label(model)[0]
    runs = load_runs(root, model=name, benchmarks=benchmarks)
    if runs.empty:
        raise ValueError(f"no complete run of model {name!r} in {root}: see data/pythia/README.md "
                         "(`geomcap pythia standin`, then `geomcap pythia run`)")
    return runs


def select_metrics(metrics: pd.DataFrame, revisions="all") -> pd.DataFrame:
    """The rows of the chosen revisions (:func:`select_revisions` over the steps present)."""
    present = [f"step{s}" for s in sorted(metrics["step"].unique())]
    try:
        chosen = select_revisions(revisions, present)
    except ValueError as exc:
        raise ParameterError(f"parameter {exc}") from None
    steps = {revision_step(r) for r in chosen}
    missing = [r for r in chosen if revision_step(r) not in set(metrics["step"])]
    if missing:
        raise ParameterError(f"parameter revisions: {', '.join(missing[:5])} not stored")
    return metrics[metrics["step"].isin(steps)].reset_index(drop=True)


def timing_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: the device, revisions stored, and the median seconds to load a revision and to
    score the benchmark at one revision (from status.json)."""
    rows = []
    for run in runs.itertuples():
        status = store.read_status(run.path) or {}
        score = list(status.get("score_seconds", {}).values())
        load = list(status.get("load_seconds", {}).values())
        rows.append({"benchmark": run.task, "n_items": run.n_items, "device": status.get("device"),
                     "revisions": len(status.get("revisions", [])),
                     "skipped": len(status.get("skipped", {})),
                     "median_load_s": float(np.median(load)) if load else np.nan,
                     "median_score_s": float(np.median(score)) if score else np.nan})
    return pd.DataFrame(rows)


def describe(runs: pd.DataFrame, metrics: pd.DataFrame) -> str:
    """One paragraph saying what the figures are computed from (the stand-in is named as such)."""
    model = runs["model"].iloc[0]
    steps = sorted(metrics["step"].unique())
    config = store.read_config(runs["path"].iloc[0])
    status = store.read_status(runs["path"].iloc[0]) or {}
    where = f"{len(steps)} revisions (step{steps[0]} .. step{steps[-1]}), {len(runs)} benchmarks, computed on " \
            f"{status.get('device', '?')} in {status.get('dtype', '?')}"
    too_long = {run.task: (store.read_status(run.path) or {}).get("items_too_long", 0) for run in runs.itertuples()}
    if any(too_long.values()):
        where += "; items longer than the model's context, left out: " + ", ".join(
            f"{b} {n} of {n_items}" for (b, n), n_items in zip(too_long.items(), runs["n_items"]) if n)
    if model == STANDIN_NAME:
        s = config["standin"]
        return (f"Model: the offline stand-in built here, NOT Pythia: a GPT-NeoX with {s['layers']} layers x "
                f"{s['width']} trained {s['steps']} steps of {config['tokens_per_step']} tokens on Python's "
                f"documentation and templated sentences"
                + (f", with {s['puzzles']} solved {'/'.join(map(str, s['puzzle_objects']))}-object ordering puzzles"
                   if s.get("puzzles") else "") + f". {where}.")
    return f"Model: {model}. {where}."


#: CPU forward pass measured on this project's 2-core machines: seconds for
#: a batch of 64 x 32 tokens through the exact configs (random weights)
CPU_FORWARD_SECONDS = {"160m": 3.4, "410m": 6.5, "2.8b": 41.0}


def cost_estimate(benchmarks="all", chars_per_token: float = 4.0, benchmark_dir=None) -> pd.DataFrame:
    """Tokens one revision's metrics need, per benchmark, and the CPU time that implies for Pythia.

    Tokens: one sequence per (item, choice), ``1 + len(context + choice) / chars_per_token``
    (Pythia's BPE averages ~4 characters per token on English; its tokenizer is not available
    offline, so this is an estimate). Seconds: tokens x the measured cost per token of a 64 x 32
    forward pass (:data:`CPU_FORWARD_SECONDS`); longer sequences add attention cost, so these are
    lower bounds, and loading a revision (0.3 GB for 160m, 5.6 GB for 2.8b in fp16) is extra.
    """
    rows = []
    for b in check_benchmarks(benchmarks):
        items = diagnostics.load_benchmark(b, benchmark_dir)
        tokens = sum(1 + len(it["context"] + c) / chars_per_token for it in items for c in it["choices"])
        row = {"benchmark": b, "items": len(items), "sequences": sum(len(it["choices"]) for it in items),
               "tokens": int(round(tokens))}
        for size, seconds in CPU_FORWARD_SECONDS.items():
            row[f"cpu_s_{size}"] = tokens * seconds / (64 * 32)
        rows.append(row)
    table = pd.DataFrame(rows)
    total = {"benchmark": "all", **table.drop(columns="benchmark").sum().to_dict()}
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True)
