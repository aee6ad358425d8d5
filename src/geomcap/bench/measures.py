"""Timing the measures: per-checkpoint geometry, the costly training-dynamics measures, RankMe against a naive SVD."""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from geomcap import geometry, tasks
from geomcap.bench.machine import log_progress, time_once
from geomcap.bench.step import GRID_STEPS, make_train_step
from geomcap.models import build
from geomcap.parameters import BENCH

#: the RankMe sizes N and d timed by default (``geomcap bench --rankme-n/--rankme-d``: their rows' defaults)
RANKME_N, RANKME_D = tuple(BENCH["rankme_n"].default), tuple(BENCH["rankme_d"].default)
COSTLY_PARTS = ("per_example_gradients", "grad_rank", "grad_cov_rank", "hessian", "llc")
#: (num_chains, num_draws) of the LLC tried by :func:`llc_calibration`; the first is ``LLC_DEFAULTS``'
LLC_SETTINGS = ((4, 200), (4, 100), (2, 100), (1, 100))
#: checkpoints of add hard on 405k, seed 0 (acquired at step 1178 in the grid): initialisation, the
#: collapse floor, the plateau, before and after acquisition
LLC_CALIBRATION_STEPS = (0, 64, 400, 800, 1100, 1300)
#: a cheaper LLC setting is adequate when the reference setting's excursion over the run is at least this many
#: times its noise over SGLD seeds ...
LLC_MIN_SIGNAL_TO_NOISE = 10.0
#: ... and its seed-mean stays within this share of that excursion of the reference's at every step (both
#: fixed before the calibration was first run)
LLC_MAX_BIAS = 0.1


# --- per-checkpoint geometry ------------------------------------------------

def geometry_cost(presets, device: torch.device, task: str = "add", level: str = "hard", rounds: int = 3,
                  block_s: float = 2.0, schedules=(2000, GRID_STEPS["hard"]), progress: bool = True,
                  on_progress=None) -> dict:
    """Share of training time spent on per-checkpoint evaluation and geometry, per preset.

    Alternates ``rounds`` times: a block of training steps (~``block_s`` s),
    then one ``geomcap.train.evaluate`` (after one untimed warm-up of each).
    ``geometry_s`` is the part of evaluate spent on RankMe (4 variants x every
    layer) and the probes; ``eval_s`` the whole checkpoint (forward passes on
    512 training and 512 test examples + geometry). For a run of ``steps``
    steps at the default schedule (``checkpoint_steps(steps)``): share =
    checkpoints x seconds per checkpoint / (steps x seconds per step), the
    median over rounds of the per-round shares. ``on_progress(out)``, if
    given, is called with the partial result after each preset.
    """
    from geomcap.train import TrainConfig, checkpoint_steps, evaluate

    data = tasks.make_task(task, level, seed=0, n_train=8192, n_test=512)
    prompts, answers = data.train_prompts.to(device), data.train_answers.to(device)
    out = {"task": task, "level": level, "rounds": rounds, "presets": []}
    for preset in presets:
        cfg = TrainConfig(task=task, level=level, size=preset)
        torch.manual_seed(0)
        model = build(preset, tasks.VOCAB_SIZE).to(device)
        run = make_train_step(model, prompts, answers, cfg.batch_size, device)
        step_s = time_once(lambda: run(2), device) / 2
        k = int(min(500, max(1, round(block_s / step_s))))
        evaluate(model, data, cfg, device)
        steps_s, eval_s, geo_s = [], [], []
        for r in range(rounds):
            steps_s.append(time_once(lambda: run(k), device) / k)
            t0 = time.perf_counter()
            _, g = evaluate(model, data, cfg, device)
            eval_s.append(time.perf_counter() - t0)
            geo_s.append(g)
            log_progress(progress, f"geometry {preset} round {r + 1}/{rounds}: step {1000 * steps_s[-1]:.1f} ms, "
                         f"checkpoint {eval_s[-1]:.2f} s (geometry {geo_s[-1]:.2f} s)")
        row = {"preset": preset, "ms_per_step": 1000 * statistics.median(steps_s),
               "eval_s": statistics.median(eval_s), "geometry_s": statistics.median(geo_s),
               "layers": model.n_hidden, "probe_size": cfg.probe_size, "schedules": []}
        for steps in schedules:
            n_ckpt = len(checkpoint_steps(steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints))
            geo_share = [n_ckpt * g / (steps * s) for g, s in zip(geo_s, steps_s)]
            eval_share = [n_ckpt * e / (steps * s) for e, s in zip(eval_s, steps_s)]
            row["schedules"].append({"steps": steps, "checkpoints": n_ckpt,
                                     "geometry_share": statistics.median(geo_share),
                                     "eval_share": statistics.median(eval_share),
                                     "geometry_share_rounds": geo_share})
        out["presets"].append(row)
        if on_progress is not None:
            on_progress(out)
    return out


