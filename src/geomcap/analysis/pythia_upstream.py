"""The public Pythia checkpoints as they are: the step branches upstream reports as serving another branch's
weight file (``data/pythia/upstream_revisions.json``: EleutherAI/pythia#205, #206, #108), read with the same
integrity rules as a measured series (:mod:`geomcap.analysis.integrity`), and what they leave of the paper's gap.
"""

from __future__ import annotations

import json

import pandas as pd

from geomcap import paper, store
from geomcap.analysis.integrity import integrity_table, span_table
from geomcap.analysis.pythia_revisions import REVISIONS, revision_step

#: the upstream reports, under the committed data directory
UPSTREAM_FILE = ("pythia", "upstream_revisions.json")

#: the model and span of the paper's gap on Pythia (C7): ~49K steps on pythia-2.8b
PAPER_MODEL = "EleutherAI/pythia-2.8b"


def upstream_reports() -> dict:
    """The committed upstream reports (``data/pythia/upstream_revisions.json``) as a dict."""
    return json.loads(store.committed_data(*UPSTREAM_FILE).read_text())


def upstream_digests(model: str = PAPER_MODEL, reports: dict | None = None) -> dict:
    """A digest per revision of Pythia's schedule as the reports give it ({revision: {"step", "files"}}): each
    reported file of a revision is the reported sha256 where a ``shared`` entry lists the revision's step, and
    a file of its own otherwise (what the reports say of every branch they do not list). ValueError for a model
    the reports do not cover."""
    reports = upstream_reports() if reports is None else reports
    if model not in reports["models"]:
        raise ValueError(f"model: no upstream report on {model!r}; reported: {', '.join(reports['models'])}")
    entry = reports["models"][model]
    digests = {}
    for revision in REVISIONS:
        step = revision_step(revision)
        files = {name: f"{revision}/{name}" for name in entry["files"]}  # a file no other branch serves
        for shared in entry["shared"]:
            if step in shared["steps"]:
                files[shared["file"]] = shared["sha256"]
        digests[revision] = {"step": step, "files": files}
    return digests


def upstream_integrity(model: str = PAPER_MODEL, reports: dict | None = None) -> pd.DataFrame:
    """The :func:`~geomcap.analysis.integrity.integrity_table` of a model's public step branches, from the
    upstream reports (:func:`upstream_digests`)."""
    return integrity_table(upstream_digests(model, reports))


def paper_span(model: str = PAPER_MODEL, span_steps: int | None = None, reports: dict | None = None) -> dict:
    """What the public grid of ``model`` leaves of a gap of ``span_steps`` (default the paper's C7 gap,
    :data:`geomcap.paper.CLAIMS`), over every placement of such a gap between two revisions of the grid
    (:func:`~geomcap.analysis.integrity.span_table`):

    ``model``, ``span_steps``, ``issue`` (the report's number), ``revisions`` and ``step_specific`` (over the
    grid), ``first_specific`` and ``last_specific`` (the steps of the first and last step-specific revision),
    ``placements``, ``span_revisions`` (the most revisions one placement holds), ``most_specific`` (the most
    step-specific revisions one placement holds), ``none_until`` (the last first step of a placement holding
    none; None when every one holds some) and ``both_ends`` (placements whose two ends are step-specific).
    """
    reports = upstream_reports() if reports is None else reports
    span_steps = paper.CLAIMS["C7"]["values"]["gap_steps"] if span_steps is None else int(span_steps)
    table = upstream_integrity(model, reports)
    spans = span_table(table, span_steps)
    specific = table.loc[table["step_specific"], "step"]
    empty = spans.loc[spans["step_specific"] == 0, "first_step"]
    return {"model": model, "span_steps": span_steps, "issue": reports["models"][model]["issue"],
            "revisions": len(table), "step_specific": len(specific),
            "first_specific": int(specific.min()) if len(specific) else None,
            "last_specific": int(specific.max()) if len(specific) else None,
            "placements": len(spans), "span_revisions": int(spans["revisions"].max()),
            "most_specific": int(spans["step_specific"].max()),
            "none_until": int(empty.max()) if len(empty) else None,
            "both_ends": int(spans["ends_step_specific"].sum())}


def paper_span_text(span: dict) -> str:
    """A :func:`paper_span` in one clause, for C7's row and the book."""
    size = span["model"].split("pythia-", 1)[-1].upper()
    text = (f"the public {size} grid has at most {span['most_specific']} step-specific checkpoints in a "
            f"{span['span_steps'] // 1000}K-step span such as the paper's gap reads ({span['revisions']} revisions, "
            f"{span['step_specific']} step-specific, all in steps {span['first_specific']}-{span['last_specific']}")
    if span["none_until"] is not None:
        text += f"; none in a span starting at step {span['none_until']} or before"
    return text + f"; EleutherAI/pythia#{span['issue']})"
