"""TARP expected-coverage tests (Lemos et al. 2023, as used by NA-DPVI).

The paper's estimator (Appendix H.4, eqs. A62-A63) is, for simulations
``i = 1..K`` with true parameters ``theta_i``, posterior draws
``theta~_{j,i}`` (``j = 1..N``) and a reference point ``theta_ref(i)``::

    f_i  = (1/N) sum_j 1[ d(theta~_{j,i}, theta_ref(i)) < d(theta_i, theta_ref(i)) ]   (A63)
    C(a) = (1/K) sum_i 1[ f_i < 1 - a ]                                               (A62)

``f_i`` is the posterior mass of the ball around the reference that just
reaches the truth. For a calibrated posterior it is uniform on (0, 1), so the
expected coverage ``C(a)`` equals the credibility ``1 - a`` at every level. The
summary is the root mean squared coverage error over the grid of levels
(eq. 27).

Randomness (reference points, bootstrap) always comes from a local
:class:`numpy.random.Generator`; the global NumPy state is never read or
changed. (The reference ``tarp`` package reseeds NumPy globally, which makes
its bootstrap replicates identical.)
"""

from dataclasses import dataclass
from numbers import Integral
from typing import Optional

import numpy as np

__all__ = [
    "DEFAULT_ALPHA_GRID",
    "TarpResult",
    "MarginalTarpResult",
    "tarp_coverage",
    "marginal_tarp_coverage",
    "coverage_from_frequencies",
    "coverage_rmse",
]

#: The paper authors' grid of alpha values: 0.001, 0.05, 0.10, ..., 0.95, 0.999.
DEFAULT_ALPHA_GRID = np.concatenate(
    [[0.001], np.round(np.arange(1, 20) * 0.05, 10), [0.999]]
)

# Vector norms (``ord`` of numpy.linalg.norm) for the supported distances.
_DISTANCES = {"euclidean": 2, "manhattan": 1, "cityblock": 1, "chebyshev": np.inf}
_REFERENCE_SCHEMES = ("posterior", "prior")
# Upper bound on the number of floats handled at once when computing distances.
_CHUNK_ELEMENTS = 2**22


# ----------------------------------------------------------------------------
# Shared helpers (also used by the other metrics modules)
# ----------------------------------------------------------------------------
def _seed_sequence(random_state):
    """Turn ``random_state`` into a :class:`numpy.random.SeedSequence`.

    Accepts None (fresh OS entropy, never NumPy's global state), a
    non-negative int, a SeedSequence (used as is), a Generator or a
    RandomState (one draw from it seeds the sequence).
    """
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(
            random_state.integers(0, 2**32, size=4, dtype=np.uint64).tolist()
        )
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(
            random_state.randint(0, 2**32, size=4, dtype=np.uint64).tolist()
        )
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(
                f"random_state must be a non-negative int, got {random_state}."
            )
        return np.random.SeedSequence(int(random_state))
    raise ValueError(
        "random_state must be None, a non-negative int, a numpy SeedSequence, "
        f"Generator or RandomState; got {random_state!r}."
    )


