"""A decoder-only, pre-LayerNorm transformer, readable top to bottom.

Six presets span the paper's 405K..151M parameters (a factor of ~370),
roughly geometrically (x3.3 per step). Parameter counts below are with the
shared task vocabulary (``geomcap.tasks.VOCAB_SIZE``) and a context of
``block_size = 64`` positions; the vocabulary only enters through the
(tied) embedding matrix.

=========  ======  =====  =====  =============
preset     layers  width  heads  parameters
=========  ======  =====  =====  =============
``405k``   2       128    4      ~0.41M
``1.3m``   3       192    6      ~1.35M
``4m``     5       256    8      ~3.97M
``14m``    8       384    6      ~14.2M
``48m``    12      576    9      ~47.9M
``151m``   12      1024   16     ~151M
=========  ======  =====  =====  =============

Two depth variants sit beside them (``DEPTH_PRESETS``), about as many
parameters as the two smallest presets but with at least six blocks, so the
top-down ordering of the collapse (which needs four or more informative
layers) can be tested at CPU scale:

==============  ======  =====  =====  =============
preset          layers  width  heads  parameters
==============  ======  =====  =====  =============
``405k-deep``   6       72     4      ~0.38M
``1.3m-deep``   8       120    6      ~1.39M
==============  ======  =====  =====  =============

One more model reproduces the grokking runs of Nanda et al. (2023)
(``GROKKING_PRESETS``): ``grok-1l``, one block, width 128, 4 heads, MLP 512
with ReLU, no LayerNorm, untied unembedding, and their initialisation
(``ModelConfig``'s ``activation``, ``layer_norm``, ``tied`` and ``init``). Without LayerNorm the last
hidden state is the last block's residual stream itself.

(``geomcap presets`` prints the exact counts.) Dropout is 0 everywhere:
the LLC estimator puts the model in train mode, and the measures must see
the same function in train and eval mode.

``GPT.forward(idx, return_hidden=True)`` also returns the residual stream:
a list of ``n_layer + 1`` tensors of shape (B, T, d) -- index 0 is the
embedding output, index i (1 <= i < n_layer) the residual stream after
block i, and the last entry is the output of the final LayerNorm (what the
unembedding reads), the same convention as Hugging Face's
``output_hidden_states``.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from geomcap.presets import (  # noqa: F401 (the presets' names, importable from here as before)
    ACTIVATION_NAMES, ALL_PRESETS, DEPTH_PRESETS, GROKKING_PRESETS, PRESETS, ModelConfig, check_preset)

#: each of :data:`geomcap.presets.ACTIVATION_NAMES` as its function
ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu}


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: ``cfg.n_head`` heads of width d_model / n_head, then an output
    projection."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x):
        """x: (B, T, d_model) -> (B, T, d_model); position t attends to positions <= t."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    """The block's feed-forward layer: d_model -> ``cfg.mlp_ratio`` x d_model -> d_model, with the preset's
    activation (:data:`ACTIVATIONS`) between."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model)
        self.proj = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model)
        self.activation = ACTIVATIONS[cfg.activation]

    def forward(self, x):
        """x: (B, T, d_model) -> (B, T, d_model)."""
        return self.proj(self.activation(self.fc(x)))


