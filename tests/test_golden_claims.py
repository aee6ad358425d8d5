"""The published claims table, pinned: the verdicts and our numbers computed from the committed data.

A change in the analysis that moves a number the book publishes fails here until the data, the
book and this file are updated on purpose: ``GEOMCAP_UPDATE_GOLDEN=1 pytest tests/test_golden_claims.py``
rewrites ``tests/golden/claims.json`` (commit it with the change that moved the numbers).
"""
import json
import os
from pathlib import Path

from geomcap import pythia, results

GOLDEN = Path(__file__).resolve().parent / "golden" / "claims.json"


def published_claims() -> list[dict]:
    """The results page's table: C1-C6 and C8 from data/runs, C7 from the committed stand-in."""
    rows = results.task_claims_from_store()
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
