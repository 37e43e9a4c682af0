"""A logistic fit in the eigenbasis of the rows' privately released Gram matrix.

Mean-field reports the conditional variance ``1 / H_jj`` where the posterior has the
marginal ``(H^-1)_jj``, and the error models read the missing coupling off the
wander, whose few effective samples in many dimensions misread it: on correlated
designs the posterior's narrowest directions were several times too narrow (results
page, "Fitting in the eigenbasis of the design"). Rotated into the eigenbasis of
``X~^T X~`` (``X~`` the rows with their intercept column), the data's curvature is
nearly diagonal, mean-field nearly exact, and the shrunk dense error model's
uncorrelated target nearly right.

With ``DPBayesianLogisticRegression(decorrelation=share)`` a fit

1. releases ``X~^T X~`` of the rows scaled to norm at most ``1.5 sqrt(p)`` (p the
   coefficients with the intercept: a standardised row's norm) by the Gaussian
   mechanism (L2 sensitivity ``(1.5 sqrt(p))^2`` on the upper triangle), with
   ``share`` of the budget's mu^2: its noise multiplier is that of one Gaussian
   release of the whole budget over ``sqrt(share)``; the accountant composes it with
   the DP-SGD run and the clipping histogram, so the certified epsilon covers all;
2. rotates the rows, ``Z = X~ V`` with V the released matrix's eigenvectors: an
   orthogonal V keeps the isotropic prior ``N(0, s^2 I)`` and every row's norm (the
   clipping) unchanged. The rows are rotated batch by batch as the engine gathers
   them (:class:`RotatedRowsModel`), so the fit makes no rotated copy of X;
3. fits the estimator's own machinery on ``Z`` without an intercept (error model
   "auto" meaning "dense_shrunk", measured), and maps its posterior back,
   ``beta = V gamma`` (:class:`RotatedComponents`).

Everything after step 1 is post-processing of released values and of the rows
through the DP-SGD run's own mechanism.
"""

import math

import numpy as np
import torch
from sklearn.base import clone

from ..accounting import DPSGDMechanism, noise_multiplier
from ..models import LogisticRegressionModel
from ..posterior import NoiseAwarePosterior
from ..utils.validation import is_positive_real
from ._reporting import _progress

#: Rows enter the Gram matrix scaled to norm at most this times sqrt(p): a
#: standardised row with its intercept has norm about sqrt(p).
GRAM_ROW_BOUND = 1.5
#: Mixed with a fit's engine seed into the seed of its Gram matrix's noise.
_GRAM_STREAM = 0x6772616D


def gram_noise_multiplier(epsilon, delta, share):
    """Noise multiplier of the Gram release: a whole-budget Gaussian release's over
    ``sqrt(share)`` (``share`` of the budget's mu^2 in Gaussian-DP terms)."""
    whole, _ = noise_multiplier(epsilon, delta, 1.0, 1)
    return whole / math.sqrt(share)


def gram_mechanism(noise_std):
    """The Gram release as the accountant sees it: one full-batch Gaussian release of
    noise multiplier ``noise_std`` (its sensitivity is the row bound squared)."""
    return DPSGDMechanism(noise_multiplier=float(noise_std), sampling_rate=1.0, steps=1)


def _with_intercept(X, fit_intercept):
    X = X.toarray() if hasattr(X, "toarray") else X  # a chunk of CSR rows
    X = np.asarray(X, dtype=float)
    return np.c_[X, np.ones(len(X))] if fit_intercept else X


