"""The per-coordinate linear-Gaussian model of the noisy gradients and its priors.

The paper's gradient model (eq. 20 / A60), per coordinate i of phi, for the released
pairs after burn-in::

    g_tilde_{t+1} | phi_t ~ N(kappa * a_i * (phi_t - phi*_i), tau_i^2),   a_i = softplus(v_i)

with tau_i = sigma * C / beta_i, the actual noise of the mechanism (the paper's A60
prints 1/beta; its Section 9 item 5), plus an optional known subsampling variance.
Priors (paper H.3 as the authors' code reads it)::

    phi*_i ~ N(mean of phi_t after burn-in, 1)
    v_i    ~ N(a_hat_i, sd(a_hat_i)^2)

where a_hat_i is the least-squares slope of g on phi (the MLE of Theorem 2 with phi*
replaced by the trace mean) and sd(a_hat_i) = tau_i / (kappa sqrt(sum (phi_t - mean)^2))
its standard error.

Optionally (``curvature_bias_correction=True``) the small-sample bias of that slope is
removed from the prior mean: a coordinate of a trace simulated from the model itself is
an AR(1) process with coefficient 1 - lambda_i kappa a_i, whose least-squares estimate
with an estimated mean is biased by -(1 + 3 rho) / n ~ -4 / n (Kendall 1954), so
a_hat_i overstates a_i by about 4 / (lambda_i kappa n). On such simulated traces the
correction raised the coverage of 90 % intervals for slowly relaxing coordinates from
80-88 % to 82-93 % (``benchmarks/bench_postprocessing.py``). On real problems it can
do harm, which is why it is off by default: on UCI Adult (57 coupled parameters) it
lowered the curvature of 40 % of the mean coordinates to its floor, widened their
posteriors 1.7 times and doubled the calibration error at epsilon = 1 (0.042 against
0.022). Everything factorises over coordinates and depends on the trace only through
:class:`~skdpvi.dpvi.TraceStatistics` (duck-typed: any object with its sums), so the
cost does not grow with T.

Given v, phi* is exactly Gaussian (the mean of g is linear in phi*, the prior on phi*
is Gaussian): :meth:`GradientModel.log_marginal_v` integrates it out and
:meth:`GradientModel.conditional_m` gives phi* | v, which is what the inference
backends (:mod:`skdpvi.noise_aware.backends`) work with.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["GradientModel"]

_LOG_2PI = np.log(2 * np.pi)


def _softplus(v):
    return np.logaddexp(0.0, v)


def _per_coord(z, like):
    """Shape a per-coordinate array (d,) to broadcast against ``like`` ((d,) or (d, k))."""
    return z[:, None] if np.ndim(like) == 2 else z


@dataclass
class GradientModel:
    """The per-coordinate linear-Gaussian model of the noisy gradients.

    Work is done in centred coordinates m = phi* - shift, x_t = phi_t - shift.

    Parameters
    ----------
    stats : TraceStatistics
    kappa : float
        Sampling rate.
    tau : ndarray of shape (d,)
        Noise standard deviation of g_tilde per coordinate.
    prior_v_mean, prior_v_sd : ndarray of shape (d,)
    prior_m_mean : ndarray of shape (d,)
    prior_m_sd : float, default=1.0
    """

    stats: object
    kappa: float
    tau: np.ndarray
    prior_v_mean: np.ndarray
    prior_v_sd: np.ndarray
    prior_m_mean: np.ndarray
    prior_m_sd: float = 1.0

    @classmethod
    def from_stats(cls, stats, kappa, noise_std, learning_rate=None, subsampling_variance=None,
                   hessian_prior_scale=1.0):
        """Build the model and its data-driven priors from trace statistics.

        Parameters
        ----------
        stats : TraceStatistics
        kappa : float
        noise_std : ndarray of shape (d,)
            sigma * C / beta.
        learning_rate : ndarray of shape (d,), optional
            Per-coordinate step size of the run; when given, the prior mean of a is
            corrected for the small-sample bias of the slope (see the module
            docstring); when None it is not.
        subsampling_variance : float or ndarray of shape (d,), optional
            Known diagonal Sigma_sub (already divided by beta^2); 0 by default,
            as in the paper's experiments.
        hessian_prior_scale : float, default=1.0
            Multiplies the prior standard deviation of v.
        """
        stats.check_finite()
        if stats.count < 2:
            raise ValueError(
                f"The trace after burn-in has {stats.count} pairs; at least 2 are needed. "
                "Increase max_iter or lower burn_in."
            )
        tau2 = np.asarray(noise_std, float) ** 2
        if subsampling_variance is not None:
            tau2 = tau2 + np.asarray(subsampling_variance, float)
        tau = np.sqrt(tau2)
        n = stats.count
        x_mean = stats.sum_x / n
        ss_x = np.maximum(stats.sum_xx - stats.sum_x * x_mean, 1e-300)  # sum (x - mean)^2
        s_gx = stats.sum_gx - stats.sum_g * x_mean
        a_hat = np.abs(s_gx) / (kappa * ss_x)
        if learning_rate is not None:
            bias = 4.0 / (np.asarray(learning_rate, float) * kappa * n)
            a_hat = np.maximum(a_hat - bias, 0.25 * a_hat)
        a_sd = hessian_prior_scale * tau / (kappa * np.sqrt(ss_x))
        return cls(stats=stats, kappa=float(kappa), tau=tau, prior_v_mean=a_hat,
                   prior_v_sd=a_sd, prior_m_mean=x_mean)

    @property
    def dim(self):
        return len(self.tau)

    def _columns(self, like):
        """Per-coordinate constants shaped to broadcast against ``like`` (cached)."""
        key = np.ndim(like)
        cache = self.__dict__.setdefault("_column_cache", {})
        if key not in cache:
            s = self.stats
            cache[key] = tuple(
                _per_coord(np.asarray(z, float), like)
                for z in (self.tau**2, s.sum_g, s.sum_x, s.sum_gg, s.sum_gx, s.sum_xx,
                          self.prior_m_mean, np.full(self.dim, 1.0 / self.prior_m_sd**2),
                          self.prior_v_mean, self.prior_v_sd)
            )
        return cache[key]

    def _conditional(self, v):
        """Precision P, P * mean of m | v, and the m-free part K, broadcasting v."""
        c = self.kappa * _softplus(v)
        t2, n_sg, n_sx, n_gg, n_gx, n_xx, m0, w0 = self._columns(v)[:8]
        # Likelihood: sum_t (g - c x + c m)^2 / tau^2 expanded with the sums.
        resid_sq = n_gg - 2 * c * n_gx + c**2 * n_xx  # sum (g - c x)^2
        lin = n_sg - c * n_sx  # sum (g - c x)
        prec = self.stats.count * c**2 / t2 + w0
        b = w0 * m0 - c * lin / t2
        k = resid_sq / t2 + w0 * m0**2
        return prec, b, k, t2

    def log_likelihood(self, m, v):
        """log p(g_tilde | phi_t, phi* = shift + m, v) summed over t, per coordinate.

        ``m`` and ``v`` have shape (d,) or (d, k).
        """
        s = self.stats
        c = self.kappa * _softplus(v)
        t2, sg, sx, gg, gx, xx = (
            _per_coord(z, v) for z in (self.tau**2, s.sum_g, s.sum_x, s.sum_gg, s.sum_gx, s.sum_xx)
        )
        q = gg - 2 * c * gx + c**2 * xx + 2 * c * m * (sg - c * sx) + s.count * c**2 * m**2
        return -0.5 * (s.count * (_LOG_2PI + np.log(t2)) + q / t2)

    def log_prior_v(self, v):
        mean, sd = self._columns(v)[8:]
        return -0.5 * ((v - mean) / sd) ** 2 - np.log(sd) - 0.5 * _LOG_2PI

    def log_prior_m(self, m):
        sd = self.prior_m_sd
        return -0.5 * ((m - _per_coord(self.prior_m_mean, m)) / sd) ** 2 - np.log(sd) - 0.5 * _LOG_2PI

    def log_joint(self, m, v):
        """Unnormalised log posterior of (m, v), per coordinate."""
        return self.log_likelihood(m, v) + self.log_prior_m(m) + self.log_prior_v(v)

    def log_marginal_v(self, v):
        """log p(v | trace) up to a constant, with m integrated out.

        ``v`` has shape (d,) or (d, k) (k values per coordinate).
        """
        prec, b, k, t2 = self._conditional(v)
        n = self.stats.count
        log_lik = -0.5 * (n * (_LOG_2PI + np.log(t2)) + np.log(prec) + k - b**2 / prec)
        return log_lik + self.log_prior_v(v)

    def conditional_m(self, v):
        """Mean and standard deviation of m | v (same shape as v)."""
        prec, b, _, _ = self._conditional(v)
        return b / prec, 1.0 / np.sqrt(prec)
