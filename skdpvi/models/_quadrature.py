"""Gaussian expectations of scalar functions by Gauss-Hermite quadrature.

The expected gradients of :mod:`skdpvi.models.statistics` need
``E[f(mu + s z)]`` for z ~ N(0, 1) and its derivatives in ``mu`` and ``s``; with 60
nodes these are exact to float precision for the smooth functions used here
(``log softplus``, ``1 / softplus``, ``log sigmoid``, ``softplus``) over the scales
a variational posterior takes.
"""

import numpy as np
from numpy.polynomial.hermite_e import hermegauss

_NODES, _WEIGHTS = hermegauss(60)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()
_NODE_WEIGHTS = _NODES * _WEIGHTS


def softplus(x):
    return np.logaddexp(0.0, x)


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def gaussian_expectation(f, mu, s):
    """``E[f(u)]``, ``d/dmu`` and ``d/ds`` of it, for u ~ N(mu, s^2).

    Parameters
    ----------
    f : callable
        ``f(u) -> (value, derivative)``, elementwise.
    mu, s : ndarray of the same shape

    Returns
    -------
    value, d_mu, d_s : ndarray of that shape
    """
    u = np.asarray(mu, float)[..., None] + np.asarray(s, float)[..., None] * _NODES
    value, slope = f(u)
    return ((value * _WEIGHTS).sum(-1), (slope * _WEIGHTS).sum(-1),
            (slope * _NODES * _WEIGHTS).sum(-1))


def softplus_family_expectations(mu, s, names):
    """:func:`gaussian_expectation` of several of ``log_softplus``,
    ``inverse_softplus_value``, ``log_sigmoid`` and ``softplus_value`` at once.

    They share the nodes, one ``log1p(exp(-|u|))`` (``softplus(u)`` and
    ``softplus(-u)`` both, as ``np.logaddexp`` computes them) and one ``tanh``: a
    third of the transcendental work of calling them one by one, which dominated
    the post-processing's designs.

    Returns
    -------
    list of (value, d_mu, d_s)
        In the order of ``names``.
    """
    u = np.asarray(mu, float)[..., None] + np.asarray(s, float)[..., None] * _NODES
    tail = np.log1p(np.exp(-np.abs(u)))
    sp = np.maximum(u, 0.0) + tail
    t = np.tanh(0.5 * u)
    sig = 0.5 * (1.0 + t)
    inverse = 1.0 / sp
    out = []
    for name in names:
        if name == "log_softplus":
            value, slope = np.log(sp), sig * inverse
        elif name == "inverse_softplus_value":
            value, slope = inverse, -sig * inverse**2
        elif name == "log_sigmoid":
            value, slope = -(np.maximum(-u, 0.0) + tail), 0.5 * (1.0 - t)
        elif name == "softplus_value":
            value, slope = sp, sig
        else:
            raise ValueError(f"unknown function {name!r}")
        out.append((value @ _WEIGHTS, slope @ _WEIGHTS, slope @ _NODE_WEIGHTS))
    return out


def log_softplus(u):
    sp = softplus(u)
    return np.log(sp), sigmoid(u) / sp


def inverse_softplus_value(u):
    """``1 / softplus(u)`` and its derivative."""
    sp = softplus(u)
    return 1.0 / sp, -sigmoid(u) / sp**2


def log_sigmoid(u):
    return -softplus(-u), sigmoid(-u)


def softplus_value(u):
    return softplus(u), sigmoid(u)