def private_gram_rotation(X, fit_intercept, noise_std, rng, signal=None, chunk=65_536):
    """Eigenvectors of the noisy Gram matrix of the rows (with the intercept column).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    fit_intercept : bool
    noise_std : float
        The release's noise multiplier (:func:`gram_noise_multiplier`).
    rng : numpy.random.Generator
        Draws the release's noise.
    signal : float or None, default=None
        None: every eigenvector of the released matrix is a direction of the basis.
        A float: only the eigenvectors whose released eigenvalue exceeds ``signal``
        times the noise's expected spectral norm (``2 sqrt(p)`` times its entries'
        sd) are; the rest of the basis are the coordinate axes projected off them and
        orthonormalised (:func:`_complete_with_axes`), so that where the release is
        noise the fit keeps the features' own coordinates.
    chunk : int, default=65_536
        Rows per pass (the intercept column is added chunk by chunk).

    Returns
    -------
    rotation : ndarray of shape (p, p)
        Orthonormal columns, by increasing released eigenvalue.
    eigenvalues : ndarray of shape (p,)
        The released matrix's eigenvalues (noise included).
    """
    p = X.shape[1] + int(bool(fit_intercept))
    bound = GRAM_ROW_BOUND * math.sqrt(p)
    gram = np.zeros((p, p))
    for start in range(0, X.shape[0], chunk):
        rows = _with_intercept(X[start:start + chunk], fit_intercept)
        norms = np.linalg.norm(rows, axis=1)
        rows *= np.minimum(1.0, bound / np.maximum(norms, 1e-300))[:, None]
        gram += rows.T @ rows
    noise = np.triu(rng.standard_normal((p, p))) * (noise_std * bound**2)
    released = gram + noise + np.triu(noise, 1).T
    eigenvalues, rotation = np.linalg.eigh(released)
    if signal is not None:
        noise_norm = 2.0 * math.sqrt(p) * noise_std * bound**2
        kept = eigenvalues > float(signal) * noise_norm
        rotation = _complete_with_axes(rotation[:, kept])
    return rotation, eigenvalues


def _complete_with_axes(directions):
    """An orthonormal basis: ``directions`` (orthonormal columns), then the coordinate
    axes projected off them and orthonormalised in turn (Gram-Schmidt, the axis with
    the largest remaining norm first): as close to the axes as the directions allow."""
    p, k = directions.shape
    basis = list(directions.T)
    candidates = np.eye(p) - directions @ directions.T  # the axes, projected off
    for _ in range(p - k):
        norms = np.linalg.norm(candidates, axis=0)
        j = int(np.argmax(norms))
        b = candidates[:, j] / norms[j]
        basis.append(b)
        candidates -= np.outer(b, b @ candidates)
    return np.column_stack(basis)


class RotatedRowsModel(LogisticRegressionModel):
    """The logistic model of the rotated coefficients ``gamma = V^T beta``, fitted on
    the original rows: each batch is rotated as the engine prepares it.

    ``prepare_data`` returns ``[X, 1] @ V`` (or ``X @ V`` without the intercept column)
    for the gathered rows only, so a fit never holds a rotated copy of the data (the
    engine's data layer prepares small data sets once up front, as for any model).

    Parameters
    ----------
    rotation : ndarray of shape (p, p)
        Orthonormal V (:func:`private_gram_rotation`).
    rows_with_intercept : bool
        The rows get their intercept column before the rotation (V's last row).
    prior_scale : float, default=1.0
        The isotropic prior of beta, hence of gamma.
    """

    def __init__(self, rotation, rows_with_intercept, prior_scale=1.0):
        super().__init__(rotation.shape[1], prior_scale, fit_intercept=False)
        self.rotation = torch.as_tensor(np.asarray(rotation), dtype=torch.float32)
        self.rows_with_intercept = bool(rows_with_intercept)

    def prepare_data(self, X, y):
        V = self.rotation.to(X.device)
        width = X.shape[1]
        Z = X.to(V.dtype) @ V[:width]
        if self.rows_with_intercept:
            Z += V[width]
        return Z, y


def rotate_rows(X, rotation, rows_with_intercept):
    """``[X, 1] @ rotation`` (or ``X @ rotation``) of every row, as a dense float32
    array, by :class:`RotatedRowsModel`'s own rotation: the rows of a lockstep batch,
    whose runs share one model and so cannot each rotate their own batches
    (:meth:`_DecorrelationMixin._fit_batch`)."""
    X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    rows = torch.as_tensor(X.astype(np.float32, copy=False))
    Z, _ = RotatedRowsModel(rotation, rows_with_intercept).prepare_data(rows, None)
    return Z.numpy()


