"""DPBayesianLinearRegression: regression with a noise-aware posterior."""

import math

import numpy as np
from sklearn.base import RegressorMixin

from ..models import LinearRegressionModel
from ..noise_aware.preconditioning import recording_step_matrix
from ..utils.validation import is_positive_real
from ._base import _BaseDPBayesianRegression, _to_seed
from ._release_checks import check_release, check_rows_for_budget
from ._settings import STATISTICS

#: Values of ``mean_preconditioning``.
_MEAN_PRECONDITIONING = ("auto", "correlation", "none")
#: Largest number of coefficients (intercept included) for which "auto" uses the
#: correlation step matrix: measured up to 30 features (TARP 0.248 / 0.152 -> 0.085 /
#: 0.082 at rho 0.9, N = 20,000); each of its ten estimates costs ~0.8 s at 30, 4 s at 40.
_AUTO_MAX_WEIGHTS = 31
#: Most features the statistics posterior takes: its statistics grow as p^2 and its
#: regression over them as p^4-p^6 (a default fit, 5,000 rows: 40 features 11.5 s and
#: 0.76 GB peak, 50 features 18.6 s and 1.1 GB, 60 features 33 s and 1.9 GB; 1,000
#: features would be a 1.9 TiB allocation), so beyond it the fit refuses before the
#: private run. (40 until the twentieth session; calibration measured at 50 and 60
#: features, ``benchmarks/ablation_linear/wide_features.py``.)
_STATISTICS_MAX_FEATURES = 60
#: ``learning_rate_scale="auto"`` with the statistics posterior: the trace learns
#: X^T X from the wander of the means, and 2.5 times the paper's step widens the
#: wander enough to bring too-wide intervals of correlated or low-information designs
#: into spec (results pages, "A larger step for the statistics posterior"; K = 200).
_STATISTICS_LEARNING_RATE_SCALE = 2.5


