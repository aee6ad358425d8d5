"""Can the geometry forecast acquisition? Every alarm of every signal (:mod:`geomcap.analysis.alarms`) scored as
a forecast, against baselines that any signal must beat.

An alarm raised at step ``a`` in a run acquired at step ``A`` (:func:`~geomcap.events.acquisition_step`)
is a *hit* at horizon ``H`` when ``A - H <= a < A``: acquisition follows within ``H`` steps (an alarm raised at
or after ``A`` forecasts nothing). Per signal and horizon, over a set of runs:

* *recall*: the share of acquired runs with a hit (runs acquired after the earliest step an alarm can be raised,
  ``earliest_alarm_step``, are counted; a run whose collapse never recovered is never armed, so a miss), and
  the lead ``A - a`` of its earliest hit;
* *precision*: the share of the alarms raised before acquisition that are hits;
* *alarm rates* per 1,000 steps read (from the collapse window's end): before acquisition on the real runs,
  after it, and on the shuffled-answer controls, which never acquire (every alarm there is false).

Baselines, at the signal's own alarm rate (alarms per armed checkpoint before acquisition, pooled over the
runs): a *random* alarm process (each armed checkpoint fires with that probability; its expected recall and
precision are computed exactly) and a *clock* (an alarm every ``1 / rate`` armed checkpoints from the first);
and the test loss, a signal read by the same rule. Intervals resample settings, then seeds within them.

The horizons and the verdict's horizon (:data:`~geomcap.analysis.forecast.FORECAST_HORIZONS`, :data:`~geomcap.analysis.forecast.VERDICT_HORIZON`) were fixed before
the scoring was first run, as the alarm rule was.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from geomcap import store
from geomcap.analysis.alarms import run_alarms
from geomcap.analysis.protocol import COLLAPSE_WINDOW, PRECURSOR_MEASURES, RUN_KEYS, SETTING_KEYS

#: the horizons H (steps) at which alarms are scored: acquisition within H steps after the alarm
FORECAST_HORIZONS = (100, 250, 500, 1000, 2000)
#: the horizon C5's verdict reads
VERDICT_HORIZON = 500
#: the signals scored, as (measure, layer): "final" = the measure's last layer, "any" = every layer's alarms
#: pooled (RankMe's per-layer alarms)
FORECAST_SIGNALS = tuple((m, layer) for m, layer in PRECURSOR_MEASURES) + (("rankme", "any"),)
#: the signal a forecaster is judged against (behaviour, read by the same rule)
REFERENCE_SIGNAL = ("test_loss", -1)


def signal_name(measure: str, layer) -> str:
    """``rankme`` for a final-layer or model-level signal, ``rankme (any layer)`` for the pooled one."""
    return f"{measure} (any layer)" if layer == "any" else measure


def signal_alarm_steps(row, measure: str, layer="final") -> np.ndarray:
    """The steps at which ``measure``'s alarms were raised in one summary row (:func:`~geomcap.results.summary_table`'s
    ``alarms`` and ``alarm_final_layers``): at its final layer, at layer -1 for a model-level measure, or at
    every layer (``"any"``; one alarm per step). Sorted; empty when the run has none (or the measure)."""
    found = (row.get("alarms") or {}).get(measure) or []
    if layer == "any":
        steps = {a["step"] for a in found}
    else:
        final = (row.get("alarm_final_layers") or {}).get(measure)
        wanted = final if layer == "final" else layer
        steps = {a["step"] for a in found if a["layer"] == wanted}
    return np.array(sorted(steps), dtype=np.int64)


def run_forecast(row, measure: str, layer, horizon: int, window: int = COLLAPSE_WINDOW) -> dict:
    """One run's forecast counts for one signal at one horizon (see the module docstring): ``acquired``,
    ``eligible`` (acquired after ``earliest_alarm_step``), ``hit`` and ``lead`` (steps; NaN without a hit),
    ``alarms_pre`` / ``hits_pre`` (raised before acquisition, and of them hits), ``alarms_post``, ``steps_pre`` /
    ``steps_post`` (steps read before and after acquisition, from ``window``), ``armed_steps_pre`` (steps
    before acquisition from the first at which an alarm could be raised), ``window_steps`` (steps of the
    horizon before acquisition during which the run was armed), ``armed_pre`` (armed
    checkpoints before acquisition) and the two baselines' ``random_hit`` (expected), ``random_hits_pre``
    (expected hits for ``random_rate`` = 1) ``window_checkpoints`` and the clock's placements (filled by
    :func:`~geomcap.results.forecast_runs`, which knows the pooled rate)."""
    A = row.get("acquisition_step")
    A = None if A is None or pd.isna(A) else int(A)
    last = int(row["last_step"])
    earliest = row.get("earliest_alarm_step")
    first = row.get("first_alarm_step")
    first = None if first is None or pd.isna(first) else int(first)
    raised = signal_alarm_steps(row, measure, layer)
    end = A if A is not None else last + 1
    pre, post = raised[raised < end], raised[raised >= end]
    hits = pre[pre >= A - horizon] if A is not None else pre[:0]
    checkpoints = np.asarray(row.get("checkpoint_grid") or [], dtype=np.int64)
    armed = checkpoints[(checkpoints >= first) & (checkpoints < end)] if first is not None else checkpoints[:0]
    in_window = armed[armed >= A - horizon] if A is not None else armed[:0]
    eligible = A is not None and earliest is not None and not pd.isna(earliest) and A > int(earliest)
    window_steps = float(max(A - max(first, A - horizon), 0)) if eligible and first is not None else 0.0
    return {"acquired": A is not None, "eligible": bool(eligible), "window_steps": window_steps, "hit": bool(len(hits)) if eligible else False,
            "lead": float(A - hits.min()) if len(hits) and eligible else np.nan,
            "lead_share": float((A - hits.min()) / A) if len(hits) and eligible and A else np.nan,
            "alarms_pre": int(len(pre)), "hits_pre": int(len(hits)), "alarms_post": int(len(post)),
            "steps_pre": float(max(min(end, last) - window, 0)), "steps_post": float(max(last - A, 0)) if A else 0.0,
            "armed_steps_pre": float(max(min(end, last) - first, 0)) if first is not None else 0.0,
            "armed_pre": int(len(armed)), "window_checkpoints": int(len(in_window)),
            "last_alarm_pre": float(pre.max()) if len(pre) else np.nan,
            "_armed": armed, "_window": in_window}


def _clock_hits(armed: np.ndarray, in_window: np.ndarray, period: int) -> tuple[int, int]:
    """(alarms, hits) of a clock firing at every ``period``-th armed checkpoint from the first."""
    if not armed.size:
        return 0, 0
    fired = armed[::period]
    return int(fired.size), int(np.isin(fired, in_window).sum())


def forecast_runs(summary: pd.DataFrame, signals=FORECAST_SIGNALS, horizons=FORECAST_HORIZONS) -> pd.DataFrame:
    """One row per run x signal x horizon of :func:`~geomcap.results.run_forecast`, with the run's keys and ``signal``,
    ``horizon``, and the baselines at the signal's alarm rate over these runs (``rate`` = alarms per armed
    checkpoint before acquisition, pooled): ``random_hit`` (probability of a hit) and ``random_hits``
    (expected hits among its alarms), ``clock_alarms`` and ``clock_hits``."""
    rows = []
    records = summary.to_dict("records")
    for measure, layer in signals:
        if not any(measure in (r.get("alarms") or {}) for r in records):
            continue
        for horizon in horizons:
            per = [(r, run_forecast(r, measure, layer, horizon)) for r in records]
            alarms = sum(f["alarms_pre"] for _, f in per)
            armed = sum(f["armed_pre"] for _, f in per)
            rate = alarms / armed if armed else 0.0
            period = max(1, int(round(1 / rate))) if rate > 0 else 0
            for r, f in per:
                clock = _clock_hits(f["_armed"], f["_window"], period) if period else (0, 0)
                rows.append({**{k: r[k] for k in (*RUN_KEYS, "run")}, "signal": signal_name(measure, layer),
                             "measure": measure, "layer": str(layer), "horizon": horizon, "rate": rate,
                             **{k: v for k, v in f.items() if not k.startswith("_")},
                             "random_hit": float(1 - (1 - rate) ** f["window_checkpoints"]) if f["eligible"] else 0.0,
                             "random_hits": rate * f["window_checkpoints"],
                             "clock_alarms": clock[0], "clock_hits": clock[1]})
    return pd.DataFrame(rows)


def ratio_interval(table: pd.DataFrame, num: str, den: str, n_boot: int = 1000, seed: int = 0,
                   level: float = 0.95, keys=SETTING_KEYS) -> tuple[float, float]:
    """Percentile interval of ``sum(num) / sum(den)`` over two-stage resamples of ``table``'s rows: settings
    (rows sharing ``keys``) with replacement, then rows within each drawn setting with replacement (as
    :func:`geomcap.results.setting_bootstrap`, vectorised for a ratio of sums). (NaN, NaN) when
    the table is empty or every resample has a zero denominator."""
    if table.empty:
        return float("nan"), float("nan")
    groups = [(g[num].to_numpy(float), g[den].to_numpy(float)) for _, g in table.groupby(list(keys), sort=True)]
    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(n_boot):
        n_sum = d_sum = 0.0
        for k in rng.integers(0, len(groups), len(groups)):
            a, b = groups[k]
            pick = rng.integers(0, a.size, a.size)
            n_sum += a[pick].sum()
            d_sum += b[pick].sum()
        if d_sum > 0:
            ratios.append(n_sum / d_sum)
    if not ratios:
        return float("nan"), float("nan")
    return tuple(float(np.quantile(ratios, q)) for q in ((1 - level) / 2, (1 + level) / 2))


#: the columns of :func:`~geomcap.results.forecast_table`
FORECAST_COLUMNS = ("signal", "horizon", "runs", "settings", "recall", "recall_low", "recall_high",
                    "random_recall", "clock_recall", "lead_median", "lead_share_median", "alarms", "precision",
                    "precision_low", "precision_high", "random_precision", "clock_precision",
                    "alarms_per_1000_pre", "alarms_per_1000_armed", "alarms_per_1000_post")


def forecast_table(per_run: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per signal and horizon, over the runs of :func:`~geomcap.results.forecast_runs` (columns :data:`~geomcap.analysis.forecast.FORECAST_COLUMNS`):
    ``runs`` (eligible) and ``settings``; ``recall`` with its setting-bootstrap interval, and the random and
    clock baselines' recall at the signal's rate; the median lead (steps, and as a share of the acquisition
    step); ``alarms`` raised before acquisition, ``precision`` (hits / alarms) with its interval, the
    baselines' precision; alarms per 1,000 steps read before acquisition (from the collapse window's end, as on
    the controls), per 1,000 armed steps before it (the random curve's unit, :func:`random_recall_curve`), and
    per 1,000 steps after it."""
    rows = []
    for (signal, horizon), g in per_run.groupby(["signal", "horizon"], sort=False):
        eligible = g[g["eligible"]]
        alarms = int(g["alarms_pre"].sum())
        rows.append({
            "signal": signal, "horizon": horizon, "runs": len(eligible),
            "settings": len(eligible.groupby(list(SETTING_KEYS))) if len(eligible) else 0,
            "recall": float(eligible["hit"].mean()) if len(eligible) else np.nan,
            **dict(zip(("recall_low", "recall_high"),
                       ratio_interval(eligible.assign(_one=1.0, _hit=eligible["hit"].astype(float)), "_hit", "_one",
                                      n_boot, seed))),
            "random_recall": float(eligible["random_hit"].mean()) if len(eligible) else np.nan,
            # no clock without alarms to match: a signal that never fires has no clock
            "clock_recall": (float((eligible["clock_hits"] > 0).mean()) if len(eligible) and g["clock_alarms"].sum()
                             else np.nan),
            "lead_median": float(eligible["lead"].median()) if eligible["lead"].notna().any() else np.nan,
            "lead_share_median": (float(eligible["lead_share"].median()) if eligible["lead_share"].notna().any()
                                  else np.nan),
            "alarms": alarms, "precision": g["hits_pre"].sum() / alarms if alarms else np.nan,
            **dict(zip(("precision_low", "precision_high"), ratio_interval(g, "hits_pre", "alarms_pre", n_boot, seed))),
            "random_precision": (g["window_checkpoints"].sum() / g["armed_pre"].sum() if g["armed_pre"].sum()
                                 else np.nan),
            "clock_precision": (g["clock_hits"].sum() / g["clock_alarms"].sum() if g["clock_alarms"].sum()
                                else np.nan),
            "alarms_per_1000_pre": (1000 * alarms / g["steps_pre"].sum() if g["steps_pre"].sum() else np.nan),
            "alarms_per_1000_armed": (1000 * alarms / g["armed_steps_pre"].sum() if g["armed_steps_pre"].sum()
                                      else np.nan),
            "alarms_per_1000_post": (1000 * g["alarms_post"].sum() / g["steps_post"].sum() if g["steps_post"].sum()
                                     else np.nan)})
    return pd.DataFrame(rows, columns=list(FORECAST_COLUMNS))


