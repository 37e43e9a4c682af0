import sys, numpy as np, torch
from common import *
from eta_linear import *
from skdpvi.dpvi import TraceStatistics, DPVIResult
from skdpvi.noise_aware import sample_phi_star
from skdpvi.posterior import NoiseAwarePosterior

fn = sys.argv[1]
burn_frac = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
D = np.load(fn)
tp, tg, theta = D["tp"], D["tg"], D["theta"]
sigma, lam, beta = float(D["sigma"]), float(D["lam"]), D["beta"]
Tn, K, d = tg.shape
burn = int(burn_frac * Tn)
tau = sigma * CLIP / beta
st = LinearStats(11, N)
rng = np.random.default_rng(0)
M = 1000
res = {"eta_nig": [], "eta_nig_infl": [], "exact": []}
truth = unconstrain(theta)
infl_all = []
for k in range(K):
    mean, cov, ratio = eta_posterior(st, tp[:, k], tg[:, k], Q, tau, burn, infl=True)
    infl_all.append(ratio)
    Lc = np.linalg.cholesky(cov)
    etas = mean + rng.standard_normal((M, len(mean))) @ Lc.T
    draws, ok = nig_posterior_draws(st, etas, M, rng)
    res["eta_nig"].append(draws[ok][:M])
    # paper's exact backend on the same trace
    stats = TraceStatistics.from_trace(tp[:, k], tg[:, k], burn)
    r = DPVIResult(phi=tp[-1, k], stats=stats, noise_multiplier=sigma, clip_norm=CLIP, sampling_rate=Q,
                   preconditioner=beta, learning_rate=lam * beta, n_steps=Tn, burn_in=burn)
    phi, _ = sample_phi_star(r, "exact", M, random_state=k)
    res["exact"].append(NoiseAwarePosterior(phi, MODEL, "exact").sample(M, random_state=k, unconstrained=True))
infl_all = np.array(infl_all)
np.set_printoptions(precision=2, suppress=True, linewidth=160)
print("clipped", D["clipped"].mean(), "residual var / tau^2 (median over sims):", np.median(infl_all, 0))
for name in ("exact", "eta_nig"):
    dr = res[name]
    if not dr: continue
    mlen = min(len(x) for x in dr)
    S = np.stack([x[:mlen] for x in dr])
    z = (S.mean(1) - truth) / S.std(1)
    print(name, "z mean", z.mean(0)); print(" " * len(name), "z sd  ", z.std(0))
    for scheme in ("posterior", "prior"):
        t = tarp_coverage(S, truth, references=scheme, prior_sampler=prior_sampler, random_state=0)
        print(f"   TARP {scheme}: {t.rmse:.3f}")
print("floor", coverage_rmse_floor(K, random_state=0))
