"""Representation geometry: RankMe and effective rank.

Definitions (the book's methods page cites these functions):

* ``effective_rank(values)`` -- Roy & Vetterli (2007): for nonnegative values
  v_k, p_k = v_k / sum(v), erank = exp(-sum_k p_k log p_k), terms with p_k = 0
  contributing 0. No epsilon.
* ``rankme(Z, eps=1e-7)`` -- Garrido et al. (ICML 2023): for a matrix Z
  (N samples x d) with singular values s_k (not squared, uncentred Z),
  p_k = s_k / sum(s) + eps and RankMe = exp(-sum_k p_k log p_k), accumulated in
  float64. It lies in [1, min(N, d)] (up to O(eps) terms). A zero matrix has
  no spectrum: RankMe is NaN.

``centre=True`` subtracts the column means first -- a different quantity
(the dimension of the spread around the mean, not of the raw states),
offered only as an explicit option for the sensitivity analysis.
"""

from __future__ import annotations

import numpy as np
import torch


def _as_float64_tensor(Z) -> torch.Tensor:
    if isinstance(Z, torch.Tensor):
        return Z.detach().to(device="cpu", dtype=torch.float64)
    return torch.as_tensor(np.asarray(Z), dtype=torch.float64)


def singular_values(Z, centre: bool = False) -> np.ndarray:
    """Singular values of Z (N, d) in float64, descending, length min(N, d).

    Small matrices use an SVD (exact, and fast below a few hundred columns).
    Large, elongated ones (short side >= 256, ratio >= 4) use the small Gram
    matrix (eigvalsh, then sqrt): several times faster there, and the
    singular values that carry RankMe's mass agree to ~1e-12 relative; the
    ones below ~1e-8 x the largest come out as round-off of that size.
    """
    return singular_values_torch(_as_float64_tensor(Z), centre=centre).cpu().numpy()


def singular_values_torch(Z: torch.Tensor, centre: bool = False) -> torch.Tensor:
    """:func:`singular_values` where Z lies: a float64 tensor (min(N, d),) on Z's device."""
    Z = Z.detach().to(torch.float64)
    if Z.ndim != 2:
        raise ValueError(f"expected a 2-D matrix (N, d), got shape {tuple(Z.shape)}")
    if centre:
        Z = Z - Z.mean(dim=0, keepdim=True)
    n, d = Z.shape
    if min(n, d) == 0:
        return Z.new_zeros(0)
    if min(n, d) >= 256 and max(n, d) >= 4 * min(n, d):
        gram = Z.T @ Z if n >= d else Z @ Z.T
        ev = torch.linalg.eigvalsh(gram).clamp_min(0.0)
        return ev.sqrt().flip(0)
    return torch.linalg.svdvals(Z)


def rankme_torch(Z: torch.Tensor, eps: float = 1e-7, centre: bool = False) -> torch.Tensor:
    """:func:`rankme` computed on Z's device in float64 -> a 0-dim float64 tensor there.

    Nothing is copied to the host (no synchronisation): a caller that records many
    layers stacks the results and copies the scalars back once. NaN as :func:`rankme`.
    """
    s = singular_values_torch(Z, centre=centre)
    total = s.sum()
    if s.numel() == 0:
        return total.new_tensor(float("nan"))
    p = s / total + eps
    entropy = -torch.where(p > 0, p * torch.log(p), torch.zeros_like(p)).sum()  # 0 log 0 = 0
    valid = torch.isfinite(total) & (total > 0)
    return torch.where(valid, torch.exp(entropy), total.new_tensor(float("nan")))


def mean_energy_share_torch(Z: torch.Tensor) -> torch.Tensor:
    """:func:`mean_energy_share` computed on Z's device in float64 -> a 0-dim float64 tensor there."""
    Z = Z.detach().to(torch.float64)
    if Z.ndim != 2:
        raise ValueError(f"expected a 2-D matrix (N, d), got shape {tuple(Z.shape)}")
    total = (Z * Z).sum()
    if Z.shape[0] == 0:
        return total.new_tensor(float("nan"))
    mean = Z.mean(dim=0)
    share = Z.shape[0] * (mean * mean).sum() / total
    return torch.where(torch.isfinite(total) & (total > 0), share, total.new_tensor(float("nan")))


def effective_rank(values) -> float:
    """exp(Shannon entropy) of ``values / values.sum()`` (Roy & Vetterli 2007).

    values: 1-D nonnegative (singular values or eigenvalues). Returns NaN
    when they sum to 0. Negative values (round-off in eigenvalues) are clipped to 0.
    """
    v = np.clip(np.asarray(values, dtype=np.float64).ravel(), 0.0, None)
    total = v.sum()
    if not np.isfinite(total) or total <= 0:
        return float("nan")
    p = v[v > 0] / total
    return float(np.exp(-np.sum(p * np.log(p))))


def rankme(Z, eps: float = 1e-7, centre: bool = False) -> float:
    """RankMe of Z (N, d), numpy array or torch tensor; see the module docstring."""
    s = singular_values(Z, centre=centre)
    total = s.sum()
    if s.size == 0 or not np.isfinite(total) or total <= 0:
        return float("nan")
    p = s / total + eps
    p = p[p > 0]  # 0 log 0 = 0 (only reachable with eps=0)
    return float(np.exp(-np.sum(p * np.log(p))))


def rankme_by_layer(hidden, eps: float = 1e-7, centre: bool = False) -> np.ndarray:
    """RankMe of each layer's (N, d) matrix: hidden is a sequence of L such matrices -> (L,)."""
    return np.array([rankme(h, eps=eps, centre=centre) for h in hidden], dtype=np.float64)


def mean_energy_share(Z) -> float:
    """Share of Z's energy in its mean row: N ||mean||^2 / ||Z||_F^2, in [0, 1].

    Z: (N, d), numpy array or torch tensor, accumulated in float64. Since
    ||Z||_F^2 = N ||mean||^2 + ||Z - mean||_F^2, the share is 1 when every row
    is the same vector and 0 when the rows are centred. Uncentred RankMe at one
    position is dominated by this shared direction when the share is near 1.
    A zero (or empty) matrix has no energy: NaN.
    """
    Z = _as_float64_tensor(Z)
    if Z.ndim != 2:
        raise ValueError(f"expected a 2-D matrix (N, d), got shape {tuple(Z.shape)}")
    total = float((Z * Z).sum())
    if Z.numel() == 0 or not np.isfinite(total) or total <= 0:
        return float("nan")
    mean = Z.mean(dim=0)
    return float(Z.shape[0] * (mean * mean).sum() / total)