def false_alarm_table(control_summary: pd.DataFrame, signals=FORECAST_SIGNALS, n_boot: int = 1000,
                      seed: int = 0) -> pd.DataFrame:
    """Per signal, on runs where nothing is learnt (the shuffled-answer controls: every alarm is false): how
    many runs, how many were armed (their collapse recovered), the alarms, and alarms per 1,000 steps read
    (from the collapse window's end) with a setting-bootstrap interval."""
    per_run = forecast_runs(control_summary, signals, horizons=(FORECAST_HORIZONS[0],))
    rows = []
    for signal, g in per_run.groupby("signal", sort=False):
        total = g["alarms_pre"].sum() + g["alarms_post"].sum()
        steps = g["steps_pre"].sum() + g["steps_post"].sum()
        low, high = ratio_interval(g.assign(_all=g["alarms_pre"] + g["alarms_post"],
                                            _steps=(g["steps_pre"] + g["steps_post"]) / 1000), "_all", "_steps",
                                   n_boot, seed)
        rows.append({"signal": signal, "runs": len(g), "armed": int((g["armed_pre"] > 0).sum()),
                     "alarms": int(total), "steps": float(steps),
                     "alarms_per_1000": 1000 * total / steps if steps else np.nan,
                     "alarms_per_1000_low": low, "alarms_per_1000_high": high})
    return pd.DataFrame(rows, columns=["signal", "runs", "armed", "alarms", "steps", "alarms_per_1000",
                                       "alarms_per_1000_low", "alarms_per_1000_high"])