# --- costly measures ----------------------------------------------------------

def costly_cost(size: str = "405k", task: str = "add", level: str = "hard", repeats: int = 3, warmup: int = 1,
                n_examples: int = 256, hessian_k: int = 1, measures=COSTLY_PARTS, costly_every: int = 4,
                steps: int = GRID_STEPS["hard"], block_s: float = 2.0, progress: bool = True) -> dict:
    """Seconds per evaluation of each costly measure, as ``geomcap.train.costly_measures`` runs them (CPU).

    measures: any of ``per_example_gradients`` (G, N x P, shared by the two
    gradient ranks), ``grad_rank`` (G + its effective rank), ``grad_cov_rank``
    (G + covariance rank), ``hessian`` (top-``hessian_k`` eigenvalues),
    ``llc`` (devinterp SGLD, ``LLC_DEFAULTS``). Each repetition times a
    block of training steps first, so every measure also has a median
    training-step equivalent; ``run_share`` is the share of a ``steps``-step
    run that records all of them on every ``costly_every``-th checkpoint.
    """
    from geomcap import dynamics
    from geomcap.train import checkpoint_steps

    unknown = [m for m in measures if m not in COSTLY_PARTS]
    if unknown:
        raise ValueError(f"unknown costly measure {unknown[0]!r}; choose from: {', '.join(COSTLY_PARTS)}")
    device = torch.device("cpu")
    data = tasks.make_task(task, level, seed=0, n_train=max(8192, n_examples), n_test=64)
    torch.manual_seed(0)
    model = build(size, tasks.VOCAB_SIZE)
    run = make_train_step(model, data.train_prompts, data.train_answers, 128, device)
    step_s = time_once(lambda: run(2)) / 2
    k = int(min(500, max(1, round(block_s / step_s))))
    prompts, answers = data.train_prompts[:n_examples], data.train_answers[:n_examples]

    def grads():
        model.eval()
        return dynamics.per_example_gradients(model, prompts, answers)

    G = grads()
    fns = {
        "per_example_gradients": grads,
        "grad_rank": lambda: dynamics.gradient_effective_rank(grads()),
        "grad_cov_rank": lambda: dynamics.gradient_covariance_rank(grads()),
        "hessian": lambda: dynamics.hessian_top_eigenvalues(model.eval(), prompts, answers, k=hessian_k),
        "llc": lambda: dynamics.local_learning_coefficient(model, prompts, answers),
    }
    secs = {m: [] for m in measures}
    steps_s = []
    rank_only = {"erank": [], "cov_rank": []}
    for r in range(warmup + repeats):
        s = time_once(lambda: run(k)) / k
        for m in measures:
            t = time_once(fns[m])
            if r >= warmup:
                secs[m].append(t)
        if r >= warmup:
            steps_s.append(s)
            rank_only["erank"].append(time_once(lambda: dynamics.gradient_effective_rank(G)))
            rank_only["cov_rank"].append(time_once(lambda: dynamics.gradient_covariance_rank(G)))
        log_progress(progress, f"costly {size} repetition {r + 1}/{warmup + repeats}"
                     f"{' (warm-up)' if r < warmup else ''}: step {1000 * s:.1f} ms, "
                     + ", ".join(f"{m} {v[-1]:.2f} s" for m, v in secs.items() if v))
    schedule = checkpoint_steps(steps)
    n_costly = len(set(schedule[::costly_every].tolist()) | {steps})
    rows = []
    for m in measures:
        rows.append({"measure": m, "seconds": statistics.median(secs[m]), "seconds_rounds": secs[m],
                     "step_equivalents": statistics.median([t / s for t, s in zip(secs[m], steps_s)])})
    # what train.costly_measures does per costly checkpoint: G once, both ranks, Hessian, LLC
    per_ckpt = []
    for i in range(len(steps_s)):
        total = 0.0
        if "per_example_gradients" in secs:
            total += secs["per_example_gradients"][i] + rank_only["erank"][i] + rank_only["cov_rank"][i]
        for m in ("hessian", "llc"):
            if m in secs:
                total += secs[m][i]
        per_ckpt.append(total)
    return {"size": size, "task": task, "level": level, "n_examples": n_examples, "hessian_k": hessian_k,
            "repeats": repeats, "warmup": warmup, "ms_per_step": 1000 * statistics.median(steps_s),
            "measures": rows,
            "rank_only_s": {k_: statistics.median(v) for k_, v in rank_only.items()},
            "per_costly_checkpoint_s": statistics.median(per_ckpt),
            "run": {"steps": steps, "costly_every": costly_every, "costly_checkpoints": n_costly,
                    "run_share": statistics.median([n_costly * c / (steps * s) for c, s in zip(per_ckpt, steps_s)])}}


