"""Linear probes on synthetic hidden states with known decodability."""
import numpy as np
import pytest

from geomcap.probes import probe_accuracy, probe_accuracy_by_layer, probe_split


def test_split_is_disjoint_and_seeded():
    fit, score = probe_split(100, seed=3)
    assert len(set(fit) & set(score)) == 0 and len(fit) + len(score) == 100
    fit2, _ = probe_split(100, seed=3)
    np.testing.assert_array_equal(fit, fit2)
    with pytest.raises(ValueError):
        probe_split(2)


def test_linearly_decodable_labels_are_decoded():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 5, 400)
    centres = rng.standard_normal((5, 16)) * 5
    H = centres[labels] + rng.standard_normal((400, 16))
    random_layer = rng.standard_normal((400, 16))
    constant_layer = np.ones((400, 16))
    acc = probe_accuracy_by_layer([constant_layer, random_layer, H], labels, seed=0)
    assert acc[2] > 0.95
    assert acc[1] < 0.4          # chance is 0.2
    assert acc[0] < 0.4          # majority class only


def test_single_class_fit():
    H = np.random.default_rng(1).standard_normal((10, 3))
    assert probe_accuracy(H[:5], np.zeros(5, int), H[5:], np.array([0, 0, 1, 0, 0])) == pytest.approx(0.8)
