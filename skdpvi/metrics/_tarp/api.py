"""The TARP tests: :func:`tarp_coverage` (joint) and :func:`marginal_tarp_coverage`.

Checks the inputs, draws the reference points, computes the frequencies f_i and
summarises them into a coverage curve, its RMSE and (optionally) a bootstrap.
"""

import numpy as np

from .._validation import _check_n_bootstrap, _seed_sequence
from ._checks import _check_tarp_inputs
from .bootstrap import _bootstrap
from .coverage import _coverage_curve, _credibility_grid, coverage_rmse
from .frequencies import _DISTANCES, _frequencies
from .references import _draw_references
from .results import MarginalTarpResult, TarpResult

__all__ = ["tarp_coverage", "marginal_tarp_coverage"]


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

    Against the reference implementation, ``tarp.get_tarp_coverage`` (Lemos,
    Coogan et al. 2023, ``pip install tarp``; version 0.1.1 checked in
    ``tests/metrics/test_tarp_reference_implementation.py``): the statistic
    ``f_i`` is the same (Euclidean or Manhattan distance, strict ``<``), and
    with the same samples, truths and explicit references, ``norm=False`` there
    and our ``alpha_grid`` set to ``1 -`` its credibility values, the coverage
    curves are equal at every level but the last. They differ in:

    - *the grid*: tarp's levels are the edges of a histogram of the ``f_i``
      with ``n_simulations // 10`` bins between their minimum and maximum, so
      they depend on the data; ours are fixed (:data:`DEFAULT_ALPHA_GRID`), so
      that curves of different studies can be compared and averaged;
    - *the top level*: tarp's last histogram bin is closed, so its curve ends at
      1 (it counts ``f_i <= max f``); we count ``f_i < level`` everywhere, so
      simulations with ``f_i = 1`` (truth farther from the reference than every
      draw) are never covered, as the definition (A62) says;
    - *the references*: tarp's ``"random"`` draws them uniformly on
      ``[0, 1]^d`` (the normalised space when ``norm=True``) with NumPy's global
      generator; we offer the authors' ``"posterior"`` scheme and prior draws,
      from a local generator;
    - *the normalisation*: tarp's ``norm=True`` min-max scales every coordinate
      by the range of the *true* parameters over the simulations; our
      ``normalize=True`` divides by each simulation's posterior standard
      deviation, which needs no truths;
    - *the bootstrap*: tarp's replaces one simulation per replicate,
      cumulatively and in place (its inputs are modified); ours resamples all
      simulations with replacement.

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
