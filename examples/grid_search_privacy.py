"""Hyper-parameter search of a private classifier, and the privacy it really costs.

Runs ``GridSearchCV`` over ``epsilon`` and ``clip_norm`` of
``DPBayesianLogisticRegression`` on the bundled UCI Adult data, scoring every
candidate by calibration RMSE, Brier score (``skdpvi.metrics`` scorers) and
accuracy, and refits the best-calibrated candidate. It then prints the
cross-validation table and the TOTAL privacy spent by the whole search
(``skdpvi.accounting.total_privacy_spent``): every fit of every candidate on
every fold, plus the refit, ran DP-SGD on the same private rows, so their
budgets compose, far beyond the epsilon of the one model you keep.
Finally it plots the calibration curve of the refitted model on the test split
and saves it to grid_search_privacy.png in the working directory.

Run: python examples/grid_search_privacy.py [--quick]
"""

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402

from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.accounting import total_privacy_spent  # noqa: E402
from skdpvi.datasets import load_adult  # noqa: E402
from skdpvi.metrics import (  # noqa: E402
    calibration_rmse,
    neg_brier_score_scorer,
    neg_calibration_rmse_scorer,
)
from skdpvi.plotting import plot_calibration  # noqa: E402


def main(quick=False):
    start = time.perf_counter()
    train = load_adult(subset="train")
    X_train, y_train = train.data, train.target
    X_test, y_test = load_adult(subset="test", return_X_y=True)
    if quick:  # a smoke run: random subsets of the rows, few DP-SGD steps
        rng = np.random.default_rng(0)
        train_rows = rng.choice(len(y_train), 2000, replace=False)
        test_rows = rng.choice(len(y_test), 2000, replace=False)
        X_train, y_train = X_train[train_rows], y_train[train_rows]
        X_test, y_test = X_test[test_rows], y_test[test_rows]
    steps, cv = (200, 2) if quick else (2000, 3)
    print(f"UCI Adult: {len(y_train)} training rows, {X_train.shape[1]} features; "
          f"{steps} DP-SGD steps per fit, {cv}-fold CV")

    search = GridSearchCV(
        DPBayesianLogisticRegression(
            delta=1e-5, max_iter=steps, inference="exact",
            onehot_blocks=train.onehot_blocks, random_state=0,
        ),
        param_grid={"epsilon": [0.5, 1.0], "clip_norm": [3.0, 11.0]},
        scoring={
            "calibration": neg_calibration_rmse_scorer,
            "brier": neg_brier_score_scorer,
            "accuracy": "accuracy",
        },
        refit="calibration",
        cv=cv,
        n_jobs=1,
    ).fit(X_train, y_train)

    res = search.cv_results_
    print("\ncross-validation results (scores are negated errors: higher is better)")
    print(f"{'epsilon':>8} {'clip_norm':>10} {'neg cal. RMSE':>16} {'neg Brier':>16} "
          f"{'accuracy':>16} {'rank':>5}")
    for i, params in enumerate(res["params"]):
        cells = "".join(
            f" {res[f'mean_test_{key}'][i]:>8.4f} +- {res[f'std_test_{key}'][i]:.3f}"
            for key in ("calibration", "brier", "accuracy")
        )
        print(f"{params['epsilon']:>8} {params['clip_norm']:>10}{cells} "
              f"{res['rank_test_calibration'][i]:>5}")
    print(f"best (refitted) by calibration: {search.best_params_}")

    n_fits = len(res["params"]) * search.n_splits_ + 1
    eps_total, delta_total = total_privacy_spent(search)
    print(f"\nWARNING: every fit spends privacy budget. This search ran {n_fits} DP fits "
          f"({len(res['params'])} candidates x {search.n_splits_} folds + 1 refit) "
          "on the same private rows.")
    print(f"privacy of the refitted model alone: epsilon = "
          f"{search.best_estimator_.epsilon_:.4f}, delta = {search.best_estimator_.delta_:g}")
    print(f"TOTAL privacy spent by the whole search: epsilon = {eps_total:.4f}, "
          f"delta = {delta_total:g} (PRV composition of all the fits, conservatively "
          "as if each saw every row)")
    print("(the chosen hyper-parameters depend on the private data too: report the "
          "total, or tune on public or simulated data and fit once.)")

    proba = search.predict_proba(X_test)[:, 1]
    print(f"\nrefitted model on {len(y_test)} test rows: accuracy "
          f"{search.best_estimator_.score(X_test, y_test):.4f}, calibration RMSE "
          f"{calibration_rmse(y_test, proba):.4f}")
    fig, ax = plt.subplots(figsize=(5, 5))
    best = search.best_params_
    plot_calibration(
        y_test, proba, ax=ax,
        labels=f"epsilon={best['epsilon']}, clip_norm={best['clip_norm']}",
    )
    ax.set_title("Refitted DPBayesianLogisticRegression, Adult test")
    fig.tight_layout()
    path = Path("grid_search_privacy.png").resolve()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot saved to {path}")
    print(f"total time {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small, fast run")
    main(parser.parse_args().quick)