# --- the LLC's chains and draws ---------------------------------------------------

def llc_calibration(cfg, steps=LLC_CALIBRATION_STEPS, settings=LLC_SETTINGS, sgld_seeds=(0, 1, 2),
                    progress: bool = True, on_progress=None) -> dict:
    """Can the LLC be estimated with fewer SGLD chains and draws? One training run, several estimates.

    ``cfg`` (a :class:`geomcap.train.TrainConfig`) is trained to each of ``steps``
    (:func:`geomcap.train.models_at`: the run's own weights there). At each, the LLC is estimated
    as ``geomcap.train`` does (the first ``cfg.dynamics_size`` training examples, ``LLC_DEFAULTS``)
    with every (num_chains, num_draws) of ``settings`` (burn-in unchanged), once per SGLD seed of
    ``sgld_seeds``. Returns ``rows`` (step, chains, draws, seed, llc, trace_drift, seconds) and, per
    setting, ``settings``: ``seconds`` (median per estimate), ``cost`` (against the first setting),
    ``noise`` (median over steps of the standard deviation over seeds), ``excursion`` (range over
    steps of the seed-mean), ``signal_to_noise`` (the first setting's excursion / this noise),
    ``max_bias`` (the largest absolute difference over steps between its seed-mean and the first
    setting's, as a share of the first setting's excursion) and ``not_flat`` (share of estimates
    whose ``abs(trace_drift)`` is above the tolerance).
    """
    from geomcap import dynamics
    from geomcap.train import dynamics_examples, models_at, task_data

    settings = [tuple(int(v) for v in s) for s in settings]
    if not settings or any(c < 1 or d <= dynamics.LLC_DEFAULTS["burn_in"] for c, d in settings):
        raise ValueError(f"each setting needs >= 1 chain and more draws than the burn-in "
                         f"({dynamics.LLC_DEFAULTS['burn_in']}), got {settings}")
    prompts, answers = dynamics_examples(task_data(cfg), cfg)
    rows = []
    for step, model in models_at(cfg, steps):
        model.eval()
        for chains, draws in settings:
            for seed in sgld_seeds:
                t0 = time.perf_counter()
                est = dynamics.local_learning_coefficient(model, prompts, answers, seed=seed,
                                                          num_chains=chains, num_draws=draws)
                rows.append({"step": step, "chains": chains, "draws": draws, "seed": seed,
                             "llc": est["llc_post_burnin"], "trace_drift": est["trace_drift"],
                             "seconds": time.perf_counter() - t0})
        log_progress(progress, f"llc calibration: step {step} done")
        if on_progress is not None:
            on_progress({"rows": rows})
    return {"task": cfg.task, "level": cfg.level, "size": cfg.size, "seed": cfg.seed, "steps": list(steps),
            "n_examples": len(prompts), "rows": rows,
            "settings": llc_settings_table(rows, dynamics.LLC_DRIFT_TOLERANCE)}


