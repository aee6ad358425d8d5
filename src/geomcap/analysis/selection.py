"""A notebook's selection of runs: its parameters checked (one line naming the parameter), the run stores
it reads, and its runs (``select_runs``). The runs a recompute asks for are training configs, built on the
training side (:func:`geomcap.results.section_grid`) and passed in; a notebook calls
:func:`geomcap.results.section_runs`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from geomcap import store
from geomcap.analysis.protocol import RUN_KEYS
from geomcap.analysis.runs import load_runs
from geomcap.parameters import PARAMETERS, ParameterError, check_selection, check_value, refusal
from geomcap.schema import SettingError


def check_positive_int(name: str, value) -> int:
    """``value`` as an int when it is a positive integer (the ``positive`` row of
    ``geomcap.parameters.KINDS``), else ParameterError naming the parameter ``name``."""
    return check_value(name, value, "positive")


def section_selection(tasks, levels, sizes, seeds) -> tuple[list, list, list, list | str]:
    """A notebook's tasks, levels, sizes and seeds, each through its row (``geomcap.parameters.PARAMETERS``:
    ParameterError naming the parameter); "all" given as every task, level and size, and seeds "all" as it is
    (every seed stored)."""
    return tuple(check_selection(name, value) for name, value in
                 (("tasks", tasks), ("levels", levels), ("sizes", sizes), ("seeds", seeds)))


def section_stores(root="", recompute: bool = False, committed=("runs",)) -> list[Path]:
    """The run stores a notebook reads: ``root``, or ("") the committed runs
    (:func:`geomcap.store.committed_data` of each folder of ``committed``: ``data/runs``, and for the scale
    section also ``data/scale``) followed, with ``recompute``, by the user store
    (:func:`geomcap.store.user_root`: ``$GEOMCAP_RUNS``, else ``~/.cache/geomcap/runs``), where the recompute
    cell trains: never into the committed ``data/``. The last store is the one runs are trained into."""
    check_value("recompute", recompute)
    if root:
        return [Path(root)]
    return [store.committed_data(name) for name in committed] + ([store.user_root()] if recompute else [])


def select_runs(tasks="all", levels="all", sizes=("405k",), seeds="all", root="", recompute=False,
                wanted=None, committed=("runs",)) -> pd.DataFrame:
    """Validate a notebook's selection and return its runs (one row per complete run). Trains nothing.

    tasks, levels, sizes: a name, a list of names, or "all"; seeds: an int, a list of ints, or "all"
    (every seed in the store). The runs are read from :func:`section_stores` (``root`` "" = the committed
    stores ``committed``). ``wanted``: training configs (a recompute's, :func:`geomcap.sections.section_grid`); then the runs
    returned are exactly theirs (their steps, their settings), from either store, and ValueError says how
    many are missing (the notebook's recompute cell trains them first: :func:`geomcap.sweep.train_missing`).
    Bad values raise ValueError naming the parameter.
    """
    tasks, levels, sizes, seeds = section_selection(tasks, levels, sizes, seeds)
    roots = section_stores(root, recompute, committed)
    if not roots[0].exists():
        raise ParameterError(f"parameter root: {roots[0]} does not exist")
    selected = [load_runs(r, task=tasks, level=levels, size=sizes, seed=None if seeds == "all" else seeds)
                for r in roots if r.exists()]
    runs = pd.concat([r for r in selected if not r.empty] or [selected[0]], ignore_index=True)
    where = " and ".join(str(r) for r in roots)
    if wanted is not None:  # exactly these runs (their steps, their settings)
        hashes = {store.config_hash(c.to_dict()) for c in wanted}
        runs = runs[runs["run"].isin(hashes)] if not runs.empty else runs
        missing = len(hashes) - runs["run"].nunique() if not runs.empty else len(hashes)
        if missing:
            raise ValueError(f"{missing} of the {len(hashes)} runs asked for are not in {where}: train them first "
                             "(the notebook's recompute cell: geomcap.sweep.train_missing)")
    if len(selected) > 1 and not runs.empty:  # a run in both stores: the committed one
        runs = runs.drop_duplicates("run").sort_values(list(RUN_KEYS)).reset_index(drop=True)
    if runs.empty:
        raise ValueError(f"no complete run in {where} for tasks={tasks}, levels={levels}, sizes={sizes}, "
                         f"seeds={seeds}: pass recompute=True to train them (see data/README.md)")
    return runs


def check_layers(layers, available) -> list[int]:
    """The layers of ``available`` that ``layers`` names through its row (``"final"``: the last, ``"all"``: every
    one, or layer indices, 0 = embeddings), each one of ``available``; ParameterError naming the parameter."""
    available = sorted(int(a) for a in available)
    try:
        chosen = replace(PARAMETERS["layers"], choices=tuple(available)).chosen(layers)
    except SettingError as exc:
        raise refusal(exc) from None
    return available[-1:] if chosen == "final" else sorted(chosen)
