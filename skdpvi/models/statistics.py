"""The expected DP-SGD gradient, written in statistics of the data.

For every model of skdpvi, the expected gradient of the negative ELBO at *any*
variational parameter phi is linear in a short vector eta of statistics of the
data set, with a design that depends on phi alone::

    E[grad L(phi)] = J(phi) @ eta + r(phi)

- linear regression: eta = (X^T X, X^T y, y^T y), exactly;
- the exponential families: eta = the sufficient statistic (sum of x, counts), exactly;
- logistic regression: eta = (Lambda, b) of a quadratic approximation of the
  negative log-likelihood around the optimum (exact for its mean-field Hessian and
  gradient there, an approximation away from it).

``r(phi)`` collects what does not depend on the data (prior, log-Jacobian, entropy),
in closed form. Because the released noisy gradients of DP-SGD are, in expectation,
``kappa`` times this, a trace of (phi_t, g_t) pairs is a *linear-Gaussian regression*
for eta whatever the wander of phi_t: the second-order (Jensen) bias that a model
linear in phi suffers from does not arise. The noise-aware posterior is then the
mixture, over the posterior of eta, of the model's posterior given eta
(:mod:`skdpvi.noise_aware.statistics`).

A model exposes this through ``Model.data_statistics(n_examples)``, which returns a
:class:`DataStatistics`.
"""

import hashlib
from collections import OrderedDict

import numpy as np

__all__ = ["DataStatistics"]

_MEMO_ITEM_BYTES, _MEMO_TOTAL_BYTES = 16 * 2**20, 64 * 2**20


def _nbytes(value):
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 0


