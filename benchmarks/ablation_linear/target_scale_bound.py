"""What the linear target-scale check reads: the release's target RMS over the prior's.

Real fits of the default ``DPBayesianLinearRegression`` (5 features,
``make_nig_linear_regression``, seeds 0-39 per cell) record the ratio that
``check_target_scale`` compares with its bound (3 from 500 rows up, 4 below;
results page, "Target scale" and the nineteenth session's user-level review). With
no offset the data come from the prior (the false-alarm rate of a bound); with an
offset the target is shifted by a constant (the noise variance then comes out high).

Run: python benchmarks/ablation_linear/target_scale_bound.py [OFFSET]
     (0: 200-2,000 rows at epsilon 0.1-1; otherwise 1,000 rows at 0.3 and 5,000 at 1)
"""
import sys, warnings, numpy as np, torch
from joblib import Parallel, delayed

def one(n, eps, seed, offset):
    torch.set_num_threads(1)
    import skdpvi.linear_model._release_checks as rc
    from skdpvi import DPBayesianLinearRegression
    from skdpvi.datasets import make_nig_linear_regression
    seen = {}
    orig = rc.check_target_scale
    def spy(est, statistics, eta):
        if eta is not None:
            rms, prior_rms, noise_rms = statistics.target_scales(eta)
            seen["ratio"] = rms / prior_rms
        return orig(est, statistics, eta)
    rc.check_target_scale = spy
    X, y, _ = make_nig_linear_regression(n, 5, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DPBayesianLinearRegression(epsilon=eps, random_state=seed).fit(X, y + offset)
    return seen.get("ratio", np.nan)

if __name__ == "__main__":
    offset = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    cells = [(200, 0.1), (200, 0.3), (500, 0.3), (2000, 0.1), (2000, 1.0)] if offset == 0 else [(5000, 1.0), (1000, 0.3)]
    for n, eps in cells:
        r = np.array(Parallel(n_jobs=2)(delayed(one)(n, eps, s, offset) for s in range(40)))
        print(f"offset {offset} N={n} eps={eps}: ratio median {np.nanmedian(r):.2f}, max {np.nanmax(r):.2f}, "
              f">3: {np.mean(r > 3):.3f}, >4: {np.mean(r > 4):.3f}, nan {np.mean(np.isnan(r)):.2f}", flush=True)
