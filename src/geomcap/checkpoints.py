"""Saved checkpoints of any causal LM: loading one, and measuring a series of them with a GeometryMonitor.

A series is a folder of ``checkpoint-<N>`` (the Hugging Face Trainer's) or ``step<N>`` (Pythia's)
subfolders, each what ``save_pretrained`` writes. :func:`measure_checkpoints` (``geomcap checkpoints``)
loads them one at a time (:func:`load_pretrained`, the one loading path, which :mod:`geomcap.pythia` also
takes), records each with a :class:`geomcap.monitor.GeometryMonitor` on a file of prompts, and writes
``metrics.csv`` beside :data:`CHECKPOINTS_FILE` and the content digest of each checkpoint
(:mod:`geomcap.digests`, ``digests.json``): a checkpoint holding the same weights as an earlier one is not
measured (:mod:`geomcap.analysis.integrity`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import torch

from geomcap import store
from geomcap.analysis.integrity import earlier_copy, integrity_table, warn_copies
from geomcap.digests import revision_digest, weight_files
from geomcap.models import resolve_device
from geomcap.store import CheckpointUnavailable
from geomcap.monitor import GeometryMonitor
from geomcap.parameters import CHECKPOINTS

__all__ = ["measure_checkpoints", "checkpoint_folders", "read_prompts", "check_out", "context_length",
           "fitting_prompts", "load_pretrained", "default_dtype", "quiet_transformers", "CheckpointUnavailable",
           "CHECKPOINTS_FILE"]


def default_dtype(device) -> torch.dtype:
    """float32 on CPU, bfloat16 on GPU (Pythia was trained in fp16; bf16 keeps its range)."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def quiet_transformers() -> None:
    """transformers' logging at errors only, no progress bars, no background safetensors conversion."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # "Writing model shards", "Loading weights": one line per revision is noise
    os.environ.setdefault("DISABLE_SAFETENSORS_CONVERSION", "1")  # no background conversion call to the hub


def load_pretrained(source, *, model_class=None, device="cpu", dtype=None, what=None, **kwargs):
    """A model saved with ``save_pretrained`` (a folder, or a hub name with ``revision=``), checked, in eval mode.

    The one loading path for checkpoints: :func:`geomcap.pythia.load_revision` (Pythia) and
    :func:`geomcap.checkpoints.measure_checkpoints` (``geomcap checkpoints``: any causal LM) call it.
    ``model_class``: default ``AutoModelForCausalLM`` (the architecture from the folder's config.json);
    no remote code. Weights load safely: safetensors, or ``torch.load`` with ``weights_only=True`` for a
    ``.bin`` file. ``what`` names the checkpoint in messages. ``dtype``: default float32 on CPU, bfloat16
    on GPU.

    Raises
    ------
    geomcap.store.CheckpointUnavailable
        The checkpoint is absent or unreadable, or its weights are incomplete
        (missing tensors) or non-finite; the message says which.
    """
    if model_class is None:
        from transformers import AutoModelForCausalLM as model_class

    quiet_transformers()
    device = torch.device(device)
    dtype = default_dtype(device) if dtype is None else dtype
    what = what or str(source)
    try:
        net, info = model_class.from_pretrained(str(source), dtype=dtype, output_loading_info=True,
                                                weights_only=True, trust_remote_code=False, **kwargs)
    except Exception as exc:  # noqa: BLE001 - absent branch, offline miss, truncated file, ...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointUnavailable(f"{what} unavailable: {type(exc).__name__}: {reason}") from exc
    missing = [k for k in info.get("missing_keys", ()) if "inv_freq" not in k and "masked_bias" not in k]
    if missing:
        raise CheckpointUnavailable(f"{what} broken: {len(missing)} weights missing "
                                  f"({', '.join(sorted(missing)[:3])}, ...)")
    if not all(bool(torch.isfinite(p).all()) for p in net.parameters()):
        raise CheckpointUnavailable(f"{what} broken: non-finite weights")
    return net.to(device).eval()


_CHECKPOINT_FOLDER = re.compile(r"(?:step|checkpoint-)(\d+)")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json")


def checkpoint_folders(root) -> list[tuple[int, Path]]:
    """(step, folder) of each checkpoint under ``root``, by step.

    A checkpoint is a subfolder named ``checkpoint-<N>`` (the Hugging Face
    Trainer's) or ``step<N>`` (Pythia's); N is its training step.
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"root: {root} is not a folder")
    found: dict[int, Path] = {}
    for path in root.iterdir():
        match = _CHECKPOINT_FOLDER.fullmatch(path.name)
        if path.is_dir() and match:
            step = int(match.group(1))
            if step in found:
                raise ValueError(f"root: {found[step].name} and {path.name} are both step {step}")
            found[step] = path
    if not found:
        raise ValueError(f"root: {root} holds no checkpoint-<N> or step<N> subfolder")
    return sorted(found.items())


