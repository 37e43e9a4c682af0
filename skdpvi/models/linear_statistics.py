"""The linear regression's expected gradient in (X^T X, X^T y, y^T y), and its posterior.

With q(w_j) = N(mu_j, s_j^2), q(u) = N(mu_u, s_u^2), sigma^2 = softplus(u) and the
normal-inverse-gamma prior of :class:`~skdpvi.models.LinearRegressionModel`, the
negative ELBO is, up to a constant,

    L = c0 E[log sigma^2] + E[1 / sigma^2] (Q / 2 + b + (|mu_w|^2 + |s_w|^2) / (2 s2))
        - E[log sigmoid(u)] - sum_j log s_j

with c0 = N / 2 + a + 1 + p / 2 and
Q = y^T y - 2 mu_w^T X^T y + mu_w^T X^T X mu_w + sum_j (X^T X)_jj s_j^2, the expected
residual sum of squares. Every gradient of L is linear in eta = (vech X^T X, X^T y,
y^T y); the expectations over u are one-dimensional Gauss-Hermite sums.

Given eta, the posterior is normal-inverse-gamma in closed form; the prior predictive
density of eta (for the importance weights of the noise-aware posterior) follows
from the OLS decomposition: given X^T X and sigma^2, w_hat = (X^T X)^-1 X^T y ~
N(w, sigma^2 (X^T X)^-1) and RSS = y^T y - X^T y . w_hat ~ sigma^2 chi^2_{N - p},
independently, with w ~ N(0, s2 sigma^2 I) and sigma^2 ~ InvGamma(a, b). X^T X gets
a flat prior (the design's distribution is not part of the model).

Clipping: what the mechanism's clipping removes, and the design corrected for it,
live in :mod:`skdpvi.models.linear_clipping` (mixed into the class; off by default,
``LinearRegressionStatistics.correct_clipping``; measurements on the results pages).
Which statistics are public, shrunk or pooled (the priors from the design) live in
:mod:`skdpvi.models.linear_design_priors`, mixed in too.
"""

import numpy as np

from ._quadrature import sigmoid, softplus, softplus_family_expectations
from .components import NormalInverseGammaComponents
from .linear_clipping import LinearClipping
from .linear_design_priors import LinearDesignPriors
from .statistics import SymmetricBlockStatistics, unvech

__all__ = ["LinearRegressionStatistics"]


