"""Known-answer and property tests for geomcap.dynamics."""

import tempfile

import numpy as np
import pytest
import torch

from geomcap import dynamics as D
from geomcap.geometry import effective_rank
from geomcap.models import GPT, ModelConfig, answer_loss, count_parameters

V, TP, TA = 20, 5, 3


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return GPT(ModelConfig(n_layer=1, d_model=32, n_head=2, block_size=16), V)


def random_data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (n, TP), generator=g), torch.randint(0, V, (n, TA), generator=g)


def svd_erank(G):
    return effective_rank(np.linalg.svd(np.asarray(G, dtype=np.float64), compute_uv=False))


# --- gradient ranks -------------------------------------------------------------

def test_gradient_effective_rank_orthogonal_rows_equal_norm_is_n():
    Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((40, 12)))  # (40, 12) orthonormal columns
    G = 3.0 * Q.T  # 12 orthogonal rows of norm 3
    assert D.gradient_effective_rank(G) == pytest.approx(12.0, rel=1e-10)


def test_gradient_effective_rank_rank_one_is_one():
    rng = np.random.default_rng(1)
    G = np.outer(rng.standard_normal(15), rng.standard_normal(50))  # rows: different multiples of one vector
    assert D.gradient_effective_rank(G) == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("shape", [(20, 50), (50, 20), (30, 30)])
def test_gradient_effective_rank_matches_svd(shape):
    G = np.random.default_rng(2).standard_normal(shape) * np.linspace(0.1, 3, shape[1])
    assert D.gradient_effective_rank(G) == pytest.approx(svd_erank(G), rel=1e-8)


def test_gradient_effective_rank_float32_tensor_and_zero():
    G = torch.randn(16, 300, generator=torch.Generator().manual_seed(3))
    assert D.gradient_effective_rank(G) == pytest.approx(svd_erank(G.double().numpy()), rel=1e-8)
    assert np.isnan(D.gradient_effective_rank(torch.zeros(4, 10)))


@pytest.mark.parametrize("shape", [(25, 6), (10, 30)])
def test_gradient_covariance_rank_matches_numpy_cov(shape):
    G = np.random.default_rng(4).standard_normal(shape) * np.linspace(0.2, 2, shape[1]) + 5.0
    ref = effective_rank(np.clip(np.linalg.eigvalsh(np.cov(G.T)), 0, None))
    assert D.gradient_covariance_rank(G) == pytest.approx(ref, rel=1e-8)


def test_gradient_covariance_rank_ignores_the_mean_gradient():
    G = np.random.default_rng(5).standard_normal((12, 40))
    shifted = G + 100.0 * np.random.default_rng(6).standard_normal(40)  # same offset on every row
    assert D.gradient_covariance_rank(shifted) == pytest.approx(D.gradient_covariance_rank(G), rel=1e-8)
    # while the uncentred rank sees the common direction
    assert D.gradient_effective_rank(shifted) < D.gradient_effective_rank(G)


def test_gradient_covariance_rank_is_nan_without_spread():
    row = np.random.default_rng(7).standard_normal(30)
    assert np.isnan(D.gradient_covariance_rank(np.tile(row, (8, 1))))  # identical rows: covariance 0
    assert np.isnan(D.gradient_covariance_rank(row[None]))  # one example


# --- per-example gradients -----------------------------------------------------

def loop_gradients(model, prompts, answers):
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for i in range(len(prompts)):
        g = torch.autograd.grad(answer_loss(model, prompts[i:i + 1], answers[i:i + 1]), params)
        rows.append(torch.cat([x.reshape(-1) for x in g]))
    return torch.stack(rows)


def test_per_example_gradients_match_autograd_loop():
    model = tiny_model()
    prompts, answers = random_data(6)
    G = D.per_example_gradients(model, prompts, answers)
    assert G.shape == (6, count_parameters(model)) and G.dtype == torch.float32
    torch.testing.assert_close(G, loop_gradients(model, prompts, answers), rtol=1e-4, atol=1e-6)
    G2 = D.per_example_gradients(model, prompts, answers, chunk_size=4)
    torch.testing.assert_close(G2, G, rtol=1e-5, atol=1e-7)


def test_per_example_gradients_skip_frozen_parameters():
    model = tiny_model()
    model.pos_emb.weight.requires_grad_(False)
    prompts, answers = random_data(4, seed=1)
    G = D.per_example_gradients(model, prompts, answers)
    assert G.shape == (4, count_parameters(model))
    torch.testing.assert_close(G, loop_gradients(model, prompts, answers), rtol=1e-4, atol=1e-6)


