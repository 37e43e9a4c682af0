"""Probe behind ``short_runs.py``: per-fit z-scores of both logistic families against T.

Each fit (coefficients from the prior, the estimator's defaults but ``max_iter``,
``variational_family`` and ``sampling_rate``) records its coordinates' z-scores
(posterior mean - truth) / posterior sd, the scales' relaxations in the burn-in and
in the whole run, how far the scales' window mean lies from their start (``drho``, in
rho) and two drift statistics of the release (the means' window-mean gradient in units
of its sd; the log ratio of the window halves' entropy moments), neither of which
flagged the short runs. K = 32-40 per cell (forty-first session; results page,
"Short runs and the variational scales").

Run: python benchmarks/ablation_logistic/short_runs_probe.py g4,i14 500,1500,4000,10000 40 \
         out.json auto,mean_field [0.1]
"""
import json
import math
import os
import sys
import time
import warnings
import numpy as np
from joblib import Parallel, delayed
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

def design(name, rng):
    if name == 'i14':
        from logistic_correlated import simulate
        X, y, theta = simulate(rng)[:3]
        return X, y, theta, dict(onehot_blocks=[[6, 7, 8, 9]])
    d, n, rho = dict(g4=(4, 5000, 0.0), g20=(20, 5000, 0.3), g8s=(8, 1000, 0.0), g4n20k=(4, 20000, 0.0), g4n1k=(4, 1000, 0.0), g6r7=(6, 5000, 0.7))[name]
    z = rng.standard_normal((n, d))
    X = math.sqrt(1 - rho) * z + math.sqrt(rho) * rng.standard_normal((n, 1))
    theta = rng.standard_normal(d + 1)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ theta[:-1] + theta[-1])))).astype(float)
    return X, y, theta, {}

def drift_stats(m):
    r = m.dpvi_result_
    out = {}
    st = getattr(r, 'mean_stats', None)
    full = st is not None
    if st is None:
        st = r.stats
    n = st.count
    mg = st.sum_g / n
    vg = np.maximum(st.sum_gg / n - mg**2, 1e-300)
    z = mg / np.sqrt(vg / n)
    p = m.dpvi_result_.n_params if full else len(z) // 2
    out['zmax_means'] = float(np.max(np.abs(z[:p])))
    if not full:
        out['zmax_rho'] = float(np.max(np.abs(z[p:])))
    else:
        h = r.half_moments
        e1, e2 = h[0]['entropy'], h[1]['entropy']
        out['ent_logratio'] = float(np.max(np.abs(np.log(e2 / e1))))
    # halves: difference of half means of g
    return out, full

def one(name, T, seed, fam='auto', q=0.1):
    from skdpvi import DPBayesianLogisticRegression
    rng = np.random.default_rng(seed)
    X, y, theta, kw = design(name, rng)
    with warnings.catch_warnings(record=True) as wl:
        warnings.simplefilter('always')
        m = DPBayesianLogisticRegression(max_iter=T, random_state=seed, variational_family=fam, sampling_rate=q, **kw).fit(X, y)
    s = m.sample_posterior(4000, random_state=0)
    z = (s.mean(0) - theta) / s.std(0)
    stats, full = drift_stats(m)
    r = m.dpvi_result_
    lr = np.asarray(r.learning_rate)
    if hasattr(r, 'mean_stats') and r.mean_stats is not None and hasattr(r, 'half_moments'):
        n = r.n_params; rho = np.asarray(r.mean_phi)[n:2 * n]
    else:
        n = len(r.phi) // 2; rho = r.stats.shift[n:] + r.stats.sum_x[n:] / r.stats.count
    rho0 = math.log(math.expm1(0.01))
    extra = dict(R_total=float(2 * q * T * np.median(lr[n:2 * n])), R_burn=float(2 * q * r.burn_in * np.median(lr[n:2 * n])),
                 drho=(rho - rho0).tolist())
    return dict(name=name, T=T, seed=seed, fam=fam, q=q, **extra, R=float(2 * q * T * np.median(np.asarray(m.dpvi_result_.learning_rate)[m.dpvi_result_.n_params if hasattr(m.dpvi_result_, 'n_params') else len(m.dpvi_result_.phi)//2:][:1])), full=full, z=z.tolist(), **stats,
                warns=sorted({type(w.message).__name__ for w in wl}))

if __name__ == '__main__':
    names = sys.argv[1].split(',')
    Ts = [int(t) for t in sys.argv[2].split(',')]
    K = int(sys.argv[3])
    fams = sys.argv[5].split(',')
    qs = [float(x) for x in sys.argv[6].split(',')] if len(sys.argv) > 6 else [0.1]
    jobs = [(nm, T, 7000 + k, f, q) for nm in names for T in Ts for f in fams for q in qs for k in range(K)]
    t = time.time()
    res = Parallel(n_jobs=2)(delayed(one)(*j) for j in jobs)
    json.dump(res, open(sys.argv[4], 'w'))
    print('secs', time.time() - t)
