"""Exact and miscalibrated posteriors shared by the metrics (and plotting) tests."""

import numpy as np


K, N, P = 300, 300, 3


def gaussian_posteriors(sd_factor=1.0, seed=0, n_sim=K, n_draws=N, n_params=P):
    """Exact conjugate posteriors: theta ~ N(0, 1), x ~ N(theta, 1).

    The posterior is N(x / 2, 1/2); ``sd_factor`` < 1 makes the draws
    over-confident, > 1 under-confident.
    """
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(n_sim, n_params))
    x = theta + rng.normal(size=theta.shape)
    z = rng.normal(size=(n_sim, n_draws, n_params))
    return x[:, None, :] / 2 + sd_factor * np.sqrt(0.5) * z, theta


def prior_sampler(n, rng):
    return rng.normal(size=(n, P))


def reference_kwargs(scheme):
    """Keyword arguments of tarp_coverage for each reference scheme."""
    if scheme == "posterior":
        return {}
    if scheme == "prior":
        return dict(references="prior", prior_sampler=prior_sampler)
    if scheme == "array":
        return dict(references=np.random.default_rng(12345).normal(size=(K, P)))
    if scheme == "callable":
        return dict(
            references=lambda rng, s: s.mean(0) + s.std(0) * rng.normal(size=s.shape[1])
        )
    raise AssertionError(scheme)


SCHEMES = ["posterior", "prior", "array", "callable"]


def high_level_error(credibility, coverage):
    """Mean signed coverage error over credibility >= 0.5 (sign of miscalibration)."""
    hi = credibility >= 0.5
    return np.mean((coverage - credibility)[..., hi], axis=-1)


def predictive_draws(scale=1.0, n=2000, n_draws=400, seed=0):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n)
    return y, mu[:, None] + scale * rng.normal(size=(n, n_draws))
