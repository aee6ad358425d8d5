"""A run's config: :class:`TrainConfig` (its hash names the run directory) and the schedules it implies.

Defaults (the paper does not state its optimizer; these are our choices):

=================  ============================================================
optimizer          AdamW, lr 1e-3, betas (0.9, 0.98), weight decay 0.1
                   (1.0 for ``mod``, the usual grokking setting)
schedule           linear warmup over ``min(100, steps // 10)`` steps, then
                   cosine decay to 0.1 x lr at the last step
batch              128 sequences; gradient norm clipped at 1.0
precision          ``precision``: fp32 (the default, on every device), or bf16
                   autocast for the training step (float32 master weights,
                   loss in float32); evaluation, RankMe and probes always
                   run in float32, RankMe in float64
=================  ============================================================

Every field is one row of the parameter schema (:mod:`geomcap.schema`): type, range or choices, default
and help, declared where the field is; :data:`SETTINGS` collects them. ``geomcap train``'s options,
``geomcap sweep --set`` and the notebooks' parameters check their values through the same rows.

Checkpoints (:func:`checkpoint_steps`): every step over the first ``dense_steps``
(128) -- the collapse happens there, and a floor that falls between two
checkpoints cannot be located -- then ``n_linear_checkpoints`` (150) evenly
spaced up to ``steps``. (The first grid used ~20 log-spaced plus 40 linear
checkpoints; its configs say so with ``dense_steps = 0``.) Which measures are taken at which of
them: :func:`recorded_at` (the when of each measure: :data:`geomcap.measures.RECORDED`).

Early stop: with ``stop_margin`` set, a run stops at the first checkpoint at
or after ``acquisition + max(stop_margin * acquisition, stop_min_steps)``
(:func:`stop_step`; acquisition: chance-corrected test accuracy > 0.5 at 3 consecutive
checkpoints, decided on the checkpoints seen so far). The learning-rate
schedule and the checkpoints are fixed by ``steps``, so everything before the
stop is what the full run would have recorded; status.json says ``stopped_at``.

The hash: :meth:`TrainConfig.to_dict` is what ``config.json`` holds and :func:`geomcap.store.config_hash`
hashes. A field added after the first committed runs enters it only when it differs from the value those
runs used (:func:`legacy_values`), so that every committed run keeps its directory name.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from geomcap import measures, tasks
from geomcap.presets import ALL_PRESETS
from geomcap.schema import SettingError, setting, table

#: weight decay by task where it differs from :data:`DEFAULT_WEIGHT_DECAY`
WEIGHT_DECAY_BY_TASK = {"mod": 1.0}
#: AdamW's weight decay on the matrices, for the tasks not in :data:`WEIGHT_DECAY_BY_TASK`
DEFAULT_WEIGHT_DECAY = 0.1
#: the step budget per level of the committed runs: the default of :func:`geomcap.sweep.grid`, of
#: ``geomcap sweep --steps`` and of the notebooks' ``steps`` parameter
DEFAULT_LEVEL_STEPS = {"easy": 2000, "medium": 4000, "hard": 8000}
#: :data:`DEFAULT_LEVEL_STEPS` as text, as ``--steps`` and the notebooks' ``steps`` parameter write it
DEFAULT_LEVEL_STEPS_TEXT = ",".join(f"{level}:{steps}" for level, steps in DEFAULT_LEVEL_STEPS.items())
#: config fields that choose what is measured, never how the model trains: two runs whose configs
#: differ only in these trained the same model (``test_costly_measures_leave_the_training_metrics_unchanged``)
MEASUREMENT_ONLY_FIELDS = ("measures", "costly_every", "dynamics_size", "hessian_warm_start", "costly_window",
                           "llc_chains", "llc_draws")
#: config fields that choose where a run is measured and where it stops, never how it trains: a run that
#: differs from another only in these (and :data:`MEASUREMENT_ONLY_FIELDS`) trained the same steps, so its
#: checkpoints can read the other's events more finely
#: (``test_the_checkpoint_schedule_leaves_the_training_unchanged``; :func:`geomcap.results.resolve_ties`)
SCHEDULE_FIELDS = ("dense_steps", "n_linear_checkpoints", "n_log_checkpoints", "stop_at", "stop_margin",
                   "stop_min_steps")
#: negative controls (``TrainConfig.control``): "shuffled_answers" permutes the answers across prompts, in the
#: training and the test set alike (:func:`geomcap.train.task_data`): the answer marginals, and so the early
#: loss drop, stay; nothing that generalises can be learnt
CONTROLS = ("shuffled_answers",)
#: learning-rate schedules (``TrainConfig.schedule``): both start with a linear warmup over ``warmup_steps``
SCHEDULES = ("cosine", "constant")
#: training precisions (``TrainConfig.precision``): "bf16" runs the training step's forward pass under bf16
#: autocast (float32 weights, optimizer state and loss); checkpoints are always evaluated in float32
PRECISIONS = ("fp32", "bf16")
#: the range of a seed: numpy, torch and scikit-learn seeds all accept 32 bits
SEED_RANGE = "[0, 4294967295]"


def check_measures(value) -> tuple[str, ...]:
    """``measures``: a sequence of costly measures' names (:func:`geomcap.measures.costly_option`); a
    SettingError whose reason is worded as a row's choice ("unknown value 'x'; choose one of: ...")."""
    if isinstance(value, str) or not all(isinstance(m, str) for m in value):
        raise SettingError("measures", f"must be a sequence of names, got {value!r}")
    names = []
    for name in value:
        try:
            names.append(measures.costly_option(name))
        except ValueError as exc:
            raise SettingError("measures", f"unknown value {name!r}; choose one of: "
                                           f"{', '.join(measures.COSTLY_MEASURES)}", str(exc)) from None
    return tuple(names)


