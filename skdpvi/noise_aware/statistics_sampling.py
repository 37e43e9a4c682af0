"""Drawing eta from (trace Gaussian) x (prior predictive): the last step of
:func:`skdpvi.noise_aware.statistics_posterior`.

Importance sampling with the trace's Gaussian as proposal; where its weights are
degenerate (a prior predictive much sharper than the trace: small N, small epsilon),
tempered sequential Monte Carlo from the same draws.
"""

import warnings

import numpy as np


def _psd_cholesky(cov):
    """Cholesky factor of a covariance with exact zeros (fixed statistics) allowed."""
    scale = np.sqrt(np.maximum(np.diag(cov), 0.0))
    keep = scale > 0
    chol = np.zeros_like(cov)
    if keep.any():
        sub = cov[np.ix_(keep, keep)] / np.outer(scale[keep], scale[keep])
        w, v = np.linalg.eigh(sub)
        root = v * np.sqrt(np.maximum(w, 0.0))
        chol[np.ix_(keep, keep)] = root * scale[keep][:, None]
    return chol


class FewValidDraws(ValueError):
    """Too few draws of eta from the trace Gaussian are possible under the model."""


class NoValidDraws(ValueError):
    """No draw of eta from the trace Gaussian is possible under the model."""


#: Rows of eta per call of ``log_prior``: its work arrays are (rows, p, p) several
#: times over (linear regression at 40 features: 680 MB for 10,000 rows at once).
_LOG_PRIOR_CHUNK = 1024


def _log_prior(data_statistics, etas):
    """``data_statistics.log_prior(etas)`` in chunks of rows (bounded memory)."""
    etas = np.asarray(etas)
    if len(etas) <= _LOG_PRIOR_CHUNK:
        return data_statistics.log_prior(etas)
    return np.concatenate([data_statistics.log_prior(etas[start:start + _LOG_PRIOR_CHUNK])
                           for start in range(0, len(etas), _LOG_PRIOR_CHUNK)])


