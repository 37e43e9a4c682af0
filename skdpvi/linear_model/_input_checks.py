"""Checks of the design X before any privacy mechanism runs: warnings, nothing stored.

Three shapes of X leave some coefficients (nearly) without information in the
likelihood, so DP-SGD's trace barely moves along them within ``max_iter`` and the
noise-aware posterior there can be far too narrow and off-centre, with nothing in the
release to show it:

- complete one-hot blocks beside the intercept that ``onehot_blocks`` leaves out
  (:func:`warn_undeclared_onehot`);
- constant columns (:func:`warn_constant_columns`);
- nearly collinear columns, for the logistic model (:func:`warn_collinear_columns`).

And one privacy check: features standardised with the statistics of these very rows
(a ``StandardScaler`` fitted on the private data), which puts unnoised statistics of
the data outside the guarantee (:func:`warn_private_standardisation`).

These are input checks, like the check for NaN: they read the rows, are shown to
whoever runs ``fit`` (who holds the data), and nothing of them is stored in the
estimator or changes what it fits, so they are outside the privacy mechanism.
"""

import warnings

import numpy as np

from ..exceptions import IdentifiabilityWarning, PrivacyWarning
from ..noise_aware.flat_directions import find_onehot_blocks

#: Above this variance inflation factor of a feature (among the features, by their
#: correlations) a logistic fit warns that the features are nearly collinear.
#: Measured (results pages, "Nearly collinear features"; the logistic default, 4
#: features of which two correlated, 5,000 rows, epsilon 1, K = 200 each): the pair's
#: 90 % intervals covered 0.69 / 0.60 / 0.43 / 0.34 at factors 5.3 / 10 / 25 / 500
#: (correlations 0.9 / 0.95 / 0.98 / 0.999); designs with factors of 2-3 (10
#: equicorrelated features at 0.7, 6 AR(1) features at 0.6) covered 0.76-0.94. The
#: linear model does not take this check: its posterior reads X^T X off the release
#: (scikit-learn's diabetes data, factors up to about 60, measured calibrated; the
#: same pair design at correlations 0.98 and 0.999, 2,000 rows: z sds 0.92-1.15).
LARGEST_VARIANCE_INFLATION = 5.0
#: The collinearity check reads at most this many rows (evenly spaced) and at most
#: this many values in all: a warning's estimate, not a statistic of every row.
_COLLINEARITY_ROWS = (20_000, 4_000_000)
#: Values per chunk of the standardisation check's pass over X.
_CHUNK_VALUES = 2_000_000
_STACKLEVEL = 6  # the user's fit call, through _validate_fit_data and check_input_design
_NOTE = ("(An input check: this warning is shown to whoever runs fit; nothing of it is "
         "stored in the estimator.)")


#: The largest magnitude of an input value: DP-SGD computes in float32, where the
#: squared norm of a row of values much above sqrt(3.4e38) ~ 1.8e19 overflows (and
#: values above 3.4e38 become inf on conversion). Beyond it a fit would clip every
#: row to nothing, or fail deep inside, so it refuses with the parameter's name.
LARGEST_INPUT_MAGNITUDE = 1e17


def check_input_magnitude(name, values):
    """Raise a ValueError naming ``name`` when an entry's magnitude exceeds
    :data:`LARGEST_INPUT_MAGNITUDE` (dense or CSR input; no copy of the data)."""
    values = getattr(values, "data", values) if hasattr(values, "tocsr") else values
    if values.size == 0:
        return
    largest = max(abs(float(values.max())), abs(float(values.min())))
    if largest > LARGEST_INPUT_MAGNITUDE:
        raise ValueError(
            f"{name} has an entry of magnitude {largest:.3g}; DP-SGD computes in float32, "
            f"where values above {LARGEST_INPUT_MAGNITUDE:.0e} overflow the per-example "
            f"gradients' norms. Rescale {name} (with public bounds, not statistics of "
            "these rows) before fitting.")


def binary_targets(y):
    """``(classes, y01)``: a classifier's two classes and ``y`` coded 0 / 1 (float32).

    Raises a ValueError naming the problem for a target that is not binary or has one
    class only."""
    from sklearn.utils.multiclass import check_classification_targets, type_of_target

    check_classification_targets(y)
    y_type = type_of_target(y, input_name="y", raise_unknown=True)
    if y_type != "binary":
        raise ValueError(
            "Only binary classification is supported. The type of the target is "
            f"{y_type} ({len(np.unique(y))} classes); DPBayesianLogisticRegression "
            "needs a binary target."
        )
    classes, y01 = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError("y contains only one class; the classifier needs 2 classes to fit.")
    return classes, y01.astype(np.float32)