def llc_settings_table(rows, drift_tolerance: float) -> list[dict]:
    """The per-setting summary of :func:`llc_calibration`'s rows (the first setting in them is the reference)."""
    import pandas as pd

    t = pd.DataFrame(rows)
    order = list(dict.fromkeys(zip(t["chains"], t["draws"])))
    means = t.groupby(["chains", "draws", "step"])["llc"].mean()
    ref = means.loc[order[0]]
    ref_excursion = float(ref.max() - ref.min())
    out = []
    for chains, draws in order:
        one = t[(t["chains"] == chains) & (t["draws"] == draws)]
        mean = means.loc[(chains, draws)]
        noise = float(one.groupby("step")["llc"].std(ddof=1).median())
        out.append({"chains": int(chains), "draws": int(draws), "seconds": float(one["seconds"].median()),
                    "noise": noise, "excursion": float(mean.max() - mean.min()),
                    "signal_to_noise": ref_excursion / noise if noise > 0 else float("inf"),
                    "max_bias": float((mean - ref).abs().max() / ref_excursion) if ref_excursion > 0 else float("nan"),
                    "not_flat": float((one["trace_drift"].abs() > drift_tolerance).mean())})
    for row in out:
        row["cost"] = row["seconds"] / out[0]["seconds"]
    return out


def cheapest_adequate_llc(settings, min_signal_to_noise: float = LLC_MIN_SIGNAL_TO_NOISE,
                          max_bias: float = LLC_MAX_BIAS) -> dict | None:
    """The cheapest row of :func:`llc_settings_table` with ``signal_to_noise >= min_signal_to_noise`` and
    ``max_bias <= max_bias``; None when none is (not even the reference, whose bias is 0)."""
    ok = [s for s in settings if s["signal_to_noise"] >= min_signal_to_noise and s["max_bias"] <= max_bias]
    return min(ok, key=lambda s: s["cost"]) if ok else None


def llc_setting_agreement(reference, other, drift_tolerance: float | None = None) -> dict:
    """How far one run's LLC at a cheaper SGLD setting is from the same run's LLC at the reference setting.

    ``reference``, ``other``: the tidy metrics (step, layer, measure, value) of two runs that trained the
    same model (configs differing only in :data:`geomcap.config.MEASUREMENT_ONLY_FIELDS`), each with
    ``llc`` and ``llc_trace_drift``. Read at the steps both estimated. Returns ``steps`` (how many),
    ``excursion`` (range of the reference), ``max_bias`` (the largest absolute difference, as a share of
    that excursion), ``spearman`` (rank correlation of the two series), ``transition`` (the
    :func:`geomcap.events.transition_step` of each: what the precursor reading sees, None
    when the series keeps its course) and ``not_flat`` (share of each run's estimates whose
    ``|llc_trace_drift|`` is above ``drift_tolerance``, by default
    :data:`geomcap.measures.LLC_DRIFT_TOLERANCE`).
    """
    from geomcap.analysis.series import spearman
    from geomcap.analysis.transition import transition_step
    from geomcap.measures import LLC_DRIFT_TOLERANCE

    tolerance = LLC_DRIFT_TOLERANCE if drift_tolerance is None else drift_tolerance

    def series(metrics, name):
        rows = metrics[metrics["measure"] == name]
        return rows.groupby("step")["value"].mean().astype(float)

    ref, oth = series(reference, "llc"), series(other, "llc")
    if ref.empty or oth.empty:
        raise ValueError("both runs need llc rows (a run trained with measures including llc)")
    both = ref.index.intersection(oth.index)
    r, o = ref.loc[both].to_numpy(), oth.loc[both].to_numpy()
    excursion = float(np.nanmax(r) - np.nanmin(r))
    steps = both.to_numpy()
    return {"steps": int(len(both)), "excursion": excursion,
            "max_bias": float(np.nanmax(np.abs(o - r)) / excursion) if excursion > 0 else float("nan"),
            "spearman": float(spearman(r, o)),
            "transition": {"reference": transition_step(steps, r), "other": transition_step(steps, o)},
            "not_flat": {key: float((series(m, "llc_trace_drift").abs() > tolerance).mean())
                         for key, m in (("reference", reference), ("other", other))}}


