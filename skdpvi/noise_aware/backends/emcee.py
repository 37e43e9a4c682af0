"""The ``emcee`` backend: emcee's ensemble sampler with a coordinate-wise stretch move.

An independent affine-invariant ensemble per coordinate, all advanced together
(:class:`~skdpvi.noise_aware.CoordinatewiseStretchMove`), on the collapsed posterior
of v; phi* | v is then drawn exactly. emcee is imported only when the backend runs.
"""

import warnings

import numpy as np

from ._common import draw_m
from .moves import CoordinatewiseStretchMove

__all__ = ["sample_emcee"]


def sample_emcee(gm, n_samples, rng, n_walkers=32, min_ess=1000, max_steps=20_000):
    """Draws of m = phi* - shift, shape (n_samples, d), and the sampler's diagnostics.

    The run is extended until every coordinate has ``min_ess`` effective draws or
    ``max_steps`` steps are done; a RuntimeWarning names the coordinates that fall
    short or whose acceptance fraction is outside [0.05, 0.95].
    """
    import emcee

    # Sample the standardised variable w = (v - prior mean) / prior sd: the same
    # stretch move then suits coordinates whose v differ by orders of magnitude.
    def log_prob_per_coord(w):
        return gm.log_marginal_v((gm.prior_v_mean + gm.prior_v_sd * w).T).T

    move = CoordinatewiseStretchMove(log_prob_per_coord)
    sampler = emcee.EnsembleSampler(
        n_walkers, gm.dim, lambda w: log_prob_per_coord(w).sum(1), moves=[(move, 1.0)],
        vectorize=True,
    )
    start = rng.standard_normal((n_walkers, gm.dim))
    seed_state = np.random.RandomState(rng.integers(2**31 - 1)).get_state()
    state = emcee.State(start, random_state=seed_state)
    # Walkers start from the prior of v, which the posterior overlaps: a short
    # burn-in suffices; the run is then extended until every coordinate has
    # min_ess effective draws (autocorrelation times are ~20 steps here).
    burn = 100
    steps = min(burn + int(np.ceil(min_ess * 25 / n_walkers)), max_steps)
    sampler.run_mcmc(state, steps, skip_initial_state_check=True)
    while True:
        chain = sampler.get_chain(discard=burn)
        # tol=0: we judge the chain by its effective sample size below instead.
        tau = emcee.autocorr.integrated_time(chain, tol=0) if len(chain) > 50 else np.inf
        ess = chain.shape[0] * n_walkers / np.maximum(tau, 1.0)
        if np.all(ess >= min_ess) or sampler.iteration >= max_steps:
            break
        more = int(min(max_steps - sampler.iteration,
                       max(200, sampler.iteration * (min_ess / max(ess.min(), 1.0) - 1) * 1.2)))
        sampler.run_mcmc(None, more, skip_initial_state_check=True)
    diagnostics = {
        "acceptance_fraction": move.acceptance_fraction,
        "autocorr_time": np.broadcast_to(tau, (gm.dim,)).copy(),
        "effective_sample_size": ess,
        "n_steps": sampler.iteration,
        # The chain of v after burn-in, shape (steps, walkers, d), for ArviZ
        # (skdpvi.integrations.to_inference_data): float32, thinned to <= 500 steps.
        "chain": (gm.prior_v_mean + gm.prior_v_sd
                  * chain[::-(-len(chain) // 500)]).astype(np.float32),
    }
    acc = move.acceptance_fraction
    bad = np.flatnonzero((ess < min_ess) | (acc < 0.05) | (acc > 0.95))
    if len(bad):
        warnings.warn(
            f"emcee draws may be unreliable for {len(bad)} of {gm.dim} coordinates "
            f"(effective sample size {ess[bad].min():.0f} < {min_ess} or acceptance "
            f"outside [0.05, 0.95]) after {sampler.iteration} steps; "
            "consider inference='exact'.",
            RuntimeWarning,
            stacklevel=3,
        )
    w = chain.reshape(-1, gm.dim)
    pick = rng.choice(len(w), size=n_samples, replace=len(w) < n_samples)
    v = (gm.prior_v_mean + gm.prior_v_sd * w[pick]).T
    return draw_m(gm, v, rng), diagnostics
