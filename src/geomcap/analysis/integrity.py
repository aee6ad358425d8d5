"""Revision integrity: which revisions of a series of checkpoints hold another revision's weights, read from
their content digests (:mod:`geomcap.digests`, stored in each run's ``digests.json``) before any event is timed.

* A revision with the same weights as an earlier one is its **duplicate** (``duplicate_of``: the earliest
  revision holding those weights). Duplicates are left out of every transition and acquisition reading.
* A revision that serves a weight file some other revision serves too, while its weights differ, is a
  **partial copy** (``shares_files_with``; e.g. a first shard that is the final model's, EleutherAI/pythia#206).
* A revision is **step-specific** when no other revision holds its weights or any of its files. Between two
  revisions that hold the same weights nothing was trained, so a gap measured across a revision that is not
  step-specific cannot be read as training time: such a gap is refused (:func:`copies_in_span`).

All of it reads tables and dicts; nothing here loads a checkpoint.
"""

from __future__ import annotations

import warnings

import pandas as pd

#: the columns of :func:`integrity_table`
INTEGRITY_COLUMNS = ["revision", "step", "commit", "weights", "duplicate_of", "shares_files_with", "step_specific"]


class CopiedRevisionsWarning(UserWarning):
    """Some revisions of a series hold another revision's weights (or weight files)."""


def same_weights(a: dict, b: dict) -> bool:
    """Whether two revision digests (:func:`geomcap.digests.revision_digest`) show the same weights: equal
    ``weights`` where both have one (whatever the files' format or sharding), else equal non-empty ``files``
    (e.g. what the hub records for each file)."""
    if a.get("weights") and b.get("weights"):
        return a["weights"] == b["weights"]
    return bool(a.get("files")) and a.get("files") == b.get("files")


def earlier_copy(digests: dict, revision: str) -> str | None:
    """The earliest revision (by step) of ``digests`` whose weights ``digests[revision]`` holds too, if it is
    earlier than ``revision``; else None. digests: {revision name: digest with ``step``}."""
    step = int(digests[revision]["step"])
    same = [name for name, digest in digests.items()
            if int(digest["step"]) < step and same_weights(digests[revision], digest)]
    return min(same, key=lambda name: int(digests[name]["step"])) if same else None


def integrity_table(digests: dict) -> pd.DataFrame:
    """One row per revision of a series, in step order (:data:`INTEGRITY_COLUMNS`): ``revision``, ``step``,
    ``commit`` (the hub commit, or None), ``weights`` (the first 12 hex digits of the weights' or else the
    files' digest), ``duplicate_of`` (the earliest revision with the same weights; "" for the first of its
    weights), ``shares_files_with`` (the other revisions that serve one of its weight files while their
    weights differ, comma-separated; "" for none) and ``step_specific`` (neither a duplicate nor the original
    of one, and sharing no file).

    digests: {revision name: digest with at least ``step`` and ``weights`` or ``files``}.
    """
    ordered = sorted(digests.items(), key=lambda item: int(item[1]["step"]))
    original_of = {name: earlier_copy(digests, name) or name for name, _ in ordered}
    servers: dict[tuple, set] = {}  # (file name, sha256) -> the revisions serving it
    for name, digest in ordered:
        for item in (digest.get("files") or {}).items():
            servers.setdefault(item, set()).add(name)
    group_size = pd.Series(original_of).value_counts()
    rows = []
    for name, digest in ordered:
        shared = {other for item in (digest.get("files") or {}).items() for other in servers[item]
                  if original_of[other] != original_of[name]}
        shared = sorted(shared, key=lambda other: int(digests[other]["step"]))
        content = digest.get("weights") or "|".join(f"{k}={v}" for k, v in sorted((digest.get("files") or {}).items()))
        rows.append({"revision": name, "step": int(digest["step"]), "commit": digest.get("commit"),
                     "weights": content[:12],
                     "duplicate_of": original_of[name] if original_of[name] != name else "",
                     "shares_files_with": ", ".join(shared),
                     "step_specific": group_size[original_of[name]] == 1 and not shared})
    return pd.DataFrame(rows, columns=INTEGRITY_COLUMNS)


