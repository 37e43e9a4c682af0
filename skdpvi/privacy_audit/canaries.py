"""The audit's data: a small logistic regression and worst-case gradient canaries.

Each canary gets a feature of its own ("Dirac canary", Nasr et al., 2021/2023): every
other row is 0 in that column, the canary is ``canary_value`` there and 0 elsewhere,
with label 1. Its variational mean starts (publicly) at -3 in that coordinate, so
``sigmoid(canary_value * theta)`` is 0 for every Monte Carlo draw and the canary's
likelihood gradient is exactly ``-canary_value`` along the mean of its coordinate and
0 along the scale (the centred draws sum to zero). With ``canary_value`` far above the
clipping norm C, its clipped gradient is ``-C`` along that one coordinate, the
worst case the accounting allows, and no other row's gradient has a component there
beyond the shared prior term (1/N of the prior gradient, made negligible by a wide
prior). So the released noisy gradient in that coordinate is the canary's
contribution (if sampled) plus the Gaussian noise, and K canaries on K coordinates
are K independent trials of the distinguishing game in one run: each is sampled,
clipped and noised on its own, and what couples them -- the 1/N prior and entropy
shares every row carries, below 1 % of C here (tested) -- is the same with and
without a given canary up to N.

A *null* canary is a row of zeros: its likelihood gradient is 0, so adding it changes
the run only through the number of rows N (the 1/N prior share of every row); an
audit with null canaries checks that this channel, which the accounting treats as
public, leaks nothing measurable.
"""

from dataclasses import dataclass

import numpy as np
import torch

from ..dpvi import clip_and_sum, per_example_gradients
from ..models import LogisticRegressionModel

__all__ = ["CanaryData", "make_canary_data"]

#: Public starting value of the variational mean in every canary coordinate.
CANARY_INIT = -3.0


@dataclass
class CanaryData:
    """The audit's data set, with and without the canaries.

    Attributes
    ----------
    model : LogisticRegressionModel
        ``n_features + n_canaries`` coefficients, no intercept, prior scale 10.
    X, y : ndarray
        The other rows (canary columns 0).
    X_canaries, y_canaries : ndarray
        One canary per row.
    init_mean : ndarray
        0 for the features, ``CANARY_INIT`` for the canary coordinates.
    coordinates : ndarray of int
        Index, in phi = (mu, rho), of each canary's coordinate of the mean.
    """

    model: LogisticRegressionModel
    X: np.ndarray
    y: np.ndarray
    X_canaries: np.ndarray
    y_canaries: np.ndarray
    init_mean: np.ndarray
    coordinates: np.ndarray

    @property
    def without(self):
        """The data set D: the other rows only."""
        return (self.X, self.y)

    @property
    def with_canaries(self):
        """D plus every canary (one more row per canary)."""
        return (np.vstack([self.X, self.X_canaries]), np.concatenate([self.y, self.y_canaries]))


def make_canary_data(n_samples=50, n_features=2, n_canaries=128, canary_value=100.0,
                     canary="gradient", random_state=0):
    """A small simulated logistic regression and ``n_canaries`` canaries.

    Parameters
    ----------
    n_samples : int, default=50
        Rows besides the canaries.
    n_features : int, default=2
        Features of those rows (standard normal; labels from a logistic model).
    n_canaries : int, default=128
        Canaries, each on its own coordinate.
    canary_value : float, default=100.0
        The canary's feature value: its likelihood gradient has this norm, so it
        must be far above the clipping norm.
    canary : {"gradient", "null"}, default="gradient"
        Worst-case gradient canaries, or rows of zeros (see the module doc).
    random_state : int, default=0

    Returns
    -------
    CanaryData

    Examples
    --------
    >>> data = make_canary_data(n_samples=20, n_canaries=4)
    >>> data.with_canaries[0].shape, data.coordinates.tolist()
    ((24, 6), [2, 3, 4, 5])
    """
    if canary not in ("gradient", "null"):
        raise ValueError(f"canary must be 'gradient' or 'null', got {canary!r}.")
    rng = np.random.default_rng(random_state)
    width = n_features + n_canaries
    X = np.zeros((n_samples, width))
    X[:, :n_features] = rng.standard_normal((n_samples, n_features))
    p = 1 / (1 + np.exp(-X[:, :n_features].sum(1)))
    y = (rng.random(n_samples) < p).astype(float)
    X_canaries = np.zeros((n_canaries, width))
    if canary == "gradient":
        X_canaries[np.arange(n_canaries), n_features + np.arange(n_canaries)] = canary_value
    init_mean = np.zeros(width)
    init_mean[n_features:] = CANARY_INIT
    model = LogisticRegressionModel(width, prior_scale=10.0, fit_intercept=False)
    return CanaryData(model=model, X=X, y=y, X_canaries=X_canaries,
                      y_canaries=np.ones(n_canaries), init_mean=init_mean,
                      coordinates=n_features + np.arange(n_canaries))


def _preconditioner(n_params, preconditioner):
    """beta as the engine builds it: a float applies to the scale coordinates."""
    beta = np.ones(2 * n_params)
    if preconditioner is not None:
        pre = np.asarray(preconditioner, dtype=float)
        if pre.ndim == 0:
            beta[n_params:] = float(pre)
        else:
            beta = pre.reshape(2 * n_params).copy()
    return beta


def canary_clipped_gradients(data, clip_norm, preconditioner=None, n_mc_samples=10,
                             init_scale=0.01, random_state=0):
    """Each canary's clipped (preconditioned) gradient at the starting point.

    What the adversary knows about the canaries: with the design above, canary k's is
    ``-clip_norm`` times the unit vector of its coordinate (up to the 1/N prior share).

    Returns
    -------
    ndarray of shape (n_canaries, 2 n_params)
    """
    model = data.model
    n = model.n_params
    beta = torch.tensor(_preconditioner(n, preconditioner))
    rho0 = float(np.log(np.expm1(init_scale)))
    phi = torch.tensor(np.concatenate([data.init_mean, np.full(n, rho0)]))
    generator = torch.Generator().manual_seed(int(random_state))
    eps = torch.randn((n_mc_samples, n), generator=generator, dtype=torch.float64)
    eps = (eps - eps.mean(0)) * np.sqrt(n_mc_samples / (n_mc_samples - 1))
    X, y = data.with_canaries
    n_rows = X.shape[0]
    prepared = model.prepare_data(torch.tensor(data.X_canaries, dtype=torch.float32),
                                  torch.tensor(data.y_canaries, dtype=torch.float32))
    out = []
    for k in range(len(data.X_canaries)):
        row = tuple(t[k:k + 1] for t in prepared)
        grads = per_example_gradients(model, phi, eps, row, n_rows, beta.float())
        clipped, _ = clip_and_sum(grads, clip_norm)
        out.append(clipped.numpy())
    return np.array(out)
