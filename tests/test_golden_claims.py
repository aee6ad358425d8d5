"""The claims table the book publishes, pinned: the verdicts, our numbers and the controls' on the committed
runs (data/runs with the negative controls of data/controls) and on the frozen first grid (data/runs-v1).

A change in the analysis or in the committed data that moves one of these numbers fails here until this file
is updated on purpose: ``GEOMCAP_UPDATE_GOLDEN=1 pytest tests/test_golden_claims.py`` rewrites
``tests/golden/claims.json`` and the README's "What it finds" list (commit them with the change that moved the
numbers, saying why). The README's list is the published table's, so a verdict that changes fails here until
the paragraph is updated too.
"""
import json
import os
import re
from pathlib import Path

import pytest

from geomcap import results, store

GOLDEN = Path(__file__).resolve().parent / "golden" / "claims.json"
README = Path(__file__).resolve().parents[1] / "README.md"
FINDINGS = re.compile(r"(<!-- findings:start -->\n)(.*?)(\n<!-- findings:end -->)", re.S)


@pytest.fixture(scope="module")
def published():
    """The results page's table on data/runs (with the controls) and the first grid's table, C7 from the
    committed stand-in in both."""
    c7 = results.c7_from_store()
    tables = {}
    for name, root in (("runs", ""), ("runs-v1", store.committed_data("runs-v1"))):
        rows = results.task_claims_from_store(root)
        rows.insert(6, c7)
        tables[name] = rows
    return tables


def _pinned(rows):
    return [{"claim": r["claim"], "ours": r["ours"], "control": r["control"], "verdict": r["verdict"]} for r in rows]


def test_the_published_claims_tables_are_unchanged(published):
    tables = {name: _pinned(rows) for name, rows in published.items()}
    readme = README.read_text()
    if os.environ.get("GEOMCAP_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(tables, indent=1, ensure_ascii=False) + "\n")
        README.write_text(FINDINGS.sub(lambda m: m.group(1) + results.findings_markdown(published["runs"])
                                       + m.group(3), readme))
    pinned = json.loads(GOLDEN.read_text())
    for name, table in tables.items():
        assert [r["claim"] for r in table] == [r["claim"] for r in pinned[name]]
        for ours, expected in zip(table, pinned[name]):
            assert ours == expected, f"{name}: {ours['claim']} moved (update the golden file on purpose if it should)"


def test_the_readme_says_what_the_published_table_says(published):
    block = FINDINGS.search(README.read_text())
    assert block, "README.md has no <!-- findings:start --> ... <!-- findings:end --> block"
    assert block.group(2) == results.findings_markdown(published["runs"])


def test_the_committed_alarm_precision_is_what_its_script_computes_from_the_committed_runs(tmp_path):
    """data/forecast/alarm-precision.json (what the monitor quotes beside a live alarm) is computed from the runs
    classed hard in data/runs and data/scale; a hard run landing in data/scale changes it, and nothing failed
    when it went stale. ``GEOMCAP_UPDATE_GOLDEN=1`` rewrites it, as it rewrites the claims table."""
    import importlib.util
    import shutil

    from geomcap.analysis.forecast import ALARM_PRECISION_FILE

    script = Path(__file__).resolve().parents[1] / "scripts" / "alarm_precision.py"
    spec = importlib.util.spec_from_file_location("alarm_precision_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fresh = tmp_path / "alarm-precision.json"
    assert module.main(["--out", str(fresh)]) == 0
    committed = store.committed_data(*ALARM_PRECISION_FILE[:-1]) / ALARM_PRECISION_FILE[-1]
    if os.environ.get("GEOMCAP_UPDATE_GOLDEN"):
        shutil.copyfile(fresh, committed)
    assert json.loads(fresh.read_text()) == json.loads(committed.read_text()), (
        "data/forecast/alarm-precision.json is stale: rerun scripts/alarm_precision.py and commit it")


def test_the_rerun_script_plans_one_rerun_per_committed_tie(tmp_path, capsys):
    """scripts/rerun_ties.py --dry-run: the ties of the committed runs (geomcap.results.tied), each planned
    once, nothing trained."""
    import importlib.util

    import pandas as pd

    script_path = Path(__file__).resolve().parents[1] / "scripts" / "rerun_ties.py"
    spec = importlib.util.spec_from_file_location("rerun_ties", script_path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--dry-run", "--out", str(tmp_path / "reruns")]) == 0
    out = capsys.readouterr().out
    runs = pd.concat([results.load_runs(store.committed_data(n)) for n in ("runs", "scale")], ignore_index=True)
    n_ties = int(results.tied(results.summary_table(runs)).sum())
    assert out.startswith(f"{n_ties} tie") and f"plan: {n_ties} run" in out
    assert not (tmp_path / "reruns").exists()
