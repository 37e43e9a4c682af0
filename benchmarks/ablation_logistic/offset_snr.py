"""How well one run's release identifies the wander (Jensen) term of the logistic model.

For each design and seed: one DP-SGD run with the estimator's defaults (epsilon 1,
clip norm 2 sqrt(n_params), T = 10,000), the offset ``kappa b`` estimated from the
release (:func:`designs.wander_offset`, a joint regression of the scale gradients on
phi, with its standard error from the known DP noise), and the oracle offset from the
true third derivatives of the data term (:func:`designs.oracle_offset`, not private).
Reports per coordinate the sd over seeds of (estimate - oracle) / se (about 1 if the
standard error is right) and the median |oracle| / se: the signal-to-noise ratio of
the correction that a single run could apply.

Run: python benchmarks/ablation_logistic/offset_snr.py [--seeds 12] [--designs gaussian correlated adult]
"""

import argparse
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _common import _engine_settings, save  # noqa: E402
from designs import correlated_design, gaussian_design, oracle_offset, wander_offset  # noqa: E402
from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.datasets import load_adult  # noqa: E402
from skdpvi.dpvi import run_dpvi  # noqa: E402
from skdpvi.models import LogisticRegressionModel  # noqa: E402


def adult_design():
    X, y = load_adult(subset="train", return_X_y=True)
    return (lambda rng: (X, y, None)), LogisticRegressionModel(X.shape[1]), len(X)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--designs", nargs="+", default=["gaussian", "correlated", "adult"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    est = DPBayesianLogisticRegression()
    payload = {}
    for design in args.designs:
        simulate, model, n = {"gaussian": lambda: gaussian_design(5, 5000, 0.0),
                              "correlated": correlated_design, "adult": adult_design}[design]()
        p = model.n_params
        settings = _engine_settings(
            model, epsilon=1.0, clip_norm=2 * math.sqrt(p), n_steps=10_000, sampling_rate=0.1,
            delta=1e-5, burn_in=0.2, preconditioner=None,
            learning_rate_scale=est._default_learning_rate_scale(2 * p), n_examples=n,
            record_trace=True)
        z, snr = [], []
        for seed in range(args.seeds):
            X, y, _ = simulate(np.random.default_rng(seed))
            result = run_dpvi(model, (X, y), random_state=seed, **settings)
            offset, se = wander_offset(result, model, return_se=True)
            oracle = oracle_offset(result, model, X)[:p]
            z.append((offset[:p] - oracle) / se)
            snr.append(np.abs(oracle) / se)
        z_sd, ratio = np.std(z, 0), np.median(snr, 0)
        payload[design] = {"z_sd": z_sd.tolist(), "snr_median": ratio.tolist()}
        print(f"{design}: (estimate - oracle) / se, sd over seeds {z_sd.min():.2f}-{z_sd.max():.2f}; "
              f"|oracle| / se median per coordinate {ratio.min():.2f}-{ratio.max():.2f} "
              f"(largest: {np.sort(ratio)[-3:].round(2)})", flush=True)
    save("ablation_logistic_offset_snr", payload)


if __name__ == "__main__":
    main()