def twin_alarm_table(summary: pd.DataFrame, twins: pd.DataFrame, signals=FORECAST_SIGNALS) -> pd.DataFrame:
    """The twins' table (:func:`geomcap.results.twin_table`) with, per signal, ``<signal>_last_alarm``:
    the last alarm raised before acquisition in each run (what a monitor user saw last), for
    :func:`geomcap.results.twin_shift_correlation` (does it move with acquisition between twins?)."""
    table = twins.copy()
    by_run = summary.set_index("run").to_dict("index")
    for measure, layer in signals:
        name = signal_name(measure, layer)
        values = []
        for run in table["run"]:
            r = by_run.get(run)
            values.append(np.nan if r is None else
                          run_forecast({**r, "run": run}, measure, layer, FORECAST_HORIZONS[-1])["last_alarm_pre"])
        table[f"{name}_last_alarm"] = values
    return table


#: the scales of the alarm band (:func:`~geomcap.events.run_alarms`' ``scale``) on the sensitivity curve: the
#: protocol's rule is 1; smaller scales fire on smaller departures
SENSITIVITY_SCALES = (0.25, 0.5, 1.0)
#: the signals of the forecast figure
FIGURE_SIGNALS = (("rankme", "final"), ("rankme", "any"), ("rankme_centred", "final"), ("test_loss", -1),
                  ("train_accuracy", -1), ("first_token_accuracy", -1), ("param_norm", -1))


