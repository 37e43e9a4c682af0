"""Pool independent TARP studies of one cell, and place each against a calibrated method.

A TARP study of K simulations gives a coverage curve whose RMSE a calibrated method
also spreads (``coverage_rmse_floor``): one study above the calibrated range is
evidence, not proof, of miscalibration. Given the result files of independent studies
of the same cell (same model, settings and method, other seeds), this prints for each
study its RMSE and the fraction of calibrated studies of the same K that score at least
as high (a one-sided p-value), then pools the studies: the coverage at each credibility
level is a mean over simulations, so the pooled curve of studies of equal K is the
mean of their curves, and its RMSE is compared with the calibrated range at the pooled
K. Same reference scheme, same alpha grid, equal K per study.

Run: python benchmarks/pool_studies.py results/a.json results/b.json [...]
         --model gamma_exponential --method statistics
"""

import argparse
import json

import numpy as np

from skdpvi.metrics._tarp.coverage import _coverage_curve, _credibility_grid, _rmse


def calibrated_rmse(n_simulations, n_repeats=4000, seed=0):
    """RMSEs of ``n_repeats`` studies of a calibrated method with K simulations."""
    rng = np.random.default_rng(seed)
    credibility = _credibility_grid(None)
    f = rng.random((n_repeats, n_simulations))
    return _rmse(credibility, _coverage_curve(f.T, credibility))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--model", required=True)
    parser.add_argument("--method", required=True)
    args = parser.parse_args()
    studies = []
    for path in args.files:
        payload = json.load(open(path))
        rows = payload["cells"][args.model]["rows"][args.method]
        studies.append((path, payload["n_sim"], rows))
    sizes = {k for _, k, _ in studies}
    if len(sizes) != 1:
        raise SystemExit(f"the studies must have the same K, got {sorted(sizes)}")
    k = sizes.pop()
    single = calibrated_rmse(k)
    pooled_k = k * len(studies)
    pooled_floor = calibrated_rmse(pooled_k)
    for scheme in ("posterior", "prior"):
        print(f"\nreferences: {scheme}")
        curves = []
        for path, _, rows in studies:
            rmse = rows[scheme]["rmse"]
            p = float(np.mean(single >= rmse))
            curves.append(np.asarray(rows[scheme]["coverage"]))
            print(f"  {path}: K = {k}, RMSE {rmse:.4f}; calibrated studies at least as "
                  f"high: {p:.1%}")
        credibility = np.asarray(studies[0][2][scheme]["credibility"])
        pooled = np.mean(curves, axis=0)
        rmse = float(np.sqrt(np.mean((pooled - credibility) ** 2)))
        lo, hi = np.quantile(pooled_floor, [0.05, 0.95])
        print(f"  pooled, K = {pooled_k}: RMSE {rmse:.4f} (calibrated: mean "
              f"{pooled_floor.mean():.4f}, 90 % {lo:.4f}-{hi:.4f}; at least as high: "
              f"{np.mean(pooled_floor >= rmse):.1%})")
        print("  pooled coverage - credibility:", np.round(pooled - credibility, 3))


if __name__ == "__main__":
    main()
