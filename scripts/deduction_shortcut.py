"""A model's accuracy on the deduction benchmarks split by the unnamed-object shortcut.

    python scripts/deduction_shortcut.py --model DIR [--revisions all|log|step2000,step2400|...]
                                         [--benchmarks logical_deduction_3] [--out FILE.json]

Each item of a deduction benchmark is classed by geomcap.diagnostics.deduction_shortcut: "shortcut right"
(exactly one object goes unnamed by the clues, and it is the answer), "shortcut wrong" (one goes unnamed,
and it is not), "no shortcut". A model that answers with the unnamed object scores about 1, 0 and chance on
the three; one that deduces scores alike on all three. Every revision is scored as `geomcap pythia run`
scores it (geomcap.pythia.scoring.score_items: the choice of highest summed log-likelihood), on the
committed benchmark files. DIR is a local root of stepN folders (a stand-in's build folder) or a hub name.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from geomcap import diagnostics, store
from geomcap.analysis.pythia_revisions import available_revisions, select_revisions
from geomcap.pythia.loading import load_revision, load_tokenizer
from geomcap.pythia.scoring import score_items


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a local root of stepN folders, or a hub name")
    parser.add_argument("--revisions", default="all", help="as geomcap pythia run's --revisions (default all)")
    parser.add_argument("--benchmarks", default="logical_deduction_3",
                        help="deduction benchmarks, comma-separated (default logical_deduction_3)")
    parser.add_argument("--out", help="write the record here as JSON (default: print it)")
    args = parser.parse_args(argv)
    benchmarks = args.benchmarks.split(",")
    for name in benchmarks:
        if name not in diagnostics.HARD:
            parser.error(f"--benchmarks: {name!r} is not a deduction benchmark ({', '.join(diagnostics.HARD)})")
    try:
        revisions = select_revisions(args.revisions, available_revisions(args.model))  # as pythia run selects
    except ValueError as exc:
        parser.error(f"--revisions: {exc}")
    torch.set_num_threads(1)
    tokenizer = load_tokenizer(args.model)
    items = {name: diagnostics.load_benchmark(name) for name in benchmarks}
    classes = {name: [diagnostics.deduction_shortcut(it) for it in items[name]] for name in benchmarks}
    record = {"model": args.model, "classes": list(diagnostics.SHORTCUT_CLASSES),
              "rule": "geomcap.diagnostics.deduction_shortcut", "benchmarks": {}}
    for name in benchmarks:
        record["benchmarks"][name] = {"file_sha256": diagnostics.file_sha(name), "revisions": {}}
    for revision in revisions:
        model = load_revision(args.model, revision)
        with torch.no_grad():
            for name in benchmarks:
                scores = score_items(model, tokenizer, items[name], hidden=False)
                correct = np.nanargmax(scores.logprob, axis=1) == scores.answer
                row = diagnostics.accuracy_by_shortcut(correct, classes[name])
                record["benchmarks"][name]["revisions"][revision] = row
                print(f"{revision} {name}: " + ", ".join(
                    f"{c} {row[c]['accuracy']:.2f} ({row[c]['items']})" for c in ("all", *diagnostics.SHORTCUT_CLASSES)
                    if row[c]["accuracy"] is not None), flush=True)
        del model
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        store.atomic_write_json(out, record)
        print(f"wrote {out}")
    else:
        json.dump(record, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
