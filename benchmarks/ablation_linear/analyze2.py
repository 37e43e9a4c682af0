import sys, numpy as np, torch
from common import *
from eta_linear import *
fn = sys.argv[1]; gammas = [float(g) for g in sys.argv[2].split(",")]
D = np.load(fn)
tp, tg, theta = D["tp"], D["tg"], D["theta"]
sigma, lam, beta = float(D["sigma"]), float(D["lam"]), D["beta"]
Tn, K, d = tg.shape
burn = int(0.2 * Tn)
tau = sigma * CLIP / beta
st = LinearStats(11, N)
truth = unconstrain(theta)
np.set_printoptions(precision=2, suppress=True, linewidth=160)
print("clipped", D["clipped"].mean(0))
for gamma in gammas:
    rng = np.random.default_rng(0)
    out = []
    nfail = 0
    for k in range(K):
        m0, c0 = eta_posterior(st, tp[:, k], tg[:, k], Q, tau, burn, prior_prec=offdiag_prior(st, np.ones(11), 0) )
        XtX0, _, _ = st.unpack(m0)
        diag = np.clip(np.diag(XtX0), 1.0, None)
        mean, cov = eta_posterior(st, tp[:, k], tg[:, k], Q, tau, burn, prior_prec=offdiag_prior(st, diag, gamma))
        Lc = np.linalg.cholesky(cov + 1e-9 * np.eye(len(cov)) * np.diag(cov).max())
        etas = mean + rng.standard_normal((1500, len(mean))) @ Lc.T
        draws, ok = nig_posterior_draws(st, etas, 1500, rng)
        nfail += (~ok).sum()
        out.append(draws[ok][:1000])
    mlen = min(len(x) for x in out)
    S = np.stack([x[:mlen] for x in out])
    z = (S.mean(1) - truth) / S.std(1)
    print(f"gamma {gamma}: failed draws {nfail}")
    print("  z mean", z.mean(0)); print("  z sd  ", z.std(0))
    for scheme in ("posterior", "prior"):
        t = tarp_coverage(S, truth, references=scheme, prior_sampler=prior_sampler, random_state=0)
        print(f"   TARP {scheme}: {t.rmse:.3f}")