def read_prompts(path, option: str = "prompts") -> list[str]:
    """The non-empty lines of a UTF-8 text file (trailing newline characters removed).

    A missing, unreadable or non-UTF-8 file, or one with fewer than 2 prompts, raises an error of one line
    naming ``option`` (the CLI's ``--prompts``) and the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{option}: {path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{option}: {path} is not UTF-8 text (byte {exc.start}: {exc.reason}); give one prompt "
                         "per line") from None
    except OSError as exc:
        raise ValueError(f"{option}: {path} cannot be read ({exc.strerror or type(exc).__name__})") from None
    prompts = [p for p in (line.rstrip("\r\n") for line in text.splitlines()) if p.strip()]
    if len(prompts) < 2:
        raise ValueError(f"{option}: {path} holds {len(prompts)} non-empty lines; RankMe needs at least 2 prompts")
    return prompts


#: what :func:`measure_checkpoints` writes into its ``out`` directory besides metrics.csv: the series' inputs
#: and what was left out (marks the directory as its own output, which a later call may overwrite)
CHECKPOINTS_FILE = "checkpoints.json"


def check_out(out, option: str = "out") -> None:
    """Raise ValueError unless ``out`` may receive :func:`measure_checkpoints`' output: a directory that does
    not exist, an empty one, or one holding only its own earlier output (metrics.csv beside
    :data:`CHECKPOINTS_FILE` and digests.json). Anything else, a geomcap run above all, is left untouched."""
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"{option} {out}: exists and is not a directory")
    names = sorted(p.name for p in out.iterdir() if not (p.name.startswith(".") and p.name.endswith(".tmp")))
    own = {CHECKPOINTS_FILE, store.METRICS_FILE, store.DIGESTS_FILE}
    if not names or (CHECKPOINTS_FILE in names and set(names) <= own):
        return
    what = "a geomcap run" if store.CONFIG_FILE in names else "other files"
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    raise ValueError(f"{option} {out}: holds {what} ({shown}); give a new or empty directory")


def _tokenizer_folder(root: Path, folders: list[Path]) -> Path:
    for folder in [root] + folders[::-1]:
        if any((folder / name).exists() for name in _TOKENIZER_FILES):
            return folder
    raise ValueError(f"root: no tokenizer in {root} nor in its checkpoint folders (save it with save_pretrained)")


#: the config fields that give a causal LM's context length (the first one present is used)
_CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length")


def context_length(config) -> int | None:
    """The number of positions a model's config allows (None when it names none)."""
    for name in _CONTEXT_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def fitting_prompts(prompts, lengths, context: int | None) -> list[str]:
    """The prompts whose token counts (``lengths``) fit ``context`` positions (all of them when it is None);
    ValueError when fewer than 2 fit."""
    kept = [p for p, n in zip(prompts, lengths) if context is None or n <= context]
    if len(kept) < 2:
        raise ValueError(f"prompts: only {len(kept)} of the {len(prompts)} prompts fit the model's {context} "
                         "positions; RankMe needs at least 2")
    return kept