def check_window(window) -> tuple[int, int]:
    """``costly_window`` as a (first, last) pair of steps with 0 <= first <= last, else ValueError."""
    try:
        first, last = window
    except (TypeError, ValueError):
        raise SettingError("costly_window", f"must be two steps (first, last), got {window!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (first, last)) or not 0 <= first <= last:
        raise SettingError("costly_window", f"must be two whole steps with 0 <= first <= last, got {window!r}")
    return int(first), int(last)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a run's metrics (its hash names the run directory). One field per setting,
    each declared with its range or choices, default and help (:data:`SETTINGS`)."""
    task: str = setting(choices=tasks.TASKS, help="the task")
    level: str = setting(choices=tasks.LEVELS, help="the task's level, a row of tasks.LEVEL_TABLE")
    size: str = setting("405k", choices=ALL_PRESETS, help="model preset (`geomcap presets` lists them)")
    seed: int = setting(0, SEED_RANGE, help="data, initialisation and batch order")
    steps: int = setting(2000, "[1, inf)", help="optimizer steps")
    batch_size: int = setting(128, "[1, inf)", sweep_settable=True,
                              help="sequences per step (full batch: per evaluation chunk)")
    lr: float = setting(1e-3, "(0, inf)", sweep_settable=True, help="peak learning rate (AdamW)")
    weight_decay: float | None = setting(
        None, "[0, inf)", sweep_settable=True, help="AdamW's weight decay on the matrices",
        none=f"{DEFAULT_WEIGHT_DECAY} (" + ", ".join(f"{v} for {t}" for t, v in WEIGHT_DECAY_BY_TASK.items()) + ")")
    beta1: float = setting(0.9, "[0, 1)", sweep_settable=True, help="AdamW's beta1")
    beta2: float = setting(0.98, "[0, 1)", sweep_settable=True, help="AdamW's beta2")
    warmup_steps: int | None = setting(None, "[0, inf)", none="min(100, steps // 10)", sweep_settable=True,
                                       help="linear warmup steps (at most steps)")
    min_lr_ratio: float = setting(0.1, "[0, 1]", sweep_settable=True,
                                help="the cosine schedule's final lr, as a share of lr")
    grad_clip: float | None = setting(1.0, "(0, inf)", none="no clipping", sweep_settable=True,
                                    help="gradient-norm clipping")
    n_log_checkpoints: int = setting(0, "[0, inf)", help="log-spaced checkpoints (the first grid's 20)")
    n_linear_checkpoints: int = setting(150, "[1, inf)", help="evenly spaced checkpoints after the dense part")
    dense_steps: int = setting(128, "[0, inf)", help="a checkpoint at every step up to here")
    n_train: int = setting(100_000, "[1, inf)", help="training examples (at most; a small task has fewer)")
    n_test: int = setting(512, "[1, inf)", help="test examples")
    probe_size: int = setting(512, "[1, inf)", help="the probe batch: the first test prompts")
    train_eval_size: int = setting(512, "[1, inf)", help="training examples evaluated at a checkpoint")
    measures: tuple[str, ...] = setting((), convert=check_measures,
                                        help="comma-separated costly measures: " + ",".join(measures.COSTLY_MEASURES))
    costly_every: int = setting(4, "[1, inf)", help="run the costly measures on every k-th checkpoint")
    dynamics_size: int = setting(256, "[1, inf)", help="training examples the costly measures are taken on")
    answer_order: str = setting("msd", choices=tasks.ANSWER_ORDERS, sweep_settable=True,
                                help="digits of add, mod, mul answers: most (msd) or least significant first")
    task_params: dict | None = setting(None, none="the level's row of tasks.LEVEL_TABLE",
                                       help="KEY=VALUE,...: the level's parameters instead of the level table's "
                                            "row, e.g. p=113,train_fraction=0.3,number_tokens=true (mod, one "
                                            "token per number)")
    stop_margin: float | None = setting(1.0, "[0, inf)", none="never stop early",
                                        help="stop a margin after acquisition (see geomcap.config); none: train "
                                             "every step")
    stop_min_steps: int = setting(500, "[0, inf)", help="the early stop's least margin, in steps")
    hessian_warm_start: bool = setting(True, help="Lanczos starts from the previous checkpoint's top eigenvector "
                                                  "(true or false)")
    costly_window: tuple[int, int] | None = setting(None, item=int, length=2, convert=check_window, none="no window",
                                                    help="FIRST,LAST: the costly measures also at every "
                                                         "checkpoint of these steps (e.g. around acquisition)")
    llc_chains: int = setting(4, "[1, inf)", help="the LLC's SGLD chains (4: geomcap.dynamics.LLC_DEFAULTS)")
    llc_draws: int = setting(200, "[51, inf)", help="the LLC's SGLD steps per chain, the first 50 a burn-in "
                                                    "(200: geomcap.dynamics.LLC_DEFAULTS)")
    control: str | None = setting(None, choices=CONTROLS, none="no control", sweep_settable=True,
                                  help="shuffled_answers: the negative control (answers permuted across prompts)")
    schedule: str = setting("cosine", choices=SCHEDULES, sweep_settable=True,
                            help="cosine (warmup, then cosine decay to min_lr_ratio x lr) or constant (warmup, "
                                 "then lr)")
    full_batch: bool = setting(False, help="true: every step on the whole training set")
    stop_at: int | None = setting(None, "[1, inf)", none="the run's own end", sweep_settable=True,
                                  help="stop at the first checkpoint at or after this step (the schedule still "
                                       "spans steps)")
    perturb: float = setting(0.0, "[0, 1)", sweep_settable=True,
                              help="multiply each initial weight by 1 + PERTURB x N(0, 1) (twins of a run)")
    perturb_seed: int = setting(0, SEED_RANGE, sweep_settable=True, help="the seed of that noise")
    precision: str = setting("fp32", choices=PRECISIONS, sweep_settable=True,
                             help="the training step's precision: fp32, or bf16 autocast (float32 weights; "
                                  "evaluation always in float32)")

    def __post_init__(self):
        for name, param in SETTINGS.items():  # each value's type, range or choices
            object.__setattr__(self, name, param.check(getattr(self, name)))
        # what one setting implies for another
        tasks.check_answer_order(self.task, self.answer_order)
        if self.weight_decay is None:
            object.__setattr__(self, "weight_decay", WEIGHT_DECAY_BY_TASK.get(self.task, DEFAULT_WEIGHT_DECAY))
        if self.warmup_steps is None:
            object.__setattr__(self, "warmup_steps", min(100, self.steps // 10))
        object.__setattr__(self, "measures", tuple(sorted(set(self.measures))))
        if self.warmup_steps > self.steps:
            raise ValueError(f"warmup_steps must be at most steps ({self.steps}), got {self.warmup_steps}")
        params = tasks.level_params(self.task, self.level) if self.task_params is None else self.task_params
        object.__setattr__(self, "task_params", tasks.check_params(self.task, params))
        if self.stop_at is not None and self.stop_at > self.steps:
            raise ValueError(f"stop_at must be at most steps ({self.steps}), got {self.stop_at}")

    def to_dict(self) -> dict:
        """The config as config.json holds it and :func:`geomcap.store.config_hash` hashes it."""
        d = asdict(self)
        d["measures"] = [measures.CONFIG_SPELLING.get(m, m) for m in self.measures]  # the hashed spelling
        # fields added after the first committed runs enter the dict (and so the run's hash) only
        # when they differ from the value those runs used, so that those runs keep their names
        for name, value in legacy_values(self.task, self.level).items():
            if d[name] == value:
                del d[name]
        if "hessian" not in d["measures"]:  # the Hessian's start vector changes nothing then
            d.pop("hessian_warm_start", None)
        if not d["measures"]:  # nor does a window for costly measures that are not taken
            d.pop("costly_window", None)
        if "llc" not in d["measures"]:  # nor the LLC's chains and draws without the LLC
            d.pop("llc_chains", None)
            d.pop("llc_draws", None)
        if not self.perturb:  # nor the seed of a perturbation that is not applied
            d.pop("perturb_seed", None)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """The config a config.json (or ``to_dict``) describes; a field it lacks takes the value
        of the runs written before that field existed (:func:`legacy_values`)."""
        names = {f.name for f in fields(cls)}
        kwargs = {**legacy_values(d["task"], d["level"]), **{k: v for k, v in d.items() if k in names}}
        kwargs["measures"] = tuple(kwargs.get("measures", ()))
        return cls(**kwargs)


#: the schema's rows of :class:`TrainConfig`: {field name: :class:`geomcap.schema.Param`}
SETTINGS = table(TrainConfig)
#: the fields ``geomcap sweep --set`` may set for every run, {name: type}: the rows flagged ``sweep_settable``
#: (the optimizer and schedule settings the paper leaves unstated, the negative control, a stop step, the
#: twins' perturbation, the precision). The grid's own axes and the measures have options of their own.
SWEEP_SETTABLE = {name: row.type for name, row in SETTINGS.items() if row.sweep_settable}


def legacy_values(task: str, level: str) -> dict:
    """Fields added after the first grid, with the values that grid's runs used."""
    return {"answer_order": "msd", "dense_steps": 0, "stop_margin": None, "stop_min_steps": 500,
            "task_params": tasks.level_params(task, level, legacy=True), "hessian_warm_start": False,
            "costly_window": None, "control": None, "schedule": "cosine", "full_batch": False, "stop_at": None,
            "perturb": 0.0, "perturb_seed": 0, "llc_chains": 4, "llc_draws": 200, "precision": "fp32"}


def parse_steps(text: str) -> int | dict:
    """'3000' -> 3000; 'easy=1000,medium=3000,hard=6000' (or with ':' for '=') -> dict of the levels given
    (:func:`geomcap.sweep.grid` needs a value for each level it is asked for). Notebooks use ':' because
    papermill cannot read a parameter line with two '='. Each level and number is checked as
    ``TrainConfig.level`` and ``TrainConfig.steps`` are (:data:`SETTINGS`)."""
    text = text.replace(":", "=")
    if "=" not in text:
        return _steps(text)
    mapping = {}
    for part in text.split(","):
        level, _, value = part.partition("=")
        mapping[SETTINGS["level"].check(level.strip())] = _steps(value)
    return mapping


def _steps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        reason = f"{text.strip()!r} is not an integer"
        raise SettingError("steps", reason, f"--steps: {reason}") from None
    return SETTINGS["steps"].check(value)


# --- the schedules a config implies ------------------------------------------

def checkpoint_steps(steps: int, n_log: int = 0, n_linear: int = 150, dense: int = 128) -> np.ndarray:
    """Checkpoint schedule: every step in [0, dense], ~n_log log-spaced steps in [1, steps/10],
    and n_linear evenly spaced steps from ``dense`` to ``steps``.

    Returns sorted unique ints, always including 0 and ``steps``. The first grid's
    schedule is ``n_log=20, n_linear=40, dense=0``.
    """
    dense = min(dense, steps)
    log_part = (np.round(np.logspace(0, np.log10(max(steps / 10, 1)), n_log)).astype(int)
                if n_log else np.zeros(0, dtype=int))
    linear_part = np.round(np.linspace(dense, steps, n_linear + 1)).astype(int)
    return np.unique(np.concatenate([np.arange(dense + 1), log_part, linear_part, [steps]]).clip(0, steps))


def config_checkpoints(cfg: TrainConfig) -> np.ndarray:
    """:func:`checkpoint_steps` of a config (its steps, log, linear and dense settings)."""
    return checkpoint_steps(cfg.steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints, cfg.dense_steps)


def thinned_steps(schedule: np.ndarray, dense: int, every: int) -> set[int]:
    """A subset of the checkpoints: 0 and the powers of two up to ``dense``, then every ``every``-th
    later checkpoint, and the last. With ``dense = 0`` (the first grid): every ``every``-th checkpoint
    and the last.

    The dense part has a checkpoint at every step to locate the collapse; the measures that are
    not needed at that resolution are taken on such a subset (see :mod:`geomcap.measures`).
    """
    schedule = np.asarray(schedule)
    if dense == 0:
        return set(schedule[::every].tolist()) | {int(schedule[-1])}
    early = {0} | {2**k for k in range(int(math.log2(dense)) + 1)}
    return ({int(s) for s in schedule if s in early} | set(schedule[schedule > dense][::every].tolist())
            | {int(schedule[-1])})


def recorded_at(when: str, schedule, cfg: TrainConfig) -> set[int]:
    """The checkpoints of ``schedule`` at which the measures recorded ``when`` are taken
    (:data:`geomcap.measures.RECORDED`): every one, or a :func:`thinned_steps` subset (training-set
    evaluation: ``every=1``; RankMe variants: ``every=2``, 1 with ``dense_steps = 0``; costly measures:
    ``every=costly_every``, plus every checkpoint of ``costly_window``; none without ``measures``)."""
    if when == "every":
        return {int(s) for s in schedule}
    if when == "costly" and not cfg.measures:
        return set()
    every = {"train_eval": 1, "variants": 2 if cfg.dense_steps else 1, "costly": cfg.costly_every}.get(when)
    if every is None:
        raise ValueError(f"when must be one of {', '.join(measures.RECORDED)}, got {when!r}")
    steps = thinned_steps(schedule, cfg.dense_steps, every)
    if when == "costly" and cfg.costly_window is not None:
        first, last = cfg.costly_window
        steps |= {int(s) for s in schedule if first <= s <= last}
    return steps


def stop_step(acquisition: int, cfg: TrainConfig) -> int | None:
    """The step at or after which a run acquired at ``acquisition`` may stop (None: never)."""
    if cfg.stop_margin is None:
        return None
    return acquisition + max(int(math.ceil(cfg.stop_margin * acquisition)), cfg.stop_min_steps)


def lr_schedule(step: int, lr: float, warmup_steps: int, steps: int, min_lr_ratio: float) -> float:
    """The learning rate for the update that takes the model from ``step`` to ``step + 1`` (steps
    count from 0): linear warmup to ``lr`` over ``warmup_steps`` updates, then cosine decay to
    ``min_lr_ratio * lr`` at ``steps``, held there after. The one schedule of geomcap: the
    training loop (:func:`learning_rate`) and the Pythia stand-in use it."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, steps - warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * cosine)


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """LR for the update that takes the model from ``step`` to ``step + 1`` (:func:`lr_schedule`
    with the config's lr, warmup_steps, steps and min_lr_ratio; ``schedule="constant"``: no decay,
    min_lr_ratio 1)."""
    min_lr_ratio = 1.0 if cfg.schedule == "constant" else cfg.min_lr_ratio
    return lr_schedule(step, cfg.lr, cfg.warmup_steps, cfg.steps, min_lr_ratio)