def _resample(data_statistics, fit, n_components, rng, n_proposals, strict=False):
    """Draws of eta from (trace Gaussian) x (prior predictive), as mixture components.

    Importance sampling with the trace Gaussian as proposal, and where its weights
    are degenerate (the prior predictive much narrower than the trace's information:
    small N or small epsilon), tempered sequential Monte Carlo from the same draws.

    Tempering cannot cross the model's support (a negative residual sum of squares
    has density 0 at any temperature): with only a handful of possible draws, the
    particles would all descend from them and the posterior collapse to a point.
    So where fewer than ``n_components / 10`` draws are possible, more are drawn
    (up to 64 times as many); if still too few, ``strict`` raises
    :class:`FewValidDraws`, otherwise a ``RuntimeWarning`` says so.
    """
    # a flat prior predictive (up to a constraint) needs no more draws than it rejects
    factor = 2 if getattr(data_statistics, "flat_prior", False) else 10
    n_prop = int(n_proposals or factor * n_components)
    enough = max(1, n_components // 10)
    etas, labels = fit.sample(n_prop, rng, return_labels=True)
    log_prior = _log_prior(data_statistics, etas)
    for _ in range(6):  # a trace far outside the prior: look further before giving up
        if np.isfinite(log_prior).sum() >= enough or n_proposals is not None:
            break
        more, more_labels = fit.sample(len(etas), rng, return_labels=True)
        etas, labels = np.concatenate([etas, more]), np.concatenate([labels, more_labels])
        log_prior = np.concatenate([log_prior, _log_prior(data_statistics, more)])
    valid = np.isfinite(log_prior)
    if 0 < valid.sum() < enough and n_proposals is None:
        message = (f"Only {valid.sum()} of {len(etas)} draws of the data statistics are "
                   "possible under the model's prior: the noise-aware posterior rests on "
                   "a few distinct draws and is too narrow.")
        if strict:
            raise FewValidDraws(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)
    ess = 0.0
    if valid.any():
        w = np.exp(log_prior[valid] - log_prior[valid].max())
        ess = float(w.sum() ** 2 / (w**2).sum())
    diagnostics = {"effective_sample_size": ess, "smc_stages": 0}
    if ess >= n_components / 4 or n_proposals is not None:
        if not valid.any():
            _raise_impossible()
        if ess < n_components / 4:
            warnings.warn(
                f"The prior-predictive importance weights of the data statistics are "
                f"degenerate (effective sample size {ess:.0f} of {len(etas)} draws): the "
                "posterior is represented by few distinct components; leave n_proposals "
                "at None to sample by tempering instead.", RuntimeWarning, stacklevel=4)
        w = np.zeros(len(etas))
        w[valid] = np.exp(log_prior[valid] - log_prior[valid].max())
        pick = rng.choice(len(etas), size=n_components, p=w / w.sum())
        return data_statistics.conditional_posterior(etas[pick]), diagnostics
    # the valid draws first: the invalid ones die at the first tempering stage
    keep = np.argsort(~valid, kind="stable")[:4 * n_components]
    etas, stages, acceptance = _tempered_smc(data_statistics, fit, etas[keep], labels[keep],
                                             log_prior[keep], rng)
    diagnostics.update(smc_stages=stages, smc_acceptance=acceptance)
    pick = rng.choice(len(etas), size=n_components, replace=len(etas) < n_components)
    return data_statistics.conditional_posterior(etas[pick]), diagnostics


def _raise_impossible():
    raise NoValidDraws(
        "No draw of the data statistics is possible under the model's prior "
        "(e.g. every residual sum of squares came out negative): the trace is too "
        "noisy for this model, or the data are far from the scales its prior assumes. "
        "Scale the target and features (user guide), or increase epsilon or max_iter."
    )


#: Tempered SMC: target ESS fraction per stage, MCMC moves per stage, stage limit.
_SMC_ESS, _SMC_MOVES, _SMC_MAX_STAGES = 0.5, 5, 100


def _tempered_smc(data_statistics, fit, etas, labels, log_prior, rng):
    """Particles from the trace Gaussian to ``trace Gaussian x prior predictive``.

    Tempering ``prior ** beta`` from beta = 0 (the particles as drawn) to 1, each
    stage choosing beta so that the incremental weights keep an effective sample
    size of half the particles, then resampling and moving every particle by
    preconditioned Crank-Nicolson steps within its shrinkage component: the
    proposal ``m + sqrt(1 - rho^2) (eta - m) + rho L xi`` leaves the trace Gaussian
    invariant, so the acceptance ratio is the tempered prior's alone.
    """
    n = len(etas)
    valid = np.isfinite(log_prior)
    if not valid.any():
        _raise_impossible()
    roots = {g: _psd_cholesky(fit.covs[g]) for g in np.unique(labels)}
    beta, rho, stages, acceptance = 0.0, 0.5, 0, []
    while beta < 1.0:
        if stages == _SMC_MAX_STAGES:
            warnings.warn(
                "The tempered sampler of the data statistics stopped after "
                f"{_SMC_MAX_STAGES} stages at temperature {beta:.2g}: the posterior may "
                "be too wide.", RuntimeWarning, stacklevel=4)
            break
        stages += 1
        delta = np.where(np.isfinite(log_prior), log_prior, -np.inf)
        finite = delta[np.isfinite(delta)]
        shift = finite.max() if finite.size else 0.0

        target = _SMC_ESS * finite.size

        def ess_at(step):
            w = np.exp(step * (delta - shift)) if step > 0 else np.isfinite(delta) * 1.0
            return w.sum() ** 2 / max((w**2).sum(), 1e-300), w

        new_beta = 1.0
        if ess_at(1.0 - beta)[0] < target:
            lo, hi = 0.0, 1.0 - beta
            for _ in range(40):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if ess_at(mid)[0] >= target else (lo, mid)
            new_beta = beta + max(lo, 1e-12)
        _, w = ess_at(new_beta - beta)
        beta = min(new_beta, 1.0)
        pick = rng.choice(n, size=n, p=w / w.sum())
        etas, labels, log_prior = etas[pick], labels[pick], log_prior[pick]
        for _ in range(_SMC_MOVES):
            proposal = np.empty_like(etas)
            for g, root in roots.items():
                rows = np.flatnonzero(labels == g)
                mean = fit.means[g]
                xi = rng.standard_normal((len(rows), root.shape[0])) @ root.T
                proposal[rows] = mean + np.sqrt(1 - rho**2) * (etas[rows] - mean) + rho * xi
            lp = _log_prior(data_statistics, proposal)
            with np.errstate(invalid="ignore"):
                log_ratio = beta * (lp - log_prior)
            accept = np.isfinite(lp) & (np.log(rng.random(n)) < np.nan_to_num(log_ratio, nan=-np.inf))
            etas[accept], log_prior[accept] = proposal[accept], lp[accept]
            rate = accept.mean()
            acceptance.append(float(rate))
            rho = float(np.clip(rho * (1.5 if rate > 0.4 else 0.6 if rate < 0.15 else 1.0),
                                1e-3, 1.0))
    return etas, stages, float(np.mean(acceptance)) if acceptance else 1.0
