"""Linear probes on synthetic hidden states with known decodability."""
import numpy as np
import pytest

from geomcap.probes import control_labels, probe_accuracy, probe_accuracy_by_layer, probe_split


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


def test_control_labels_are_a_random_function_of_the_prompts_key_with_the_labels_marginal():
    rng = np.random.default_rng(0)
    prompts = rng.integers(0, 10, size=(4000, 6))
    labels = rng.choice([3, 7, 9], size=4000, p=[0.6, 0.3, 0.1])
    control = control_labels(prompts, labels, seed=0)
    key = prompts[:, 1] * 10 + prompts[:, -2]
    for k in np.unique(key):  # a function of the key: one label per key
        assert len(set(control[key == k])) == 1
    assert set(control) <= {3, 7, 9} and 0.4 < np.mean(control == 3) < 0.8  # drawn from the labels' marginal
    assert np.array_equal(control, control_labels(prompts, labels, seed=0))
    assert not np.array_equal(control, control_labels(prompts, labels, seed=1))


def test_a_probe_is_selective_only_when_the_state_carries_the_answer_and_not_the_input_alone():
    """Selectivity (Hewitt & Liang): a state that encodes the key tokens one-hot lets the probe fit the control
    labels too (low selectivity); a state that encodes only the answer does not (high selectivity)."""
    rng = np.random.default_rng(1)
    n = 2000
    prompts = rng.integers(0, 5, size=(n, 4))
    labels = (prompts[:, 1] + prompts[:, 2]) % 3
    control = control_labels(prompts, labels, seed=0)
    key_state = np.concatenate([np.eye(5)[prompts[:, 1]], np.eye(5)[prompts[:, 2]],
                                np.eye(25)[prompts[:, 1] * 5 + prompts[:, 2]]], axis=1)
    answer_state = np.eye(3)[labels] + 0.01 * rng.standard_normal((n, 3))
    true_acc, control_acc = (probe_accuracy_by_layer([key_state, answer_state], y) for y in (labels, control))
    assert true_acc[0] > 0.95 and control_acc[0] > 0.95      # the input carries both: no selectivity
    assert true_acc[1] > 0.95 and control_acc[1] < 0.6       # only the answer: selective
