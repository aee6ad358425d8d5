"""The claims table, pinned: the verdicts and our numbers computed from the frozen first grid.

The first grid (data/runs-v1) no longer changes, so a change in the analysis that moves one of its
numbers fails here until this file is updated on purpose (the re-run in data/runs grows as its runs
land, so its table cannot be pinned): ``GEOMCAP_UPDATE_GOLDEN=1 pytest tests/test_golden_claims.py``
rewrites ``tests/golden/claims.json`` (commit it with the change that moved the numbers).
"""
import json
import os
from pathlib import Path

from geomcap import pythia, results, store

GOLDEN = Path(__file__).resolve().parent / "golden" / "claims.json"


def published_claims() -> list[dict]:
    """The results page's table computed on the first grid: C1-C6 and C8 from data/runs-v1, C7 from the
    committed stand-in."""
    rows = results.task_claims_from_store(store.committed_data("runs-v1"))
    rows.insert(6, pythia.c7_claim_from_store())
    return [{"claim": r["claim"], "ours": r["ours"], "verdict": r["verdict"]} for r in rows]


def test_the_published_claims_table_is_unchanged():
    table = published_claims()
    if os.environ.get("GEOMCAP_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    pinned = json.loads(GOLDEN.read_text())
    assert [r["claim"] for r in table] == [r["claim"] for r in pinned]
    for ours, expected in zip(table, pinned):
        assert ours == expected, f"{ours['claim']} moved (update the golden file on purpose if it should)"
