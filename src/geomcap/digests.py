"""Content digests of saved checkpoints: what tells a training step from a copy of another one.

A revision's name does not guarantee its content: on the hub, 76 of pythia-2.8b's 154 step branches serve the
final model's weights file (EleutherAI/pythia#205; ``data/pythia/README.md``). Every series geomcap measures
(:func:`geomcap.pythia.run`, :func:`geomcap.checkpoints.measure_checkpoints`) therefore records, per revision,
:func:`revision_digest` of its folder:

* ``files``: the sha256 of each weight file (``model*.safetensors``, ``pytorch_model*.bin``; the hub's LFS
  records the same number for each file, which is how #205 compared the branches);
* ``weights``: one sha256 over every tensor, by name (each tensor's name, dtype, shape and bytes, in name
  order), so that a copy sharded differently, or re-saved from ``.bin`` to safetensors, compares equal where
  its files do not; ``tensors``: how many;

and, for a hub revision, ``commit``: the commit its branch pointed to when it was downloaded. Which revisions
are copies of which is read from these records by :mod:`geomcap.analysis.integrity`.

Reading a safetensors file needs no torch (its header gives each tensor's dtype, shape and byte range); a
``.bin`` file is read with ``torch.load(weights_only=True, mmap=True)``, imported only then.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

#: the weight files of a checkpoint folder, as ``save_pretrained`` writes them (sharded or not)
WEIGHT_PATTERNS = ("model*.safetensors", "pytorch_model*.bin")

#: bytes read at a time while hashing
_CHUNK = 1 << 24

#: torch's dtypes by safetensors' names, so that a tensor hashes alike from either format
_TORCH_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
                 "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def weight_files(folder) -> list[Path]:
    """The weight files of a checkpoint folder, by name (safetensors and ``.bin`` alike)."""
    folder = Path(folder)
    return sorted({p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern) if p.is_file()})


def file_sha256(path) -> str:
    """The sha256 of a file's bytes, hex (what the hub's LFS records as the file's oid)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _safetensors_tensors(path: Path):
    """(name, dtype, shape, read) per tensor of a safetensors file; ``read(update)`` feeds its bytes."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    base = 8 + size
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]

        def read(update, start=start, end=end):
            with open(path, "rb") as f:
                f.seek(base + start)
                left = end - start
                while left > 0:
                    chunk = f.read(min(_CHUNK, left))
                    if not chunk:
                        raise ValueError(f"{path}: truncated")
                    update(chunk)
                    left -= len(chunk)

        yield name, info["dtype"], list(info["shape"]), read


def _bin_tensors(path: Path):
    """(name, dtype, shape, read) per tensor of a ``.bin`` state dict (torch imported here only)."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # a file in the legacy (not zip) format cannot be memory-mapped
        state = torch.load(path, map_location="cpu", weights_only=True)
    for name, tensor in state.items():
        if not isinstance(tensor, torch.Tensor):
            continue
        dtype = _TORCH_DTYPES.get(str(tensor.dtype).replace("torch.", ""), str(tensor.dtype))

        def read(update, tensor=tensor):
            update(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())

        yield name, dtype, list(tensor.shape), read


def weights_sha256(files) -> tuple[str, int]:
    """(sha256, number of tensors) over every tensor of ``files`` in name order: its name, dtype and shape,
    then its bytes. The safetensors files are read when there are any (what ``from_pretrained`` loads), else
    the ``.bin`` files. ValueError when a tensor name appears twice."""
    files = [Path(f) for f in files]
    chosen = [f for f in files if f.suffix == ".safetensors"] or files
    tensors = {}
    for path in chosen:
        reader = _safetensors_tensors if path.suffix == ".safetensors" else _bin_tensors
        for name, dtype, shape, read in reader(path):
            if name in tensors:
                raise ValueError(f"{path}: tensor {name} also in another weight file")
            tensors[name] = (dtype, shape, read)
    digest = hashlib.sha256()
    for name in sorted(tensors):
        dtype, shape, read = tensors[name]
        digest.update(f"{name}|{dtype}|{shape}\n".encode())
        read(digest.update)
    return digest.hexdigest(), len(tensors)


def revision_digest(folder, step: int, commit: str | None = None) -> dict:
    """The content digest of one checkpoint folder: ``{"step", "files": {name: sha256}, "weights": sha256,
    "tensors": count, "commit"}`` (see the module's description). ``step``: the revision's training step;
    ``commit``: the hub commit it was downloaded from (None for a local folder). ValueError when the folder
    holds no weight file."""
    files = weight_files(folder)
    if not files:
        raise ValueError(f"{folder}: no weight file ({' or '.join(WEIGHT_PATTERNS)})")
    weights, count = weights_sha256(files)
    return {"step": int(step), "files": {f.name: file_sha256(f) for f in files}, "weights": weights,
            "tensors": count, "commit": commit}