def rescaled(summary: pd.DataFrame, metrics: pd.DataFrame, scale: float, measures) -> pd.DataFrame:
    """``summary`` with each run's ``alarms`` of ``measures`` recomputed from ``metrics`` (tidy, with a ``run``
    column: :func:`~geomcap.results.load_metrics`) with the band scaled by ``scale``, read from the same
    ``reading_start``."""
    by_run = dict(tuple(metrics.groupby("run", sort=False)))
    out = summary.copy()
    out["alarms"] = [
        run_alarms(by_run[r.run], None if pd.isna(r.reading_start) else int(r.reading_start), measures, scale)
        if r.run in by_run else {} for r in summary.itertuples()]
    return out


def band_sensitivity(summary: pd.DataFrame, metrics: pd.DataFrame, control: pd.DataFrame | None = None,
                      control_metrics: pd.DataFrame | None = None, signals=FIGURE_SIGNALS,
                      scales=SENSITIVITY_SCALES, horizon: int = VERDICT_HORIZON) -> pd.DataFrame:
    """Recall against alarm rate as the alarm band is scaled (:data:`~geomcap.analysis.forecast.SENSITIVITY_SCALES`): per signal and
    scale, over the runs of ``summary`` (e.g. the hard ones) at ``horizon``: ``runs``, ``recall``,
    ``alarms``, ``precision``, ``alarms_per_1000_pre`` (before acquisition) and ``alarms_per_1000_armed``
    (per armed step before it), and, with the controls
    (``control`` and its ``control_metrics``), ``control_alarms_per_1000``."""
    measures = sorted({m for m, _ in signals})
    rows = []
    for scale in scales:
        real = summary if scale == 1.0 else rescaled(summary, metrics, scale, measures)
        table = forecast_table(forecast_runs(real, signals, (horizon,)), n_boot=1).set_index("signal")
        false = None
        if control is not None and len(control):
            ctrl = control if scale == 1.0 else rescaled(control, control_metrics, scale, measures)
            false = false_alarm_table(ctrl, signals, n_boot=1).set_index("signal")
        for signal, r in table.iterrows():
            rows.append({"signal": signal, "scale": scale, "runs": int(r["runs"]), "recall": r["recall"],
                         "alarms": int(r["alarms"]), "precision": r["precision"],
                         "alarms_per_1000_pre": r["alarms_per_1000_pre"],
                         "alarms_per_1000_armed": r["alarms_per_1000_armed"],
                         "control_alarms_per_1000": (false.loc[signal, "alarms_per_1000"]
                                                     if false is not None and signal in false.index else np.nan)})
    return pd.DataFrame(rows)


