"""Directions the likelihood cannot see: their exact posterior is the prior's.

A categorical feature one-hot encoded with all its categories puts exactly one 1 in
its block of columns in every row. With an intercept, raising every coefficient of the
block by c and lowering the intercept by c leaves every logit ``x . w + b`` unchanged,
and two such blocks give the same freedom without an intercept. The likelihood is
constant along these directions F, which a public schema names (no data needed).

With an isotropic Gaussian prior N(0, tau^2 I) the posterior then factorises over the
orthogonal split theta = theta_F + theta_perp: ``p(theta | D) = p(theta_perp | D)
N(theta_F; 0, tau^2 I_F)``, exactly. DP-SGD cannot find that out from its trace: along
F only the prior restores the means, 1 / (lambda kappa tau^-2) steps per relaxation,
so over a run they random-walk, and the trace-based post-processing reads the walk
as a confident, wrong optimum (on issue 14's correlated benchmark the one-hot block's
and the intercept's z-scores had sds of 3.6-7.6). :func:`prior_along_flat_directions`
replaces every mixture component's distribution along F by the prior's and keeps its
orthogonal part: a post-processing of the release (no privacy cost) that leaves the
predictive distribution of every row obeying the schema unchanged, since such rows
are orthogonal to F.
"""

import numpy as np

from ..models.components import GaussianComponents, MeanFieldComponents

__all__ = ["onehot_flat_directions", "prior_along_flat_directions"]


def validate_onehot_blocks(blocks, n_features):
    """``blocks`` (an estimator's ``onehot_blocks``) as a list of int arrays.

    Raises a ValueError naming ``onehot_blocks`` unless every block lists at least
    two distinct integer columns of the ``n_features`` and no column is in two
    blocks; None gives no blocks.
    """
    if blocks is None:
        return []
    out, seen = [], set()
    try:
        if isinstance(blocks, str):
            raise TypeError
        raw = [np.asarray(block) for block in blocks]
    except TypeError:
        raise ValueError("onehot_blocks must be a sequence of sequences of column "
                         f"indices, got {blocks!r}.") from None
    for block in raw:
        if (block.ndim != 1 or len(block) < 2 or block.dtype.kind not in "iu"
                or len(np.unique(block)) != len(block)):
            raise ValueError("each block of onehot_blocks must list at least two "
                             f"distinct integer column indices, got {block.tolist()!r}.")
        if block.min() < 0 or block.max() >= n_features:
            raise ValueError(f"onehot_blocks refers to column {int(block.max())} "
                             f"outside the {n_features} columns of X.")
        shared = seen & set(block.tolist())
        if shared:
            raise ValueError("onehot_blocks must not share columns; column(s) "
                             f"{sorted(shared)} are in two blocks.")
        seen |= set(block.tolist())
        out.append(block.astype(int))
    return out


def check_onehot_rows(X, blocks):
    """Raise a ValueError unless every block's columns of X are 0/1 with one 1 per row.

    An input check, like the check for NaN: a fit that fails it releases nothing.
    """
    for block in blocks:
        part = X[:, block]
        part = part.toarray() if hasattr(part, "toarray") else np.asarray(part)
        if not (np.isin(part, (0, 1)).all() and (part.sum(1) == 1).all()):
            raise ValueError(
                f"onehot_blocks: columns {block.tolist()} of X must be 0 or 1 with "
                "exactly one 1 in every row (a one-hot encoding of all categories).")


def onehot_flat_directions(blocks, n_features, fit_intercept=True):
    """Orthonormal basis of the directions along which one-hot blocks leave logits fixed.

    Parameters
    ----------
    blocks : sequence of sequences of int
        Column indices of each one-hot encoded categorical feature (every row has
        exactly one 1 among them): at least two columns each, no column in two blocks.
    n_features : int
        Number of columns of X; the parameters are the coefficients, then the
        intercept (if ``fit_intercept``).
    fit_intercept : bool, default=True

    Returns
    -------
    ndarray of shape (k, n_features + fit_intercept)
        Orthonormal rows spanning F: one direction per block with an intercept, one
        fewer without (k may be 0).

    Examples
    --------
    >>> F = onehot_flat_directions([[1, 2, 3]], n_features=4)
    >>> F.shape
    (1, 5)
    >>> row = np.array([0.3, 0.0, 1.0, 0.0, 1.0])  # x, with the intercept's 1 last
    >>> bool(abs(F @ row)[0] < 1e-12)
    True
    """
    n_params = int(n_features) + bool(fit_intercept)
    sums = []
    for block in blocks:
        v = np.zeros(n_params)
        v[np.asarray(block, int)] = 1.0
        sums.append(v)
    if fit_intercept:
        one = np.zeros(n_params)
        one[-1] = 1.0
        sums.append(one)
    # every row x (intercept included) has a . x = 1 for each of these vectors, so
    # their differences are orthogonal to every row
    if len(sums) < 2:
        return np.zeros((0, n_params))
    differences = np.array([s - sums[-1] for s in sums[:-1]])
    q, _ = np.linalg.qr(differences.T)
    return q.T


def prior_along_flat_directions(components, directions, prior_scale):
    """Mixture components whose distribution along ``directions`` is the prior's.

    Each component N(m, S) becomes N(P m, P S P + tau^2 Q Q^T), with Q the
    orthonormal ``directions`` (rows) and P = I - Q Q^T: its orthogonal part kept,
    its part along the flat directions replaced by the prior N(0, tau^2).

    Parameters
    ----------
    components : MeanFieldComponents or GaussianComponents
    directions : ndarray of shape (k, n)
        Orthonormal rows (:func:`onehot_flat_directions`).
    prior_scale : float
        tau, the prior sd of every parameter (the prior must be isotropic).

    Returns
    -------
    components : GaussianComponents
        With full covariances (the projection couples the block's coefficients and
        the intercept); ``components`` itself when ``directions`` is empty.
    """
    Q = np.asarray(directions, float).T  # (n, k)
    if Q.shape[1] == 0:
        return components
    if isinstance(components, MeanFieldComponents):
        mean = components.means
        root = components.scales[:, :, None] * np.eye(mean.shape[1])  # (M, n, n)
    elif isinstance(components, GaussianComponents):
        mean = components.mean
        root = np.broadcast_to(components.chol, (len(mean), *components.chol.shape[-2:]))
    else:
        raise TypeError(f"cannot project {type(components).__name__} onto flat directions")
    P = np.eye(len(Q)) - Q @ Q.T
    projected = P @ root  # (M, n, n): the orthogonal part's square root
    cov = projected @ projected.transpose(0, 2, 1) + prior_scale**2 * (Q @ Q.T)
    return GaussianComponents(mean @ P, np.linalg.cholesky(0.5 * (cov + cov.transpose(0, 2, 1))))