def measure_checkpoints(root, prompts, out=None, *, position=CHECKPOINTS["position"].default,
                        device=CHECKPOINTS["device"].default, dtype=None, progress=None) -> GeometryMonitor:
    """Per-layer RankMe of every checkpoint under ``root`` on ``prompts``; returns the monitor.

    Before a checkpoint is loaded, its content digest
    (:func:`geomcap.digests.revision_digest`) is recorded (``out/digests.json``);
    one that holds the same weights as an earlier checkpoint is a duplicate: it
    is not measured, and the duplicates are named in one
    :class:`~geomcap.analysis.integrity.CopiedRevisionsWarning`.

    The returned monitor's ``checkpoints`` is a dict: ``root``, ``position``,
    ``scored`` (the number of checkpoints scored), ``skipped`` ({folder name: why}),
    ``duplicates`` ({folder name: the earlier folder whose weights it holds}),
    ``prompts`` (the number scored), ``prompts_left_out`` (longer than the
    model's ``context`` positions) and ``context``; ``monitor.digests`` holds
    the digests.

    An index or "mean" and a device's name are checked through the rows of
    ``geomcap checkpoints --position`` and ``--device`` (``geomcap.parameters.CHECKPOINTS``,
    which also gives the defaults) before anything is read: the command's reason.

    Parameters
    ----------
    root : path
        Folder of ``checkpoint-<N>`` or ``step<N>`` subfolders, each what
        ``save_pretrained`` writes for a causal LM; the tokenizer in ``root`` or in
        the folders (loaded once, from ``root`` or else the latest folder).
    prompts : list of str
        One prompt per RankMe row, tokenized together with right padding;
        ``position=-1`` takes each prompt's last token. Prompts longer than the
        model's context (:func:`context_length` of the first checkpoint's config)
        are left out, counted and reported; the others are scored.
    out : path, optional
        Output directory: ``out/metrics.csv`` is rewritten after each checkpoint, beside
        ``out/checkpoints.json`` (``monitor.checkpoints``). It must be new, empty, or
        this function's own earlier output (:func:`check_out`): a run directory is refused untouched.
    position : int, "mean" or a boolean (B, T) mask
        The token position per prompt, as :class:`~geomcap.monitor.GeometryMonitor` takes it.
    device, dtype
        Where and in which precision to load each checkpoint (one at a time in
        memory), through :func:`load_pretrained`; a device's name (auto, cpu,
        cuda, cuda:N) as :func:`geomcap.models.resolve_device` resolves it.
    progress : callable(str), optional
        Called with one line per checkpoint (and per checkpoint skipped
        because it cannot be loaded: missing, truncated or non-finite weights,
        or because it holds an earlier checkpoint's weights), and once with the
        number of prompts left out.

    """
    from transformers import AutoTokenizer

    if isinstance(position, str) or np.ndim(position) == 0:  # not a mask: through its row
        position = CHECKPOINTS["position"].check(position)  # "position must be an integer or 'mean', got 'last'"
    if isinstance(device, str):
        device = resolve_device(CHECKPOINTS["device"].check(device))
    root = Path(root)
    if out is not None:
        check_out(out)
    found = checkpoint_folders(root)
    tokenizer = AutoTokenizer.from_pretrained(str(_tokenizer_folder(root, [f for _, f in found])))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token if tokenizer.eos_token is not None else tokenizer.unk_token
    tokenizer.padding_side = "right"
    prompts = list(prompts)
    lengths = [len(ids) for ids in tokenizer(prompts)["input_ids"]]
    shown = position if isinstance(position, str) else int(position) if np.ndim(position) == 0 else "mask"
    series = {"root": str(root), "position": shown, "scored": 0, "skipped": {}, "duplicates": {}}
    monitor, digests = None, {}
    for step, folder in found:
        if weight_files(folder):  # else load_pretrained says what is missing
            digests[folder.name] = revision_digest(folder, step)
            twin = earlier_copy(digests, folder.name)
            if twin:  # the same weights as an earlier checkpoint: nothing to measure
                series["duplicates"][folder.name] = twin
                if progress is not None:
                    progress(f"{folder.name}: the weights of {twin}, not measured")
                continue
        try:
            net = load_pretrained(folder, device=device, dtype=dtype, what=f"{root}: {folder.name}")
        except CheckpointUnavailable as exc:  # a broken checkpoint is reported, counted and skipped
            series["skipped"][folder.name] = str(exc)
            if progress is not None:
                progress(f"skipped: {exc}")
            continue
        if monitor is None:  # the prompts the model's context holds, once
            context = context_length(net.config)
            kept = fitting_prompts(prompts, lengths, context)
            series.update(prompts=len(kept), prompts_left_out=len(prompts) - len(kept), context=context)
            if len(kept) < len(prompts) and progress is not None:
                progress(f"{len(prompts) - len(kept)} of {len(prompts)} prompts are longer than the model's "
                         f"{context} positions: left out, the measures are over the other {len(kept)}")
            monitor = GeometryMonitor(net, dict(tokenizer(kept, padding=True, return_tensors="pt")),
                                      position=position)
            monitor.checkpoints, monitor.digests = series, digests
        monitor.model = net
        monitor.record(step)
        series["scored"] += 1
        del net
        if out is not None:
            _save_series(monitor, out)
        if progress is not None:
            progress(f"{folder.name}: step {step}, final-layer rankme {monitor.final_rankme[1][-1]:.2f}")
    if monitor is None:
        raise ValueError(f"root: none of the {len(found)} checkpoints under {root} could be loaded")
    if out is not None and (series["skipped"] or series["duplicates"]):
        _save_series(monitor, out)  # the checkpoints skipped after the last one scored
    warn_copies(integrity_table(digests), str(root))
    return monitor


def _save_series(monitor: GeometryMonitor, out) -> None:
    """checkpoints.json first (it marks ``out`` as this output), then the digests and metrics.csv."""
    Path(out).mkdir(parents=True, exist_ok=True)
    store.atomic_write_json(Path(out) / CHECKPOINTS_FILE, monitor.checkpoints)
    store.write_digests(out, monitor.digests)
    monitor.save(out)
