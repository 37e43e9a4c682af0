"""Inference backends: from the gradient model to draws of phi*.

Given v, phi* is exactly Gaussian (the mean of g is linear in phi*, the prior on phi*
is Gaussian), so phi* is integrated out and every backend works on the 1-D posterior
of v_i, then draws phi*_i | v_i exactly:

``exact`` (:mod:`.exact`)
    a fine adaptive grid on v_i; the reference implementation.
``emcee`` (:mod:`.emcee`)
    emcee's ensemble sampler with a coordinate-wise stretch move (:mod:`.moves`):
    an independent affine-invariant ensemble per coordinate, all advanced together.
``laplace`` (:mod:`.laplace`)
    the paper's Laplace approximation (Appendix C) of the joint (phi*, v) posterior.
``last_iterate`` (:mod:`.last_iterate`)
    the naive baseline: phi* = phi_T, ignoring the DP noise.

A new backend is one new module with its sampler and one
:func:`~skdpvi.noise_aware.register_backend` line below (see its docstring for the
sampler's signature); :func:`~skdpvi.noise_aware.sample_phi_star` looks the name up in
the registry (:mod:`.registry`).
"""

from .emcee import sample_emcee
from .exact import sample_exact
from .laplace import sample_laplace
from .last_iterate import sample_last_iterate
from .moves import CoordinatewiseStretchMove
from .registry import Backend, backend_names, get_backend, register_backend

__all__ = [
    "Backend",
    "CoordinatewiseStretchMove",
    "backend_names",
    "get_backend",
    "register_backend",
    "sample_emcee",
    "sample_exact",
    "sample_laplace",
    "sample_last_iterate",
]

register_backend("emcee", sample_emcee)
register_backend("exact", sample_exact)
register_backend("laplace", sample_laplace)
register_backend("last_iterate", sample_last_iterate, needs_model=False)
