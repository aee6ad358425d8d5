"""Loading a GPT-NeoX checkpoint (a hub revision or a local folder), checked, in eval mode."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from geomcap.pythia.revisions import RevisionUnavailable, _revision, check_model, local_revisions


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