class RotatedComponents:
    """Mixture components drawn in a rotated basis and mapped back: ``beta = V gamma``.

    Parameters
    ----------
    base : object
        Components with ``n_components`` and ``sample(index, rng)``, in the rotated
        coordinates gamma.
    rotation : ndarray of shape (p, p)
        Orthonormal V whose columns are the rotated coordinates' directions.
    """

    def __init__(self, base, rotation):
        self.base = base
        self.rotation = np.asarray(rotation, float)

    @property
    def n_components(self):
        return self.base.n_components

    def sample(self, index, rng):
        return self.base.sample(index, rng) @ self.rotation.T


def _inner_estimator(est, random_state):
    """The estimator that fits the rotated rows: no intercept, no decorrelation."""
    error_model = "dense_shrunk" if est.error_model == "auto" else est.error_model
    return clone(est).set_params(fit_intercept=False, decorrelation=None,
                                 onehot_blocks=None, error_model=error_model,
                                 random_state=random_state)


def prepare(est, X, seed):
    """Release the Gram matrix: the inner estimator, which fits the rows rotated into
    its eigenbasis (:class:`RotatedRowsModel`) and composes the release with its
    DP-SGD run; sets ``est.rotation_`` and ``est.gram_noise_multiplier_``."""
    noise = gram_noise_multiplier(est.epsilon, est.delta, float(est.decorrelation))
    rng = np.random.default_rng([int(seed), _GRAM_STREAM])
    rotation, eigenvalues = private_gram_rotation(X, est.fit_intercept, noise, rng,
                                                  signal=est._decorrelation_signal)
    _progress(int(est.verbose), 1,
              f"decorrelation: the rows' Gram matrix released (noise multiplier "
              f"{noise:.4g}, {float(est.decorrelation):g} of the budget's mu^2); the fit "
              f"runs in its eigenbasis")
    inner = _inner_estimator(est, est.random_state)
    inner._composed_mechanisms = (gram_mechanism(noise),)
    # the one-hot blocks' flat directions in the rotated coordinates: the inner fit's
    # error models and its prior along them work there as on the features' axes
    flat = est._onehot_flat_directions()
    inner._given_flat_directions = flat @ rotation if len(flat) else flat
    inner.n_features_in_ = rotation.shape[0]
    inner.classes_ = est.classes_
    inner._row_rotation = (rotation, bool(est.fit_intercept))
    est.gram_noise_multiplier_ = noise
    est.rotation_ = rotation
    est._gram_eigenvalues = eigenvalues
    return inner


def adopt(est, inner, model):
    """Set ``est``'s fitted attributes from the inner fit, mapped back to beta."""
    components = RotatedComponents(inner.posterior_.components, est.rotation_)
    # the inner fit gave its components the prior along the flat directions already
    est.posterior_ = NoiseAwarePosterior.from_components(components, model,
                                                         inner.posterior_.method)
    for name in ("dpvi_result_", "noise_multiplier_", "epsilon_", "delta_", "clip_norm_",
                 "clip_histogram_noise_", "n_iter_", "burn_in_", "error_model_",
                 "wander_correction_", "_draw_seed"):
        setattr(est, name, getattr(inner, name))
    est.inference_diagnostics_ = {
        **inner.inference_diagnostics_,
        "decorrelation": {"share": float(est.decorrelation),
                          "gram_noise_multiplier": est.gram_noise_multiplier_,
                          "released_eigenvalues": est._gram_eigenvalues},
    }
    est._set_point_estimates(model)
    return est