# --- Hessian ---------------------------------------------------------------------

def test_hessian_top_eigenvalues_of_quadratic():
    rng = np.random.default_rng(0)
    spectrum = np.concatenate([[10.0, 7.0, 5.5], rng.uniform(-4, 4, 27)])
    Q, _ = np.linalg.qr(rng.standard_normal((30, 30)))
    A = torch.tensor((Q * spectrum) @ Q.T)
    x = torch.randn(30, dtype=torch.float64, requires_grad=True)
    top = D.hessian_top_eigenvalues_of(lambda: 0.5 * x @ A @ x, [x], k=3, tol=1e-10)
    np.testing.assert_allclose(top, [10.0, 7.0, 5.5], rtol=1e-8)


def test_hessian_top_eigenvalues_of_least_squares_with_two_tensors():
    g = torch.Generator().manual_seed(0)
    N, d = 50, 8
    X = torch.randn(N, d, generator=g, dtype=torch.float64) * torch.linspace(0.5, 2, d, dtype=torch.float64)
    y = torch.randn(N, generator=g, dtype=torch.float64)
    w1 = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    w2 = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    loss = lambda: 0.5 * ((X[:, :5] @ w1 + X[:, 5:] @ w2 - y) ** 2).mean()  # noqa: E731
    top = D.hessian_top_eigenvalues_of(loss, [w1, w2], k=2, tol=1e-10)
    ref = np.sort(np.linalg.eigvalsh((X.T @ X / N).numpy()))[::-1][:2]
    np.testing.assert_allclose(top, ref, rtol=1e-8)


def test_hessian_top_eigenvalues_of_handles_unused_and_linear_parameters():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(3, dtype=torch.float64, requires_grad=True)  # enters linearly: zero Hessian block
    unused = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    top = D.hessian_top_eigenvalues_of(lambda: 2.0 * (x ** 2).sum() + b.sum(), [x, b, unused], k=2, tol=1e-10)
    np.testing.assert_allclose(top, [4.0, 4.0], rtol=1e-8)
    np.testing.assert_array_equal(D.hessian_top_eigenvalues_of(lambda: b.sum(), [b], k=1), [0.0])


def test_hessian_top_eigenvalues_tiny_transformer():
    model = tiny_model()
    prompts, answers = random_data(32)
    top = D.hessian_top_eigenvalues(model, prompts, answers, k=2)
    assert top.shape == (2,) and np.isfinite(top).all() and top[0] >= top[1]
    np.testing.assert_allclose(D.hessian_top_eigenvalues(model, prompts, answers, k=2), top, rtol=1e-6)

    # property: lambda_max >= Rayleigh quotient v^T H v / v^T v of any direction
    params = [p for p in model.parameters() if p.requires_grad]
    v = [torch.randn(p.shape, generator=torch.Generator().manual_seed(i)) for i, p in enumerate(params)]
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        grads = torch.autograd.grad(answer_loss(model, prompts, answers), params, create_graph=True)
        Hv = torch.autograd.grad(grads, params, grad_outputs=v)
    rayleigh = sum((a * b).sum() for a, b in zip(v, Hv)).item() / sum((a * a).sum() for a in v).item()
    assert top[0] >= rayleigh
    assert all(p.grad is None for p in model.parameters())  # no gradients left behind


# --- local learning coefficient ----------------------------------------------------

