"""One run's summary: every event of the protocol from its tidy metrics table (what ``geomcap show`` prints
and the notebooks tabulate)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from geomcap.analysis.acquisition import acquisition_step, plateau_fraction
from geomcap.analysis.collapse import collapse, reading_start
from geomcap.analysis.protocol import (ACQUISITION_PATIENCE, ACQUISITION_THRESHOLD, COLLAPSE_WINDOW,
                                       MIN_LEAD_CHECKPOINTS, PLATEAU_LEVEL, PRECURSOR_MEASURES, PROTOCOL,
                                       READING_START, RECOVERY_HOLD, SMOOTH, TRANSITION_BASELINE, TRANSITION_HOLD,
                                       TRANSITION_MIN_CHANGE, TRANSITION_SIGMAS)
from geomcap.analysis.series import chance_corrected, check_tidy, final_layer, layer_matrix, tidy_series
from geomcap.analysis.topdown import TopDown, top_down
from geomcap.analysis.alarms import first_alarm_step, run_alarms
from geomcap.analysis.transition import lead, precursor, transition_step

if TYPE_CHECKING:  # pandas is only needed by the table helpers
    import pandas


def _value_at(metrics, measure: str, step: int | None, layer) -> float | None:
    if step is None or measure not in set(metrics["measure"].unique()):
        return None
    layer = final_layer(metrics, measure) if layer == "final" else layer
    s, v = tidy_series(metrics, measure, layer=layer)
    i = int(np.searchsorted(s, step))
    return float(v[i]) if i < s.size and s[i] == step and np.isfinite(v[i]) else None


def _top_down_dict(td: TopDown) -> dict:
    return {"rho_step": td.rho_step, "rho_floor": td.rho_floor, "defined": td.defined,
            # undefined (None) with fewer than the protocol's informative layers or tied collapse steps
            "is_top_down": td.is_top_down if td.defined else None,
            "layers": td.layers.tolist(), "collapse_step": td.collapse_step.tolist(),
            "min_step": td.min_step.tolist(), "floor": td.floor.tolist(), "excluded": td.excluded.tolist()}


def _precursor_reading(metrics, steps, accuracy, present, start, threshold, patience, smooth, min_lead,
                       reading: str) -> dict:
    """Every series of :data:`~geomcap.analysis.protocol.PRECURSOR_MEASURES` in the table, read from ``start``: its transition, its
    lead over acquisition and over the test loss's transition (see :func:`summarize_run`)."""
    found = {}
    for name, layer in PRECURSOR_MEASURES:
        if name not in present:
            continue
        layer = final_layer(metrics, name) if layer == "final" else layer
        m_steps, m_values = tidy_series(metrics, name, layer=layer)
        # costly measures exist on a subset of checkpoints: their transition comes from their own
        # series, acquisition from the full accuracy series, gaps counted on the full checkpoint grid
        p = (precursor(steps, m_values, accuracy, threshold, patience, smooth, min_lead=min_lead, start=start,
                       measure_steps=m_steps) if accuracy is not None else
             lead(steps, transition_step(m_steps, m_values, smooth=smooth, start=start), None, min_lead))
        found[name] = (layer, p)
    loss = found.get("test_loss")
    loss_step = None if loss is None else loss[1].measure_step
    # the first step at which the rule can decide anything (the checkpoint after its baseline): a run acquired
    # by then leaves no room for a lead, so the reading is undefined there, not "no precursor"
    readable = steps[steps >= (start or 0)]
    room = int(readable[TRANSITION_BASELINE]) if readable.size > TRANSITION_BASELINE else None
    acq = next(iter(found.values()))[1].acquisition_step if found else None
    no_room = acq is not None and (room is None or acq <= room)
    out = {}
    for name, (layer, p) in found.items():
        t, leads = p.measure_step, None
        if name != "test_loss" and t is not None and "test_loss" in found:
            # a test loss with no transition in the record moves later than any transition in it
            leads = True if loss_step is None else lead(steps, t, loss_step, min_lead).is_precursor
        entry = {**p.__dict__, "test_loss_step": loss_step, "leads_test_loss": leads,
                 "informative": bool(p.is_precursor and leads), "reading": reading, "start": start,
                 "room_step": room, "layer": layer}
        if no_room:
            entry.update(is_precursor=None, informative=None)
        out[name] = entry
    return out