class LinearRegressionStatistics(LinearClipping, LinearDesignPriors, SymmetricBlockStatistics):
    """:class:`DataStatistics` of :class:`~skdpvi.models.LinearRegressionModel`.

    Parameters
    ----------
    model : LinearRegressionModel
    n_examples : int
        N, the number of rows.
    """

    #: Whether the coefficients' scale gradients enter the regression for eta. With
    #: 20 correlated features at epsilon 1 the noise variance comes out low with them
    #: (z mean -0.63; +0.07 without them), also when exact expectations remove their
    #: Monte Carlo noise (-0.59): they contradict the clipped mean rows on the
    #: diagonal of X^T X. But at small epsilon they carry most of the trace's
    #: information on that diagonal (10-D, epsilon 0.1, without them: TARP 0.082 /
    #: 0.090, intervals up to twice too wide). Kept by default.
    use_scale_gradients = True

    def __init__(self, model, n_examples):
        self.model = model
        self.n_examples = int(n_examples)
        p = model.n_weights
        self._init_block(p)
        self.n_statistics = self.n_vech + p + 1
        names = [f"XtX[{i},{k}]" for i, k in zip(self.rows, self.cols)]
        self.statistic_names = tuple(names + [f"Xty[{j}]" for j in range(p)] + ["yty"])

    # ------------------------------------------------------------------ gradient

    def _parts(self, phi):
        """The pieces of J and r shared by :meth:`design` and :meth:`normal_equations`
        (memoised: the post-processing asks for them on the same trace many times)."""
        return self._memoised(self._compute_parts, phi)

    def _compute_parts(self, phi):
        m = self.model
        p, n_params = self.p, m.n_params
        s2, a, b = m.weight_scale**2, m.noise_shape, m.noise_scale
        mu_w, mu_u = phi[:, :p], phi[:, p]
        rho_w, rho_u = phi[:, n_params:n_params + p], phi[:, n_params + p]
        s_w, s_u = softplus(rho_w), softplus(rho_u)
        sig_w, sig_u = sigmoid(rho_w), sigmoid(rho_u)
        (_, e0m, e0s), (e1, e1m, e1s), (_, e2m, e2s) = softplus_family_expectations(
            mu_u, s_u, ("log_softplus", "inverse_softplus_value", "log_sigmoid"))
        T, d = phi.shape
        # dQ / d eta: Q, the expected residual sum of squares, is linear in eta
        rows, cols, vech = self.rows, self.cols, np.arange(self.n_vech)
        dQ = np.empty((T, self.n_statistics))
        dQ[:, vech] = np.where(rows == cols, mu_w[:, rows] ** 2 + s_w[:, rows] ** 2,
                               2.0 * mu_w[:, rows] * mu_w[:, cols])
        dQ[:, self.n_vech:self.n_vech + p] = -2.0 * mu_w
        dQ[:, -1] = 1.0
        c0 = self.n_examples / 2 + a + 1 + p / 2
        known = b + ((mu_w**2).sum(1) + (s_w**2).sum(1)) / (2 * s2)
        r = np.empty((T, d))
        r[:, :p] = e1[:, None] * mu_w / s2
        r[:, p] = c0 * e0m + e1m * known - e2m
        r[:, n_params:n_params + p] = (e1[:, None] * s_w / s2 - 1.0 / s_w) * sig_w
        r[:, n_params + p] = (c0 * e0s + e1s * known - e2s - 1.0 / s_u) * sig_u
        return dict(mu_w=mu_w, s_w=s_w, e1=e1, dQ=dQ, u_mean=0.5 * e1m, u_scale=0.5 * e1s * sig_u,
                    w_scale=e1[:, None] * s_w * sig_w, r=r)

    def design(self, phi):
        parts = self._parts(phi)
        p, n_params = self.p, self.model.n_params
        mu_w, e1, dQ = parts["mu_w"], parts["e1"], parts["dQ"]
        T, d = parts["r"].shape
        J = np.zeros((T, d, self.n_statistics))
        rows, cols, vech, off = self.rows, self.cols, np.arange(self.n_vech), self.off_diagonal
        # mean rows of w: E[1/sigma^2] (X^T X mu_w - X^T y) (+ the prior term in r)
        J[:, rows, vech] += e1[:, None] * mu_w[:, cols]
        J[:, cols[off], off] += e1[:, None] * mu_w[:, rows[off]]
        J[:, np.arange(p), self.n_vech + np.arange(p)] = -e1[:, None]
        J[:, p, :] = parts["u_mean"][:, None] * dQ
        J[:, n_params + np.arange(p), self.diagonal] = parts["w_scale"]
        J[:, n_params + p, :] = parts["u_scale"][:, None] * dQ
        return J, parts["r"].copy()

    def design_sum(self, phi):
        """``sum_t J_t`` and ``sum_t r_t`` without forming the (T, d, k) block."""
        parts = self._parts(phi)
        p, n_params = self.p, self.model.n_params
        rows, cols, vech, off = self.rows, self.cols, np.arange(self.n_vech), self.off_diagonal
        J = np.zeros((2 * n_params, self.n_statistics))
        m1 = parts["e1"] @ parts["mu_w"]
        J[rows, vech] += m1[cols]
        J[cols[off], off] += m1[rows[off]]
        J[np.arange(p), self.n_vech + np.arange(p)] = -parts["e1"].sum()
        J[p] = parts["u_mean"] @ parts["dQ"]
        J[n_params + np.arange(p), self.diagonal] = parts["w_scale"].sum(0)
        J[n_params + p] = parts["u_scale"] @ parts["dQ"]
        return J, parts["r"].sum(0)

    def normal_equations(self, phi, target, precision):
        """As :meth:`DataStatistics.normal_equations`, from cross-products of the trace.

        The mean row of coefficient j is ``E[1/sigma^2] S_j (mu_w, -1)`` for a fixed
        scatter S_j, so its contribution to ``sum J^T W J`` is
        ``W_j S_j G S_j^T`` with ``G = sum_t E[1/sigma^2]^2 (mu_w, -1)(mu_w, -1)^T``:
        (p + 1)^2 numbers instead of a (T d x k) product.
        """
        phi = np.atleast_2d(np.asarray(phi, float))
        p, n_params, k = self.p, self.model.n_params, self.n_statistics
        parts = self._parts(phi)
        y = np.asarray(target, float) - parts["r"]
        P, h = np.zeros((k, k)), np.zeros(k)
        yy = float(np.einsum("td,d,td->", y, precision, y))
        # dense rows: the two rows of u
        for row, coef in ((p, parts["u_mean"]), (n_params + p, parts["u_scale"])):
            design = coef[:, None] * parts["dQ"]
            P += precision[row] * design.T @ design
            h += precision[row] * design.T @ y[:, row]
        # scale rows of w: one statistic each (the diagonal of X^T X)
        ws = parts["w_scale"]
        wy = y[:, n_params:n_params + p]
        P[self.diagonal, self.diagonal] += precision[n_params:n_params + p] * (ws**2).sum(0)
        h[self.diagonal] += precision[n_params:n_params + p] * (ws * wy).sum(0)
        # mean rows of w, through G
        ext = np.column_stack([parts["mu_w"], -np.ones(len(phi))]) * parts["e1"][:, None]
        G = ext.T @ ext
        Gy = ext.T @ y[:, :p]  # (p + 1, p)
        for j in range(p):
            index = self._scatter[j]
            P[np.ix_(index, index)] += precision[j] * G
            h[index] += precision[j] * Gy[:, j]
        return P, h, yy

    def expected_gradient(self, phi, eta):
        parts = self._parts(phi)
        p, n_params = self.p, self.model.n_params
        XtX, Xty, _ = self.unpack(eta)
        out = parts["r"].copy()
        out[:, :p] += parts["e1"][:, None] * (parts["mu_w"] @ XtX - Xty)
        Q = parts["dQ"] @ eta
        out[:, p] += parts["u_mean"] * Q
        out[:, n_params:n_params + p] += parts["w_scale"] * np.diag(XtX)
        out[:, n_params + p] += parts["u_scale"] * Q
        return out

    def unused_coordinates(self):
        """The coefficients' scales, unless ``use_scale_gradients`` (see there)."""
        if self.use_scale_gradients:
            return np.zeros(0, dtype=int)
        return self.model.n_params + np.arange(self.p)

    def intercept_inflation(self, eta, exclude=()):
        """How much the features' offset inflates the intercept's variance, from eta.

        ``N / (N - s^T S^-1 s) = 1 + m^T C^-1 m`` with ``s = X^T 1``, S the features'
        block of X^T X, ``m = s / N`` their means and ``C = S / N - m m^T`` their
        covariance: 1 for centred features, the square of the Mahalanobis distance of
        the mean from 0 plus one otherwise (inf where C is not positive definite).
        The intercept's interval rests on the small difference ``N - s^T S^-1 s``,
        which a trace resolves only where this is small (results pages). NaN without
        an intercept. Features in ``exclude`` are left out (one-hot blocks, whose sum
        with the intercept is a direction the posterior takes from the prior). From
        the release's eta, a post-processing.
        """
        if not self.model.fit_intercept:
            return float("nan")
        features = np.setdiff1d(np.arange(self.p - 1), np.asarray(exclude, int))
        if not len(features):  # the intercept alone
            return 1.0
        XtX = self.unpack(np.atleast_2d(eta))[0][0]
        n = float(self.n_examples)
        mean = XtX[-1, features] / n
        cov = XtX[np.ix_(features, features)] / n - np.outer(mean, mean)
        try:
            root = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            return float("inf")
        whitened = np.linalg.solve(root, mean)
        return float(1.0 + whitened @ whitened)

    @property
    def features(self):
        """Positions of the features in X^T X (all but the intercept's column)."""
        return np.arange(self.p - 1 if self.model.fit_intercept else self.p)

    def feature_scales(self, eta):
        """The root mean square of every feature, ``sqrt((X^T X)_jj / N)``, from eta.

        The default clip norm and learning rate assume features of unit scale; far
        from it the clipping distorts the release (results pages, "Generalisation
        probes"). From the release's eta, a post-processing.
        """
        XtX = self.unpack(np.atleast_2d(eta))[0][0]
        return np.sqrt(np.maximum(np.diag(XtX)[self.features], 0.0) / float(self.n_examples))

    def scale_row_diagonal(self, phi, target, precision):
        """The features' diagonal of X^T X as the coefficients' scale rows alone read it.

        The scale row of coefficient j is ``w_scale_j(phi) (X^T X)_jj + r_j(phi)`` with
        ``r`` known, so each diagonal entry is a regression through a known intercept,
        which the trace's feedback on its own regressors does not bias (the means' rows
        have an unknown one, ``X^T y``, and read a diagonal biased upward where the
        window holds few relaxations: results pages, "Small data at small epsilon").
        Noisier than the full regression, so only used for checks.

        Parameters
        ----------
        phi, target, precision
            As in :meth:`normal_equations`.

        Returns
        -------
        values : ndarray of shape (n_features,)
            The estimates of ``(X^T X)_jj``, the intercept's column left out.
        information : ndarray of shape (n_features,)
            Their precisions (inverse variances).
        """
        phi = np.atleast_2d(np.asarray(phi, float))
        n_params = self.model.n_params
        features = np.arange(self.p - 1 if self.model.fit_intercept else self.p)
        parts = self._parts(phi)
        slope = parts["w_scale"][:, features]
        residual = np.asarray(target, float)[:, n_params + features] - parts["r"][
            :, n_params + features]
        weight = np.asarray(precision, float)[n_params + features]
        information = weight * (slope**2).sum(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = weight * (slope * residual).sum(0) / information
        return values, information

    def target_scales(self, eta):
        """The target's root mean square ``sqrt(y^T y / N)`` from eta, and what the
        priors lead one to expect: the prior predictive's root mean square of y given
        the features' mean squares, ``sqrt(E[sigma^2] (1 + w^2 sum_j (X^T X)_jj / N))``,
        and the noise's alone, ``sqrt(E[sigma^2])`` (NaN for both where the noise
        prior has no mean, shape <= 1). From the release's eta, a post-processing.
        """
        m = self.model
        XtX, _, yty = self.unpack(np.atleast_2d(eta))
        n = float(self.n_examples)
        noise = m.noise_scale / (m.noise_shape - 1) if m.noise_shape > 1 else float("nan")
        prior = noise * (1.0 + m.weight_scale**2 * np.maximum(np.diag(XtX[0]), 0.0).sum() / n)
        return float(np.sqrt(max(yty[0], 0.0) / n)), float(np.sqrt(prior)), float(np.sqrt(noise))

    def step_curvature(self, eta):
        """The features' block of X^T X: the intercept keeps the plain step (with
        uncentred features, speeding up the direction it shares with them made the
        intercept's intervals too narrow: results pages, "Uncentred features")."""
        block = self.features
        return block, self.unpack(np.asarray(eta, float)[None])[0][0][np.ix_(block, block)]

    def mean_curvature(self, eta, phi):
        """``E_q[1 / sigma^2] (X^T X + I / s2)`` over all the coefficients, the
        intercept included: the negative ELBO's Hessian in their means at phi."""
        phi = np.atleast_2d(np.asarray(phi, float))
        e1 = self._parts(phi)["e1"][0]
        XtX = self.unpack(np.asarray(eta, float)[None])[0][0]
        block = np.arange(self.p)
        return block, e1 * (XtX + np.eye(self.p) / self.model.weight_scale**2)

    # ----------------------------------------------------------------- posterior

    def unpack(self, eta):
        """(X^T X (..., p, p), X^T y (..., p), y^T y (...)) of statistics (..., k)."""
        eta = np.asarray(eta, float)
        return (unvech(eta[..., :self.n_vech], self.p),
                eta[..., self.n_vech:self.n_vech + self.p], eta[..., -1])

    def _ols(self, eta):
        """Cholesky of X^T X, w_hat and RSS per row; ``ok`` marks usable rows."""
        XtX, Xty, yty = self.unpack(eta)
        M, p = len(eta), self.p
        try:  # usually every row is positive definite
            chol, ok = np.linalg.cholesky(XtX), np.ones(M, bool)
        except np.linalg.LinAlgError:  # a batched Cholesky raises for the whole batch
            chol = np.full((M, p, p), np.nan)
            ok = np.linalg.eigvalsh(XtX)[:, 0] > 0
            if ok.any():
                chol[ok] = np.linalg.cholesky(XtX[ok])
        w_hat = np.full((M, p), np.nan)
        if ok.any():
            w_hat[ok] = np.linalg.solve(XtX[ok], Xty[ok][..., None])[..., 0]
        rss = yty - np.einsum("mi,mi->m", Xty, np.nan_to_num(w_hat))
        ok &= rss > 0
        return XtX, Xty, chol, w_hat, rss, ok

    def log_prior(self, eta):
        m = self.model
        p, s2, a, b = self.p, m.weight_scale**2, m.noise_shape, m.noise_scale
        k = self.n_examples - p
        XtX, Xty, chol, w_hat, rss, ok = self._ols(eta)
        out = np.full(len(eta), -np.inf)
        if not ok.any() or k <= 0:
            return out
        # w_hat | sigma^2 ~ N(0, sigma^2 C), C = s2 I + XtX^-1 = XtX^-1 (I + s2 XtX);
        # RSS | sigma^2 ~ sigma^2 chi2_k. With XtX w_hat = Xty, w_hat^T C^-1 w_hat =
        # w_hat^T (I + s2 XtX)^-1 Xty: one Cholesky and one solve, no inverse
        logdet_xtx = 2 * np.log(np.diagonal(chol[ok], axis1=1, axis2=2)).sum(1)
        inner = np.eye(p) + s2 * XtX[ok]
        logdet_cov = (2 * np.log(np.diagonal(np.linalg.cholesky(inner), axis1=1, axis2=2)).sum(1)
                      - logdet_xtx)
        quad = np.einsum("mi,mi->m", w_hat[ok], np.linalg.solve(inner, Xty[ok][..., None])[..., 0])
        shape = a + (p + k) / 2
        scale = b + (quad + rss[ok]) / 2
        # the Jacobian from (X^T y, y^T y) to (w_hat, RSS) is det(X^T X)
        out[ok] = (-0.5 * logdet_cov + (k / 2 - 1) * np.log(rss[ok]) - shape * np.log(scale)
                   - logdet_xtx)
        return out

    def conditional_posterior(self, eta):
        m = self.model
        p, s2, a, b = self.p, m.weight_scale**2, m.noise_shape, m.noise_scale
        XtX, Xty, yty = self.unpack(eta)
        precision = XtX + np.eye(p) / s2
        cov = np.linalg.inv(precision)
        mean = np.einsum("mij,mj->mi", cov, Xty)
        scale = b + 0.5 * (yty - np.einsum("mi,mi->m", mean, Xty))
        chol = np.linalg.cholesky(0.5 * (cov + np.swapaxes(cov, 1, 2)))
        return NormalInverseGammaComponents(mean, chol, a + self.n_examples / 2,
                                            np.maximum(scale, 1e-300))