def costly_checkpoint_fraction(costly: dict, llc_cost: float) -> float:
    """The time of one costly checkpoint (all the costly measures, the ``costly`` part's
    ``per_costly_checkpoint_s``) if the LLC cost ``llc_cost`` times what it costs now (e.g. a cheaper
    setting's ``cost``), as a fraction of its present time."""
    llc_s = next(m["seconds"] for m in costly["measures"] if m["measure"] == "llc")
    per_ckpt = costly["per_costly_checkpoint_s"]
    return (per_ckpt - llc_s * (1 - llc_cost)) / per_ckpt


# --- RankMe against a naive SVD -----------------------------------------------

def naive_rankme(Z, eps: float = 1e-7) -> float:
    """RankMe from a plain float64 SVD of the whole (N, d) matrix (numpy/LAPACK gesdd, values only)."""
    s = np.linalg.svd(np.asarray(Z, dtype=np.float64), compute_uv=False)
    p = s / s.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def rankme_test_matrix(n: int, d: int, seed: int = 0) -> np.ndarray:
    """A float32 (n, d) matrix shaped like hidden states: a power-law spectrum plus a common component.

    Z = X diag(k^-1) + 0.5 m, X standard normal (n, d), k = 1..d, m one
    random row shared by all rows (the uncentred states' common component).
    """
    if n < 1 or d < 1:
        raise ValueError(f"matrix sizes must be positive, got {n} x {d}")
    rng = np.random.default_rng([seed, n, d])
    Z = rng.standard_normal((n, d), dtype=np.float32)
    Z *= (1.0 / np.arange(1, d + 1, dtype=np.float32))
    Z += 0.5 * rng.standard_normal((1, d), dtype=np.float32)
    return Z


def _rankme_repeats(n: int, d: int) -> tuple[int, int]:
    """(repeats, warmup) by the work n d min(n, d): fewer for the largest (stated in the result)."""
    work = n * d * min(n, d)
    if work <= 5e9:
        return 5, 1
    if work <= 5e10:
        return 3, 1
    return 1, 0


def rankme_vs_naive(sizes, repeats: int | None = None, progress: bool = True, on_progress=None) -> dict:
    """geomcap's RankMe vs ``naive_rankme`` on ``rankme_test_matrix(N, d)`` for each (N, d) in sizes.

    Both take the same float32 matrix (as hidden states are) and convert to
    float64 themselves; timed in alternation, ``repeats`` each (default by
    size: 5, 3, or 1 without warm-up for N d min(N, d) > 5e10). speedup =
    median over repetitions of naive time / geomcap time. ``on_progress(out)``,
    if given, is called with the partial result after each size.
    """
    out = {"naive": "numpy.linalg.svd(Z.astype(float64), compute_uv=False), numpy " + np.__version__,
           "matrix": "rankme_test_matrix: float32, power-law spectrum k^-1 plus a common component", "sizes": []}
    rows = out["sizes"]
    for n, d in sizes:
        Z = rankme_test_matrix(n, d)
        reps, warm = _rankme_repeats(n, d) if repeats is None else (repeats, 1)
        method = "gram" if min(n, d) >= 256 and max(n, d) >= 4 * min(n, d) else "svd"
        ours_t, naive_t = [], []
        ours_v = naive_v = None
        for r in range(warm + reps):
            t0 = time.perf_counter()
            ours_v = geometry.rankme(Z)
            t1 = time.perf_counter()
            naive_v = naive_rankme(Z)
            t2 = time.perf_counter()
            if r >= warm:
                ours_t.append(t1 - t0)
                naive_t.append(t2 - t1)
        row = {"n": n, "d": d, "method": method, "repeats": reps, "warmup": warm,
               "geomcap_s": statistics.median(ours_t), "naive_s": statistics.median(naive_t),
               "speedup": statistics.median([b / a for a, b in zip(ours_t, naive_t)]),
               "geomcap_value": ours_v, "naive_value": naive_v, "abs_diff": abs(ours_v - naive_v),
               "rel_diff": abs(ours_v - naive_v) / abs(naive_v)}
        rows.append(row)
        log_progress(progress, f"rankme {n} x {d} ({method}, {reps} repeats): geomcap {row['geomcap_s']:.3f} s, "
                     f"naive {row['naive_s']:.3f} s, speedup {row['speedup']:.2f}, |diff| {row['abs_diff']:.1e}")
        del Z
        if on_progress is not None:
            on_progress(out)
    return out