@pytest.mark.parametrize("d", [4, 16])
def test_llc_of_linear_regression_is_half_the_dimension(d):
    # A regular model at its minimum: the posterior is Gaussian and LLC = d / 2.
    # lr * n_beta * h ~ 0.15 (a ~4% discretisation bias), localization << n_beta * h,
    # and the batches tile the data, so init_loss (one epoch) is exactly L_n(w*).
    g = torch.Generator().manual_seed(d)
    n = 1000
    X = torch.randn(n, d, generator=g)
    y = X @ torch.randn(d, generator=g) + 0.1 * torch.randn(n, generator=g)
    w_star = torch.linalg.lstsq(X.double(), y.double()[:, None]).solution[:, 0].float()
    model = torch.nn.Linear(d, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(w_star[None])

    def example_loss(m, idx):
        return 0.5 * (m(X[idx])[:, 0] - y[idx]) ** 2

    # 8 chains x 400 steps (~1.5 s here): 4 x 200 leaves a ~15% chain-to-chain error at d = 4
    out = D.local_learning_coefficient_of(model, example_loss, n, lr=1e-3, localization=1.0,
                                          batch_size=100, num_chains=8, num_draws=400)
    assert out["llc_post_burnin"] == pytest.approx(d / 2, rel=0.15)
    assert out["llc_mean"] == pytest.approx(d / 2, rel=0.2)
    assert out["n"] == n and out["n_beta"] == pytest.approx(n / np.log(n))
    # with d = 4 the excess loss is 0.5 chi^2_4 / n_beta: |trace_drift| carries O(0.2) sampling noise
    assert abs(out["trace_drift"]) < 0.6 and out["n_failed_chains"] == 0
    assert torch.equal(model.weight[0], w_star)


FAST = dict(num_chains=2, num_draws=24, burn_in=8, batch_size=16)


def test_llc_tiny_transformer_contract():
    model = tiny_model()
    model.eval()
    prompts, answers = random_data(64)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = D.local_learning_coefficient(model, prompts, answers, **FAST)

    assert set(out) >= {"llc_mean", "llc_std", "llc_post_burnin", "init_loss", "loss_trace",
                        "trace_drift", "trace_flat", "n_failed_chains", "n", "n_beta"}
    assert out["loss_trace"].shape == (2, 24)
    for key in ("llc_mean", "llc_std", "llc_post_burnin", "init_loss", "trace_drift"):
        assert np.isfinite(out[key]), key
    assert out["n"] == 64 and out["n_beta"] == pytest.approx(64 / np.log(64))
    assert out["init_loss"] == pytest.approx(answer_loss(model, prompts, answers).item(), rel=0.2)
    # our post-burn-in estimate and devinterp's all-steps estimate, from the same trace
    tr = out["loss_trace"]
    nb, init = out["n_beta"], out["init_loss"]
    assert out["llc_post_burnin"] == pytest.approx(nb * (tr[:, 8:].mean() - init), rel=1e-6)
    assert out["llc_mean"] == pytest.approx(nb * (tr.mean() - init), rel=1e-3, abs=1e-4)

    # the model is untouched: weights, mode, no gradients
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not model.training
    assert all(p.grad is None for p in model.parameters())

    # seeded: the same call gives the same numbers
    again = D.local_learning_coefficient(model, prompts, answers, **FAST)
    np.testing.assert_array_equal(again["loss_trace"], out["loss_trace"])


def test_llc_sees_new_weights_not_a_cached_result():
    model = tiny_model()
    prompts, answers = random_data(64)
    first = D.local_learning_coefficient(model, prompts, answers, **FAST)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    second = D.local_learning_coefficient(model, prompts, answers, **FAST)
    assert second["init_loss"] != first["init_loss"]
    assert second["llc_mean"] != first["llc_mean"]
    assert model.training  # the mode it came in with


def test_llc_rejects_unknown_hyperparameters():
    model = tiny_model()
    prompts, answers = random_data(64)
    with pytest.raises(ValueError, match="unknown LLC hyperparameters"):
        D.local_learning_coefficient(model, prompts, answers, step_size=1e-3)
    with pytest.raises(ValueError, match="batch_size"):
        D.local_learning_coefficient(model, prompts[:8], answers[:8])


def test_llc_cleans_up_and_restores_devinterp(tmp_path, monkeypatch):
    from devinterp.slt import sampler
    saved = sampler.trange, sampler._gc_and_empty_cache
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = tiny_model()
    prompts, answers = random_data(64)
    D.local_learning_coefficient(model, prompts, answers, **FAST)
    assert list(tmp_path.iterdir()) == []  # the per-call output directory is gone
    assert (sampler.trange, sampler._gc_and_empty_cache) == saved


def test_hessian_top_eigenpair_warm_start_and_health():
    model = tiny_model()
    prompts, answers = random_data(32)
    cold = D.hessian_top_eigenpair(model, prompts, answers, tol=1e-8, seed=1)
    reference = D.hessian_top_eigenvalues(model, prompts, answers, k=1, tol=1e-10)[0]
    assert cold["value"] == pytest.approx(reference, rel=1e-6)
    assert cold["residual"] < 1e-3 and np.linalg.norm(cold["vector"]) == pytest.approx(1.0)
    # from the converged eigenvector Lanczos needs far fewer Hessian-vector products
    warm = D.hessian_top_eigenpair(model, prompts, answers, v0=cold["vector"], tol=1e-8)
    assert warm["value"] == pytest.approx(reference, rel=1e-6)
    assert warm["matvecs"] < cold["matvecs"]
    with pytest.raises(ValueError, match="v0 must have shape"):
        D.hessian_top_eigenpair(model, prompts, answers, v0=np.ones(3))
