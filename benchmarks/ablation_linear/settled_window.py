"""Ablation: the statistics posterior's settled window on the vague-noise-prior hold-out.

Runs ``holdout_public_api.py``'s ``lin_d10_equi03_n5000_e1_vague`` design (default
linear estimator, ``InvGamma(3, 1)`` noise prior) through
:func:`skdpvi.metrics.run_tarp_study` with the later window starts that ``settle``
tries (:data:`skdpvi.noise_aware.statistics_window.WINDOW_OFFSETS`) replaced: ``()`` is
the recorded window only (as before the forty-third session). In one process
(``n_jobs=1``): the replacement is a module attribute, which joblib's worker
processes would not see.

Results: doc/results.rst, "Hold-outs".
Run: python benchmarks/ablation_linear/settled_window.py "()" "(0.25, 0.5, 0.75)" --seed 20261130
"""

import argparse
import os
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import skdpvi.noise_aware.statistics_window as statistics_window  # noqa: E402
from _common import machine, save  # noqa: E402
from holdout_public_api import PriorSampler, Simulator, estimator  # noqa: E402
from skdpvi.metrics import run_tarp_study, tarp_coverage  # noqa: E402

DESIGN = "lin_d10_equi03_n5000_e1_vague"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("offsets", nargs="+", help="Python tuples of window starts")
    parser.add_argument("--n-sim", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = {}
    for text in args.offsets:
        statistics_window.WINDOW_OFFSETS = tuple(eval(text))
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run_tarp_study(estimator(DESIGN), Simulator(DESIGN), n_simulations=args.n_sim,
                                 n_draws=1000, references="prior",
                                 prior_sampler=PriorSampler(DESIGN), unconstrained=True,
                                 n_jobs=1, random_state=args.seed)
        authors = tarp_coverage(res.samples, res.theta_true, references="posterior",
                                random_state=0)
        z_sd = res.z_scores().std(0)
        coverage = res.interval_coverage(0.9)
        rows[text] = {"authors_refs": authors.rmse, "prior_refs": res.rmse,
                      "z_sd": z_sd.tolist(), "coverage_90": coverage.tolist(),
                      "ellipsoid_90": res.ellipsoid_coverage(0.9),
                      "seconds": time.perf_counter() - start}
        print(f"offsets {text}: TARP {authors.rmse:.3f} / {res.rmse:.3f}; z sd "
              f"{z_sd.min():.2f}-{z_sd.max():.2f}; coverage {coverage.min():.2f}-"
              f"{coverage.max():.2f}; ellipsoids {rows[text]['ellipsoid_90']:.2f}", flush=True)
    save("ablation_linear_settled_window", {"machine": machine(), "args": vars(args),
                                            "design": DESIGN, "rows": rows})


if __name__ == "__main__":
    main()
