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


@pytest.mark.parametrize("shape", [(64, 16), (16, 64), (300, 40), (1100, 260)])  # the last takes the Gram path
@pytest.mark.parametrize("centre", [False, True])
def test_device_rankme_and_energy_share_equal_the_reference(shape, centre):
    from geomcap.geometry import mean_energy_share, mean_energy_share_torch, rankme_torch

    gen = torch.Generator().manual_seed(shape[0])
    # a decaying spectrum plus a shared offset: RankMe well inside (1, min(N, d)), a non-trivial mean
    Z = (torch.randn(shape, generator=gen) * torch.logspace(0, -3, shape[1]) + 0.5).float()
    value = rankme_torch(Z, centre=centre)
    assert value.dtype == torch.float64 and value.ndim == 0 and value.device == Z.device
    reference = rankme(Z, centre=centre)
    assert 1 < reference < min(shape)
    assert abs(value.item() - reference) <= 1e-10 * reference
    share = mean_energy_share_torch(Z)
    assert share.dtype == torch.float64 and abs(share.item() - mean_energy_share(Z)) <= 1e-10 * mean_energy_share(Z)


def test_device_measures_known_answers_and_nan():
    from geomcap.geometry import mean_energy_share_torch, rankme_torch

    row = torch.arange(1.0, 6.0)
    same_rows = row.repeat(7, 1)  # rank one, all energy in the mean
    assert abs(rankme_torch(same_rows).item() - rankme(same_rows)) < 1e-12
    assert rankme_torch(same_rows).item() < 1.0001
    assert abs(mean_energy_share_torch(same_rows).item() - 1.0) < 1e-12
    assert abs(mean_energy_share_torch(torch.cat([same_rows, -same_rows])).item()) < 1e-12
    assert abs(rankme_torch(torch.eye(6), eps=0.0).item() - 6.0) < 1e-12
    assert np.isnan(rankme_torch(torch.zeros(4, 3)).item())
    assert np.isnan(mean_energy_share_torch(torch.zeros(4, 3)).item())
    with pytest.raises(ValueError, match="2-D"):
        rankme_torch(torch.zeros(2, 3, 4))


def test_checkpoint_geometry_on_the_device_equals_the_host_rows():
    from geomcap import models, tasks
    from geomcap.train import TrainConfig, evaluate

    cfg = TrainConfig(task="add", level="easy", batch_size=32, n_train=64, n_test=96, probe_size=80,
                      train_eval_size=32)
    data = tasks.make_task(cfg.task, cfg.level, n_train=cfg.n_train, n_test=cfg.n_test, params=cfg.task_params)
    torch.manual_seed(0)
    model = models.build("405k-deep", tasks.VOCAB_SIZE)
    for variants in (True, False):
        host, _ = evaluate(model, data, cfg, torch.device("cpu"), variants=variants)
        device, _ = evaluate(model, data, cfg, torch.device("cpu"), variants=variants, geometry_on_device=True)
        assert [r[:2] for r in device] == [r[:2] for r in host]  # the same rows in the same order
        assert {m for _, m, _ in host} >= {"rankme", "rankme_centred", "mean_energy_share", "probe_accuracy",
                                            "rankme_residual", "mean_energy_share_residual"}
        for (layer, measure, a), (_, _, b) in zip(host, device):
            if measure == "probe_accuracy":
                assert a == b, (layer, measure)
            else:
                assert abs(a - b) <= 1e-10 * abs(a) or (np.isnan(a) and np.isnan(b)), (layer, measure, a, b)