def _as_float_array(x, name, ndim=None):
    """Convert to a finite float array, optionally checking its number of dims."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array: {exc}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return arr


def _check_n_bootstrap(n_bootstrap):
    if (
        not isinstance(n_bootstrap, Integral)
        or isinstance(n_bootstrap, bool)
        or n_bootstrap < 0
    ):
        raise ValueError(
            f"n_bootstrap must be a non-negative int, got {n_bootstrap!r}."
        )
    return int(n_bootstrap)


def _check_levels(values, name):
    """Validate a 1-D grid of probabilities in [0, 1]; return it sorted."""
    arr = _as_float_array(values, name, ndim=1)
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty.")
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{name} must lie in [0, 1], got {arr}.")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"{name} must not contain duplicates.")
    return np.sort(arr)


def _credibility_grid(alpha_grid):
    """Credibility levels ``1 - alpha`` in increasing order."""
    alpha = DEFAULT_ALPHA_GRID if alpha_grid is None else alpha_grid
    alpha = _check_levels(alpha, "alpha_grid")
    return np.sort(1.0 - alpha)


def _coverage_curve(frequencies, credibility):
    """C at each level: mean over simulations of ``1[f_i < level]`` (A62).

    ``frequencies`` has shape (K,) or (K, P); the result (L,) or (P, L).
    """
    return (frequencies[..., None] < credibility).mean(axis=0)


def _bootstrap(frequencies, credibility, n_bootstrap, rng):
    """Resample simulations with replacement; summarise the coverage curves."""
    n_sim = frequencies.shape[0]
    boot_cov = np.empty((n_bootstrap,) + frequencies.shape[1:] + credibility.shape)
    for b in range(n_bootstrap):
        idx = rng.integers(0, n_sim, size=n_sim)
        boot_cov[b] = _coverage_curve(frequencies[idx], credibility)
    boot_rmse = coverage_rmse(credibility, boot_cov)
    ddof = 1 if n_bootstrap > 1 else 0
    return dict(
        bootstrap_coverage=boot_cov,
        bootstrap_rmse=boot_rmse,
        coverage_se=boot_cov.std(axis=0, ddof=ddof),
        coverage_band=np.percentile(boot_cov, [2.5, 97.5], axis=0),
        rmse_se=boot_rmse.std(axis=0, ddof=ddof),
        rmse_band=np.percentile(boot_rmse, [2.5, 97.5], axis=0),
    )


def _check_tarp_inputs(samples, theta_true, n_levels):
    samples = _as_float_array(samples, "samples", ndim=3)
    theta_true = _as_float_array(theta_true, "theta_true", ndim=2)
    n_sim, n_draws, n_params = samples.shape
    if theta_true.shape != (n_sim, n_params):
        raise ValueError(
            "theta_true must have shape (n_simulations, n_params) = "
            f"{(n_sim, n_params)} to match samples of shape {samples.shape}; "
            f"got {theta_true.shape}."
        )
    if n_params < 1 or n_draws < 2:
        raise ValueError(
            "samples needs at least 2 draws and 1 parameter per simulation, "
            f"got shape {samples.shape}."
        )
    if n_sim < n_levels:
        raise ValueError(
            f"samples holds {n_sim} simulations, fewer than the {n_levels} "
            "credibility levels of alpha_grid; run more simulations or pass a "
            "coarser alpha_grid."
        )
    return samples, theta_true


def _draw_references(references, samples, rng, prior_sampler=None):
    """Reference points of shape (n_simulations, n_params) for a scheme.

    See :func:`tarp_coverage` for the schemes.
    """
    n_sim, _, n_params = samples.shape
    if isinstance(references, str):
        if references == "posterior":
            mean = samples.mean(axis=1)
            sd = samples.std(axis=1)
            return mean + sd * rng.uniform(-4.0, 4.0, size=mean.shape)
        if references == "prior":
            if prior_sampler is None or not callable(prior_sampler):
                raise ValueError(
                    'references="prior" requires prior_sampler, a callable '
                    "(n, rng) -> array of shape (n, n_params)."
                )
            refs = prior_sampler(n_sim, rng)
            name = "prior_sampler(n, rng)"
        else:
            raise ValueError(
                f"references must be one of {_REFERENCE_SCHEMES}, an array of "
                "shape (n_simulations, n_params) or a callable "
                f"(rng, samples_i) -> reference; got {references!r}."
            )
    elif callable(references):
        refs = [np.ravel(references(rng, samples[i])) for i in range(n_sim)]
        name = "references(rng, samples_i)"
        if any(r.shape != (n_params,) for r in refs):
            raise ValueError(
                f"{name} must return {n_params} values (one per parameter)."
            )
    else:
        refs = references
        name = "references"
    refs = _as_float_array(refs, name, ndim=2)
    if refs.shape != (n_sim, n_params):
        raise ValueError(
            f"{name} must have shape (n_simulations, n_params) = "
            f"{(n_sim, n_params)}, got {refs.shape}."
        )
    return refs


def _frequencies(samples, theta_true, refs, distance, normalize, marginal):
    """f_i of eq. A63: shape (K,), or (K, P) per parameter when ``marginal``."""
    n_sim, n_draws, n_params = samples.shape
    ord_ = _DISTANCES[distance]
    freq = np.empty((n_sim, n_params) if marginal else n_sim)
    chunk = max(1, _CHUNK_ELEMENTS // (n_draws * n_params))
    for start in range(0, n_sim, chunk):
        sl = slice(start, start + chunk)
        s, r, t = samples[sl], refs[sl, None, :], theta_true[sl, None, :]
        if normalize:
            scale = s.std(axis=1, keepdims=True)
            scale[scale == 0] = 1.0
            s, r, t = s / scale, r / scale, t / scale
        if marginal:
            freq[sl] = (np.abs(s - r) < np.abs(t - r)).mean(axis=1)
        else:
            d_draws = np.linalg.norm(s - r, ord=ord_, axis=-1)
            d_true = np.linalg.norm(t - r, ord=ord_, axis=-1)
            freq[sl] = (d_draws < d_true).mean(axis=1)
    return freq


# ----------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------
@dataclass
class TarpResult:
    """Expected coverage of posterior credible regions (TARP).

    Attributes
    ----------
    credibility : ndarray of shape (n_levels,)
        Credibility levels ``1 - alpha`` in increasing order.
    coverage : ndarray of shape (n_levels,)
        Expected coverage ``C(alpha)`` at each level (eq. A62). Calibrated
        posteriors give ``coverage == credibility`` up to sampling error; at
        high credibility over-confident ones fall below, under-confident ones
        above (see :func:`tarp_coverage` for the low levels).
    rmse : float
        Root mean squared coverage error over the levels (eq. 27).
    frequencies : ndarray of shape (n_simulations,)
        The per-simulation statistics ``f_i`` (eq. A63), uniform on (0, 1)
        for a calibrated posterior. Pass them to
        :func:`coverage_from_frequencies` to re-summarise on another grid or
        after pooling repetitions.
    references : ndarray of shape (n_simulations, n_params)
        The reference points used.
    n_bootstrap : int
        Number of bootstrap replicates (0: no uncertainty summaries).
    coverage_se, coverage_band : ndarray or None
        Bootstrap standard error of ``coverage`` (n_levels,) and its 95%
        percentile band (2, n_levels): row 0 the 2.5% and row 1 the 97.5%
        percentile.
    rmse_se : float or None
        Bootstrap standard error of ``rmse``.
    rmse_band : ndarray of shape (2,) or None
        95% percentile band of ``rmse``.
    bootstrap_coverage : ndarray of shape (n_bootstrap, n_levels) or None
        The replicate coverage curves.
    bootstrap_rmse : ndarray of shape (n_bootstrap,) or None
        The replicate RMSEs.
    """

    credibility: np.ndarray
    coverage: np.ndarray
    rmse: float
    frequencies: np.ndarray
    references: np.ndarray
    n_bootstrap: int = 0
    coverage_se: Optional[np.ndarray] = None
    coverage_band: Optional[np.ndarray] = None
    rmse_se: Optional[float] = None
    rmse_band: Optional[np.ndarray] = None
    bootstrap_coverage: Optional[np.ndarray] = None
    bootstrap_rmse: Optional[np.ndarray] = None

    @property
    def alpha(self):
        """ndarray of shape (n_levels,): ``1 - credibility``."""
        return 1.0 - self.credibility

    def __repr__(self):
        extra = (
            f", rmse_se={self.rmse_se:.4f}, n_bootstrap={self.n_bootstrap}"
            if self.n_bootstrap
            else ""
        )
        return (
            f"{type(self).__name__}(rmse={self.rmse:.4f}{extra}, "
            f"n_simulations={self.frequencies.shape[0]}, "
            f"n_levels={self.credibility.size})"
        )


@dataclass
class MarginalTarpResult:
    """Per-parameter (1-D) TARP coverage.

    Attributes
    ----------
    credibility : ndarray of shape (n_levels,)
        Credibility levels ``1 - alpha`` in increasing order.
    coverage : ndarray of shape (n_params, n_levels)
        Expected coverage of each parameter's marginal credible intervals.
    rmse : ndarray of shape (n_params,)
        Coverage RMSE (eq. 27) per parameter.
    frequencies : ndarray of shape (n_simulations, n_params)
        Per-simulation, per-parameter ``f_i`` (eq. A63 with 1-D distance).
    references : ndarray of shape (n_simulations, n_params)
        The reference points used.
    param_names : list of str or None
        Names of the parameters, if given.
    n_bootstrap : int
        Number of bootstrap replicates (simulations are resampled jointly for
        all parameters).
    coverage_se : ndarray of shape (n_params, n_levels) or None
    coverage_band : ndarray of shape (2, n_params, n_levels) or None
    rmse_se : ndarray of shape (n_params,) or None
    rmse_band : ndarray of shape (2, n_params) or None
    bootstrap_coverage : ndarray of shape (n_bootstrap, n_params, n_levels) or None
    bootstrap_rmse : ndarray of shape (n_bootstrap, n_params) or None

    Indexing with a parameter position or name returns that parameter's
    :class:`TarpResult`.
    """

    credibility: np.ndarray
    coverage: np.ndarray
    rmse: np.ndarray
    frequencies: np.ndarray
    references: np.ndarray
    param_names: Optional[list] = None
    n_bootstrap: int = 0
    coverage_se: Optional[np.ndarray] = None
    coverage_band: Optional[np.ndarray] = None
    rmse_se: Optional[np.ndarray] = None
    rmse_band: Optional[np.ndarray] = None
    bootstrap_coverage: Optional[np.ndarray] = None
    bootstrap_rmse: Optional[np.ndarray] = None

    def __len__(self):
        return self.coverage.shape[0]

    def __getitem__(self, key):
        if isinstance(key, str):
            if self.param_names is None or key not in self.param_names:
                raise KeyError(f"No parameter named {key!r}.")
            key = list(self.param_names).index(key)
        j = range(len(self))[key]
        boot = self.n_bootstrap > 0
        return TarpResult(
            credibility=self.credibility,
            coverage=self.coverage[j],
            rmse=float(self.rmse[j]),
            frequencies=self.frequencies[:, j],
            references=self.references[:, [j]],
            n_bootstrap=self.n_bootstrap,
            coverage_se=self.coverage_se[j] if boot else None,
            coverage_band=self.coverage_band[:, j] if boot else None,
            rmse_se=float(self.rmse_se[j]) if boot else None,
            rmse_band=self.rmse_band[:, j] if boot else None,
            bootstrap_coverage=self.bootstrap_coverage[:, j] if boot else None,
            bootstrap_rmse=self.bootstrap_rmse[:, j] if boot else None,
        )

    def __repr__(self):
        names = self.param_names or [str(j) for j in range(len(self))]
        rmse = ", ".join(f"{n}: {r:.4f}" for n, r in zip(names, self.rmse))
        return f"{type(self).__name__}(rmse={{{rmse}}}, n_bootstrap={self.n_bootstrap})"


# ----------------------------------------------------------------------------
# Public functions
# ----------------------------------------------------------------------------
def coverage_rmse(credibility, coverage):
    """Root mean squared coverage error over credibility levels (paper eq. 27).

    ``sqrt(mean_l (coverage_l - credibility_l) ** 2)``.

    Parameters
    ----------
    credibility : array-like of shape (n_levels,)
        Credibility levels ``1 - alpha`` in [0, 1].
    coverage : array-like of shape (..., n_levels)
        Expected coverage at each level; leading axes (bootstrap replicates,
        parameters) are kept.

    Returns
    -------
    rmse : float or ndarray of shape coverage.shape[:-1]

    Examples
    --------
    >>> from skdpvi.metrics import coverage_rmse
    >>> coverage_rmse([0.5, 0.9], [0.5, 0.9])
    0.0
    >>> round(coverage_rmse([0.5, 0.9], [0.4, 0.8]), 3)
    0.1
    """
    credibility = _as_float_array(credibility, "credibility", ndim=1)
    coverage = _as_float_array(coverage, "coverage")
    if coverage.ndim == 0 or coverage.shape[-1] != credibility.shape[0]:
        raise ValueError(
            f"coverage must have shape (..., {credibility.shape[0]}) to match "
            f"credibility, got {coverage.shape}."
        )
    for name, arr in (("credibility", credibility), ("coverage", coverage)):
        if np.any((arr < 0) | (arr > 1)):
            raise ValueError(f"{name} must lie in [0, 1].")
    rmse = np.sqrt(np.mean((coverage - credibility) ** 2, axis=-1))
    return float(rmse) if rmse.ndim == 0 else rmse


def coverage_from_frequencies(frequencies, *, alpha_grid=None):
    """Coverage curve from TARP frequencies ``f_i`` (paper eq. A62).

    Use it to re-summarise stored :attr:`TarpResult.frequencies` on another
    grid of levels, or after pooling the frequencies of several runs.

    Parameters
    ----------
    frequencies : array-like of shape (n_simulations,) or (n_simulations, n_params)
        Values of ``f_i`` in [0, 1].
    alpha_grid : array-like of shape (n_levels,), default=None
        The alpha values; default :data:`DEFAULT_ALPHA_GRID`.

    Returns
    -------
    credibility : ndarray of shape (n_levels,)
        ``1 - alpha`` in increasing order.
    coverage : ndarray of shape (n_levels,) or (n_params, n_levels)
        ``mean_i 1[f_i < credibility]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.metrics import coverage_from_frequencies, coverage_rmse
    >>> f = np.array([0.1, 0.2, 0.8, 0.9])
    >>> cred, cov = coverage_from_frequencies(f, alpha_grid=[0.5, 0.25])
    >>> cred, cov
    (array([0.5 , 0.75]), array([0.5, 0.5]))
    >>> float(round(coverage_rmse(cred, cov), 4))
    0.1768
    """
    frequencies = _as_float_array(frequencies, "frequencies")
    if frequencies.ndim not in (1, 2) or frequencies.shape[0] == 0:
        raise ValueError(
            "frequencies must have shape (n_simulations,) or "
            f"(n_simulations, n_params), got {frequencies.shape}."
        )
    if np.any((frequencies < 0) | (frequencies > 1)):
        raise ValueError("frequencies must lie in [0, 1].")
    credibility = _credibility_grid(alpha_grid)
    coverage = _coverage_curve(frequencies, credibility)
    return credibility, coverage


def coverage_rmse_floor(n_simulations, *, alpha_grid=None, n_repeats=2000, quantiles=(0.05, 0.95),
                        random_state=None):
    """TARP coverage RMSE that a perfectly calibrated method gets with K simulations.

    With a finite number K of simulations the estimated coverage curve is noisy,
    so even an exact posterior has an RMSE of roughly ``sqrt(1 / (6 K))`` (on average
    0.058 for K = 40 and 0.017 for K = 500 with the default grid). This simulates it: for a calibrated method the
    TARP frequencies are i.i.d. Uniform(0, 1). Compare a study's RMSE with this
    floor before reading anything into it.

    Parameters
    ----------
    n_simulations : int
        K, the number of simulated data sets of the study.
    alpha_grid : array-like, default=None
        The alpha values of the study; default :data:`DEFAULT_ALPHA_GRID`.
    n_repeats : int, default=2000
        Simulated studies.
    quantiles : tuple of float, default=(0.05, 0.95)
    random_state : int, numpy Generator or None

    Returns
    -------
    mean : float
        Expected RMSE of a calibrated method.
    bounds : ndarray of shape (len(quantiles),)
        Its quantiles: an RMSE above the upper one is evidence of miscalibration.

    Examples
    --------
    >>> from skdpvi.metrics import coverage_rmse_floor
    >>> mean, (lo, hi) = coverage_rmse_floor(500, random_state=0)
    >>> bool(0.01 < mean < 0.025)
    True
    """
    if not isinstance(n_simulations, (int, np.integer)) or n_simulations < 1:
        raise ValueError(f"n_simulations must be a positive integer, got {n_simulations!r}.")
    if not isinstance(n_repeats, (int, np.integer)) or n_repeats < 2:
        raise ValueError(f"n_repeats must be an integer >= 2, got {n_repeats!r}.")
    rng = np.random.default_rng(random_state)
    credibility = _credibility_grid(alpha_grid)
    f = rng.random((n_repeats, n_simulations))
    coverage = (f[..., None] < credibility).mean(axis=1)  # (n_repeats, L)
    rmse = np.sqrt(np.mean((coverage - credibility) ** 2, axis=-1))
    return float(rmse.mean()), np.quantile(rmse, quantiles)


def _summarise(frequencies, refs, credibility, n_bootstrap, boot_rng):
    coverage = _coverage_curve(frequencies, credibility)
    out = dict(
        credibility=credibility,
        coverage=coverage,
        rmse=coverage_rmse(credibility, coverage),
        frequencies=frequencies,
        references=refs,
        n_bootstrap=n_bootstrap,
    )
    if n_bootstrap:
        out.update(_bootstrap(frequencies, credibility, n_bootstrap, boot_rng))
    return out


def _prepare(samples, theta_true, references, alpha_grid, n_bootstrap,
             random_state, prior_sampler):
    credibility = _credibility_grid(alpha_grid)
    samples, theta_true = _check_tarp_inputs(samples, theta_true, credibility.size)
    n_bootstrap = _check_n_bootstrap(n_bootstrap)
    ref_seq, boot_seq = _seed_sequence(random_state).spawn(2)
    refs = _draw_references(
        references, samples, np.random.default_rng(ref_seq), prior_sampler
    )
    return samples, theta_true, refs, credibility, n_bootstrap, boot_seq


def tarp_coverage(
    samples,
    theta_true,
    *,
    references="posterior",
    alpha_grid=None,
    n_bootstrap=0,
    random_state=None,
    distance="euclidean",
    prior_sampler=None,
    normalize=False,
):
    """Expected coverage of posterior credible balls (TARP, paper A62-A63).

    For each simulation ``i`` the statistic ``f_i`` is the fraction of
    posterior draws closer to the reference point than the true parameter
    (A63). The expected coverage at credibility ``1 - alpha`` is the fraction
    of simulations with ``f_i < 1 - alpha`` (A62). A posterior that is
    calibrated on average over the prior gives ``C(alpha) = 1 - alpha`` for
    every reference distribution that depends on the data only (Lemos et al.
    2023, Thm 3).

    Reading the curve: at high credibility (``1 - alpha >= 0.5``) coverage
    below the diagonal means over-confidence (regions too small), above it
    under-confidence. At low credibility the sign depends on how far the
    references are from the posterior: with a reference near the posterior
    mean an over-confident posterior is below the diagonal everywhere, but
    with distant references (large ``+-4 sd`` offsets, prior draws) its
    ``f_i`` pile up at both 0 and 1 and the curve crosses the diagonal
    (S-shape). The RMSE (eq. 27) penalises both.

    Parameters
    ----------
    samples : array-like of shape (n_simulations, n_draws, n_params)
        Posterior draws for each simulated data set.
    theta_true : array-like of shape (n_simulations, n_params)
        The parameters each data set was simulated from, in the same space
        (constrained or unconstrained) as ``samples``.
    references : {"posterior", "prior"}, callable or array-like, default="posterior"
        How reference points are chosen:

        - ``"posterior"``: the authors' scheme. Per simulation, the posterior
          mean of the draws plus independent uniform noise in
          ``[-4 sd, +4 sd]`` per dimension (sd = posterior standard deviation
          of the draws).
        - ``"prior"``: one draw per simulation from ``prior_sampler``. This
          scheme is much harder to pass than ``"posterior"`` (design notes
          §3.10); a calibrated posterior passes under every scheme, so report
          several.
        - callable ``references(rng, samples_i) -> ndarray (n_params,)``,
          called once per simulation with a :class:`numpy.random.Generator`.
        - array of shape (n_simulations, n_params): explicit references.
    alpha_grid : array-like of shape (n_levels,), default=None
        Values of alpha in [0, 1]. Default :data:`DEFAULT_ALPHA_GRID`, the
        authors' ``{0.001, 0.05, 0.10, ..., 0.95, 0.999}`` (21 levels).
        There must be at least as many simulations as levels.
    n_bootstrap : int, default=0
        Number of bootstrap replicates, resampling simulations with
        replacement, for standard errors and 95% percentile bands of the
        coverage curve and of the RMSE. 0 disables the bootstrap.
    random_state : int, numpy Generator, RandomState, SeedSequence or None, default=None
        Seeds the reference points and the bootstrap through local generators
        (two independent streams). NumPy's global state is never used; None
        draws fresh entropy from the operating system.
    distance : {"euclidean", "manhattan", "chebyshev"}, default="euclidean"
        Distance between points (``"cityblock"`` is an alias of
        ``"manhattan"``). The paper does not state it; the reference TARP
        implementation uses Euclidean.
    prior_sampler : callable, default=None
        ``prior_sampler(n, rng) -> ndarray (n, n_params)``; required when
        ``references="prior"``, ignored otherwise.
    normalize : bool, default=False
        If True, every coordinate of the draws, the truth and the reference
        of simulation ``i`` is divided by that simulation's posterior
        standard deviation (from its draws) before distances are computed,
        so that parameters on large scales do not dominate the balls
        (coordinates with zero posterior sd are left unscaled). Coverage of a
        calibrated posterior is unaffected; the power against particular
        miscalibrations changes.

    Returns
    -------
    result : TarpResult
        Credibility levels, coverage, RMSE (eq. 27), the frequencies ``f_i``,
        the references and, when ``n_bootstrap > 0``, bootstrap summaries.

    See Also
    --------
    marginal_tarp_coverage : The same test for each parameter separately.
    coverage_from_frequencies : Re-summarise stored frequencies.
    skdpvi.metrics.run_tarp_study : Simulate, fit and test in one call.

    Notes
    -----
    The paper leaves the distance, reference distribution, normalisation,
    number of draws and alpha grid unspecified (spec §9.16); the defaults
    here follow the authors' code.

    Examples
    --------
    A conjugate Gaussian model whose posterior is exact:

    >>> import numpy as np
    >>> from skdpvi.metrics import tarp_coverage
    >>> rng = np.random.default_rng(0)
    >>> theta = rng.normal(size=(300, 2))                 # prior N(0, 1)
    >>> x = theta + rng.normal(size=theta.shape)          # one N(theta, 1) observation
    >>> post_mean, post_sd = x / 2, np.sqrt(0.5)
    >>> samples = post_mean[:, None, :] + post_sd * rng.normal(size=(300, 500, 2))
    >>> result = tarp_coverage(samples, theta, random_state=0)
    >>> bool(result.rmse < 0.05)
    True
    """
    if not isinstance(distance, str) or distance not in _DISTANCES:
        raise ValueError(
            f"distance must be one of {sorted(_DISTANCES)}, got {distance!r}."
        )
    samples, theta_true, refs, credibility, n_bootstrap, boot_seq = _prepare(
        samples, theta_true, references, alpha_grid, n_bootstrap, random_state,
        prior_sampler,
    )
    freq = _frequencies(samples, theta_true, refs, distance, bool(normalize), False)
    return TarpResult(
        **_summarise(
            freq, refs, credibility, n_bootstrap, np.random.default_rng(boot_seq)
        )
    )


def marginal_tarp_coverage(
    samples,
    theta_true,
    *,
    references="posterior",
    alpha_grid=None,
    n_bootstrap=0,
    random_state=None,
    prior_sampler=None,
    param_names=None,
):
    """TARP coverage of each parameter's marginal posterior (1-D distance).

    Runs the test of :func:`tarp_coverage` on every coordinate separately:
    ``f_ij`` is the fraction of draws of parameter ``j`` closer to the
    reference coordinate ``ref_ij`` than ``theta_ij``. Correct joint coverage
    implies correct marginal coverage; a marginal test localises which
    parameter is miscalibrated (the paper uses it for the Dirichlet model).

    Parameters
    ----------
    samples : array-like of shape (n_simulations, n_draws, n_params)
        Posterior draws for each simulated data set.
    theta_true : array-like of shape (n_simulations, n_params)
        True parameters, in the same space as ``samples``.
    references : {"posterior", "prior"}, callable or array-like, default="posterior"
        As in :func:`tarp_coverage`; coordinate ``j`` of each reference is
        used for parameter ``j``.
    alpha_grid : array-like of shape (n_levels,), default=None
        Values of alpha; default :data:`DEFAULT_ALPHA_GRID`.
    n_bootstrap : int, default=0
        Bootstrap replicates; simulations are resampled jointly for all
        parameters.
    random_state : int, numpy Generator, RandomState, SeedSequence or None, default=None
        Seeds references and bootstrap through local generators only.
    prior_sampler : callable, default=None
        ``prior_sampler(n, rng) -> ndarray (n, n_params)``; required when
        ``references="prior"``.
    param_names : sequence of str, default=None
        Names of the parameters, stored in the result (index it by name).

    Returns
    -------
    result : MarginalTarpResult
        Per-parameter coverage curves (n_params, n_levels), RMSEs
        (n_params,), frequencies (n_simulations, n_params) and bootstrap
        summaries. ``result[j]`` or ``result[name]`` is a :class:`TarpResult`.

    See Also
    --------
    tarp_coverage : The joint test.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpvi.metrics import marginal_tarp_coverage
    >>> rng = np.random.default_rng(0)
    >>> theta = rng.normal(size=(300, 2))
    >>> x = theta + rng.normal(size=theta.shape)
    >>> sd = np.sqrt(0.5) * np.array([1.0, 0.3])  # "b" is over-confident
    >>> samples = x[:, None, :] / 2 + sd * rng.normal(size=(300, 500, 2))
    >>> res = marginal_tarp_coverage(samples, theta, random_state=0,
    ...                              param_names=["a", "b"])
    >>> bool(res["a"].rmse < 0.05), bool(res["b"].rmse > 0.15)
    (True, True)
    """
    samples, theta_true, refs, credibility, n_bootstrap, boot_seq = _prepare(
        samples, theta_true, references, alpha_grid, n_bootstrap, random_state,
        prior_sampler,
    )
    if param_names is not None:
        param_names = [str(n) for n in param_names]
        if len(param_names) != samples.shape[2]:
            raise ValueError(
                f"param_names has {len(param_names)} names for "
                f"{samples.shape[2]} parameters."
            )
    freq = _frequencies(samples, theta_true, refs, "euclidean", False, True)
    return MarginalTarpResult(
        param_names=param_names,
        **_summarise(
            freq, refs, credibility, n_bootstrap, np.random.default_rng(boot_seq)
        ),
    )
