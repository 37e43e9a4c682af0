"""DPBayesianLogisticRegression: binary classification with a noise-aware posterior."""

import math

from sklearn.base import ClassifierMixin

from ..models import LogisticRegressionModel
from ..utils.validation import is_positive_real
from ._base import _BaseDPBayesianRegression
from ._input_checks import binary_targets
from ._logistic_decorrelation import _DecorrelationMixin
from ._logistic_error_models import _LogisticErrorModels
from ._logistic_full_rank import _FullRankMixin
from ._logistic_predictions import _LogisticPredictions
from ._logistic_release_checks import (check_logistic_fit, check_logistic_scales,
                                       check_matched_centred)


class DPBayesianLogisticRegression(ClassifierMixin, _LogisticPredictions,
                                   _LogisticErrorModels, _DecorrelationMixin,
                                   _FullRankMixin, _BaseDPBayesianRegression):
    """Differentially private Bayesian logistic regression (NA-DPVI).

    Fits y | x ~ Bernoulli(sigmoid(x . w + b)) with prior (w, b) ~ N(0, prior_scale^2 I)
    by DP-SGD variational inference under an (epsilon, delta) budget, then turns the
    privatised optimisation trace into a posterior that also carries the DP noise
    (Alrawajfeh, Jälkö & Honkela, AISTATS 2025). Predictive probabilities average the
    likelihood over that posterior.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy budget epsilon (> 0) for the whole fit.
    delta : float, default=1e-5
        Privacy budget delta, in (0, 1); well below 1 / n_samples. ``fit`` warns
        (:class:`~skdpvi.exceptions.PrivacyWarning`) when ``delta >= 1 / n_samples``,
        where the guarantee is meaningless.
    max_iter : int, default=10_000
        Number of DP-SGD steps T.
    sampling_rate : float, default=0.1
        Poisson sampling rate kappa in (0, 1]; the expected batch is kappa * n_samples.
    clip_norm : float or "auto", default="auto"
        Per-example gradient norm bound C. "auto" measures the rows' norms
        ``||(x, 1)||`` privately, at 5 % of the budget (in Gaussian-DP terms; the
        DP-SGD's noise multiplier is 2.6 % larger for it): a noisy histogram on a
        public grid (edges a factor sqrt(2) apart, from ``2 * sqrt(n_features + 1)``
        down) gives the lowest edge that at most 5 % of the rows exceed, and C is one
        grid step above it, at most ``2 * sqrt(n_features + 1)``
        (:mod:`skdpvi.dpvi.clip_bound`). Features scaled to [0, 1] thus get a C near
        their rows' norms instead of one made for unit-variance features, and
        several times less noise (UCI Adult: 5.3 instead of 15.1); unit-variance
        features keep ``2 * sqrt(n_features + 1)``. Where the histogram's noise is too
        large for the number of rows to lower the bound at all (below about 1,160
        rows at epsilon 1, 9,550 at 0.1, with ``delta=1e-5``), nothing is spent on it
        and C is ``2 * sqrt(n_features + 1)``, twice the norm of a fully
        misclassified example when the features have unit scale.
        ``clip_histogram_noise_`` says which happened. A number fixes C: choose
        it from public knowledge of the feature ranges (the largest possible
        ``||(x, 1)||``), never from the private data.
    learning_rate : float or "auto", default="auto"
        Step size lambda; "auto" is the paper's heuristic (A58).
    learning_rate_scale : float or "auto", default="auto"
        lambda_c of the heuristic; "auto" is sqrt(d / 2) with d = 2 * n_params (the
        paper's alternative to 1). With 1, the means of a 57-parameter model relax
        over thousands of steps and the noise-aware posterior of the slow ones is
        nearly uninformative; on Adult that worsened calibration 2-3 times (user
        guide). With coefficients known to be large (logits of several units) a
        larger value, ``prior_scale * sqrt(n_params)``, moved the lagging trace
        further and lowered the TARP error under prior references 2-4 times; with a
        prior wider than the coefficients it made the intervals far too narrow (user
        guide, "Logistic regression: large coefficients").
    scale_preconditioning : float or "auto", default="auto"
        beta for the variational scale parameters (the paper's gradient
        preconditioning); "auto" is ``1 / (learning_rate * sqrt(max_iter))``, which
        makes the scale parameters converge in about max_iter / 20 steps at any
        budget, capped at ``C_scales * n_samples / (5 * sqrt(n_params))`` so that
        their per-example gradients stay inside their clipping budget (see the
        user guide).
    n_mc_samples : int, default=10
        Monte Carlo draws per step of the ELBO's gradient (unused with
        ``elbo_gradients="closed_form"``).
    elbo_gradients : {"monte_carlo", "closed_form"}, default="monte_carlo"
        How DP-SGD computes each example's ELBO gradient. "monte_carlo" averages
        over ``n_mc_samples`` reparameterised draws shared by the batch (the
        paper's DPVI); "closed_form" takes the exact expectation over the
        variational posterior (Gauss-Hermite quadrature of each example's Gaussian
        logit), which removes the Monte Carlo noise from the released gradients
        (either ``variational_family``). Sampling, clipping, noise and accounting
        are the same; measured, neither calibrates better (results pages).
    burn_in : float or int, default=0.2
        Fraction of max_iter (float) or number of steps (int) discarded before the
        post-processing.
    inference : {"exact", "emcee", "laplace", "last_iterate", "statistics"}, default="exact"
        Post-processing backend. "exact", "emcee" and "laplace" fit a gradient model
        of phi* (``error_model`` says which): "exact" computes its posterior in
        closed form, "emcee" samples it (the paper), "laplace" approximates it;
        "last_iterate" ignores the DP noise (baseline). "statistics" infers a
        quadratic model of the log-likelihood (dense curvature, linear-response
        components; :func:`~skdpvi.noise_aware.statistics_posterior`): not the
        default, a trace identifies that curvature poorly (user guide); a posterior
        wider than the prior warns (``inference_diagnostics_["sd_over_prior_sd"]``).
    n_posterior_samples : int, default=1000
        Draws of phi* forming the mixture posterior, and draws used for predictions.
    error_model : {"auto", "dense", "dense_shrunk", "dense_matched", "diagonal", "coupled"}, \
default="auto"
        How the errors of the optimum phi* of the variational means are modelled
        with ``inference`` "exact", "emcee" or "laplace". "auto" with "exact" (the
        default) chooses per fit, from the release: "dense_matched" where the
        recording window holds at least 5 relaxation times of the median mean
        coordinate, its wander shows the features centred and ``prior_scale`` is at
        most 1.5, "dense_shrunk" where it holds that many relaxations but one of the
        other two fails, "dense" where it holds fewer or the batch is below 0.3 of the
        noise (``inference_diagnostics_["auto_error_model"]`` holds the statistics, or
        the prior scale when the bound decided; results pages, "The logistic default
        chosen per fit": on centred Gaussian, heavy-tailed and correlated designs TARP
        0.036-0.067 against the dense model's 0.10-0.17, equal or better than "dense"
        on uncentred ones, worse where one-hot columns are not declared in
        ``onehot_blocks``; "The fallback of the per-fit choice" for "dense_shrunk",
        jointly less narrow, and the prior bound: with ``prior_scale`` 2-3, large
        coefficients whose trace still lags, matching left 90 % intervals covering
        65-91 %, the fallback 78-94 %, neither calibrated under prior references).
        With "emcee" and "laplace" "auto" is "diagonal" (the paper's model, which
        they sample or approximate). "diagonal": the paper's
        gradient model, one coordinate at a time, errors independent, mean-field
        components. "coupled": the means' draws come from the dense error model
        that the covariance of the released trace's wander implies
        (:func:`~skdpvi.noise_aware.coupled_means`): coupled coefficients err
        together, as they do whenever features are correlated. "dense": the same
        dense curvature, corrected for the finite recording window, gives both the
        errors of the means and the components' covariance, the linear-response
        covariance H^-1 instead of mean-field's conditional variances
        (:func:`~skdpvi.noise_aware.linear_response_posterior`; the backend's draws
        are not used; conjugate, so it is computed exactly whatever the backend).
        Post-processing only. Dense replaced the diagonal model as the default
        because, on designs with known coefficients beyond the paper's (larger prior
        scales, correlated features), the diagonal model's intervals were up to 4
        times too narrow where the posterior is correlated, while the dense model's
        were too wide, by up to 1.8 times, where the trace holds few relaxations
        (results pages, "Choosing the logistic default"). "dense_shrunk": "dense"
        with the window's wander covariance shrunk fully towards the uncorrelated
        covariance the released mean-field scales imply
        (:func:`~skdpvi.noise_aware.shrink_wander_covariance`,
        directions that clear the noise bulk kept): a few dozen effective samples
        in p dimensions spread the wander's eigenvalues, which "dense" reads as
        curvatures far too stiff along some combinations of the coefficients, where
        its posterior is then several times too narrow (90 % credible ellipsoids
        covering 0-1 % of the truths on 10-20 Gaussian features). Shrunk: 56-83 %
        there, with equal or better TARP, but where the coefficient vector lags
        inward (15 features at epsilon 0.3) a worse TARP with prior references
        (0.258 against 0.141) and on UCI Adult at epsilon 0.1 a worse predictive
        calibration (0.047 against 0.028); results pages, "The joint check that TARP
        misses". For joint statements about the coefficients. "dense_matched":
        "dense" with the curvature matched to the diagonal the released mean-field
        scales fix (:func:`~skdpvi.noise_aware.matched_curvature`; ``onehot_blocks``'
        flat directions at the prior's; the diagonal, here and in "dense_shrunk", read
        with the scales' own wander undone, :func:`~skdpvi.noise_aware.mean_field_curvature`,
        twenty-ninth session), the wander's noise bulk shrunk first where
        the window holds at least 10 relaxation times and at most 0.85 means per
        relaxation (twenty-eighth session; ten Gaussian features: TARP 0.049 / 0.051
        -> 0.020 / 0.030): for coefficients of centred continuous
        features (20 Gaussian features: TARP 0.034 against 0.169, 90 % intervals
        covering 86-94 % against 94-99 %), worse on uncentred ones (it warns), on
        one-hot data without ``onehot_blocks`` and on Adult's predictions at
        epsilon 0.1 (results pages, "A curvature matched to the mean-field diagonal").
    wander_correction : {"auto", "none", "probit"}, default="auto"
        Whether to remove the outward bias that the wander of constant-step DP-SGD
        gives the means: averaged over the trace, each example's expected sigmoid
        sees a logit variance grown by the wander, as if the posterior were wider,
        and the fitted optimum is pushed outward. "probit" removes it to first order
        with the probit approximation of the sigmoid, from the release alone
        (:func:`~skdpvi.noise_aware.remove_wander_bias`; needs ``fit_intercept`` and
        ``inference`` "emcee", "exact" or "laplace"); the dense error models read the
        wander's width through their own curvature, the others off the release's
        ``Cov(g, x)`` (:func:`~skdpvi.noise_aware.logistic_wander_width`).
        Post-processing only. "auto": "probit" when the error model in use is
        "dense_matched" (chosen or given) and the model has an intercept, "none"
        otherwise: the measured combination (results pages, "The Jensen width ...").
    onehot_blocks : sequence of sequences of int, default=None
        Columns of each categorical feature one-hot encoded with all its categories
        (public schema): the posterior takes the prior along the directions they
        leave the likelihood flat in (user guide, "One-hot blocks").
    decorrelation : float in (0, 1) or None, default=None
        Fit in the eigenbasis of the rows' Gram matrix (with the intercept column),
        released privately with this share of the budget's mu^2 and composed with
        the DP-SGD run by the accountant (``epsilon_`` covers the whole fit); the
        rows enter that release scaled to norm at most ``1.5 sqrt(n_features + 1)``.
        There the curvature is nearly diagonal, and the shrunk dense error model
        (what "auto" means then) describes correlated features (the collinearity
        warning is not shown with it); without strong correlation the intervals
        come out too wide: not the default (user guide, "Correlated features").
        ``rotation_`` and ``dpvi_result_`` are in the rotated coordinates;
        ``wander_correction="probit"`` is not available with it.
    variational_family : {"auto", "mean_field", "full_rank"}, default="auto"
        "full_rank": DP-SGD on ``N(m, L L^T)``, same mechanism and accounting
        (:func:`~skdpvi.dpvi.run_dpvi_full_rank`); needs the default ``inference``,
        ``error_model`` and no ``decorrelation``. "auto": full rank at most 13
        parameters, ``sampling_rate * n_samples * n_params^2 <= 5e5``, 16 scale
        relaxations (``2 sampling_rate sqrt(max_iter)``, fewer for few rows at small
        budgets), ``prior_scale <= 1`` and those options at their defaults, else mean field
        (Adult); short runs, and a full rank with ``prior_scale > 1``, warn (user
        guide, "Correlated features: a full-rank variational family").
    prior_scale : float, default=1.0
        Prior standard deviation of every coefficient and the intercept. Above 1.5
        the default error model never matches the curvature (see ``error_model``), a
        public choice keyed on the public prior.
    fit_intercept : bool, default=True
    device : str, default="cpu"
        Torch device for DP-SGD ("cuda" if available).
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        What ``fit`` prints. 0: nothing. 1: a line after the accounting (noise
        multiplier, certified epsilon, time), the DP-SGD progress bar (tqdm, on
        stderr) and a line after the post-processing (backend, number of draws,
        time). 2 and more: also the DP-SGD settings (expected batch, clip norm,
        learning rate, preconditioning) and the backend's diagnostics (emcee:
        effective sample size, autocorrelation time and acceptance fraction, as
        min / median / max over the coordinates). The lines go to stdout and
        start with ``[skdpvi]``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Posterior mean of the coefficients.
    intercept_ : float
    classes_ : ndarray of shape (2,)
    posterior_ : NoiseAwarePosterior
    epsilon_, delta_ : float
        Privacy actually spent (certified PRV upper bound on epsilon).
    noise_multiplier_ : float
    clip_norm_ : float
        The clipping norm of the run (chosen privately with ``clip_norm="auto"``).
    clip_histogram_noise_ : float or None
        Noise standard deviation of the private row-norm histogram that chose
        ``clip_norm_``; None if none ran (C fixed, no budget spent on it). Its
        mechanism is part of the fit's privacy accounting (``epsilon_`` covers both).
    n_iter_ : int
    burn_in_ : int
    variational_family_ : str
        The family fitted ("auto" resolved): "mean_field" or "full_rank".
    error_model_ : str or None
        The error model used ("auto" resolved), None without one (full rank too).
    wander_correction_ : str
        The wander correction used ("auto" resolved): "probit" or "none".
    param_names_ : ndarray of str
        Names of the parameters, in the column order of :meth:`sample_posterior`:
        ``coef[<feature>]`` for each feature (named after ``feature_names_in_``
        when X has column names, ``coef[0]``, ``coef[1]``, ... otherwise), then
        ``intercept``. ``posterior_.param_names`` is the same, and
        ``posterior_.summary()`` tabulates the posterior with these names.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has column names.
    dpvi_result_ : DPVIResult or FullRankRelease
        The release (covered by the DP guarantee): a FullRankRelease with
        ``variational_family="full_rank"``; with ``decorrelation``, rotated.
    rotation_, gram_noise_multiplier_ : ndarray, float
        Only with ``decorrelation``: the released Gram matrix's eigenvectors
        (columns, the last row the intercept's; ``beta = rotation_ @ gamma``) and
        the release's noise multiplier.
    inference_diagnostics_ : dict
        Backend diagnostics (emcee: acceptance, autocorrelation, ESS, the thinned
        chain, for :func:`skdpvi.integrations.to_inference_data`; every backend:
        ``sd_over_prior_sd``; with an intercept and the default clip norm,
        ``feature_scales``: each feature's scale relative to the intercept's column
        as the released scales show it, which warns above about 1.5 (after allowing
        for the window's wander), and ``batch_over_noise``: ``sampling_rate *
        n_samples / (noise_multiplier * clip_norm)``, which warns below 0.3, where
        the intervals were measured too narrow; the dense error models:
        ``relaxation_times`` per eigen-direction of the wander; ``error_model="auto"``
        with "exact": ``auto_error_model``, the statistics of its choice, see
        ``error_model``; with ``decorrelation``: ``decorrelation``, its share, the
        release's noise multiplier and the released matrix's eigenvalues).

    Notes
    -----
    Sample weights are not accepted: they would change the per-example sensitivity.

    Before any privacy mechanism ``fit`` checks the design X and warns about
    undeclared one-hot blocks, constant columns, nearly collinear features (a
    variance inflation factor above 5: the intervals of such a pair were measured
    far too narrow, and the release cannot show it; not with ``decorrelation``,
    which repaired them) and features standardised with
    these rows' own statistics (:class:`~skdpvi.exceptions.PrivacyWarning`); these
    are shown to whoever runs ``fit`` and stored nowhere
    (:mod:`skdpvi.linear_model._input_checks`).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skdpvi import DPBayesianLogisticRegression
    >>> X, y = make_classification(n_samples=2000, n_features=4, n_redundant=0,
    ...                            random_state=0)
    >>> clf = DPBayesianLogisticRegression(epsilon=1.0, max_iter=1000,
    ...                                    inference="exact", random_state=0)
    >>> clf.fit(X, y).predict_proba(X[:2]).shape
    (2, 2)
    >>> clf.epsilon_ <= 1.0
    True
    """

    _y_numeric = False
    _private_clip_norm = True

    def __init__(self, *, epsilon=1.0, delta=1e-5, max_iter=10_000, sampling_rate=0.1,
                 clip_norm="auto", learning_rate="auto", learning_rate_scale="auto",
                 scale_preconditioning="auto", n_mc_samples=10, elbo_gradients="monte_carlo",
                 burn_in=0.2, inference="exact", n_posterior_samples=1000,
                 error_model="auto", wander_correction="auto", onehot_blocks=None,
                 decorrelation=None, variational_family="auto", prior_scale=1.0, fit_intercept=True, device="cpu",
                 random_state=None, verbose=0):
        super().__init__(
            epsilon=epsilon, delta=delta, max_iter=max_iter, sampling_rate=sampling_rate,
            clip_norm=clip_norm, learning_rate=learning_rate,
            learning_rate_scale=learning_rate_scale,
            scale_preconditioning=scale_preconditioning, n_mc_samples=n_mc_samples,
            elbo_gradients=elbo_gradients,
            burn_in=burn_in, inference=inference, n_posterior_samples=n_posterior_samples,
            fit_intercept=fit_intercept, device=device, random_state=random_state,
            verbose=verbose,
        )
        self.error_model = error_model
        self.wander_correction = wander_correction
        self.onehot_blocks = onehot_blocks
        self.decorrelation = decorrelation
        self.variational_family = variational_family
        self.prior_scale = prior_scale

    @staticmethod
    def _default_learning_rate_scale(dim):
        # not keyed on prior_scale: a larger step helps large coefficients and hurts
        # where the prior overstates them (results pages, "Large coefficients: ...")
        return math.sqrt(dim / 2)

    def _make_model(self, n_features):
        if not is_positive_real(self.prior_scale):
            raise ValueError(f"prior_scale must be a finite number > 0, got {self.prior_scale!r}.")
        self._check_error_model_params()
        self._check_decorrelation()
        self._check_variational_family()
        return self._rows_model(
            LogisticRegressionModel(n_features, self.prior_scale, self.fit_intercept))

    def _fit_from_result(self, result, settings, n_samples, seeds):
        n_params = settings.engine["model"].n_params
        choice = self._resolve_models(result, n_params, n_samples)
        theta_mean = super()._fit_from_result(result, settings, n_samples, seeds)
        if choice:
            self.inference_diagnostics_["auto_error_model"] = choice
        check_logistic_fit(self, n_samples, settings.engine)
        check_logistic_scales(self, result, n_params, float(self.prior_scale))
        if self.error_model == "dense_matched":  # "auto" checked it before choosing
            check_matched_centred(self, result, n_params, self._flat_directions())
        return theta_mean

    def _default_clip_norm(self, model):
        return 2.0 * math.sqrt(model.n_params)

    def fit(self, X, y):
        """Fit the noise-aware posterior under the privacy budget.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, preprocessed with public (not data-derived) scalings.
        y : array-like of shape (n_samples,)
            Binary target.

        Returns
        -------
        self

        Examples
        --------
        >>> from sklearn.datasets import make_classification
        >>> X, y = make_classification(n_samples=1000, n_features=3, n_informative=2,
        ...                            n_redundant=0, random_state=1)
        >>> DPBayesianLogisticRegression(max_iter=300, inference="exact",
        ...                              random_state=0).fit(X, y).n_iter_
        300
        """
        X, y01 = self._fit_inputs(X, y)
        self._forget_decorrelation()
        self.variational_family_ = self._family_for(X)
        if self.variational_family_ == "full_rank":
            self._fit_full_rank(X, y01)
        elif self.decorrelation is None:
            self._fit(X, y01)
        else:
            self._fit_decorrelated(X, y01)
        return self

    def _fit_inputs(self, X, y):
        X, y = self._validate_fit_data(X, y)
        self.classes_, y01 = binary_targets(y)
        return X, y01

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.poor_score = True
        return tags
