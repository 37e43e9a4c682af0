"""Bridges to other libraries of the PyData stack, each imported only when used.

- :func:`to_inference_data` exports a fit to ArviZ (``pip install skdpvi[arviz]``):
  the posterior draws with named coordinates, the post-processing sampler's chain
  and diagnostics, and what DP-SGD released.
"""

from .arviz import to_inference_data

__all__ = ["to_inference_data"]
