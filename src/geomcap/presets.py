"""The model presets: each preset's shape (:class:`ModelConfig`), without torch, so that what reads a run
store (the analysis, the notebooks' parameter checks) can name and check presets without loading the model
code (:mod:`geomcap.models` builds them)."""

from __future__ import annotations

from dataclasses import dataclass

#: the MLP non-linearities a preset may name (:data:`geomcap.models.ACTIVATIONS` maps each to its function)
ACTIVATION_NAMES = ("gelu", "relu")


@dataclass(frozen=True)
class ModelConfig:
    """The shape of one model: depth, width, heads, context, MLP ratio, and the choices Nanda et al.'s grokking
    model differs in (activation, LayerNorm, tied unembedding, initialisation)."""

    n_layer: int
    d_model: int
    n_head: int
    block_size: int = 64
    mlp_ratio: int = 4
    activation: str = "gelu"    # the MLP's non-linearity: "gelu" or "relu"
    layer_norm: bool = True     # pre-LayerNorm blocks and a final LayerNorm; False: none at all
    tied: bool = True           # the unembedding is the token embedding (GPT-2); False: its own matrix
    init: str = "gpt2"          # "gpt2": N(0, 0.02^2), projections into the residual scaled down; "fan_in":
                                # every matrix N(0, 1/d_model), the unembedding N(0, 1/vocab) (Nanda et al.)

    def __post_init__(self):
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}")
        if self.activation not in ACTIVATION_NAMES:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATION_NAMES)}, got {self.activation!r}")
        if self.init not in ("gpt2", "fan_in"):
            raise ValueError(f"init must be 'gpt2' or 'fan_in', got {self.init!r}")


PRESETS: dict[str, ModelConfig] = {
    "405k": ModelConfig(n_layer=2, d_model=128, n_head=4),
    "1.3m": ModelConfig(n_layer=3, d_model=192, n_head=6),
    "4m": ModelConfig(n_layer=5, d_model=256, n_head=8),
    "14m": ModelConfig(n_layer=8, d_model=384, n_head=6),
    "48m": ModelConfig(n_layer=12, d_model=576, n_head=9),
    "151m": ModelConfig(n_layer=12, d_model=1024, n_head=16),
}


#: deeper, narrower variants of the two smallest presets (same parameter budget, >= 6 blocks)
DEPTH_PRESETS: dict[str, ModelConfig] = {
    "405k-deep": ModelConfig(n_layer=6, d_model=72, n_head=4),
    "1.3m-deep": ModelConfig(n_layer=8, d_model=120, n_head=6),
}
#: the one-layer model of Nanda et al. (2023)'s grokking runs: d_model 128, 4 heads of 32, MLP 512 with
#: ReLU, no LayerNorm, untied embedding and unembedding, their initialisation (every matrix N(0, 1/d_model),
#: the unembedding N(0, 1/vocab)); learned positions, as every preset
GROKKING_PRESETS: dict[str, ModelConfig] = {
    "grok-1l": ModelConfig(n_layer=1, d_model=128, n_head=4, activation="relu", layer_norm=False, tied=False,
                           init="fan_in"),
}
#: every model that ``build`` accepts: the six presets, then the depth variants and the grokking model
ALL_PRESETS: dict[str, ModelConfig] = {**PRESETS, **DEPTH_PRESETS, **GROKKING_PRESETS}


def check_preset(preset: str) -> None:
    """Raise ValueError with one clear line when ``preset`` is not a preset name."""
    if preset not in ALL_PRESETS:
        raise ValueError(f"unknown size {preset!r}; choose one of: {', '.join(ALL_PRESETS)}")
