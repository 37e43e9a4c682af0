import sys, numpy as np, torch, time
from common import *
from eta_linear import *
fn = sys.argv[1]; Kmax = int(sys.argv[2]) if len(sys.argv) > 2 else 999
D = np.load(fn)
tp, tg, theta = D["tp"], D["tg"], D["theta"]
sigma, lam, beta = float(D["sigma"]), float(D["lam"]), D["beta"]
Tn, K, d = tg.shape; K = min(K, Kmax)
burn = int(0.2 * Tn); tau = sigma * CLIP / beta
st = LinearStats(11, N); truth = unconstrain(theta)[:K]
np.set_printoptions(precision=2, suppress=True, linewidth=160)
print("clipped", D["clipped"].mean(0))
rng = np.random.default_rng(0)
out, esss = [], []
t0 = time.time()
for k in range(K):
    mean, cov = eta_posterior(st, tp[:, k], tg[:, k], Q, tau, burn, prior_prec=offdiag_prior(st, np.ones(11), 0))
    dr, ess = weighted_nig_draws(st, mean, cov, 1000, rng, n_prop=10)
    out.append(dr); esss.append(ess)
print("time/sim", (time.time() - t0) / K, "ESS median/min", np.median(esss), np.min(esss))
mlen = min(len(x) for x in out)
S = np.stack([x[:mlen] for x in out])
z = (S.mean(1) - truth) / S.std(1)
print("  z mean", z.mean(0)); print("  z sd  ", z.std(0))
for scheme in ("posterior", "prior"):
    t = tarp_coverage(S, truth, references=scheme, prior_sampler=prior_sampler, random_state=0)
    print(f"   TARP {scheme}: {t.rmse:.3f}")