def summarize_run(metrics: "pandas.DataFrame", threshold: float = ACQUISITION_THRESHOLD,
                  patience: int = ACQUISITION_PATIENCE, smooth: int = SMOOTH, chance: float = 0.0,
                  measure: str = "rankme", *, window: int | None = COLLAPSE_WINDOW, hold: int = RECOVERY_HOLD,
                  min_lead: int = MIN_LEAD_CHECKPOINTS, plateau_level: float = PLATEAU_LEVEL) -> dict:
    """Every event of one run, under the analysis protocol, from its tidy metrics table.

    The defaults are the protocol (:data:`~geomcap.analysis.protocol.PROTOCOL`); the run may have stopped
    before its step budget (nothing here reads the budget or where the run
    stopped: every transition is computed causally from its own series).
    Rows whose value is not finite are dropped first and counted
    (``nonfinite_rows``). A table without ``accuracy`` (a monitor without
    labels, a checkpoints folder) gets everything that needs no behaviour:
    acquisition and the leads over it are None, with a note.

    Parameters
    ----------
    metrics : DataFrame
        One run's tidy table (``step, layer, measure, value``).
    threshold, patience
        Acquisition: chance-corrected accuracy ``(acc - chance) / (1 - chance)
        > threshold`` at ``patience`` consecutive checkpoints
        (:func:`acquisition_step`). ``chance`` is the best constant answer's
        accuracy (:func:`geomcap.tasks.chance_accuracy`; 0 when unknown).
    smooth, min_lead
        The smoothing of every rule and the lead (in checkpoints) a precursor needs.
    measure : str
        The per-layer geometric measure whose collapse and top-down statistic
        are reported (default the primary ``rankme``; a variant for the
        sensitivity analysis).
    window, hold
        The collapse window and the recovery hold (:func:`collapse`).
    plateau_level
        :func:`plateau_fraction`'s level.

    Returns
    -------
    dict
        ``acquisition_step`` (None when never acquired), ``final_accuracy``
        (raw, last checkpoint), ``last_step``, ``checkpoints``, ``chance``,
        ``measure``, ``final_layer``, ``plateau_fraction`` (of the steps
        before acquisition, or of the whole run when never acquired),
        ``nonfinite_rows``, ``notes`` (what could not be computed, and why);
        ``collapse``: the :class:`Collapse` fields of the final layer's
        ``measure`` (None without the measure);
        ``order_collapse_recovery_acquisition``: collapsed and floor <
        recovery <= acquisition (claim C1; None when never acquired);
        ``mean_energy``: the final layer's ``mean_energy_share`` at
        initialisation, at the floor and at the last checkpoint, and
        ``mean_energy_share_residual`` at the floor (None where not recorded);
        ``reading_start``: where the informative reading starts (:func:`reading_start`);
        ``alarms``: every alarm of every precursor series at every layer, read from ``reading_start``
        (:func:`geomcap.events.run_alarms`: {measure: [{step, onset_step, side, layer}, ...]}), and
        ``first_alarm_step``, the first step at which one could be raised (None: never armed);
        ``precursors`` (the informative reading (b), from ``reading_start``) and
        ``paper_precursors`` (the paper's reading (a), from the first checkpoint):
        for every series of :data:`~geomcap.analysis.protocol.PRECURSOR_MEASURES` in the table, a dict with
        ``measure_step`` (its transition, :func:`transition_step`), ``acquisition_step``,
        ``gap_steps``, ``gap_checkpoints``, ``gap_share`` (gap / acquisition step),
        ``is_precursor`` (gap_checkpoints >= ``min_lead``; None when the run was acquired before the rule
        could decide anything, at ``room_step``, the checkpoint after its baseline), ``test_loss_step`` (the test
        loss's transition, same reading), ``leads_test_loss`` (the transition precedes the test
        loss's by >= ``min_lead`` checkpoints, or the test loss has none; None when the series has
        no transition, or for the test loss itself), ``informative`` (is_precursor and
        leads_test_loss; None where is_precursor is), ``reading``, ``start``, ``room_step`` and ``layer``;
        ``top_down``: :func:`top_down` on the pre-LayerNorm residual streams
        (layers ``0..L-1`` of ``measure`` and, at ``L``, ``<measure>_residual``
        when recorded; else the post-LayerNorm output, said in ``basis``),
        with the post-LayerNorm reading beside it under ``post_ln``;
        ``protocol``: the parameters used, which :func:`format_summary` states.
    """
    check_tidy(metrics)
    finite = np.isfinite(np.asarray(metrics["value"], dtype=float))
    nonfinite = int((~finite).sum())
    notes = []
    if nonfinite:
        by_measure = metrics.loc[~finite, "measure"].value_counts()
        notes.append(f"{nonfinite} row(s) with a non-finite value dropped ("
                     + ", ".join(f"{name} {count}" for name, count in by_measure.items()) + ")")
        metrics = metrics[finite]
    present = set(metrics["measure"].unique())
    steps = np.unique(np.asarray(metrics["step"], dtype=np.int64))
    accuracy = raw_accuracy = None
    if "accuracy" in present:
        steps, raw_accuracy = tidy_series(metrics, "accuracy")
        accuracy = chance_corrected(raw_accuracy, chance)
    else:
        notes.append("no accuracy recorded: acquisition and the leads over it are undefined")
    acq = None if accuracy is None else acquisition_step(steps, accuracy, threshold=threshold, patience=patience)
    last = final_layer(metrics, measure)
    summary = {"acquisition_step": acq,
               "final_accuracy": None if raw_accuracy is None else float(raw_accuracy[-1]),
               "last_step": int(steps[-1]) if steps.size else None, "checkpoints": int(steps.size),
               "chance": chance, "measure": measure, "final_layer": last,
               "plateau_fraction": None if accuracy is None else plateau_fraction(steps, accuracy, until=acq,
                                                                                  level=plateau_level),
               "nonfinite_rows": nonfinite, "notes": notes, "collapse": None,
               "order_collapse_recovery_acquisition": None, "mean_energy": None, "reading_start": None,
               "precursors": {}, "paper_precursors": {}, "alarms": {}, "first_alarm_step": None, "top_down": None,
               "protocol": {"threshold": threshold, "patience": patience, "smooth": smooth, "window": window,
                            "hold": hold, "min_lead": min_lead, "plateau_level": plateau_level,
                            "transition_baseline": TRANSITION_BASELINE, "transition_sigmas": TRANSITION_SIGMAS,
                            "transition_min_change": TRANSITION_MIN_CHANGE, "transition_hold": TRANSITION_HOLD,
                            "reading_start": READING_START}}

    c = None
    if last is not None:
        r_steps, r_values = tidy_series(metrics, measure, layer=last)
        if np.isfinite(r_values).sum() >= 2:
            c = collapse(r_steps, r_values, smooth=smooth, window=window, hold=hold)
            summary["collapse"] = c.__dict__.copy()
            if acq is not None:
                summary["order_collapse_recovery_acquisition"] = bool(
                    c.collapsed and c.recovery_step is not None and c.floor_step < c.recovery_step <= acq)
        else:
            notes.append(f"{measure} has fewer than 2 checkpoints: no collapse")
    if "mean_energy_share" in present:
        share_steps, share = tidy_series(metrics, "mean_energy_share", layer=final_layer(metrics, "mean_energy_share"))
        floor_step = None if c is None else c.floor_step
        summary["mean_energy"] = {
            "initial": float(share[0]), "last": float(share[-1]),
            "at_floor": _value_at(metrics, "mean_energy_share", floor_step, "final"),
            "residual_at_floor": _value_at(metrics, "mean_energy_share_residual", floor_step, "final")}

    start = reading_start(c, window if window is not None else READING_START)
    summary["reading_start"] = start
    summary["alarms"] = run_alarms(metrics, start)
    summary["first_alarm_step"] = first_alarm_step(steps, start)
    common = (metrics, steps, accuracy, present)
    summary["paper_precursors"] = _precursor_reading(*common, None, threshold, patience, smooth, min_lead,
                                                     "from_start")
    if start is not None:
        summary["precursors"] = _precursor_reading(*common, start, threshold, patience, smooth, min_lead,
                                                   "after_collapse")
    else:
        notes.append("the collapse never recovered: no informative reading")

    if last is not None and c is not None:
        layers, l_steps, values = layer_matrix(metrics, measure)
        residual = f"{measure}_residual"
        td_post = top_down(l_steps, values, layers=layers, smooth=smooth, window=window)
        pre = values.copy()
        if residual in present:
            res_steps, res_values = tidy_series(metrics, residual, layer=final_layer(metrics, residual))
            row = np.full(l_steps.size, np.nan)
            idx = np.searchsorted(l_steps, res_steps)
            ok = (idx < l_steps.size) & (l_steps[np.minimum(idx, l_steps.size - 1)] == res_steps)
            row[idx[ok]] = res_values[ok]
            pre[list(layers).index(last)] = row
            basis = f"pre-LayerNorm residual streams (layer {last}: {residual})"
            td = top_down(l_steps, pre, layers=layers, smooth=smooth, window=window)
        else:
            basis = (f"layers 0..{last - 1} pre-LayerNorm, layer {last} post-LayerNorm "
                     f"({residual} not recorded)")
            td = td_post
        summary["top_down"] = {**_top_down_dict(td), "basis": basis,
                               "residual_measure": residual if residual in present else None,
                               "post_ln": _top_down_dict(td_post)}
    return summary