def left_out_steps(table: pd.DataFrame) -> set[int]:
    """The steps of the duplicates in an :func:`integrity_table`: left out of every reading."""
    return set(int(s) for s in table.loc[table["duplicate_of"] != "", "step"]) if len(table) else set()


def copies_in_span(table: pd.DataFrame, first_step, last_step) -> list[str]:
    """The revisions of an :func:`integrity_table` between ``first_step`` and ``last_step`` (inclusive, either
    order) that are not step-specific: a gap measured across any of them is refused."""
    if not len(table) or first_step is None or last_step is None or pd.isna(first_step) or pd.isna(last_step):
        return []
    low, high = sorted((int(first_step), int(last_step)))
    inside = table[(table["step"] >= low) & (table["step"] <= high) & ~table["step_specific"].astype(bool)]
    return list(inside["revision"])


def copies_line(table: pd.DataFrame, what: str) -> str | None:
    """One line naming every revision of ``what`` (a model, a folder) that is not step-specific, or None when
    every revision is: the duplicates, grouped by the revision whose weights they hold, and the partial copies."""
    if not len(table) or table["step_specific"].all():
        return None
    dups = table[table["duplicate_of"] != ""]
    parts = []
    if len(dups):
        groups = "; ".join(f"{', '.join(group['revision'])} = {original}"
                           for original, group in dups.groupby("duplicate_of", sort=False))
        parts.append(f"{len(dups)} of its {len(table)} revisions hold the weights of an earlier one and are left "
                     f"out of every reading ({groups})")
    partial = table[table["shares_files_with"] != ""]
    if len(partial):
        parts.append(f"{len(partial)} serve a weight file another revision serves while holding other weights "
                     f"({', '.join(partial['revision'])})")
    return f"{what}: " + "; ".join(parts) + "; a gap measured across any of these is refused"


def warn_copies(table: pd.DataFrame, what: str) -> str | None:
    """Emit :func:`copies_line` as one :class:`CopiedRevisionsWarning` (nothing when every revision is
    step-specific); returns the line."""
    line = copies_line(table, what)
    if line:
        warnings.warn(line, CopiedRevisionsWarning, stacklevel=2)
    return line


def span_table(table: pd.DataFrame, span_steps: int) -> pd.DataFrame:
    """Every placement of a gap of ``span_steps`` steps between two revisions of an :func:`integrity_table`
    (both ends revisions of the series): ``first_step``, ``last_step``, ``revisions`` inside (ends included),
    ``step_specific`` (how many of them are) and ``ends_step_specific`` (both ends are)."""
    steps = table["step"].to_numpy()
    specific = table["step_specific"].astype(bool).to_numpy()
    present = set(int(s) for s in steps)
    rows = []
    for first in steps:
        last = int(first) + int(span_steps)
        if last not in present:
            continue
        inside = (steps >= first) & (steps <= last)
        rows.append({"first_step": int(first), "last_step": last, "revisions": int(inside.sum()),
                     "step_specific": int(specific[inside].sum()),
                     "ends_step_specific": bool(specific[steps == first][0] and specific[steps == last][0])})
    return pd.DataFrame(rows, columns=["first_step", "last_step", "revisions", "step_specific",
                                       "ends_step_specific"])


def content_ranges(table: pd.DataFrame) -> pd.DataFrame:
    """An :func:`integrity_table` as runs of consecutive revisions (in step order) of one kind: ``first_step``,
    ``last_step``, ``revisions``, ``content`` ("step-specific", or "the weights of <revision>" for a group of
    identical revisions, named by its earliest, or "shares a file with <revisions>")."""
    kinds = []
    for row in table.itertuples():
        if row.step_specific:
            kinds.append("step-specific")
        elif row.shares_files_with:
            kinds.append(f"shares a weight file with {row.shares_files_with}")
        else:
            kinds.append(f"the weights of {row.duplicate_of or row.revision}")
    rows = []
    for step, kind in zip(table["step"], kinds):
        if rows and rows[-1]["content"] == kind:
            rows[-1].update(last_step=int(step), revisions=rows[-1]["revisions"] + 1)
        else:
            rows.append({"first_step": int(step), "last_step": int(step), "revisions": 1, "content": kind})
    return pd.DataFrame(rows, columns=["first_step", "last_step", "revisions", "content"])
