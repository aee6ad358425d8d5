"""What each signal's alarms were worth on the committed hard runs, for the monitor to quote beside a live alarm.

    python scripts/alarm_precision.py [--out data/forecast/alarm-precision.json]

Reads the real runs of data/runs (and of data/scale where it exists), keeps those classed hard from behaviour
(geomcap.results.difficulty_class), scores every signal's alarms as a forecast at the verdict's horizon
(geomcap.results.forecast_runs, forecast_table) and writes geomcap.results.alarm_precision_record's JSON,
which geomcap.monitor.GeometryMonitor reads (geomcap.results.alarm_precision).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from geomcap import store
from geomcap.analysis.forecast import ALARM_PRECISION_FILE
from geomcap.results import (alarm_precision_record, difficulty_class, forecast_runs, forecast_table, load_arms,
                             load_runs, summary_table)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(store.committed_data(*ALARM_PRECISION_FILE[:-1]) / ALARM_PRECISION_FILE[-1]))
    args = parser.parse_args(argv)
    runs = [load_arms("")["real"]]
    scale = store.committed_data("scale")
    if scale.is_dir():
        runs.append(load_runs(scale))
    summary = summary_table(pd.concat(runs, ignore_index=True))
    hard = summary[difficulty_class(summary) == "hard"]
    table = forecast_table(forecast_runs(hard))
    record = alarm_precision_record(table, runs=f"the {len(hard)} runs classed hard from behaviour in data/runs"
                                    + (" and data/scale" if len(runs) > 1 else ""))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    store.atomic_write_json(out, record)
    print(f"wrote {out}: {len(record['signals'])} signals at a horizon of {record['horizon']} steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