class DataStatistics:
    """Interface: the expected gradient in data statistics, and the posterior given them.

    Subclasses set ``n_statistics`` and ``statistic_names`` and implement
    :meth:`design`, :meth:`log_prior` and :meth:`conditional_posterior`.
    Everything here is a function of the public model definition and of N, the
    number of rows, which the engine already treats as public.
    """

    n_statistics = 0
    statistic_names = ()
    #: Whether the post-processing corrects the design for the mechanism's clipping
    #: (for models with a :meth:`per_example_predictive`).
    correct_clipping = True

    def _memoised(self, compute, phi):
        """``compute(phi)``, remembered by the bytes of phi (up to 64 MB in all).

        The post-processing evaluates the design on the same trace (its halves, its
        chunks) many times; models whose design is costly (a quadrature per step)
        keep it here. Results over 16 MB are not kept.
        """
        phi = np.ascontiguousarray(np.atleast_2d(np.asarray(phi, float)))
        key = (compute.__name__, phi.shape,
               hashlib.blake2b(phi.tobytes(), digest_size=16).digest())
        cache = self.__dict__.setdefault("_memo", OrderedDict())  # key -> (value, bytes)
        if key in cache:
            return cache[key][0]
        value = compute(phi)
        size = _nbytes(value)
        if size <= _MEMO_ITEM_BYTES:
            cache[key] = value, size
            while sum(entry[1] for entry in cache.values()) > _MEMO_TOTAL_BYTES:
                cache.popitem(last=False)
        return value

    def design(self, phi):
        """``J(phi)`` and ``r(phi)`` with ``E[grad L(phi)] = J(phi) @ eta + r(phi)``.

        Parameters
        ----------
        phi : ndarray of shape (T, d)
            Variational parameters (mu, rho), one row per step.

        Returns
        -------
        J : ndarray of shape (T, d, n_statistics)
        r : ndarray of shape (T, d)
        """
        raise NotImplementedError

    def design_sum(self, phi):
        """``sum_t J(phi_t)`` and ``sum_t r(phi_t)`` over the rows of phi."""
        J_sum, r_sum = 0.0, 0.0
        for start in range(0, len(phi), 512):
            J, r = self.design(phi[start:start + 512])
            J_sum, r_sum = J_sum + J.sum(0), r_sum + r.sum(0)
        return J_sum, r_sum

    def normal_equations(self, phi, target, precision):
        """``sum_t J_t^T W J_t``, ``sum_t J_t^T W y_t`` and ``sum_t y_t^T W y_t``.

        With ``y_t = target_t - r_t``: the Gaussian regression of the released
        gradients on the statistics, summed over the steps.

        Parameters
        ----------
        phi : ndarray of shape (T, d)
        target : ndarray of shape (T, d)
            The released gradients divided by the sampling rate.
        precision : ndarray of shape (d,)
            W, the inverse noise variance of each coordinate of ``target``.

        Returns
        -------
        P : ndarray of shape (n_statistics, n_statistics)
        h : ndarray of shape (n_statistics,)
        yy : float
        """
        P = np.zeros((self.n_statistics, self.n_statistics))
        h = np.zeros(self.n_statistics)
        yy = 0.0
        for start in range(0, len(phi), 512):
            J, r = self.design(phi[start:start + 512])
            y = target[start:start + 512] - r
            flat = J.reshape(-1, self.n_statistics)
            weighted = (J * precision[None, :, None]).reshape(-1, self.n_statistics)
            P += weighted.T @ flat
            h += weighted.T @ y.reshape(-1)
            yy += float(np.einsum("td,d,td->", y, precision, y))
        return P, h, yy

    def expected_gradient(self, phi, eta):
        """``J(phi) @ eta + r(phi)`` for every row of ``phi`` (T, d)."""
        out = []
        for start in range(0, len(phi), 512):
            J, r = self.design(phi[start:start + 512])
            out.append(J @ eta + r)
        return np.concatenate(out) if out else np.zeros((0, 0))

    def per_example_predictive(self, eta):
        """The distribution of one example's statistic under the posterior mean given eta.

        For models whose per-example gradient is affine in a per-example statistic
        t_i with ``eta = sum_i t_i`` (the exponential families, linear regression),
        that gradient is exactly ``J(phi) t_i + r(phi) / N``, and the mechanism's
        clipping can be accounted for from this distribution
        (:func:`clipping_correction`).

        Returns
        -------
        None, or (nodes, weights)
            ``nodes`` of shape (K, n_statistics) and probabilities ``weights`` (K,).
        """
        return None

    def per_example_rows(self, phi, eta):
        """Expected per-example gradients ``J(phi) t + r(phi) / N`` at the nodes of
        :meth:`per_example_predictive` ``(eta)``.

        Parameters
        ----------
        phi : ndarray of shape (T, d)
        eta : ndarray of shape (n_statistics,)

        Returns
        -------
        ndarray of shape (T, K, d)
        """
        nodes, _ = self.per_example_predictive(eta)
        J, r = self.design(phi)
        return np.matmul(J, nodes.T).transpose(0, 2, 1) + r[:, None, :] / self.n_examples

    def clip_groups(self):
        """The coordinates of phi that the mechanism clips together, or None (one row).

        Models clipped by groups (``model.clip_shares``, see
        :mod:`skdpvi.dpvi.mechanism`) return one index array per group, in the order
        of the mechanism's group clip norms.
        """
        return None

    def step_curvature(self, eta):
        """The block of the means that a recording step matrix preconditions, and its
        curvature at the statistics eta (:func:`~skdpvi.noise_aware.recording_step_matrix`).

        Returns
        -------
        block : ndarray of int
            Positions in phi.
        curvature : ndarray of shape (len(block), len(block))
        """
        raise NotImplementedError(f"{type(self).__name__} has no recording step matrix.")

    def mean_curvature(self, eta, phi):
        """The Hessian of the negative ELBO in the means at phi, given the statistics eta:
        what sets how fast DP-SGD relaxes along each direction of the means
        (:func:`~skdpvi.noise_aware.recording_step_matrix` caps that rate).

        Parameters
        ----------
        eta : ndarray of shape (n_statistics,)
        phi : ndarray of shape (d,)
            The variational parameters (mu, rho) the curvature is taken at.

        Returns
        -------
        block : ndarray of int
            Positions in phi (the means).
        curvature : ndarray of shape (len(block), len(block))
        """
        raise NotImplementedError(f"{type(self).__name__} has no mean curvature.")

    def unused_coordinates(self):
        """Coordinates of the released gradient that the regression for eta leaves out.

        Returns
        -------
        ndarray of int
            Positions in phi whose released gradients the model's design does not
            describe well enough to learn eta from (they get zero precision). Empty
            (the default): every coordinate is used.
        """
        return np.zeros(0, dtype=int)

    def gaussian_prior(self, eta_hat):
        """An optional Gaussian prior on eta, from a first estimate ``eta_hat``.

        Returns None (no prior: the default) or ``(precision, precision @ mean)``,
        added to the normal equations. For statistics whose prior predictive is
        Gaussian given others (logistic regression's gradient b given its curvature)
        this keeps the DP noise from moving them where the model says they cannot go.
        """
        return None

    def known_statistics(self):
        """Statistics whose value is public, fixed exactly in the posterior.

        Returns
        -------
        index : ndarray of int
        values : ndarray
            For example the intercept's ``(X^T X)_pp = N`` when N is public.
        """
        return np.zeros(0, dtype=int), np.zeros(0)

    def scale_statistics(self):
        """Statistics that set the scale of the posterior (checked for identification).

        Returns
        -------
        ndarray of int
            Positions in eta, e.g. the diagonal of X^T X. Empty (the default): the
            model's posterior given eta does not hinge on a curvature estimated from
            the trace, and no check is made.
        """
        return np.zeros(0, dtype=int)

    def shrinkage_groups(self):
        """Statistics that a Gaussian shrinkage prior may pull towards zero.

        Returns
        -------
        index : ndarray of int
            Positions in eta (e.g. the off-diagonal entries of X^T X).
        scale : callable
            ``scale(eta_hat) -> ndarray`` of the same length: the natural scale of
            each entry (e.g. ``sqrt(XtX_jj XtX_kk)``), which the prior's standard
            deviation multiplies.
        """
        return np.zeros(0, dtype=int), lambda eta: np.zeros(0)

    def pooled_statistics(self):
        """Statistics that a Gaussian prior pools towards their common (unknown) level.

        Returns
        -------
        ndarray of int
            Positions in eta (linear regression: the features' diagonal of X^T X);
            the scale of the pooling is chosen by marginal likelihood. Empty (the
            default): none.
        """
        return np.zeros(0, dtype=int)

    def pooled_correlations(self):
        """Statistics pooled towards their common level *relative to their natural scale*.

        Returns
        -------
        index : ndarray of int
            Positions in eta (linear regression: the features' off-diagonal of X^T X,
            pooled as correlations ``(X^T X)_jk / sqrt((X^T X)_jj (X^T X)_kk)``).
        scale : callable
            ``scale(eta_hat) -> ndarray``: each entry's natural scale. Empty (the
            default): none.
        """
        return np.zeros(0, dtype=int), lambda eta: np.zeros(0)

    def shrinkage_labels(self):
        """A shrinkage group for each statistic of :meth:`shrinkage_groups`.

        Returns
        -------
        ndarray of int or None
            Labels 0, 1, ... aligned with the index of :meth:`shrinkage_groups`; each
            group gets its own shrinkage scale gamma. None (the default): one group.
        """
        return None

    def log_prior(self, eta):
        """Log density of eta's prior predictive distribution, up to a constant.

        Parameters
        ----------
        eta : ndarray of shape (M, n_statistics)

        Returns
        -------
        ndarray of shape (M,)
            ``-inf`` where eta is impossible (e.g. a negative count).
        """
        return np.zeros(len(eta))

    def conditional_posterior(self, eta):
        """The model's posterior given the statistics, as mixture components.

        Parameters
        ----------
        eta : ndarray of shape (M, n_statistics)
            Valid statistics (:meth:`log_prior` finite).

        Returns
        -------
        components
            An object with ``n_components`` and ``sample(index, rng)`` returning
            unconstrained parameter draws (len(index), n_params), one from the
            posterior given ``eta[index[i]]`` for each i.
        """
        raise NotImplementedError


