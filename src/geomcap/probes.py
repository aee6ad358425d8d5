"""Linear probes: can a linear read-out of a layer's hidden state decode the answer?

The probe is a ridge classifier: ridge regression (closed form, penalty
``alpha`` on standardised features, unpenalised bias) from the hidden state
at the answer position to the one-hot first answer token, predicting the
arg-max. It is a linear read-out like a logistic probe, but exact and ~100x
cheaper (a d x d solve instead of an iterative fit), which is what lets the
training loop probe every layer at every checkpoint. It is fit on one half
of the probe set and scored on the other half (a fixed, seeded split), so
probe accuracy is a held-out accuracy, comparable with the model's own test
accuracy.

A probe that decodes the answer may only be reading the input: a rich enough
representation lets a linear map send input features to any labels. The
control task of Hewitt & Liang (2019) measures that: the same probe, fit to
labels that are a fixed random function of the prompt with the answer's
marginals (:func:`control_labels`). *Selectivity* is the probe's accuracy on
the true labels minus its accuracy on the control labels.
"""

from __future__ import annotations

import numpy as np


def control_labels(prompts, labels, seed: int = 0) -> np.ndarray:
    """Control-task labels (Hewitt & Liang 2019) for probe prompts: a fixed random function of the prompt.

    prompts: (N, T) int token ids; labels: (N,) the true labels (their empirical distribution is the
    control's marginal). The function reads the prompt through a *key*, its second token and its
    second-to-last token (for a digit task the first and the last operand digit; for ``a b =`` with one
    token per number, ``b``), so that keys recur between the probe's fit and score halves, as word types
    recur in Hewitt & Liang's control tasks: a probe scores above the marginal only if the hidden state
    carries those input tokens in a linearly decodable form. Each distinct key gets one label drawn from
    the labels' empirical distribution with a generator seeded by ``seed`` (keys in sorted order).
    Returns (N,) labels of ``labels``' dtype.
    """
    prompts = np.asarray(prompts)
    labels = np.asarray(labels)
    if prompts.ndim != 2 or prompts.shape[0] != labels.shape[0] or prompts.shape[1] < 2:
        raise ValueError(f"control_labels needs prompts (N, T >= 2) and labels (N,), got {prompts.shape} "
                         f"and {labels.shape}")
    keys, key_index = np.unique(prompts[:, [1, -2]], axis=0, return_inverse=True)
    drawn = np.random.default_rng(seed).choice(labels, size=len(keys), replace=True)
    return drawn[key_index.reshape(-1)]


def probe_split(n: int, seed: int = 0, fit_fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of range(n) into (fit indices, score indices)."""
    if n < 4:
        raise ValueError(f"need at least 4 probe examples, got {n}")
    order = np.random.default_rng(seed).permutation(n)
    n_fit = int(round(n * fit_fraction))
    return np.sort(order[:n_fit]), np.sort(order[n_fit:])


def probe_accuracy(H_fit, y_fit, H_score, y_score, alpha: float = 1.0) -> float:
    """Held-out accuracy of a ridge-classifier probe.

    H_fit (n_fit, d), y_fit (n_fit,) int labels; H_score (n_score, d), y_score (n_score,).
    A label seen only in the score half is always missed (the probe cannot
    predict a class it never saw); with a single class in the fit half the
    probe predicts that class.
    """
    H_fit = np.asarray(H_fit, dtype=np.float64)
    H_score = np.asarray(H_score, dtype=np.float64)
    y_fit = np.asarray(y_fit)
    y_score = np.asarray(y_score)
    classes, y_index = np.unique(y_fit, return_inverse=True)
    if classes.size == 1:
        return float(np.mean(y_score == classes[0]))
    mean = H_fit.mean(axis=0)
    scale = H_fit.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature carries nothing; leave it at 0
    X = (H_fit - mean) / scale
    targets = np.eye(classes.size)[y_index]
    targets_mean = targets.mean(axis=0)
    # centred features and targets: the bias is the targets' mean, unpenalised
    W = np.linalg.solve(X.T @ X + alpha * np.eye(X.shape[1]), X.T @ (targets - targets_mean))
    scores = ((H_score - mean) / scale) @ W + targets_mean
    return float(np.mean(classes[scores.argmax(axis=1)] == y_score))


def probe_accuracy_by_layer(hidden, labels, seed: int = 0, skip_constant: bool = True) -> np.ndarray:
    """Probe accuracy of each layer.

    hidden: sequence of L arrays (N, d); labels: (N,) ints. Returns (L,) floats.
    A layer whose states are identical for every example (the embedding at
    the answer position, which is the same token for every prompt) gets the
    majority-class rate of the fit half -- no linear read-out can do better.
    """
    labels = np.asarray(labels)
    fit, score = probe_split(len(labels), seed=seed)
    out = []
    for H in hidden:
        H = np.asarray(H, dtype=np.float64)
        if skip_constant and np.ptp(H, axis=0).max() == 0:
            values, counts = np.unique(labels[fit], return_counts=True)
            out.append(float(np.mean(labels[score] == values[np.argmax(counts)])))
        else:
            out.append(probe_accuracy(H[fit], labels[fit], H[score], labels[score]))
    return np.array(out, dtype=np.float64)


def probe_accuracy_by_layer_torch(hidden, labels, seed: int = 0, alpha: float = 1.0) -> "torch.Tensor":
    """:func:`probe_accuracy_by_layer` where the hidden states are (torch, float64 on their device).

    hidden: sequence of L tensors (N, d) on one device; labels: (N,) ints (numpy or tensor).
    Returns an (L,) float64 tensor on that device; the same values as the numpy version
    up to float64 round-off (the same split, standardisation, ridge solve and arg-max).
    """
    import torch

    dev = hidden[0].device
    labels = torch.as_tensor(np.asarray(labels), device=dev)
    fit, score = (torch.as_tensor(i, device=dev) for i in probe_split(len(labels), seed=seed))
    classes, y_index = torch.unique(labels[fit], return_inverse=True)
    y_score = labels[score]
    values, counts = torch.unique(labels[fit], return_counts=True)
    majority = (y_score == values[counts.argmax()]).double().mean()
    out = []
    for H in hidden:
        H = H.detach().to(torch.float64)
        if classes.numel() == 1:
            out.append((y_score == classes[0]).double().mean())
            continue
        H_fit = H[fit]
        mean, scale = H_fit.mean(dim=0), H_fit.std(dim=0, unbiased=False)
        constant = (H.amax(dim=0) - H.amin(dim=0)).max() == 0
        scale = torch.where(scale == 0, torch.ones_like(scale), scale)
        X = (H_fit - mean) / scale
        targets = torch.eye(classes.numel(), dtype=torch.float64, device=dev)[y_index]
        targets_mean = targets.mean(dim=0)
        W = torch.linalg.solve(X.T @ X + alpha * torch.eye(X.shape[1], dtype=torch.float64, device=dev),
                               X.T @ (targets - targets_mean))
        scores = ((H[score] - mean) / scale) @ W + targets_mean
        accuracy = (classes[scores.argmax(dim=1)] == y_score).double().mean()
        out.append(torch.where(constant, majority, accuracy))
    return torch.stack(out)
