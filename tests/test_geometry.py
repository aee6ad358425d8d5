"""RankMe and effective rank against analytic spectra."""
import numpy as np
import pytest
import torch

from geomcap.geometry import effective_rank, mean_energy_share, rankme, rankme_by_layer, singular_values


def reference_rankme(Z, eps=1e-7):
    s = np.linalg.svd(np.asarray(Z, dtype=np.float64), compute_uv=False)
    p = s / s.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def matrix_with_singular_values(s, n, d, seed=0):
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n, len(s))))
    V, _ = np.linalg.qr(rng.standard_normal((d, len(s))))
    return U @ np.diag(s) @ V.T


def test_equal_singular_values_give_full_rank():
    Z = matrix_with_singular_values(np.ones(16), n=64, d=16)
    assert rankme(Z) == pytest.approx(16, rel=1e-4)
    assert effective_rank(np.ones(16)) == pytest.approx(16, rel=1e-12)


def test_rank_one_matrix_has_rankme_one():
    rng = np.random.default_rng(1)
    Z = np.outer(rng.standard_normal(200), rng.standard_normal(32))
    # eps=1e-7 adds ~min(N,d) * 1e-7 * 16 to the entropy: exactly 1 up to that
    assert rankme(Z) == pytest.approx(1.0, abs=1e-3)
    assert rankme(Z, eps=0.0) == pytest.approx(1.0, abs=1e-9)


def test_known_spectrum_entropy():
    s = np.array([4.0, 2.0, 1.0, 1.0])
    p = s / s.sum()
    expected = np.exp(-np.sum(p * np.log(p)))
    assert effective_rank(s) == pytest.approx(expected, rel=1e-12)
    Z = matrix_with_singular_values(s, n=50, d=10)
    assert rankme(Z, eps=0.0) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("shape", [(512, 128), (128, 512), (300, 200), (4096, 64), (64, 64)])
def test_matches_full_svd(shape):
    rng = np.random.default_rng(2)
    Z = rng.standard_normal(shape) @ np.diag(np.linspace(0.01, 3, shape[1]))
    assert rankme(Z) == pytest.approx(reference_rankme(Z), abs=1e-6)


def test_ill_conditioned_matrix_gram_path_is_accurate():
    s = np.logspace(0, -8, 64)
    Z = matrix_with_singular_values(s, n=2048, d=64, seed=3)
    assert rankme(Z) == pytest.approx(reference_rankme(Z), abs=1e-6)
    np.testing.assert_allclose(singular_values(Z)[:10], s[:10], rtol=1e-8)


def test_bounds_and_input_types():
    rng = np.random.default_rng(4)
    Z = rng.standard_normal((40, 12))
    value = rankme(Z)
    assert 1.0 <= value <= 12.0 + 1e-3
    assert rankme(torch.tensor(Z, dtype=torch.float32)) == pytest.approx(value, rel=1e-5)


def test_zero_matrix_is_nan_and_bad_shape_raises():
    assert np.isnan(rankme(np.zeros((10, 5))))
    assert np.isnan(effective_rank(np.zeros(3)))
    with pytest.raises(ValueError, match="2-D"):
        rankme(np.ones(5))


def test_centring_removes_a_shared_component():
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((500, 20)) * 0.01 + 10.0  # a big common mean, small spread
    assert rankme(Z) < 1.1          # uncentred: one dominant direction (the mean)
    assert rankme(Z, centre=True) > 15  # centred: the isotropic spread


def test_rankme_by_layer():
    rng = np.random.default_rng(6)
    layers = [rng.standard_normal((100, 8)), np.ones((100, 8))]
    out = rankme_by_layer(layers)
    assert out.shape == (2,)
    assert out[1] == pytest.approx(1.0, abs=1e-3)


def test_mean_energy_share_known_answers():
    # rows (1, 0) and (1, 2): mean (1, 1), N ||mean||^2 = 4, ||Z||_F^2 = 1 + 1 + 4 = 6
    Z = np.array([[1.0, 0.0], [1.0, 2.0]])
    assert mean_energy_share(Z) == pytest.approx(4 / 6, rel=1e-15)
    assert mean_energy_share(torch.tensor(Z, dtype=torch.float32)) == pytest.approx(4 / 6, rel=1e-7)
    same_rows = np.tile([3.0, -1.0, 2.0], (5, 1))
    assert mean_energy_share(same_rows) == pytest.approx(1.0, rel=1e-15)
    centred = np.array([[1.0, 2.0], [-1.0, -2.0]])
    assert mean_energy_share(centred) == 0.0
    rng = np.random.default_rng(0)
    shifted = rng.standard_normal((50, 8)) + 10.0
    share = mean_energy_share(shifted)
    assert 0.95 < share < 1.0


def test_mean_energy_share_zero_and_bad_shape():
    assert np.isnan(mean_energy_share(np.zeros((4, 3))))
    with pytest.raises(ValueError, match="2-D"):
        mean_energy_share(np.zeros((2, 3, 4)))