class SymmetricBlockStatistics(DataStatistics):
    """Statistics that start with vech of a symmetric p x p matrix (X^T X, Lambda),
    followed by a p-vector paired with it (X^T y, b): the index bookkeeping, the
    shrinkage of the off-diagonal and the scatter of each coefficient's normal
    equations, shared by the linear and logistic models."""

    def _init_block(self, p):
        self.p = p
        self.rows, self.cols = np.tril_indices(p)
        self.n_vech = len(self.rows)
        self.diagonal = np.flatnonzero(self.rows == self.cols)
        self.off_diagonal = np.flatnonzero(self.rows != self.cols)

    @property
    def _scatter(self):
        """Positions in eta of (M[j, 0..p-1], v[j]) for each coefficient j."""
        if "_scatter_cache" not in self.__dict__:
            lookup = {}
            for c, (i, k) in enumerate(zip(self.rows, self.cols)):
                lookup[(i, k)] = lookup[(k, i)] = c
            self._scatter_cache = [
                np.array([lookup[(j, k)] for k in range(self.p)] + [self.n_vech + j])
                for j in range(self.p)
            ]
        return self._scatter_cache

    def shrinkage_groups(self):
        """The off-diagonal of the matrix, on the scale sqrt(M_jj M_kk)."""
        off = self.off_diagonal
        rows, cols, diagonal = self.rows[off], self.cols[off], self.diagonal

        def scale(eta):
            d = np.maximum(eta[diagonal], 1e-12)
            return np.sqrt(d[rows] * d[cols])

        return off, scale


def vech_indices(p):
    """Row and column of each entry of the lower triangle of a p x p matrix, in order."""
    return np.tril_indices(p)


def unvech(values, p):
    """Symmetric matrices (..., p, p) from their lower triangles (..., p (p + 1) / 2)."""
    rows, cols = np.tril_indices(p)
    out = np.zeros(values.shape[:-1] + (p, p))
    out[..., rows, cols] = values
    out[..., cols, rows] = values
    return out
