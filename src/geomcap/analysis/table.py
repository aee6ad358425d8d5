"""The summary table: one row per run, the events of :func:`geomcap.events.summarize_run` flattened, with
its difficulty class; rows computed once per code and files (:func:`geomcap.results.summary_cache`)."""

from __future__ import annotations

import hashlib
import os
import pickle
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from geomcap import store
from geomcap.analysis.acquisition import run_chance
from geomcap.analysis.difficulty import difficulty_class
from geomcap.analysis.alarms import first_alarm_step
from geomcap.analysis.protocol import READING_START, RUN_KEYS
from geomcap.analysis.series import final_layer
from geomcap.analysis.summary import summarize_run


def summary_row(metrics: pd.DataFrame, **kwargs) -> dict:
    """A flat dict of :func:`geomcap.events.summarize_run` for one run's metrics.

    The ``rankme_*`` and ``top_down_*`` columns describe the collapse of the
    measure selected with ``measure=`` (default: the primary ``rankme``).
    ``reading_start``: where the informative reading starts. Per series ``<m>`` of
    :data:`~geomcap.analysis.protocol.PRECURSOR_MEASURES` present, the informative reading (b):
    ``<m>_transition_step``, ``<m>_gap_steps``, ``<m>_gap_checkpoints``, ``<m>_gap_share``,
    ``<m>_is_precursor`` (leads acquisition), ``<m>_leads_test_loss`` and ``<m>_informative``
    (both); and the paper's reading (a), from the first checkpoint, as ``paper_<m>_transition_step``,
    ``paper_<m>_gap_checkpoints``, ``paper_<m>_gap_share``, ``paper_<m>_is_precursor``,
    ``paper_<m>_leads_test_loss``. ``alarms`` (a dict: measure -> list of alarm dicts) and
    ``first_alarm_step``: the run's alarms (:func:`geomcap.events.run_alarms`).
    """
    s = summarize_run(metrics, **kwargs)
    checkpoints = np.unique(np.asarray(metrics["step"], dtype=np.int64))
    row = {"acquisition_step": s["acquisition_step"], "final_accuracy": s["final_accuracy"],
           "last_step": s["last_step"], "checkpoints": s["checkpoints"], "final_layer": s["final_layer"],
           "plateau_fraction": s["plateau_fraction"], "reading_start": s["reading_start"],
           "ordered_collapse_recovery_acquisition": s["order_collapse_recovery_acquisition"],
           "first_alarm_step": s["first_alarm_step"], "alarms": s["alarms"],
           # what the forecast scoring reads (geomcap.analysis.forecast): the checkpoints, each alarmed
           # measure's final layer, and where an alarm could first be raised had the run been armed at the
           # collapse window's end
           "checkpoint_grid": checkpoints.tolist(),
           "alarm_final_layers": {m: final_layer(metrics, m) for m in s["alarms"]},
           "earliest_alarm_step": first_alarm_step(checkpoints, kwargs.get("window") or READING_START)}
    c = s["collapse"] or {}
    for key in ("initial_value", "peak_value", "peak_step", "onset_step", "floor_value", "floor_step",
                "recovery_step", "relative_drop", "collapsed", "floor_certain_step", "recovery_certain_step"):
        row[f"rankme_{key}"] = c.get(key)
    energy = s["mean_energy"] or {}
    for key in ("initial", "at_floor", "last", "residual_at_floor"):
        row[f"mean_energy_share_{key}"] = energy.get(key)
    for prefix, reading in (("", "precursors"), ("paper_", "paper_precursors")):
        # every series the run recorded gets its columns, empty where the reading is undefined (a collapse
        # that never recovered has no informative reading)
        for measure in s["paper_precursors"]:
            p = s[reading].get(measure) or dict.fromkeys(("measure_step", "gap_steps", "gap_checkpoints",
                                                           "gap_share", "is_precursor", "leads_test_loss",
                                                           "informative"))
            row[f"{prefix}{measure}_transition_step"] = p["measure_step"]
            row[f"{prefix}{measure}_gap_checkpoints"] = p["gap_checkpoints"]
            row[f"{prefix}{measure}_gap_share"] = p["gap_share"]
            row[f"{prefix}{measure}_is_precursor"] = p["is_precursor"]
            row[f"{prefix}{measure}_leads_test_loss"] = p["leads_test_loss"]
            if not prefix:
                row[f"{measure}_gap_steps"] = p["gap_steps"]
                row[f"{measure}_informative"] = p["informative"]
    td = s["top_down"] or {}
    row["top_down_rho_step"] = td.get("rho_step")
    row["top_down_rho_floor"] = td.get("rho_floor")
    row["is_top_down"] = td.get("is_top_down")
    row["top_down_layers"] = len(td.get("layers", []))
    row["top_down_residual"] = td.get("residual_measure") is not None if td else None
    row["top_down_rho_step_post_ln"] = (td.get("post_ln") or {}).get("rho_step")
    steps = np.asarray(td.get("collapse_step", []), dtype=float)
    row["top_down_half_drop_median"] = float(np.median(steps)) if steps.size else None
    return row


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """SHA-1 of every module of the package and of numpy's and pandas' versions: a cached summary is reused
    only by the code that made it."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha1(f"numpy {np.__version__} pandas {pd.__version__}".encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _run_summary(run, kwargs: dict, cache: Path | None) -> dict:
    """One run's row of :func:`summary_table`, from ``cache`` when this code already summarised these exact
    files with these arguments (the key hashes the package's code, the run's config, metrics and status)."""
    path = Path(run.path)
    key = None
    if cache is not None:
        digest = hashlib.sha1(_code_fingerprint().encode())
        digest.update(repr(sorted(kwargs.items())).encode())
        for name in ("config.json", store.METRICS_FILE, "status.json"):
            digest.update(name.encode() + b"\0" + ((path / name).read_bytes() if (path / name).exists() else b""))
        key = cache / f"{digest.hexdigest()}.pkl"
        if key.exists():
            try:
                return pickle.loads(key.read_bytes())
            except Exception:  # a truncated or foreign file: recompute and overwrite it
                pass
    status = store.read_status(path) or {}
    chance = status["chance_accuracy"] if "chance_accuracy" in status else run_chance(run._asdict())
    row = {**{k: getattr(run, k) for k in (*RUN_KEYS, "steps", "run")}, "chance": chance,
           "stopped_at": status.get("stopped_at"), "parameters": status.get("parameters"),
           **summary_row(store.read_metrics(path), chance=chance, **kwargs)}
    if key is not None:
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            store.atomic_write_bytes(key, pickle.dumps(row))
        except OSError:  # a read-only cache only costs the recomputation
            pass
    return row


def summary_cache() -> Path | None:
    """Where :func:`summary_table` keeps the rows it computed: ``$GEOMCAP_SUMMARY_CACHE``, else
    ``<user cache>/geomcap/summaries`` (:func:`geomcap.store.user_root`); ``GEOMCAP_SUMMARY_CACHE=off``
    turns it off. Every notebook reads the same runs, so the book's build summarises each run once."""
    setting = os.environ.get("GEOMCAP_SUMMARY_CACHE", "")
    if setting.lower() == "off":
        return None
    return Path(setting) if setting else store.user_root("summaries")


def summary_table(runs: pd.DataFrame, **kwargs) -> pd.DataFrame:
    """One row per run: its task, level, size, seed, steps (the budget), ``stopped_at`` (when the run
    stopped early, else missing) and the events of :func:`summary_row` (acquisition on chance-corrected
    accuracy, see :func:`geomcap.events.summarize_run`), with its difficulty class
    (:func:`difficulty_class`). Rows already computed by the same code from the same files are read
    from :func:`summary_cache`."""
    cache = summary_cache()
    rows = [_run_summary(run, kwargs, cache) for run in runs.itertuples()]
    table = pd.DataFrame(rows)
    if not table.empty:
        step_columns = [c for c in table.columns
                        if (c.endswith("_step") or c.endswith("_steps") or c == "stopped_at")
                        and not c.startswith("top_down_rho")]
        for column in step_columns:
            table[column] = pd.to_numeric(table[column], errors="coerce").astype("Int64")
        table["difficulty"] = difficulty_class(table)
    return table