def check_input_design(X, declared, fit_intercept, collinearity=True):
    """Run the checks on X (``declared``: the validated ``onehot_blocks``; the
    collinearity check only with ``collinearity``)."""
    warn_private_standardisation(X)
    found = warn_undeclared_onehot(X, declared, fit_intercept)
    constant = warn_constant_columns(X, fit_intercept)
    if collinearity:
        skip = {j for block in declared for j in block.tolist()}
        skip.update(j for block in found for j in block)
        skip.update(constant.tolist())
        warn_collinear_columns(X, skip)


def warn_undeclared_onehot(X, declared, fit_intercept):
    """Warn when X holds complete one-hot blocks that ``onehot_blocks`` leaves out.

    Beside the intercept (or beside a second block) such a block leaves the likelihood
    flat along one direction, which only a declared block gets right
    (:mod:`skdpvi.noise_aware.flat_directions`). Returns the blocks found (lists of
    column indices; warned or not).
    """
    skip = [j for block in declared for j in block.tolist()]
    found = find_onehot_blocks(X, skip=skip)
    if not found or (not fit_intercept and len(found) + len(declared) < 2):
        return found
    shown = ", ".join(f"[{b[0]}, ..., {b[-1]}]" if len(b) > 4 else str(b)
                      for b in found[:4]) + (", ..." if len(found) > 4 else "")
    suggestion = [block.tolist() for block in declared] + found
    suggestion = str(suggestion) if len(str(suggestion)) <= 120 else "[...]"
    warnings.warn(
        f"Columns {shown} of X are 0/1 with exactly one 1 in every row (complete "
        "one-hot encodings) but are not in onehot_blocks. Beside the intercept (or "
        "another block) the likelihood is flat along each block's sum, DP-SGD's "
        "trace random-walks there, and the credible intervals of the block's "
        "coefficients and of the intercept can be far off. If the columns come from a "
        f"public schema, declare them: onehot_blocks={suggestion}. {_NOTE}",
        IdentifiabilityWarning, stacklevel=_STACKLEVEL)
    return found


def warn_constant_columns(X, fit_intercept):
    """Warn when columns of X are constant where that leaves their coefficients flat.

    A column of zeros, and beside the intercept any constant column, gives the
    likelihood nothing about its coefficient that the intercept does not absorb, so
    its posterior given the data is its prior; DP-SGD's trace random-walks along it,
    restrained by the prior alone, and the noise-aware posterior can sit anywhere in
    the prior and be wider than it (a new user's probe, logistic regression: a column
    of zeros got 1.45 +- 0.69 under a N(0, 1) prior; results pages, "Few rows for the
    budget, and a noise prior the data contradict"). Columns of ones are left to the
    one-hot check (a block of one); without an intercept a nonzero constant column is
    the intercept. Returns the constant columns warned about.
    """
    low, high = X.min(axis=0), X.max(axis=0)
    if hasattr(low, "toarray"):  # sparse
        low, high = low.toarray(), high.toarray()
    low, high = np.asarray(low).ravel(), np.asarray(high).ravel()
    flat = (low == high) & ((low != 1) if fit_intercept else (low == 0))
    constant = np.flatnonzero(flat)
    if len(constant):
        warnings.warn(
            f"Columns {_shown(constant)} of X are constant: the data carry no "
            "information about their coefficients, whose posterior given the data is "
            "their prior, and DP-SGD's trace random-walks along them, so their credible "
            "intervals can sit anywhere within the prior and be wider than it. Drop "
            "such columns (a category of a public schema that these rows never take "
            f"keeps its prior at best). {_NOTE}",
            IdentifiabilityWarning, stacklevel=_STACKLEVEL)
    return constant


