"""The measures a training run records: one record per name of metrics.csv's ``measure`` column.

Each :class:`Measure` says where the measure lives (``layers``: ``"model"``, one value per checkpoint
at layer -1; ``"each"``, one per layer, 0 = embeddings; ``"last"``, at the last layer only), whether
it is *costly* (recorded only when its ``option`` is in ``TrainConfig.measures``), at which checkpoints
it is recorded (``recorded``, see :data:`RECORDED`), and how the analysis reads it (``precursor``:
its transition is compared with acquisition, :data:`~geomcap.analysis.protocol.PRECURSOR_MEASURES`; ``baseline``:
a series every precursor is compared with: behaviour, which moves with behaviour by construction, and the
parameter norm).

A measure of the probe batch's hidden states also says what it is computed from (``source``: the
answer-position states of each layer, every position stacked, the mean over positions, or the last
block's residual stream before the final LayerNorm) and how (``statistic``: RankMe, centred RankMe, the
mean-energy share, or a linear probe to the answer's first token or to the control task's labels).

The registry is the list of names the rest of geomcap reads: :mod:`geomcap.recorders` (what to record,
when, from what: the one place each measure is computed, for :mod:`geomcap.train`, :mod:`geomcap.packed`
and :mod:`geomcap.monitor` alike), :mod:`geomcap.events` (the precursor series), :mod:`geomcap.results`
and the ``geomcap`` command (the costly measures, the RankMe variants). It imports nothing heavy: the
analysis reads it without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

#: when a measure is recorded: at every checkpoint; at the thinned checkpoints of the training-set
#: evaluation (0 and the powers of two over the dense part, then every checkpoint); at those of the
#: RankMe variants (every second one after the dense part); at those of the costly measures (every
#: ``costly_every``-th; see :func:`geomcap.config.recorded_at`)
RECORDED = ("every", "train_eval", "variants", "costly")
#: where a measure's values live (the ``layer`` column): -1, every layer, or the last layer only
LAYERS = ("model", "each", "last")
#: what a measure of hidden states is computed from, per layer (N = probe rows, T = positions, d = width):
#: the answer position's states (N, d); every position stacked (N * T, d); the mean over positions (N, d);
#: the last block's residual stream at the answer position, before the final LayerNorm (N, d)
SOURCES = ("answer", "all_positions", "mean_pooled", "residual")
#: how: of the matrix (``geomcap.recorders.STATISTICS``), or a held-out linear probe of every layer's matrix
#: to the answer's first token (``probe``) or to the control task's labels (``control_probe``)
STATISTICS = ("rankme", "rankme_centred", "mean_energy_share", "probe", "control_probe")


@dataclass(frozen=True)
class Measure:
    """One measure of metrics.csv (see the module docstring)."""
    name: str
    layers: str
    recorded: str
    description: str
    costly: bool = False
    option: str | None = None      # costly measures: the TrainConfig.measures name that records it
    precursor: bool = False
    baseline: bool = False
    source: str | None = None      # measures of hidden states: what (SOURCES) and how (STATISTICS)
    statistic: str | None = None

    def __post_init__(self):
        if self.layers not in LAYERS:
            raise ValueError(f"layers must be one of {', '.join(LAYERS)}, got {self.layers!r}")
        if self.recorded not in RECORDED:
            raise ValueError(f"recorded must be one of {', '.join(RECORDED)}, got {self.recorded!r}")
        if self.costly != (self.recorded == "costly") or self.costly != (self.option is not None):
            raise ValueError(f"{self.name}: a costly measure is recorded at the costly checkpoints, with an option")
        if (self.source is None) != (self.statistic is None) or (self.source is not None and (
                self.source not in SOURCES or self.statistic not in STATISTICS or self.layers == "model")):
            raise ValueError(f"{self.name}: a measure of hidden states has a source of {', '.join(SOURCES)} and a "
                             f"statistic of {', '.join(STATISTICS)}, per layer")

    @property
    def per_layer(self) -> bool:
        """Recorded per layer (``layers`` "each" or "last"), not once for the model (layer -1)."""
        return self.layers != "model"


#: every measure a run records (the precursor series in the order the summaries list them: geometry, costly,
#: behavioural baselines)
MEASURES = (
    Measure("rankme", "each", "every", "RankMe of the answer-position hidden states, uncentred (the primary "
            "measure)", precursor=True, source="answer", statistic="rankme"),
    Measure("rankme_centred", "each", "every", "the same, centred", precursor=True, source="answer",
            statistic="rankme_centred"),
    Measure("rankme_all_positions", "each", "variants", "RankMe of every position of every probe sequence",
            precursor=True, source="all_positions", statistic="rankme"),
    Measure("rankme_mean_pooled", "each", "variants", "RankMe of the mean over positions", precursor=True,
            source="mean_pooled", statistic="rankme"),
    Measure("rankme_residual", "last", "every", "RankMe of the last block's residual stream before the final "
            "LayerNorm", precursor=True, source="residual", statistic="rankme"),
    Measure("rankme_centred_residual", "last", "every", "the same, centred", precursor=True, source="residual",
            statistic="rankme_centred"),
    Measure("mean_energy_share", "each", "every", "share of the uncentred energy the mean direction carries",
            precursor=True, source="answer", statistic="mean_energy_share"),
    Measure("mean_energy_share_residual", "last", "every", "the same, before the final LayerNorm", precursor=True,
            source="residual", statistic="mean_energy_share"),
    Measure("probe_accuracy", "each", "every", "linear probe to the first answer token", precursor=True,
            source="answer", statistic="probe"),
    Measure("probe_control_accuracy", "each", "every", "the same probe on the control task's labels (a fixed "
            "random function of the prompt; Hewitt & Liang 2019): selectivity = probe_accuracy minus this",
            source="answer", statistic="control_probe"),
    Measure("grad_rank", "model", "costly", "effective rank of the per-example gradients", costly=True,
            option="grad_rank", precursor=True),
    Measure("grad_cov_rank", "model", "costly", "effective rank of their covariance", costly=True,
            option="grad_cov_rank", precursor=True),
    Measure("hessian_top", "model", "costly", "the loss Hessian's top eigenvalue (Lanczos)", costly=True,
            option="hessian_top", precursor=True),
    Measure("hessian_residual", "model", "costly", "||Hv - lambda v|| / lambda: Lanczos's convergence",
            costly=True, option="hessian_top"),
    Measure("hessian_matvecs", "model", "costly", "Hessian-vector products used", costly=True,
            option="hessian_top"),
    Measure("llc", "model", "costly", "local learning coefficient (SGLD)", costly=True, option="llc",
            precursor=True),
    Measure("llc_trace_drift", "model", "costly", "how much the SGLD chains still moved (> 0.2: not flat)",
            costly=True, option="llc"),
    Measure("test_loss", "model", "every", "cross-entropy on the test set", baseline=True, precursor=True),
    Measure("train_accuracy", "model", "train_eval", "exact match on that batch", baseline=True, precursor=True),
    Measure("first_token_accuracy", "model", "every", "accuracy on the first answer token alone (the probes' "
            "target)", baseline=True, precursor=True),
    Measure("param_norm", "model", "every", "L2 norm of all parameters (Omnigrok's confound for grokking's "
            "timing)", baseline=True, precursor=True),
    Measure("loss", "model", "train_eval", "cross-entropy on a fixed batch of training examples"),
    Measure("accuracy", "model", "every", "exact match on the test set (acquisition is read from it)"),
)

#: the costly measures a run may request (``TrainConfig.measures``, ``geomcap train --measures``)
COSTLY_MEASURES = tuple(dict.fromkeys(m.option for m in MEASURES if m.costly))
#: the ways of computing RankMe at every layer (the sensitivity analysis)
RANKME_VARIANTS = tuple(m.name for m in MEASURES if m.layers == "each" and m.name.startswith("rankme"))
#: the baselines every precursor is compared with (behaviour, and the parameter norm)
BEHAVIOURAL_BASELINES = tuple(m.name for m in MEASURES if m.baseline)
#: the LLC chains have not levelled off when the absolute ``trace_drift`` is above this (the estimator,
#: :func:`geomcap.dynamics.local_learning_coefficient_of`, flags it; the costly measures' health table counts it)
LLC_DRIFT_TOLERANCE = 0.2
#: how config.json spells a costly measure whose name changed: the runs hashed with it keep their names
CONFIG_SPELLING = {"hessian_top": "hessian"}


def costly_option(name: str) -> str:
    """A requested costly measure's name (:data:`COSTLY_MEASURES`), also from its config.json spelling
    (:data:`CONFIG_SPELLING`); ValueError naming the choices otherwise."""
    name = {spelt: option for option, spelt in CONFIG_SPELLING.items()}.get(name, name)
    if name not in COSTLY_MEASURES:
        raise ValueError(f"unknown measure {name!r}; choose from: {', '.join(COSTLY_MEASURES)}")
    return name