def random_recall_curve(per_run: pd.DataFrame, rates_per_1000) -> pd.DataFrame:
    """The expected recall of random alarms raised at ``rates_per_1000`` alarms per 1,000 armed steps (a Poisson
    process on the steps the run was armed), over the eligible runs of ``per_run`` (:func:`forecast_runs` rows of
    one signal and horizon): 1 - exp(-rate x armed steps in the horizon), averaged. The reference a signal's
    (alarm rate, recall) point is read against."""
    eligible = per_run[per_run["eligible"]]
    window = eligible["window_steps"].to_numpy(float)
    rates = np.asarray(list(rates_per_1000), dtype=float)
    recall = [float(np.mean(1 - np.exp(-r / 1000 * window))) if window.size else np.nan for r in rates]
    return pd.DataFrame({"alarms_per_1000": rates, "recall": recall})


#: where the measured precision of each signal's alarms is committed (``scripts/alarm_precision.py`` writes it;
#: :class:`geomcap.monitor.GeometryMonitor` quotes it beside each live alarm)
ALARM_PRECISION_FILE = ("forecast", "alarm-precision.json")


def alarm_precision_record(table: pd.DataFrame, runs: str) -> dict:
    """The committed record of a :func:`~geomcap.results.forecast_table` at :data:`~geomcap.analysis.forecast.VERDICT_HORIZON`: {"horizon", "runs" (what
    was scored, in words), "signals": {signal: {"precision", "alarms", "hits", "recall", "eligible_runs"}}}."""
    rows = table[table["horizon"] == VERDICT_HORIZON]
    signals = {}
    for r in rows.itertuples():
        signals[r.signal] = {"precision": None if not np.isfinite(r.precision) else float(r.precision),
                             "alarms": int(r.alarms),
                             "hits": int(round(r.precision * r.alarms)) if r.alarms else 0,
                             "recall": None if not np.isfinite(r.recall) else float(r.recall),
                             "eligible_runs": int(r.runs)}
    return {"horizon": VERDICT_HORIZON, "runs": runs, "signals": signals}


def alarm_precision(path=None) -> dict:
    """The committed record of :func:`~geomcap.results.alarm_precision_record` (default ``data/forecast/alarm-precision.json``),
    or {} where there is none (a library installed without the repository's data)."""
    try:
        path = store.committed_data(*ALARM_PRECISION_FILE) if path is None else path
        return json.loads(open(path).read())
    except (FileNotFoundError, OSError, ValueError):
        return {}


def alarm_note(record: dict, measure: str, layer: int, final_layer: int) -> str:
    """What one live alarm is worth, from a committed :func:`~geomcap.results.alarm_precision` record: "in this book's hard runs,
    X% of such alarms (k of n) were followed by acquisition within H steps", for the final layer's signal or
    (another layer) the signal pooled over layers; "" when the record has no figure for it."""
    signal = measure if layer in (-1, final_layer) else signal_name(measure, "any")
    entry = (record.get("signals") or {}).get(signal)
    if not entry or not entry.get("alarms"):
        return ""
    return (f"in this book's hard runs, {100 * entry['precision']:.0f}% of {signal}'s alarms ({entry['hits']} of "
            f"{entry['alarms']}) were followed by acquisition within {record['horizon']} steps")
