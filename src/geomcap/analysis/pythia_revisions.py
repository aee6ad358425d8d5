"""Pythia's names and checkpoint schedule, and where a model's revisions come from (hub or local root).

Names only: nothing here loads a checkpoint or imports torch (the loaders are :mod:`geomcap.pythia`'s), so that
reading the stored Pythia runs (:mod:`geomcap.analysis.pythia_runs`) stays torch-free.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from geomcap.schema import SettingError, as_list

#: Pythia's 154 checkpoints: step0, the log-spaced step1 .. step512, then every 1000 steps to 143000
SCHEDULE_STEPS = (0,) + tuple(2 ** k for k in range(10)) + tuple(range(1000, 143_001, 1000))
REVISIONS = tuple(f"step{s}" for s in SCHEDULE_STEPS)
#: one Pythia step = a batch of 1024 sequences of 2048 tokens
TOKENS_PER_STEP = 1024 * 2048
SIZES = ("70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b")
HUB_NAME = re.compile(r"^EleutherAI/pythia-(70m|160m|410m|1b|1\.4b|2\.8b|6\.9b|12b)(-deduped)?$")
STANDIN_FILE = "standin.json"
#: the name a stand-in gives itself in the run store (``model`` field)
STANDIN_NAME = "standin"


def revision_step(revision: str) -> int:
    """``"step3000" -> 3000``; ValueError for anything else (``main`` included: name the step)."""
    match = re.fullmatch(r"step(\d+)", str(revision))
    if not match:
        raise ValueError(f"revision {revision!r} is not of the form stepN (e.g. step0, step143000)")
    return int(match.group(1))


def revision_name(value) -> str:
    """A revision name from 'step1000', '1000' or 1000; ValueError for anything else."""
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
    """The ``standin.json`` of a local root built by :func:`geomcap.pythia.build_standin`, else None."""
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


def _refused(reason: str) -> SettingError:
    return SettingError("revisions", reason, f"revisions: {reason}")


def revision_spec(spec) -> str | list[str]:
    """A revisions specification checked for its form, before any model is asked what it holds (the check of
    the ``revisions`` parameter, notebook and command alike): ``"all"``, ``"log"`` or ``"every:K"`` as they
    are, else revision names (a list, or comma-separated: ``"step0,step1000"``; ``1000`` for ``step1000``).
    :class:`~geomcap.schema.SettingError` naming ``revisions`` otherwise."""
    if isinstance(spec, str) and spec.strip() in ("all", "log"):
        return spec.strip()
    if isinstance(spec, str) and spec.strip().startswith("every:"):
        k = spec.strip()[len("every:"):]
        if not k.isdigit() or int(k) < 1:
            raise _refused(f"every:K needs a positive integer K, got {spec!r}")
        return spec.strip()
    names = [r for r in as_list(spec) if not (isinstance(r, str) and not r.strip())]
    if not names:
        raise _refused("empty selection")
    try:
        return [revision_name(r) for r in names]
    except ValueError as exc:
        raise _refused(f"{exc}; or use all, log, every:K") from None


def select_revisions(spec, available) -> list[str]:
    """Revision names from a specification (:func:`revision_spec`), in step order.

    spec: ``"all"``; ``"log"`` (step 0, then each revision at least twice the
    previous one's step, then the last: 19 of Pythia's 154); ``"every:K"``
    (every revision below step K, the multiples of K, the last); or revisions
    as a list or a comma-separated string (``"step0,step1000"``, ints allowed).
    ``available``: the revisions to choose from (:func:`available_revisions`).
    Named revisions outside ``available`` are kept (a missing one is reported
    when it is loaded) unless ``available`` is the hub schedule, where such a
    name is a mistake: :class:`~geomcap.schema.SettingError` naming ``revisions``.
    """
    spec = revision_spec(spec)
    available = sorted(available, key=revision_step)
    steps = [revision_step(r) for r in available]
    if spec == "all":
        return list(available)
    if spec == "log":
        return [f"step{s}" for s in _log_spaced(steps)]
    if isinstance(spec, str):  # every:K
        k = int(spec[len("every:"):])
        chosen = [s for s in steps if s < k or s % k == 0] + steps[-1:]
        return [f"step{s}" for s in sorted(set(chosen))]
    chosen = sorted(set(spec), key=revision_step)
    if list(available) == list(REVISIONS):
        outside = [r for r in chosen if r not in REVISIONS]
        if outside:
            raise _refused(f"{', '.join(outside)} not in Pythia's schedule (step0, step1, step2, step4, ..., step512, "
                           "then step1000 ... step143000 every 1000)")
    return chosen