class Block(nn.Module):
    """One pre-LayerNorm transformer block: attention, then the MLP, each reading a LayerNorm of the residual
    stream (none where not ``cfg.layer_norm``) and adding its output to it."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model) if cfg.layer_norm else nn.Identity()
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model) if cfg.layer_norm else nn.Identity()
        self.mlp = MLP(cfg)

    def forward(self, x):
        """x: the residual stream (B, T, d_model) -> the next one, (B, T, d_model)."""
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """The decoder-only transformer of every preset (:func:`build`): token and learned position embeddings,
    ``cfg.n_layer`` pre-LayerNorm blocks (causal self-attention, then an MLP, each added to the residual
    stream), a final LayerNorm (no LayerNorm anywhere where not ``cfg.layer_norm``) and a linear head onto the
    ``vocab_size`` tokens (the token embedding where ``cfg.tied``). Initialised as GPT-2 (normal, std 0.02;
    the projections into the residual stream scaled by 1/sqrt(2 n_layer)), or with ``cfg.init == "fan_in"`` at
    std 1/sqrt(fan in)."""

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.tok_emb = nn.Embedding(vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model) if cfg.layer_norm else nn.Identity()
        self.lm_head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        if cfg.tied:
            self.lm_head.weight = self.tok_emb.weight  # weight tying, as GPT-2
        self.apply(self._init_weights)
        # GPT-2's scaled init of the projections that write into the residual stream
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))
        if cfg.init == "fan_in":  # Nanda et al.'s: unit-scale activations at initialisation
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if p.ndim >= 2:
                        fan_in = vocab_size if name == "lm_head.weight" else cfg.d_model
                        p.normal_(0.0, 1.0 / math.sqrt(fan_in))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    @property
    def n_hidden(self) -> int:
        """Number of hidden-state matrices returned with ``return_hidden`` (layers + embeddings)."""
        return self.cfg.n_layer + 1

    def forward(self, idx: torch.Tensor, return_hidden: bool = False, return_residual: bool = False):
        """idx: (B, T) int64 with T <= block_size.

        Returns logits (B, T, vocab_size), and with ``return_hidden`` also
        the list of n_layer + 1 hidden states (B, T, d_model) described in
        the module docstring. With ``return_hidden`` and ``return_residual``
        a third item: the last block's residual stream (B, T, d_model) before
        the final LayerNorm (the list's last entry is after it).
        """
        B, T = idx.shape
        if T > self.cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.cfg.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        hidden = [x]
        for block in self.blocks:
            x = block(x)
            hidden.append(x)
        residual = x
        x = self.ln_f(x)
        hidden[-1] = x
        logits = self.lm_head(x)
        if not return_hidden:
            return logits
        return (logits, hidden, residual) if return_residual else (logits, hidden)


def build(preset: str, vocab_size: int) -> GPT:
    """Build a freshly initialised model of a named preset (seed with torch.manual_seed first)."""
    check_preset(preset)
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    return GPT(ALL_PRESETS[preset], vocab_size)


def count_parameters(model: nn.Module) -> int:
    """Number of distinct trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class LogitsOnly(nn.Module):
    """Wrap a Hugging Face causal LM so that ``module(idx)`` returns logits (B, T, V), as :class:`GPT` does:
    the form :func:`answer_loss` and :func:`geomcap.train.train_step` take."""

    def __init__(self, hf_model: nn.Module):
        super().__init__()
        self.hf_model = hf_model

    def forward(self, idx: torch.Tensor, return_hidden: bool = False) -> torch.Tensor:
        """idx: (B, T) int64 -> the wrapped model's logits (B, T, V); no hidden states (ValueError if asked)."""
        if return_hidden:
            raise ValueError("LogitsOnly returns logits only")
        return self.hf_model(input_ids=idx).logits


def preset_table(vocab_size: int) -> list[dict]:
    """One row per preset: name, layers, width, heads, parameters (exact, counted on a built model)."""
    rows = []
    for name, cfg in ALL_PRESETS.items():
        with torch.device("meta"):  # count without allocating 151M parameters
            model = GPT(cfg, vocab_size)
        rows.append({"preset": name, "layers": cfg.n_layer, "width": cfg.d_model,
                     "heads": cfg.n_head, "parameters": count_parameters(model)})
    return rows


# --- teacher-forced answers -------------------------------------------------
# Every (task, level) has fixed prompt and answer lengths, so the answer is
# scored in one forward pass: the input is prompt + answer[:-1], and the logits
# at positions prompt_len-1 .. prompt_len+answer_len-2 predict the answer.
# Exact match under teacher forcing equals greedy-decoding exact match: the
# two differ only after a first wrong token, and either way the answer is wrong.

def answer_inputs(prompts: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """(B, Tp), (B, Ta) -> model input (B, Tp + Ta - 1)."""
    return torch.cat([prompts, answers[:, :-1]], dim=1)


def answer_logits(model: nn.Module, prompts: torch.Tensor, answers: torch.Tensor,
                  return_hidden: bool = False, return_residual: bool = False):
    """Logits over the answer tokens, (B, Ta, V); with ``return_hidden`` also the hidden states
    (and with ``return_residual`` the last block's pre-LayerNorm residual, see ``GPT.forward``)."""
    Tp, Ta = prompts.shape[1], answers.shape[1]
    inputs = answer_inputs(prompts, answers)
    out = (model(inputs, return_hidden=True, return_residual=True) if return_hidden and return_residual
           else model(inputs, return_hidden=return_hidden))
    if not return_hidden:
        return out[:, Tp - 1: Tp - 1 + Ta]
    return (out[0][:, Tp - 1: Tp - 1 + Ta], *out[1:])


def answer_loss(model: nn.Module, prompts: torch.Tensor, answers: torch.Tensor,
                reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy over the answer tokens (nats/token).

    reduction="mean": a scalar; "none": per-example mean over answer tokens, shape (B,).
    """
    logits = answer_logits(model, prompts, answers)
    per_token = F.cross_entropy(logits.transpose(1, 2).float(), answers, reduction="none")  # (B, Ta)
    per_example = per_token.mean(dim=1)
    if reduction == "none":
        return per_example
    if reduction == "mean":
        return per_example.mean()
    raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")


# --- where and in which precision the models run ------------------------------

def resolve_device(device: str = "auto") -> torch.device:
    """'auto' -> cuda when present, else cpu; 'cpu' and 'cuda[:N]' as given. Checked through the ``device``
    parameter row (``geomcap.parameters.device_name``): a SettingError (a ValueError) for CUDA absent, or
    another name."""
    from geomcap.parameters import PARAMETERS

    PARAMETERS["device"].check(device)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class PrecisionWarning(UserWarning):
    """bf16 autocast asked for where bf16 matrix products have no native kernel (:func:`warn_slow_precision`)."""


def bf16_matmul_native(device: torch.device) -> bool:
    """Whether bf16 matrix products run on native kernels on ``device``: always on CUDA; on a CPU only where
    oneDNN has bf16 kernels (AVX512 or AMX; torch's own check). Elsewhere (an AVX2-only CPU) torch falls back
    to a reference GEMM that runs bf16 products at a small fraction of float32's rate."""
    if device.type != "cpu":
        return True
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return True if check is None else bool(check())  # a torch without the check: no claim either way


def warn_slow_precision(device: torch.device, precision: str) -> None:
    """A :class:`PrecisionWarning` when ``precision`` is "bf16" and ``device`` has no native bf16 kernels: the
    run is correct but its training step can be many times slower than in fp32 (:func:`bf16_matmul_native`)."""
    if precision == "bf16" and not bf16_matmul_native(device):
        warnings.warn(f"bf16 autocast on a {device.type} without native bf16 matrix kernels (no AVX512 or AMX): "
                      "torch falls back to a reference GEMM, many times slower than float32; "
                      "train in fp32 here (precision=fp32)", PrecisionWarning, stacklevel=3)


def autocast(device: torch.device, precision: str = "fp32"):
    """The training step's precision context (``TrainConfig.precision``): "bf16": bf16 autocast on the
    device (CPU or CUDA; float32 master weights); "fp32": nothing."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision != "fp32":
        raise ValueError(f"precision must be fp32 or bf16, got {precision!r}")
    return contextlib.nullcontext()