def warn_private_standardisation(X):
    """Warn when every non-binary column of X has mean 0 and standard deviation 1 to
    rounding: standardised with the statistics of these very rows (a
    ``StandardScaler`` fitted on them), which no public constant would give exactly.
    Those means and standard deviations are statistics of the private data, unnoised,
    kept by the scaler and outside the privacy guarantee (user guide, "Privacy
    pitfalls"). Dense input only (a sparse scaler does not centre)."""
    if hasattr(X, "toarray") or X.shape[0] < 3:
        return
    n, d = X.shape
    total, squares, binary = np.zeros(d), np.zeros(d), np.ones(d, bool)
    step = max(1, _CHUNK_VALUES // d)  # in chunks: no copy of X (a memmap stays on disk)
    for start in range(0, n, step):
        block = np.asarray(X[start:start + step], dtype=float)
        total += block.sum(0)
        squares += (block * block).sum(0)
        binary &= np.all((block == 0) | (block == 1), axis=0)
    if binary.all():
        return
    mean = total[~binary] / n
    variance = squares[~binary] / n - mean**2
    tolerance = 1e-4 if X.dtype == np.float32 else 1e-8
    if np.all(np.abs(mean) < tolerance) and np.all(np.abs(variance - 1.0) < 2 * tolerance):
        warnings.warn(
            "Every non-binary column of X has mean 0 and standard deviation 1 to "
            "rounding: X looks standardised with the means and standard deviations of "
            "these very rows (a StandardScaler fitted on them). Those are statistics "
            "of the private data, released without noise by whoever keeps the scaler, "
            "outside the privacy guarantee that epsilon_ states. Scale with public "
            "values (public bounds or published means and sds; user guide, 'Privacy "
            "pitfalls'); on public or simulated data this is harmless. (An input "
            "check: this warning is shown to whoever runs fit; nothing of it is "
            "stored in the estimator.)",
            PrivacyWarning, stacklevel=_STACKLEVEL)


def variance_inflation(X, skip=()):
    """The features' variance inflation factors, ``diag(R^-1)`` of their correlations.

    Read on at most ``_COLLINEARITY_ROWS`` evenly spaced rows. Columns in ``skip``
    (and constant ones) get NaN; an exactly collinear column gets inf.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    skip : iterable of int

    Returns
    -------
    ndarray of shape (n_features,)
    """
    n, d = X.shape
    vif = np.full(d, np.nan)
    keep = np.setdiff1d(np.arange(d), np.fromiter(skip, int, count=-1) if skip else [])
    if len(keep) < 2:
        return vif
    m = int(min(n, _COLLINEARITY_ROWS[0], max(len(keep) + 2, _COLLINEARITY_ROWS[1] // d)))
    rows = X[np.linspace(0, n - 1, m).astype(int)]
    rows = np.asarray(rows.toarray() if hasattr(rows, "toarray") else rows, float)[:, keep]
    sd = rows.std(0)
    varying = sd > 0
    keep, rows = keep[varying], rows[:, varying]
    if len(keep) < 2:
        return vif
    R = np.corrcoef(rows, rowvar=False)
    values, vectors = np.linalg.eigh(R)
    if values.min() <= 1e-12 * values.max():
        inverse_diagonal = np.full(len(keep), np.inf)
        # the columns not in the null space keep their finite factors
        null = vectors[:, values <= 1e-12 * values.max()]
        finite = np.abs(null).max(1) < 1e-8
        kept = values > 1e-12 * values.max()
        inverse_diagonal[finite] = ((vectors[finite][:, kept] ** 2) / values[kept]).sum(1)
    else:
        inverse_diagonal = ((vectors**2) / values).sum(1)
    vif[keep] = inverse_diagonal
    return vif


def warn_collinear_columns(X, skip=()):
    """Warn when some features are nearly collinear (a variance inflation factor above
    :data:`LARGEST_VARIANCE_INFLATION`): the likelihood is nearly flat along their
    contrast, DP-SGD's trace barely moves along it within ``max_iter``, and nothing in
    the release shows it, so the posterior of their coefficients can be far too
    narrow and off-centre. Returns the factors (NaN for skipped columns)."""
    vif = variance_inflation(X, skip)
    high = np.flatnonzero(np.nan_to_num(vif, nan=0.0) > LARGEST_VARIANCE_INFLATION)
    if len(high):
        worst = high[np.argsort(-vif[high], kind="stable")]
        factors = ", ".join(f"{j}: {vif[j]:.3g}" for j in worst[:5])
        warnings.warn(
            f"Columns {_shown(np.sort(high))} of X are nearly collinear (variance "
            f"inflation factors {factors}; above {LARGEST_VARIANCE_INFLATION:g} warns): "
            "the likelihood is nearly flat along their contrasts, DP-SGD's trace barely "
            "moves along them within max_iter, and nothing in the release shows it, so "
            "the credible intervals of these coefficients can be far too narrow and "
            "off-centre (two features with correlation 0.9 in a logistic regression: "
            "90 % intervals covering 69 %, at 0.98 43 %; results pages, 'Nearly "
            "collinear features'). Combine or drop such columns, or fit with "
            "decorrelation=0.1, in the eigenbasis of a privately released Gram matrix "
            "(correlation 0.95 / 0.98: the coordinates' coverage 0.88-0.94 instead of "
            "0.64-0.94 / 0.50-0.94; results pages, 'Fitting in the eigenbasis of the "
            f"design'). {_NOTE}",
            IdentifiabilityWarning, stacklevel=_STACKLEVEL)
    return vif


def _shown(columns, limit=8):
    """``[0, 3, 7]``, or the first ``limit`` and an ellipsis."""
    head = ", ".join(str(int(j)) for j in columns[:limit])
    return f"[{head}{', ...' if len(columns) > limit else ''}]"
