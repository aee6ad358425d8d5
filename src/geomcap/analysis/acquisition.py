"""Acquisition and chance: when a capability is acquired, how long behaviour sat at chance, and the chance
levels a run's accuracy is corrected by (read from the run's status.json, which training writes).
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from pathlib import Path

import numpy as np

from geomcap import store
from geomcap.analysis.protocol import ACQUISITION_PATIENCE, ACQUISITION_THRESHOLD, PLATEAU_LEVEL
from geomcap.analysis.series import chance_corrected, check_series
from geomcap.config import TrainConfig
from geomcap.tasks import chance_accuracy, level_params, task_arrays


def acquisition_step(steps, accuracy, threshold: float = ACQUISITION_THRESHOLD,
                     patience: int = ACQUISITION_PATIENCE) -> int | None:
    """Step at which a capability is acquired.

    Definition: the step of the first checkpoint of the first run of
    ``patience`` consecutive checkpoints whose accuracy is strictly greater
    than ``threshold``. Accuracy exactly equal to the threshold, and NaN
    accuracy, do not count as above it (NaN breaks a run).

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps, strictly increasing.
    accuracy : array of float, shape (n,)
        Test accuracy at each checkpoint (fraction in [0, 1]).
    threshold : float
        Accuracy that must be exceeded (strictly).
    patience : int
        Number of consecutive checkpoints (not steps) that must exceed it; >= 1.
        Requiring a run guards against a single lucky checkpoint.

    Returns
    -------
    int or None
        The training step (not the index), or None if never acquired.

    Raises
    ------
    ValueError
        If shapes differ, steps are not strictly increasing integers, or
        ``patience < 1``.
    """
    s, acc = check_series(steps, accuracy, "accuracy")
    patience = _check_patience(patience)
    with np.errstate(invalid="ignore"):
        above = acc > threshold  # NaN > t is False, so NaN breaks a run
    first = int(_first_sustained(above[None, :], patience)[0])
    return None if first < 0 else int(s[first])


def _check_patience(patience) -> int:
    if isinstance(patience, bool) or int(patience) != patience or patience < 1:
        raise ValueError(f"patience must be an integer >= 1, got {patience!r}")
    return int(patience)


def _first_sustained(above: np.ndarray, patience: int) -> np.ndarray:
    """Per row of a boolean array of shape (rows, n): the index of the first checkpoint that starts
    ``patience`` consecutive True values, -1 where none does. Shape (rows,)."""
    rows, n = above.shape
    if n < patience:
        return np.full(rows, -1)
    count = np.concatenate([np.zeros((rows, 1), dtype=np.int64), np.cumsum(above, axis=1)], axis=1)
    sustained = (count[:, patience:] - count[:, :-patience]) == patience
    return np.where(sustained.any(axis=1), sustained.argmax(axis=1), -1)


def subsampled_acquisition(steps, accuracy, n_scored: int, subset_size: int, chance: float = 0.0,
                           draws: int = 200, seed: int = 0, threshold: float = ACQUISITION_THRESHOLD,
                           patience: int = ACQUISITION_PATIENCE) -> np.ndarray:
    """The acquisition steps the rule would have given had each checkpoint been scored on ``subset_size``
    of its ``n_scored`` test examples: ``draws`` simulated subsets.

    A checkpoint that got ``c = accuracy * n_scored`` examples right gets, on a subset of ``subset_size``
    drawn without replacement, a hypergeometric number right; its accuracy is chance-corrected with the
    full set's ``chance`` (:func:`~geomcap.events.chance_corrected`) and read by
    :func:`~geomcap.events.acquisition_step`'s rule. Draws are independent from one checkpoint to the next,
    where one fixed subset's errors are correlated: the simulation overstates a subset's checkpoint-to-checkpoint
    noise and understates a lasting bias (a subset easier than the whole set stays easier).

    Parameters
    ----------
    steps, accuracy : arrays of shape (n,)
        A run's checkpoints and its raw test accuracy there (a fraction of ``n_scored``; NaN breaks a run).
    n_scored : int
        Test examples each accuracy was computed on.
    subset_size : int
        Examples of the simulated subset, in ``[1, n_scored]``; ``n_scored`` gives back
        :func:`~geomcap.events.acquisition_step`.

    Returns
    -------
    array of float, shape (draws,)
        The acquisition step of each simulated subset, NaN where it never acquires.

    Raises
    ------
    ValueError
        If ``subset_size`` is outside ``[1, n_scored]``, ``draws < 1``, or an accuracy is not a count out of
        ``n_scored`` (the wrong ``n_scored``).
    """
    s, acc = check_series(steps, accuracy, "accuracy")
    for name, value, low in (("n_scored", n_scored, 1), ("subset_size", subset_size, 1), ("draws", draws, 1)):
        if isinstance(value, bool) or int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if subset_size > n_scored:
        raise ValueError(f"subset_size {subset_size} is more than the {n_scored} examples scored")
    patience = _check_patience(patience)
    finite = np.isfinite(acc)
    correct = np.where(finite, acc, 0.0) * n_scored
    if np.abs(correct - np.round(correct)).max(initial=0.0) > 1e-6 * n_scored:
        raise ValueError(f"an accuracy is not a count out of n_scored={n_scored}: is that the run's test set size?")
    correct = np.round(correct).astype(np.int64)
    rng = np.random.default_rng(seed)
    right = rng.hypergeometric(correct, n_scored - correct, int(subset_size), size=(int(draws), s.size))
    corrected = chance_corrected(right / subset_size, chance)
    first = _first_sustained((corrected > threshold) & finite[None, :], patience)
    return np.where(first >= 0, s[np.maximum(first, 0)], np.nan).astype(float)


def plateau_fraction(steps, accuracy, until: int | None = None, level: float = PLATEAU_LEVEL) -> float | None:
    """Share of the steps before ``until`` during which accuracy sits at chance (``< level``).

    Each checkpoint's accuracy is held until the next checkpoint, so the
    share is measured in training steps over ``[steps_0, until)``, not in
    checkpoints (checkpoints are denser early on). NaN accuracy counts as not
    at chance.

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps, strictly increasing.
    accuracy : array of float, shape (n,)
        Chance-corrected accuracy (:func:`chance_corrected`).
    until : int, optional
        End of the span, normally the acquisition step; default the last step.
    level : float
        Accuracy below which a checkpoint is at chance.

    Returns
    -------
    float in [0, 1] or None
        None when the span is empty (``until <= steps_0``).
    """
    s, acc = check_series(steps, accuracy, "accuracy")
    if s.size == 0:
        return None
    until = int(s[-1]) if until is None else int(until)
    if until <= s[0]:
        return None
    ends = np.minimum(np.append(s[1:], until), until)
    length = np.clip(ends - s, 0, None)
    with np.errstate(invalid="ignore"):
        at_chance = acc < level
    return float(length[at_chance].sum() / (until - s[0]))


def run_chance(config: dict, status: dict | None = None) -> float:
    """The best constant answer's accuracy on a run's test set: what training recorded in the run's
    status.json (``chance_accuracy``; ``status``, or read from the config's ``path``), else recomputed from
    the config (:func:`chance_for`: any mapping with task, level, seed; n_train and n_test default to
    :class:`geomcap.config.TrainConfig`'s)."""
    recorded = _recorded(config, status, "chance_accuracy")
    # the answer order does not enter: reversing every answer's digits is a bijection on answers,
    # so the most common answer is as common either way
    return recorded if recorded is not None else chance_for(*_task_args(config)[:6])


def run_test_size(config: dict) -> int:
    """How many test examples a run's accuracy was scored on: its test set, regenerated from the config
    (``n_test`` is an upper bound, and mod ignores it; see :func:`geomcap.tasks.make_task`)."""
    return test_size_for(*_task_args(config)[:6])


@lru_cache(maxsize=None)
def test_size_for(task: str, level: str, seed: int, n_train: int, n_test: int, params: tuple | None = None) -> int:
    """The number of rows of a test set (:func:`geomcap.tasks.task_arrays`); ``params`` as in :func:`chance_for`."""
    return len(task_arrays(task, level, seed, n_train, n_test, params=_params(params))[4])


def run_majority_rate(config: dict, status: dict | None = None) -> float:
    """The majority-class rate of the first answer token on a run's test set (C4's baseline): training's
    record (``majority_first_token`` in status.json), else recomputed (:func:`majority_first_token_for`)."""
    recorded = _recorded(config, status, "majority_first_token")
    return recorded if recorded is not None else majority_first_token_for(*_task_args(config))


def _recorded(config: dict, status: dict | None, key: str) -> float | None:
    """``key`` of the run's status.json (``status`` when given, else read from ``config["path"]``); None for a
    run made before training recorded it, or a config without a path."""
    if status is None:
        path = config.get("path")
        status = (store.read_status(path) or {}) if isinstance(path, (str, Path)) else {}
    value = status.get(key)
    return None if value is None else float(value)


@lru_cache(maxsize=None)
def chance_for(task: str, level: str, seed: int, n_train: int, n_test: int, params: tuple | None = None) -> float:
    """Accuracy of the best constant answer on the test set of a run made before training recorded it
    (:func:`geomcap.tasks.chance_accuracy` of the regenerated test answers, :func:`geomcap.tasks.task_arrays`).

    ``params``: the run's level parameters as sorted (key, value) pairs (None: ``LEVEL_TABLE``'s row).
    """
    test_answers = task_arrays(task, level, seed, n_train, n_test, params=_params(params))[4]
    return chance_accuracy(test_answers)


@lru_cache(maxsize=None)
def majority_first_token_for(task: str, level: str, seed: int, n_train: int, n_test: int,
                             params: tuple | None = None, answer_order: str = "msd") -> float:
    """Share of the test answers whose first token is the most common first token (the majority-class
    rate a probe of the first answer token must beat), regenerated for a run made before training recorded
    it; ``params`` as in :func:`chance_for`, ``answer_order`` the run's (it decides the first token)."""
    first = task_arrays(task, level, seed, n_train, n_test, answer_order, _params(params))[4][:, 0]
    return float(np.bincount(first).max() / len(first))


def _params(items: tuple | None) -> dict | None:
    return None if items is None else dict(items)


def _task_args(config: dict) -> tuple:
    """(task, level, seed, n_train, n_test, level parameters as sorted pairs, answer order) of a run's config.
    A config without ``task_params`` (or NaN there, in a table of runs) is a first-grid run: its levels are
    ``LEGACY_LEVEL_TABLE``'s, as :meth:`geomcap.config.TrainConfig.from_dict` reads it."""
    params = config.get("task_params")
    if not isinstance(params, dict):
        params = level_params(config["task"], config["level"], legacy=True)
    order = config.get("answer_order")
    return (config["task"], config["level"], int(config["seed"]), *_task_sizes(config),
            tuple(sorted(params.items())), order if isinstance(order, str) else "msd")


def _task_sizes(config: dict) -> tuple[int, int]:
    """n_train, n_test of a run's config; :class:`geomcap.config.TrainConfig`'s defaults when the config
    holds only task, level, size, seed and steps."""
    defaults = {f.name: f.default for f in fields(TrainConfig)}

    def get(key):
        value = config.get(key)
        return int(defaults[key] if value is None or (isinstance(value, float) and np.isnan(value)) else value)

    return get("n_train"), get("n_test")