class DPBayesianLinearRegression(RegressorMixin, _BaseDPBayesianRegression):
    """Differentially private Bayesian linear regression (NA-DPVI).

    Fits y | x ~ N(x . w + b, sigma^2) with the normal-inverse-gamma prior
    sigma^2 ~ InvGamma(prior_noise_shape, prior_noise_scale) and
    (w, b) | sigma^2 ~ N(0, prior_weight_scale^2 sigma^2 I) by DP-SGD variational
    inference under an (epsilon, delta) budget, then turns the privatised trace into
    a posterior that also carries the DP noise (Alrawajfeh, Jälkö & Honkela, 2025).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget epsilon (> 0) for the whole fit.
    delta : float, default=1e-5
        Privacy budget delta, in (0, 1); well below 1 / n_samples. ``fit`` warns
        (:class:`~skdpvi.exceptions.PrivacyWarning`) when ``delta >= 1 / n_samples``.
    max_iter : int, default=10_000
        Number of DP-SGD steps T.
    sampling_rate : float, default=0.1
        Poisson sampling rate kappa in (0, 1].
    clip_norm : float or "auto", default="auto"
        Per-example gradient norm bound C. "auto" is
        ``3 * sqrt(n_features + 1) / sqrt(prior mean of sigma^2)``: three times the
        gradient norm of an example with a one-sigma residual when the features have
        unit scale and the noise is at its prior mean. Choose it from public
        knowledge (feature and target ranges), never from the private data.
    learning_rate : float or "auto", default="auto"
    learning_rate_scale : float or "auto", default="auto"
        lambda_c of the paper's learning-rate heuristic. "auto" is 2.5 with
        ``inference="statistics"`` (the default): the statistics posterior learns
        X^T X from how the released gradients change as the means wander, and a
        wider wander identifies it better, which brings the too-wide intervals of
        correlated or low-information designs into spec (results pages, "A larger
        step for the statistics posterior"); 1 with the paper's gradient model
        (``inference`` "exact", "emcee", "laplace"), whose noise-variance gradient
        the wander would bias (user guide).
    scale_preconditioning : float or "auto", default="auto"
        See :class:`DPBayesianLogisticRegression`.
    n_mc_samples : int, default=10
        Monte Carlo draws per step of the ELBO's gradient (unused with
        ``elbo_gradients="closed_form"``).
    elbo_gradients : {"monte_carlo", "closed_form"}, default="monte_carlo"
        See :class:`DPBayesianLogisticRegression`; here "closed_form" is exact in
        the coefficients and Gauss-Hermite quadrature in the noise variance.
    burn_in : float or int, default=0.2
    mean_preconditioning : {"auto", "correlation", "none"}, default="auto"
        How the coefficient means step after burn-in. "correlation": the features'
        means multiplied by the inverse correlation matrix of their block of X^T X as
        the released trace estimates it
        (:func:`~skdpvi.noise_aware.recording_step_matrix`; re-estimated at each
        tenth of the recording window; the intercept keeps the plain step), so that
        every soft direction relaxes as fast as an uncorrelated coordinate: with strongly correlated features the
        soft directions otherwise barely move, the trace identifies X^T X poorly
        there and the intervals come out too wide (results pages). The same matrix
        caps how fast any direction of the means relaxes (at most the whole
        distance to the optimum per step, :func:`~skdpvi.noise_aware.rate_cap`):
        the rate grows with the rows, the features' scale and their correlation,
        and a feature at sd 10, N = 100,000 rows at epsilon 3 or 50,000 rows at
        equicorrelation 0.9 made the plain step diverge (results pages, "A cap on
        the relaxation rate"). A post-processing of the release: the privacy
        guarantee is unchanged. "none": the plain step.
        "auto" is "correlation" with ``inference="statistics"`` (which needs the
        recorded trace) and at most 30 features (it was measured up to 30, and each
        of its ten estimates of X^T X solves a regression in about p^2 / 2
        dimensions: with 40 features it would add about 40 CPU-s to a 17 s fit),
        "none" otherwise.
    inference : {"statistics", "emcee", "exact", "laplace", "last_iterate"}, default="statistics"
        Post-processing. "statistics" (the default) infers the data statistics
        (X^T X, X^T y, y^T y) behind the released trace and mixes the exact
        normal-inverse-gamma posteriors given them
        (:func:`~skdpvi.noise_aware.statistics_posterior`): its gradient model is
        exact wherever DP-SGD's wander takes the trace, so the wander biases nothing.
        With little data at a small epsilon (10 features, 300-500 rows at epsilon
        0.3; 20 features up to 1,000) the trace identifies X^T X with an upward bias
        and the intervals are too narrow; the fit warns
        (:class:`~sklearn.exceptions.ConvergenceWarning`) when the recording window
        holds fewer than 25 relaxation times of the coefficients, as the release
        reads it (``inference_diagnostics_["window_relaxations"]``; results pages,
        "Small data at small epsilon"). At most 60 features (its cost grows as the
        fourth power of their number or faster: 33 s and 1.9 GB at 60; wider data
        raise before the private run). The others are the paper's gradient model of
        phi* (see :class:`DPBayesianLogisticRegression`).
    n_posterior_samples : int, default=1000
        Mixture components, and draws used for predictions.
    prior_weight_scale : float, default=2.0
        w in coefficients | sigma^2 ~ N(0, w^2 sigma^2); the paper uses w^2 = 4.
    prior_noise_shape : float, default=20.0
    prior_noise_scale : float, default=0.5
        InvGamma(shape, scale) prior of the noise variance (the paper's values:
        prior mean 0.026, i.e. a residual sd of about 0.16, known to +-25 %).
        Set them from public knowledge of the (publicly scaled) target: for a
        guess ``s0`` of the residual sd, ``prior_noise_scale = s0**2 *
        (prior_noise_shape - 1)``; a shape of 3-5 for a rough guess. The user
        guide ("Scaling the target and choosing the priors") gives the recipe.
    onehot_blocks : sequence of sequences of int, default=None
        Columns of each categorical feature one-hot encoded with all its categories
        (public schema): the posterior takes the prior, its exact posterior, along the
        directions they leave the likelihood flat in (user guide, "One-hot blocks").
    fit_intercept : bool, default=True
    device : str, default="cpu"
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        0: silent; 1: progress lines for the accounting and the post-processing and
        the DP-SGD progress bar; 2: also the DP-SGD settings and the backend's
        diagnostics. See :class:`DPBayesianLogisticRegression`.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Posterior mean of the coefficients.
    intercept_ : float
    noise_variance_ : float
        Posterior mean of sigma^2.
    posterior_ : NoiseAwarePosterior
    epsilon_, delta_, noise_multiplier_, clip_norm_, clip_histogram_noise_, n_iter_,
    burn_in_, param_names_, n_features_in_, feature_names_in_, dpvi_result_,
    inference_diagnostics_
        As in :class:`DPBayesianLogisticRegression` (``clip_histogram_noise_`` is
        always None: ``clip_norm="auto"`` is the fixed rule here); ``param_names_`` ends with
        ``noise_variance``. With ``inference="statistics"``,
        ``inference_diagnostics_["window_start"]`` is the first step of the window
        the posterior was fitted on: the burn-in, or a later start where the
        split-window check rejected the recorded window and accepted (or rejected
        less) a later part of it; ``dpvi_result_.burn_in`` is that step too, and
        ``burn_in_`` the run's; ``["correlation_pooling"]`` is "on", or "dropped" (pooled
        correlations left no valid draw; refitted without). With ``inference="statistics"`` and an intercept,
        ``inference_diagnostics_["intercept_inflation"]`` is the factor by which
        the features' means inflate the intercept's variance, as the release
        estimates it (1 for centred features); above 6 the fit warns
        (:class:`~skdpvi.exceptions.IdentifiabilityWarning`): centre the features
        with public values. ``inference_diagnostics_["feature_scales"]`` is every
        feature's root mean square as the release estimates it; above 4 (with
        ``clip_norm="auto"``) the fit warns too: scale the features with public values.
        ``inference_diagnostics_["target_scale"]`` is the target's; more than 4 times
        what the priors predict, or under a quarter of their noise sd, warns too.
        ``inference_diagnostics_["window_relaxations"]`` (and ``..._sd``, its
        standard error) is how many relaxation times of the coefficient means the
        recording window holds, read off the coefficients' scale gradients (which
        the trace's feedback does not bias); below 25 the fit warns
        (:class:`~sklearn.exceptions.ConvergenceWarning`) that the intervals can be
        too narrow, as measured on 5-20 features at epsilon 0.3-1 (not on every
        design: 5 features on 400 rows at epsilon 1 warned in 129 of 200 fits and
        was calibrated): more rows, a larger epsilon or fewer features help; a
        reading within its standard error of zero warns that the release does not
        resolve it. ``inference_diagnostics_["noise_variance_prior_level"]`` is the
        noise variance prior's cumulative probability at the posterior median;
        outside 0.001-0.999 the fit warns that the data contradict the noise prior.
        ``inference_diagnostics_["batch_over_noise"]`` (every fit) is
        ``sampling_rate * n_samples / (noise_multiplier * sqrt(p))``, p the
        coefficients with the intercept, from public settings only; below 0.125 the
        fit warns "Few rows for this privacy budget".

    Notes
    -----
    Sample weights are not accepted: they change the per-example sensitivity.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi import DPBayesianLinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3))
    >>> y = X @ [0.5, -0.2, 0.1] + rng.normal(0, 0.2, 2000)
    >>> reg = DPBayesianLinearRegression(epsilon=1.0, max_iter=1000, inference="exact",
    ...                                  random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:2], return_std=True)
    >>> mean.shape, std.shape
    ((2,), (2,))
    """

    _y_numeric = True

    def __init__(self, *, epsilon=1.0, delta=1e-5, max_iter=10_000, sampling_rate=0.1,
                 clip_norm="auto", learning_rate="auto", learning_rate_scale="auto",
                 scale_preconditioning="auto", n_mc_samples=10, elbo_gradients="monte_carlo",
                 burn_in=0.2, mean_preconditioning="auto", inference="statistics",
                 n_posterior_samples=1000, prior_weight_scale=2.0, prior_noise_shape=20.0,
                 prior_noise_scale=0.5, onehot_blocks=None, fit_intercept=True, device="cpu",
                 random_state=None, verbose=0):
        super().__init__(
            epsilon=epsilon, delta=delta, max_iter=max_iter, sampling_rate=sampling_rate,
            clip_norm=clip_norm, learning_rate=learning_rate,
            learning_rate_scale=learning_rate_scale,
            scale_preconditioning=scale_preconditioning, n_mc_samples=n_mc_samples,
            elbo_gradients=elbo_gradients, burn_in=burn_in, inference=inference,
            n_posterior_samples=n_posterior_samples,
            fit_intercept=fit_intercept, device=device, random_state=random_state,
            verbose=verbose,
        )
        self.mean_preconditioning = mean_preconditioning
        self.prior_weight_scale = prior_weight_scale
        self.prior_noise_shape = prior_noise_shape
        self.prior_noise_scale = prior_noise_scale
        self.onehot_blocks = onehot_blocks

    def _step_matrix(self, engine, n_samples):
        """The engine's ``step_matrix`` under ``mean_preconditioning`` (or None)."""
        model = engine["model"]
        if self.mean_preconditioning == "none" or self.inference != STATISTICS or not (
                0 < engine["burn_in"] < engine["n_steps"]):
            return None
        if self.mean_preconditioning == "auto" and model.n_weights > _AUTO_MAX_WEIGHTS:
            return None
        n = model.n_params
        beta = np.r_[np.ones(n), np.full(n, engine["preconditioner"])]
        return recording_step_matrix(
            model.data_statistics(n_samples), sampling_rate=engine["sampling_rate"],
            noise_std=engine["noise_multiplier"] * engine["clip_norm"] / beta,
            learning_rate=engine["learning_rate"] * beta)

    def _default_learning_rate_scale(self, dim):
        # statistics posterior: 2.5, more wander identifies X^T X better (results pages,
        # "A larger step for the statistics posterior"); the paper's gradient model: 1,
        # the coefficients' wander inflates the residuals its noise-variance gradient
        # sees (user guide)
        return _STATISTICS_LEARNING_RATE_SCALE if self.inference == STATISTICS else 1.0

    def _make_model(self, n_features):
        # validated here, before the private run starts
        if self.inference == STATISTICS and n_features > _STATISTICS_MAX_FEATURES:
            raise ValueError(
                f"inference='statistics' takes at most {_STATISTICS_MAX_FEATURES} features "
                f"(X has {n_features}): its post-processing grows as the fourth power of "
                "the number of features or faster (60 features: about 35 s and 1.9 GB). "
                "Reduce the features with a public projection first, or use "
                "inference='exact' (the paper's gradient model), which runs at any width "
                "but is poorly calibrated there: at 50 features its noise variance's 90 % "
                "intervals covered 11 % of the truths (user guide).")
        for name in ("prior_weight_scale", "prior_noise_shape", "prior_noise_scale"):
            value = getattr(self, name)
            if not is_positive_real(value):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")
        if self.mean_preconditioning not in _MEAN_PRECONDITIONING:
            raise ValueError(f"mean_preconditioning must be one of {_MEAN_PRECONDITIONING}, "
                             f"got {self.mean_preconditioning!r}.")
        if self.mean_preconditioning == "correlation" and self.inference != STATISTICS:
            raise ValueError("mean_preconditioning='correlation' estimates X^T X from the "
                             "recorded trace and needs inference='statistics', got "
                             f"inference={self.inference!r}.")
        return LinearRegressionModel(n_features, self.prior_weight_scale,
                                     self.prior_noise_shape, self.prior_noise_scale,
                                     self.fit_intercept)

    def _default_clip_norm(self, model):
        prior_var = model.noise_scale / max(model.noise_shape - 1.0, 1.0)
        return 3.0 * math.sqrt(model.n_weights) / math.sqrt(prior_var)

    def fit(self, X, y):
        """Fit the noise-aware posterior under the privacy budget.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(1000, 2)); y = X @ [0.3, 0.1] + rng.normal(0, 0.2, 1000)
        >>> DPBayesianLinearRegression(max_iter=300, inference="exact",
        ...                            random_state=0).fit(X, y).n_iter_
        300
        """
        self._fit(*self._fit_inputs(X, y))
        return self

    def _fit_inputs(self, X, y):
        X, y = self._validate_fit_data(X, y)
        return X, np.asarray(y, dtype=np.float32)  # the engine's precision

    def _fit_from_result(self, result, settings, n_samples, seeds):
        theta_mean = super()._fit_from_result(result, settings, n_samples, seeds)
        self.noise_variance_ = float(theta_mean[-1])
        # checks of the design on the release's estimate of the data statistics
        # (after a fallback too: a design far off the priors' scale is its usual cause)
        eta = self.inference_diagnostics_.get("eta_mean")
        if eta is not None:
            statistics = settings.engine["model"].data_statistics(n_samples)
            check_release(self, statistics, eta,
                          fallback="fallback" in self.inference_diagnostics_,
                          result=self.dpvi_result_)  # the window the posterior used
        check_rows_for_budget(self, n_samples, settings.engine["sampling_rate"],
                              settings.engine["noise_multiplier"])
        return theta_mean

    def _split(self, draws):
        n = self.n_features_in_
        w = draws[:, :n]
        b = draws[:, n] if self._fitted_intercept else np.zeros(len(draws))
        return w, b, draws[:, -1]

    def predict(self, X, return_std=False):
        """Posterior predictive mean (and standard deviation) of y.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation, which includes the
            noise variance (as :meth:`sklearn.linear_model.BayesianRidge.predict`).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only when ``return_std`` is True.

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(1000, 2)); y = X @ [0.3, 0.1] + rng.normal(0, 0.2, 1000)
        >>> reg = DPBayesianLinearRegression(max_iter=300, inference="exact",
        ...                                  random_state=0).fit(X, y)
        >>> reg.predict(X[:3]).shape
        (3,)
        """
        X = self._check_X(X)
        w, b, var = self._split(self._theta_draws)
        means = X @ w.T + b  # (n_samples, n_draws)
        y_mean = means.mean(1)
        if not return_std:
            return y_mean
        return y_mean, np.sqrt(means.var(1) + var.mean())

    def sample_y(self, X, n_samples=1, random_state=None):
        """Draw from the posterior predictive distribution of y.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
        random_state : int, RandomState, Generator or None, default=None

        Returns
        -------
        ndarray of shape (n_samples_X, n_samples)
            As :meth:`sklearn.gaussian_process.GaussianProcessRegressor.sample_y`.

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(1000, 2)); y = X @ [0.3, 0.1] + rng.normal(0, 0.2, 1000)
        >>> reg = DPBayesianLinearRegression(max_iter=300, inference="exact",
        ...                                  random_state=0).fit(X, y)
        >>> reg.sample_y(X[:4], n_samples=5, random_state=0).shape
        (4, 5)
        """
        X = self._check_X(X)
        seed = _to_seed(random_state)
        rng = np.random.default_rng(seed)
        draws = self.posterior_.sample(n_samples, random_state=rng)
        w, b, var = self._split(draws)
        mean = X @ w.T + b
        return mean + np.sqrt(var) * rng.standard_normal(mean.shape)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        return tags
