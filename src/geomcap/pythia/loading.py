"""Loading a GPT-NeoX checkpoint (a hub revision or a local folder), checked, in eval mode, through
:func:`geomcap.checkpoints.load_pretrained` (the one loading path of any saved causal LM)."""

from __future__ import annotations

from pathlib import Path

import torch

from geomcap.analysis.pythia_revisions import check_model, local_revisions, revision_name, revision_step
from geomcap.checkpoints import default_dtype, load_pretrained, quiet_transformers
from geomcap.digests import WEIGHT_PATTERNS
from geomcap.store import CheckpointUnavailable

#: a revision that cannot be loaded: absent from the hub or the root, or broken (the exception of any
#: unloadable checkpoint, :class:`geomcap.store.CheckpointUnavailable`)
RevisionUnavailable = CheckpointUnavailable


def load_tokenizer(model, cache_dir=None):
    """The tokenizer of a model: from ``main`` on the hub, from the latest revision of a local root."""
    from transformers import AutoTokenizer

    quiet_transformers()
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


def load_revision(model, revision: str, cache_dir=None, device="cpu", dtype=None, commit: str | None = None):
    """One revision as a GPTNeoXForCausalLM in eval mode on ``device``.

    ``model``: a hub name (downloaded into ``cache_dir``, or read from it when
    the hub is unreachable and HF_HUB_OFFLINE=1) or a local root (``model/revision``).
    ``dtype``: default float32 on CPU, bfloat16 on GPU. ``commit`` (hub only): load the revision at this
    commit rather than where its branch points now (:func:`geomcap.pythia.run` pins each revision so).

    Raises
    ------
    geomcap.store.CheckpointUnavailable
        (``RevisionUnavailable``) The revision is absent (no such branch or folder), or its weights are
        incomplete (missing tensors) or non-finite; the message says which.
    """
    from transformers import GPTNeoXForCausalLM

    quiet_transformers()
    revision = revision_name(revision)
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
        args, kwargs = (str(model),), {"revision": commit or revision, "cache_dir": cache_dir}
    return load_pretrained(*args, model_class=GPTNeoXForCausalLM, device=device, dtype=dtype,
                           what=f"{model}: revision {revision}", **kwargs)


def revision_folder(model, revision: str, cache_dir=None) -> tuple[Path, str | None]:
    """(the folder a revision's files are read from, its hub commit): ``model/revision`` and None for a local
    root; for a hub name, the download cache's snapshot of the revision (a branch name or a commit), which is
    named by the commit the branch pointed to when it was downloaded. RevisionUnavailable when not downloaded."""
    revision = str(revision)
    if check_model(model) == "local":
        return Path(str(model)).expanduser() / revision_name(revision), None
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(str(model), revision=revision, cache_dir=cache_dir, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - not in the cache: reported as the revision's
        raise RevisionUnavailable(f"{model}: revision {revision} is not in the download cache "
                                  f"({type(exc).__name__})") from exc
    return folder, folder.name


def hub_record(model, revision: str) -> dict | None:
    """What the hub records of a revision, where it is reachable: ``{"step", "commit", "files": {weight file:
    its LFS sha256}}`` (the digest :mod:`geomcap.analysis.integrity` compares before anything is downloaded);
    None when HF_HUB_OFFLINE is set or the hub does not answer (the download then says why)."""
    from fnmatch import fnmatch

    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        return None
    try:
        info = HfApi().model_info(str(model), revision=revision, files_metadata=True)
    except Exception:  # noqa: BLE001 - unreachable or no such branch: the load reports it
        return None
    files = {s.rfilename: s.lfs["sha256"] for s in info.siblings or []
             if s.lfs and any(fnmatch(s.rfilename, pattern) for pattern in WEIGHT_PATTERNS)}
    return {"step": revision_step(revision), "commit": info.sha, "files": files} if files else None


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