class _DecorrelationMixin:
    """The ``decorrelation`` parameter's part of
    :class:`~skdpvi.DPBayesianLogisticRegression`: its validation, the decorrelated
    ``fit`` and ``_fit_batch``, and the Gram release in the accounting."""

    #: With ``decorrelation``: None rotates into every eigenvector of the released Gram
    #: matrix; a float keeps only those above that many times the noise's spectral
    #: norm (:func:`private_gram_rotation`)
    _decorrelation_signal = None
    #: An inner fit's (rotation, rows_with_intercept): it reads the original rows
    #: through a :class:`RotatedRowsModel` (set by :func:`prepare`)
    _row_rotation = None

    def _rows_model(self, model):
        """``model``, or the rotated-rows model of an inner fit."""
        if self._row_rotation is None:
            return model
        rotation, with_intercept = self._row_rotation
        return RotatedRowsModel(rotation, with_intercept, model.prior_scale)

    @property
    def _rows_with_intercept(self):
        if self._row_rotation is None:
            return self.fit_intercept
        return self._row_rotation[1]

    @property
    def _checks_collinearity(self):
        # with decorrelation the nearly collinear pairs measured were calibrated
        # (correlation 0.95 and 0.98: coverage 0.88-0.94), so the warning would mislead
        return self.decorrelation is None

    def _check_decorrelation(self):
        """Raise for a bad ``decorrelation`` or a combination it does not support."""
        if self.decorrelation is None:
            return
        if not (is_positive_real(self.decorrelation) and self.decorrelation < 1):
            raise ValueError(f"decorrelation must be None or a share of the budget in "
                             f"(0, 1), got decorrelation={self.decorrelation!r}.")
        if self.wander_correction == "probit":
            raise ValueError("wander_correction='probit' is not available with "
                             "decorrelation: the rotated fit has no intercept "
                             "coordinate to measure the wander with.")

    def _fit_decorrelated(self, X, y01):
        """``fit`` with ``decorrelation`` on validated inputs (``_fit_inputs``)."""
        self._check_decorrelated_params(X.shape)
        inner = prepare(self, X, self._fit_seeds().engine)
        inner._fit(X, y01)
        adopt(self, inner, self._make_model(X.shape[1]))

    def _forget_decorrelation(self):
        """Drop a previous decorrelated fit's attributes (a refit without it)."""
        for name in ("rotation_", "gram_noise_multiplier_", "_gram_eigenvalues"):
            self.__dict__.pop(name, None)

    def _fit_batch(self, datasets, random_states, verbose=0):
        if self.decorrelation is None:
            return super()._fit_batch(datasets, random_states, verbose)
        fitted = [clone(self).set_params(random_state=int(s)) for s in random_states]
        inputs, inners = [], []
        for est, (X, y) in zip(fitted, datasets):
            X, y01 = est._fit_inputs(X, y)
            est._check_decorrelated_params(X.shape)
            inner = prepare(est, X, est._fit_seeds().engine)
            # the lockstep engine runs every simulation of a group with one model, so
            # each gets its rows rotated up front (the batch prepares them once anyway)
            # and a plain model, not a RotatedRowsModel of its own rotation
            rotation, with_intercept = inner._row_rotation
            inner._row_rotation = None
            inners.append(inner)
            inputs.append((rotate_rows(X, rotation, with_intercept), y01))
        for est, inner in zip(fitted, self._fit_prepared_batch(inners, inputs, verbose)):
            adopt(est, inner, est._make_model(est.n_features_in_))
        return fitted

    def _check_decorrelated_params(self, shape):
        """Validate every parameter before the Gram release spends any budget."""
        self._check_params(shape[0])
        self._make_model(shape[1])
        self._onehot_blocks(shape[1])

    def _other_mechanisms(self):
        if hasattr(self, "noise_multiplier_"):  # fitted: what ran, whatever set_params says
            noise = getattr(self, "gram_noise_multiplier_", None)
            ran = () if noise is None else (gram_mechanism(noise),)
            return ran + getattr(self, "_composed_mechanisms", ())
        if self.decorrelation is None:  # an inner fit of a decorrelated one has them
            return getattr(self, "_composed_mechanisms", ())
        noise = gram_noise_multiplier(self.epsilon, self.delta, float(self.decorrelation))
        return (gram_mechanism(noise),)