def _fmt(x, spec: str = ".2f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)


def format_summary(summary: dict) -> str:
    """Human-readable lines for :func:`summarize_run`'s dict, stating the protocol's parameters it used
    (its ``protocol``; the defaults, :data:`~geomcap.analysis.protocol.PROTOCOL`, for a dict without one)."""
    used = {"threshold": PROTOCOL["acquisition_threshold"], "patience": PROTOCOL["acquisition_patience"],
            "min_lead": MIN_LEAD_CHECKPOINTS, **summary.get("protocol", {})}
    chance = f" (best constant answer {summary['chance']:.3f})" if summary.get("chance") else ""
    lines = []
    if summary.get("final_accuracy") is not None:
        acquired = (f"acquired at step {summary['acquisition_step']}" if summary["acquisition_step"] is not None
                    else f"never acquired (chance-corrected > {used['threshold']:g} for {used['patience']} "
                         "checkpoints)")
        lines.append(f"accuracy   final {summary['final_accuracy']:.3f}{chance}; {acquired}; last step "
                     f"{summary.get('last_step')}; at chance over {_fmt(summary.get('plateau_fraction'))} of the "
                     f"steps {'before acquisition' if summary['acquisition_step'] is not None else 'of the run'}")
    for note in summary.get("notes", []):
        lines.append(f"note       {note}")
    c = summary["collapse"]
    if c is not None:
        lines.append(f"{summary.get('measure', 'rankme'):<10} layer {summary['final_layer']} (final): initial {c['initial_value']:.2f}, "
                     f"peak {c['peak_value']:.2f} at step {c['peak_step']}, "
                     f"floor {c['floor_value']:.2f} at step {c['floor_step']} "
                     f"({'collapse' if c['collapsed'] else 'no collapse'}: drop {100 * c['relative_drop']:.0f}%; "
                     f"certain at step {c.get('floor_certain_step')}), "
                     f"recovery at step {c['recovery_step']} (certain at step {c.get('recovery_certain_step')})")
        lines.append(f"ordering   floor < recovery <= acquisition: {summary['order_collapse_recovery_acquisition']}")
    energy = summary.get("mean_energy")
    if energy:
        lines.append(f"mean share of energy (final layer): initial {_fmt(energy['initial'])}, at the floor "
                     f"{_fmt(energy['at_floor'])}, last {_fmt(energy['last'])}")
    for key, title in (("precursors", f"informative reading (b), from step {summary.get('reading_start')}, "
                                      "where the collapse is over"),
                       ("paper_precursors", "the paper's reading (a), from the first checkpoint")):
        if not summary.get(key):
            continue
        lines.append(f"{title}: transition = leaves the course of its first "
                     f"{used.get('transition_baseline', TRANSITION_BASELINE)} checkpoints; precursor = leads "
                     f"acquisition by >= {used['min_lead']} checkpoints")
        for measure, p in summary[key].items():
            gap = (f"gap {p['gap_steps']} steps, {p['gap_checkpoints']} checkpoints, "
                   f"{_fmt(p.get('gap_share'))} of acquisition" if p["gap_steps"] is not None else "gap undefined")
            lines.append(f"  {measure:<28} transition at {p['measure_step']}, {gap}, "
                         f"precursor: {p['is_precursor']}, leads test loss: {p.get('leads_test_loss')}")
    if summary.get("alarms"):
        lines.append(f"alarms     armed from step {summary.get('reading_start')}, first possible at step "
                     f"{summary.get('first_alarm_step')} (every departure from the course, re-armed after each)")
        for measure, found in summary["alarms"].items():
            if found:
                where = ", ".join(f"{a['step']}" + (f" (layer {a['layer']})" if a["layer"] >= 0 else "")
                                  for a in found[:8])
                lines.append(f"  {measure:<28} {len(found)} alarm(s) at step {where}"
                             + (f", ... ({len(found) - 8} more)" if len(found) > 8 else ""))
    td = summary["top_down"]
    if td is not None:
        lines.append(f"top-down   rho(depth, collapse step) = {_fmt(td['rho_step'])}, "
                     f"rho(depth, relative floor) = {_fmt(td['rho_floor'])}; top-down: {td['is_top_down']} "
                     f"(layers {td['layers']}, excluded {td['excluded']}; {td.get('basis', '')}); "
                     f"post-LayerNorm output: rho {_fmt(td.get('post_ln', {}).get('rho_step'))}")
    return "\n".join(lines)
