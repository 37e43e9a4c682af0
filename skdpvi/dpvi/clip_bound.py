"""A private bound on the rows' norms, to choose the clipping norm from the data.

A GLM's per-example gradient of the means is ``r_i x_i`` with ``|r_i| <= 1`` (for
logistic regression), so its norm is at most the row's norm ``||x_i||`` (the
intercept's 1 included). A clipping norm far above the rows' norms adds noise
``sigma C`` for nothing: features scaled to [0, 1] with public bounds (UCI Adult:
every row has norm 2.6-3.0) meet a default made for unit-variance features
(``2 sqrt(p) = 15.1``) and get five times the noise they need. The data's scale is
not public, so it is measured privately, at a small share of the budget:

1. a histogram of the rows' norms on a public geometric grid (two bins per octave,
   from the fixed default ``top`` down by six octaves, with an overflow and an
   underflow bin) gets Gaussian noise of standard deviation ``noise_std`` in every
   bin. One row changes one count by one: a Gaussian mechanism of sensitivity 1, a
   full-batch DP-SGD step of clip norm 1 for the accountant;
2. walking down from ``top``, an edge is accepted while the noisy count of rows
   above it, plus ``Z`` standard deviations of its noise, stays below
   ``TAIL * n_rows``; the bound is ``HEADROOM`` grid steps above the lowest edge
   accepted (``top`` at most).

The bound is therefore never above the fixed default, and where the noise is too
large for the counts (small data at a small epsilon) it stays at ``top``;
:func:`bound_is_informative` says so from public numbers only, before any budget is
spent, so that such fits skip the histogram and spend nothing on it.
"""

import math

import numpy as np

__all__ = ["BUDGET_SHARE", "TAIL", "bound_is_informative", "histogram_noise_std",
           "norm_grid", "private_norm_bound", "row_norms_with_intercept"]

#: Share of the budget (of mu^2 in Gaussian-DP terms) spent on the histogram: the
#: DP-SGD's noise multiplier grows by about 1 / sqrt(1 - BUDGET_SHARE), 2.6 %.
BUDGET_SHARE = 0.05
#: Fraction of the rows the lowest accepted edge may leave above it.
TAIL = 0.05
#: Standard deviations of the noise added to a noisy count before it is trusted.
Z = 2.0
#: The grid: BINS_PER_OCTAVE edges per halving, N_OCTAVES halvings below ``top``.
BINS_PER_OCTAVE, N_OCTAVES = 2, 6
#: Grid steps (of sqrt 2) between the lowest edge accepted and the bound returned: the
#: few rows above the accepted edge are not clipped either unless their norm exceeds
#: it by a factor sqrt(2). Measured (``doc/results.rst``, "A private clipping norm"):
#: clipping at the accepted edge itself (HEADROOM = 0) made the TARP error of the
#: correlated benchmark and of [0, 1] features worse (our reading: the misclassified
#: rows of large norm, clipped, bias the coefficients outward, as the user guide's
#: clipping section measured for a C at the rows' typical norm).
HEADROOM = 1


def norm_grid(top):
    """The histogram's edges, from ``top`` down (descending), a public grid.

    Examples
    --------
    >>> [round(float(e), 2) for e in norm_grid(4.0)[:3]]
    [4.0, 2.83, 2.0]
    """
    k = np.arange(BINS_PER_OCTAVE * N_OCTAVES + 1)
    return float(top) * 2.0 ** (-k / BINS_PER_OCTAVE)


def histogram_noise_std(whole_budget_noise):
    """The histogram's noise: a Gaussian mechanism spending ``BUDGET_SHARE`` of mu^2.

    ``whole_budget_noise`` (``1 / mu``) is the noise of a single Gaussian mechanism
    of sensitivity 1 that spends the whole (epsilon, delta) (the accountant's
    ``noise_multiplier(epsilon, delta, 1.0, 1)``); the histogram gets
    ``mu sqrt(BUDGET_SHARE)``. For the accountant the histogram is one full-batch
    DP-SGD step of clip norm 1 with this noise multiplier.
    """
    return float(whole_budget_noise) / math.sqrt(BUDGET_SHARE)


def bound_is_informative(n_rows, noise_std):
    """Whether the histogram can lower the bound below ``top`` at all.

    The bound drops below ``top`` only if edge ``HEADROOM + 1`` is accepted, which
    needs ``Z`` noise standard deviations of the ``HEADROOM + 2`` bins above it to fit
    in ``TAIL * n_rows``, even with no row above it. A
    function of public numbers only (the number of rows is public by the engine's
    assumptions), so a fit may skip the histogram, and its budget share, when False.
    """
    return Z * noise_std * math.sqrt(HEADROOM + 2.0) <= TAIL * n_rows


def row_norms_with_intercept(X, fit_intercept):
    """``||(x_i, 1)||`` (or ``||x_i||`` without an intercept) of every row.

    Dense (numpy, memmap, torch) or CSR rows, without a copy of the data.
    """
    from sklearn.utils.extmath import row_norms

    if hasattr(X, "numpy"):  # a torch tensor
        X = X.detach().cpu().numpy()
    squared = row_norms(X, squared=True).astype(float)
    return np.sqrt(squared + 1.0 if fit_intercept else squared)


def private_norm_bound(row_norms, top, noise_std, rng):
    """The private upper bound on the rows' norms (see the module docstring).

    Parameters
    ----------
    row_norms : ndarray of shape (n_rows,)
        ``||x_i||`` of every row, the intercept's column included (private).
    top : float
        The largest value returned: the fixed default the bound replaces.
    noise_std : float
        Standard deviation of the Gaussian noise on every count.
    rng : numpy.random.Generator
        Draws the noise.

    Returns
    -------
    bound : float
        An edge of :func:`norm_grid` (``top`` included).
    noisy_counts : ndarray
        The released histogram, overflow bin first, then the bins between the edges
        from the top down, then the underflow bin.

    Examples
    --------
    >>> import numpy as np
    >>> norms = np.full(10_000, 2.9)
    >>> bound, _ = private_norm_bound(norms, 15.0, 20.0, np.random.default_rng(0))
    >>> round(bound, 2)  # 3.75 is the lowest edge above the rows, one step up
    5.3
    """
    edges = norm_grid(top)
    # bin 0: [top, inf); bin k: [edges[k], edges[k - 1]); last: [0, edges[-1])
    index = np.searchsorted(-edges, -np.asarray(row_norms, float), side="left")
    counts = np.bincount(index, minlength=len(edges) + 1).astype(float)
    noisy = counts + rng.normal(0.0, noise_std, size=counts.shape)
    limit = TAIL * len(row_norms)
    lowest = 0
    for k in range(1, len(edges)):
        # rows at or above edges[k]: bins 0..k, k + 1 noisy counts
        above = noisy[: k + 1].sum() + Z * noise_std * math.sqrt(k + 1)
        if above > limit:
            break
        lowest = k
    return float(edges[max(lowest - HEADROOM, 0)]), noisy
