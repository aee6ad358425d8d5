"""Training-dynamics measures: gradient ranks, Hessian top eigenvalues, LLC.

The paper compares hidden-state RankMe against these as precursors of
capability acquisition. Each is computed at a checkpoint from the model and
a fixed set of (prompt, answer) examples; the loss throughout is
``geomcap.models.answer_loss`` (cross-entropy over the answer tokens,
nats/token, mean over a sequence's answer tokens).

Definitions (the docstrings below pin them; the "ranks" of one gradient
matrix differ by 10x between definitions, so the name alone is not enough):

* ``per_example_gradients`` -- G (N x P): row i is the gradient of example
  i's answer loss w.r.t. all P trainable parameters (tied weights once).
* ``gradient_effective_rank(G)`` -- erank of the singular values of G
  (uncentred).
* ``gradient_covariance_rank(G)`` -- erank of the eigenvalues of the centred
  covariance of G's rows.
* erank (Roy & Vetterli 2007): p_k = v_k / sum(v), erank = exp(-sum p_k log p_k),
  no epsilon; ``geomcap.geometry.effective_rank``.
* ``hessian_top_eigenvalues`` -- the k largest (algebraic) eigenvalues of the
  Hessian of the mean answer loss, by Lanczos (``scipy.sparse.linalg.eigsh``)
  on exact Hessian-vector products.
* ``local_learning_coefficient`` -- the SGLD estimate of Lau et al. (2023),
  llc = n_beta * (E_posterior[L_n(w)] - L_n(w*)), with devinterp 2.0.1 and
  the fixed hyperparameters ``LLC_DEFAULTS``.

Attention: the fused CPU SDPA kernel has neither a vmap batching rule nor a
double backward, so gradients and HVPs here run under the MATH kernel
(same function; on CPU it is also ~3x faster under vmap).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from contextlib import contextmanager
from functools import partial

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator, eigsh
from torch.func import functional_call, grad, vmap

from geomcap import measures
from geomcap.geometry import effective_rank
from geomcap.models import answer_loss


def _math_attention():
    """Context manager selecting the twice-differentiable, vmap-able SDPA kernel."""
    return torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH)


# --- per-example gradients ----------------------------------------------------

def per_example_gradients(model, prompts, answers, chunk_size: int | None = None) -> torch.Tensor:
    """Per-example gradients of the answer loss, G of shape (N, P), float32.

    Row i is d answer_loss(model, prompts[i], answers[i]) / d theta, flattened
    over the trainable parameters in ``model.parameters()`` order (a tied
    weight appears once, with the sum of its uses' gradients). P is
    ``geomcap.models.count_parameters(model)``.

    prompts: (N, Tp) int64; answers: (N, Ta) int64.
    chunk_size: examples per vmap slice (None: all N at once). The memory of
    one slice is ~ chunk_size x (activations + P floats); lower it for big models.
    Uses torch.func.functional_call + vmap(grad); the model is not modified.
    """
    named = dict(model.named_parameters())  # tied weights appear once
    trainable = {k: v.detach() for k, v in named.items() if v.requires_grad}
    frozen = {k: v.detach() for k, v in named.items() if not v.requires_grad}
    frozen.update({k: v.detach() for k, v in model.named_buffers()})

    def loss_one(params, p, a):
        state = {**params, **frozen}
        fn = lambda idx, return_hidden=False: functional_call(  # noqa: E731
            model, state, (idx,), {"return_hidden": return_hidden})
        return answer_loss(fn, p[None], a[None])

    with _math_attention():
        grads = vmap(grad(loss_one), in_dims=(None, 0, 0), chunk_size=chunk_size)(
            trainable, prompts, answers)
    N = prompts.shape[0]
    return torch.cat([grads[k].reshape(N, -1) for k in trainable], dim=1).float()


# --- ranks of the gradient matrix ---------------------------------------------

def _gram64(G, centre: bool, block: int = 1 << 16) -> tuple[np.ndarray, float]:
    """(G G^T (N, N) in float64 with G's columns optionally centred, ||G||_F^2 of
    the uncentred G); built in column blocks so that a float64 copy of the
    whole (N, P) matrix is never held."""
    G = G.detach().cpu() if isinstance(G, torch.Tensor) else torch.as_tensor(np.asarray(G))
    if G.ndim != 2:
        raise ValueError(f"expected a 2-D matrix (N, P), got shape {tuple(G.shape)}")
    N, P = G.shape
    K = torch.zeros(N, N, dtype=torch.float64)
    sumsq = 0.0
    for j in range(0, P, block):
        Gb = G[:, j:j + block].to(torch.float64)
        sumsq += float((Gb * Gb).sum())
        if centre:
            Gb = Gb - Gb.mean(dim=0, keepdim=True)
        K += Gb @ Gb.T
    return K.numpy(), sumsq


def _gram_eigenvalues(K: np.ndarray, scale: float | None = None) -> np.ndarray:
    """Eigenvalues of a PSD Gram matrix, with round-off set to exactly 0.

    Eigenvalues below N * eps64 * scale are float64 round-off (the usual
    numerical-rank tolerance; ``scale`` is the largest eigenvalue by default,
    for a centred matrix ||G||_F^2, the size of the numbers the centring cancelled).
    Zeroing them makes an exactly rank-r matrix give an erank of r values only.
    """
    ev = np.linalg.eigvalsh(K)
    if scale is None:
        scale = ev.max(initial=0.0)
    ev[ev <= K.shape[0] * np.finfo(np.float64).eps * scale] = 0.0
    return ev


def gradient_effective_rank(G) -> float:
    """erank of the singular values s_k of the per-example gradient matrix G (N, P), uncentred.

    erank = exp(-sum_k p_k log p_k), p_k = s_k / sum(s) (Roy & Vetterli 2007).
    Computed as s_k = sqrt(eigenvalues of G G^T) in float64 (N x N instead of
    an SVD of N x P); eigenvalues below N * eps64 * max are set to 0.
    Range [1, min(N, P)]; NaN for G = 0.
    """
    K, _ = _gram64(G, centre=False)
    ev = _gram_eigenvalues(K)
    if not ev.any():
        return float("nan")
    return effective_rank(np.sqrt(ev))


def gradient_covariance_rank(G) -> float:
    """erank of the eigenvalues (not their square roots) of the centred covariance of G's rows.

    C = (G - mean_rows)^T (G - mean_rows) / (N - 1), a P x P matrix; its
    nonzero eigenvalues are those of the centred N x N Gram matrix, which is
    what is diagonalised (float64; eigenvalues below N * eps64 * ||G||_F^2,
    round-off of the centring, set to 0).
    The 1/(N-1) does not change erank. Range [1, min(N - 1, P)]. NaN when the
    covariance is zero (all rows identical, or N = 1).
    """
    K, sumsq = _gram64(G, centre=True)
    ev = _gram_eigenvalues(K, scale=sumsq)
    if not ev.any():
        return float("nan")
    return effective_rank(ev)


# --- Hessian ------------------------------------------------------------------

def _hvp_operator(loss_fn, params: list[torch.Tensor]):
    """(LinearOperator v -> H v on flat float64 vectors, n), or (None, n) when the loss is at most
    linear in ``params`` (H = 0). The gradient is built once with create_graph=True and each HVP
    is one backward of g . v through that graph."""
    n = sum(p.numel() for p in params)

    def flat(tensors):  # None (a parameter the graph does not reach) -> zeros
        return torch.cat([(torch.zeros_like(p) if t is None else t).reshape(-1)
                          for t, p in zip(tensors, params)])

    g_flat = flat(torch.autograd.grad(loss_fn(), params, create_graph=True, allow_unused=True))
    if not g_flat.requires_grad:
        return None, n
    dtype, device = g_flat.dtype, g_flat.device

    def hvp(v: np.ndarray) -> np.ndarray:
        v_t = torch.as_tensor(np.ascontiguousarray(v).ravel(), dtype=dtype, device=device)
        Hv = torch.autograd.grad(g_flat, params, grad_outputs=v_t, retain_graph=True, allow_unused=True)
        return flat(Hv).detach().cpu().double().numpy()

    return LinearOperator((n, n), matvec=hvp, dtype=np.float64), n


def hessian_top_eigenvalues_of(loss_fn, params: list[torch.Tensor], k: int = 1, tol: float = 1e-3,
                               maxiter: int | None = None, seed: int = 0) -> np.ndarray:
    """The k largest (algebraic) eigenvalues of the Hessian of ``loss_fn()`` w.r.t. ``params``.

    loss_fn: () -> scalar tensor, computed from ``params`` (each requires_grad).
    Returns (k,) float64, descending, in units of loss / param^2.

    Lanczos (``eigsh``, which="LA") on exact Hessian-vector products: the
    gradient is built once with create_graph=True and each HVP is one
    backward of g . v through that graph. ``tol`` is eigsh's relative
    accuracy; the start vector is a standard normal from ``seed``, so the
    result is deterministic. Needs k < number of parameters.
    """
    params = list(params)
    n = sum(p.numel() for p in params)
    if not 0 < k < n:
        raise ValueError(f"need 0 < k < number of parameters ({n}), got k={k}")
    op, n = _hvp_operator(loss_fn, params)
    if op is None:
        return np.zeros(k)
    v0 = np.random.default_rng(seed).standard_normal(n)
    vals = eigsh(op, k=k, which="LA", tol=tol, maxiter=maxiter, v0=v0, return_eigenvectors=False)
    return np.sort(vals)[::-1].copy()


def hessian_top_eigenvalues(model, prompts, answers, k: int = 1, tol: float = 1e-3,
                            maxiter: int | None = None, seed: int = 0) -> np.ndarray:
    """The k largest eigenvalues of the Hessian of the mean answer loss, (k,) descending.

    The loss is ``answer_loss(model, prompts, answers)`` (mean over the N
    examples; nats/token), the Hessian is w.r.t. all trainable parameters
    (a tied weight once), evaluated at the model's current weights; see
    ``hessian_top_eigenvalues_of`` for the method. prompts (N, Tp), answers
    (N, Ta) int64. All N examples go through one forward pass.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    with _math_attention():  # the fused CPU kernel has no double backward
        return hessian_top_eigenvalues_of(lambda: answer_loss(model, prompts, answers), params,
                                          k=k, tol=tol, maxiter=maxiter, seed=seed)


def hessian_top_eigenpair(model, prompts, answers, v0: np.ndarray | None = None, tol: float = 1e-3,
                          seed: int = 0) -> dict:
    """The largest Hessian eigenvalue of the mean answer loss, with its eigenvector and health.

    ``v0`` (P,) starts Lanczos, e.g. the previous checkpoint's eigenvector: the top eigenvector
    turns slowly between nearby checkpoints, so a warm start needs fewer Hessian-vector
    products (``matvecs``) for the same ``tol``. Without it the start is a standard normal from
    ``seed``. Returns a dict: ``value`` (loss / param^2), ``vector`` (P,) float64 unit norm,
    ``residual`` = ``||H v - value v|| / |value|`` (Lanczos's convergence, computed with one more
    Hessian-vector product: ~tol when converged; NaN when value = 0), ``matvecs``.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    with _math_attention():  # the fused CPU kernel has no double backward
        op, n = _hvp_operator(lambda: answer_loss(model, prompts, answers), params)
        if op is None:
            return {"value": 0.0, "vector": np.zeros(n), "residual": float("nan"), "matvecs": 0}
        if v0 is None:
            v0 = np.random.default_rng(seed).standard_normal(n)
        elif np.shape(v0) != (n,):
            raise ValueError(f"v0 must have shape ({n},), got {np.shape(v0)}")
        calls = []
        counted = LinearOperator((n, n), matvec=lambda v: calls.append(1) or op.matvec(v), dtype=np.float64)
        vals, vecs = eigsh(counted, k=1, which="LA", tol=tol, v0=np.asarray(v0, dtype=np.float64))
        value, vector = float(vals[0]), vecs[:, 0] / np.linalg.norm(vecs[:, 0])
        residual = (float(np.linalg.norm(op.matvec(vector) - value * vector)) / abs(value)
                    if value != 0 else float("nan"))
    return {"value": value, "vector": vector, "residual": residual, "matvecs": len(calls)}


# --- local learning coefficient -------------------------------------------------

# Fixed SGLD hyperparameters. They set the scale of the estimate, so they are
# held fixed across checkpoints: only same-hyperparameter LLCs are comparable.
# Calibrated on the 405k model (~0.41M params) with 256..3000 examples, at
# initialisation (loss ~ chance, top Hessian eigenvalue ~100) and after
# training (loss ~1e-3, top eigenvalue ~0.01..0.2):
# * lr = 1e-4 with localization = 100 (a common devinterp setting) let chains
#   on trained checkpoints climb to near-chance loss (not local at all).
# * the SGLD step is stable while lr * (n_beta * h_max + gamma) / 2 < 2; with
#   h_max ~ 100 at init, lr = 3e-5 keeps that below ~1 up to n ~ 4000
#   examples (n_beta ~ 480), where lr = 1e-4 is already at ~1.8.
# * lr * gamma ~ 0.1 makes the pull toward w* relax in ~2 / (lr gamma) ~ 20
#   steps, so the loss levels off well inside the 50 burn-in steps, and the
#   stationary spread it allows in flat directions, 1 / sqrt(gamma) ~ 0.018
#   per coordinate, stays below the weights' init std (0.02).
# With few examples, n_beta * h << gamma in most directions of a trained
# model, so the estimate is localisation-dominated (it tracks
# n_beta * tr(H) / (2 gamma) more than a true LLC): read it as a relative,
# fixed-hyperparameter measure.
#: the LLC's SGLD hyperparameters (see the comment above); a run's ``llc_chains`` and ``llc_draws``
#: replace ``num_chains`` and ``num_draws``
LLC_DEFAULTS: dict = {
    "lr": 3e-5,                 # SGLD step epsilon (noise std per step sqrt(lr) ~ 0.0055)
    "localization": 3000.0,     # gamma, pull toward the checkpoint's weights w*
    "n_beta": "n/log(n)",       # Watanabe's beta* = 1/log n, times n = number of examples; or a number
    "num_chains": 4,
    "num_draws": 200,           # SGLD steps per chain, all recorded (devinterp burn-in 0, so
                                # loss_trace shows the climb from w*)
    "burn_in": 50,              # leading steps per chain dropped by llc_post_burnin
    "batch_size": 32,           # runtime is linear in it: 4 x 200 steps ~ 10 s for 405k on 2 cores
    # batches averaged for init_loss = L_n(w*); "epoch" = n // batch_size, one
    # pass over the data in the same shuffled order the chains then cycle
    # through, so init_loss and the trace average over the same examples (a
    # few batches can be off by more than the whole excess loss of a trained model)
    "num_init_loss_batches": "epoch",
}

LLC_DRIFT_TOLERANCE = measures.LLC_DRIFT_TOLERANCE  # defined beside the measures, where a reader of the store finds it


@contextmanager
def _quiet_devinterp():
    """Silence devinterp's per-chain tqdm bars and skip its per-chain gc.collect().

    The bars come from its module-level ``trange`` (TQDM_DISABLE is read only
    when tqdm is first imported, so the name is swapped instead). The
    gc.collect() + cuda.empty_cache() around each chain only frees GPU memory,
    and costs ~0.25 s per call in a process holding torch + datasets + xarray
    (~2 s of a ~12 s estimate); on CUDA it is left in place.
    """
    from devinterp.slt import sampler
    saved = sampler.trange, sampler._gc_and_empty_cache
    sampler.trange = partial(saved[0], disable=True)
    if not torch.cuda.is_available():
        sampler._gc_and_empty_cache = lambda: None
    try:
        yield
    finally:
        sampler.trange, sampler._gc_and_empty_cache = saved


def _resolve_n_beta(rule, n: int) -> float:
    if rule == "n/log(n)":
        if n < 2:
            raise ValueError(f"n/log(n) needs n >= 2 examples, got {n}")
        return n / math.log(n)
    return float(rule)


def local_learning_coefficient_of(model, example_loss, n: int, seed: int = 0, **overrides) -> dict:
    """SGLD estimate of the local learning coefficient at the model's current weights w*.

    example_loss(model, idx) -> (B,) per-example losses (the negative
    log-likelihood whose average L_n is the empirical loss) of the examples
    with indices idx, a (B,) int64 tensor into 0..n-1. Any nn.Module works:
    this is the generic core of ``local_learning_coefficient``.

    The dataset handed to devinterp is the indices: row i of ``input_ids`` is
    [i, i] (length 2, one "next token"), and the per-token loss is the
    per-example loss, shape (B, 1).

    Hyperparameters are ``LLC_DEFAULTS`` updated by ``overrides`` (same keys).
    ``seed`` is devinterp's init_seed (chain c uses seed + c for its noise and
    shuffling), so results are reproducible.

    Returns a dict::

      llc_mean, llc_std: devinterp's estimate, n_beta * (mean loss over all
        steps, burn-in included - init_loss), mean and std (ddof 0) over chains
        (devinterp skips NaN steps of a failed chain: check n_failed_chains).
      llc_post_burnin: n_beta * (mean of loss_trace[:, burn_in:] - init_loss).
      init_loss: L_n(w*) as devinterp measured it (mean over
        num_init_loss_batches batches; by default one pass over the data).
      loss_trace: (num_chains, num_draws) float64, the minibatch loss at each
        SGLD step (nats/token); NaN after a chain failed (non-finite loss).
      trace_drift: (mean of the last quarter - mean of the first quarter of the
        post-burn-in, chain-averaged trace) / |mean post-burn-in loss - init_loss|,
        the fraction by which the excess loss still moved inside the window
        used for the estimate; |drift| > LLC_DRIFT_TOLERANCE (0.2) means the
        chains did not level off and the number is not trustworthy. It also
        carries sampling noise, larger when the excess loss has few effective
        degrees of freedom (~0.2 for a 4-parameter regression; |drift| ~0.03-0.07
        on 405k checkpoints at LLC_DEFAULTS) or when the excess is comparable
        to the minibatch noise of the loss (e.g. at initialisation, which is
        not a minimum: the chains also drift downhill there).
      trace_flat: |trace_drift| <= LLC_DRIFT_TOLERANCE and no chain failed.
      n_failed_chains: chains whose loss went non-finite (devinterp stops them
        with a warning); llc_post_burnin is then NaN.
      n: number of examples; n_beta: the inverse temperature used.

    The model's weights, device and train/eval mode are unchanged (devinterp
    samples on a deepcopy and restores the mode after computing init_loss).
    """
    from datasets import Dataset
    from devinterp.slt.llc import llc

    unknown = set(overrides) - set(LLC_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown LLC hyperparameters {sorted(unknown)}; known: {sorted(LLC_DEFAULTS)}")
    hp = {**LLC_DEFAULTS, **overrides}
    n = int(n)
    n_beta = _resolve_n_beta(hp["n_beta"], n)
    if hp["batch_size"] > n:
        raise ValueError(f"batch_size={hp['batch_size']} exceeds the {n} examples")
    init_batches = hp["num_init_loss_batches"]
    init_batches = n // hp["batch_size"] if init_batches == "epoch" else int(init_batches)
    if not 0 <= hp["burn_in"] < hp["num_draws"]:
        raise ValueError(f"need 0 <= burn_in < num_draws, got {hp['burn_in']} and {hp['num_draws']}")

    idx = torch.arange(n, dtype=torch.int64)
    ds = Dataset.from_dict({"input_ids": torch.stack([idx, idx], dim=1).tolist()}).with_format("torch")

    def loss_fn(m, ids):
        return example_loss(m, ids[:, 0]).unsqueeze(1)  # (B, T-1) with T = 2

    was_training = model.training
    # a fresh directory per call: devinterp returns a cached result for an
    # existing output_path with the same sampler config, even if the weights changed
    tmp = tempfile.mkdtemp(prefix="geomcap_llc_")
    try:
        with _quiet_devinterp():
            out = llc(model, ds, observables={}, lr=hp["lr"], n_beta=n_beta,
                      localization=hp["localization"], num_chains=hp["num_chains"],
                      num_draws=hp["num_draws"], num_burnin_steps=0,
                      batch_size=hp["batch_size"], num_init_loss_batches=init_batches,
                      init_seed=seed, loss_fn=loss_fn, device=str(next(model.parameters()).device),
                      output_path=f"{tmp}/samples.zarr")
            out = out.load()  # read everything before the directory goes
            llc_mean, llc_std = float(out.llc_mean), float(out.llc_std)
            init_loss = float(out.init_loss)
            trace = np.asarray(out.loss_trace.transpose("chain", "step").values, dtype=np.float64)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        model.train(was_training)

    post = trace[:, hp["burn_in"]:]
    excess = float(post.mean()) - init_loss
    curve = post.mean(axis=0)
    q = max(1, len(curve) // 4)
    drift = (float(curve[-q:].mean()) - float(curve[:q].mean())) / (abs(excess) + 1e-12)
    return {
        "llc_mean": llc_mean,
        "llc_std": llc_std,
        "llc_post_burnin": n_beta * excess,
        "init_loss": init_loss,
        "loss_trace": trace,
        "trace_drift": drift,
        "trace_flat": bool(np.isfinite(trace).all() and abs(drift) <= LLC_DRIFT_TOLERANCE),
        "n_failed_chains": int((~np.isfinite(trace)).any(axis=1).sum()),
        "n": n,
        "n_beta": n_beta,
    }


def local_learning_coefficient(model, prompts, answers, seed: int = 0, **overrides) -> dict:
    """SGLD estimate of the LLC of the answer loss at the model's current weights.

    prompts (N, Tp), answers (N, Ta) int64; the empirical loss is
    L_n(w) = mean_i answer_loss_i(w) (nats/token, per-example mean over answer
    tokens), n = N, n_beta = n / log n by default. Hyperparameters:
    ``LLC_DEFAULTS`` updated by ``overrides``. Returns the dict described in
    ``local_learning_coefficient_of`` (llc_mean, llc_std, llc_post_burnin,
    init_loss, loss_trace (chains, draws), trace_drift, trace_flat,
    n_failed_chains, n, n_beta).
    """
    device = next(model.parameters()).device
    prompts, answers = torch.as_tensor(prompts, device=device), torch.as_tensor(answers, device=device)
    if prompts.shape[0] != answers.shape[0]:
        raise ValueError(f"{prompts.shape[0]} prompts but {answers.shape[0]} answers")

    def example_loss(m, idx):
        idx = idx.to(prompts.device)
        return answer_loss(m, prompts[idx], answers[idx], reduction="none")

    return local_learning_coefficient_of(model, example_loss, prompts.shape[0], seed=seed, **overrides)
