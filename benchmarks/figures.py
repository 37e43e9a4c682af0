"""Figures of the results page (doc/images/).

Run: python benchmarks/figures.py adult    (two DP runs on Adult, about 2 minutes)
     python benchmarks/figures.py tarp     (from benchmarks/results/table2_linear.json)
     python benchmarks/figures.py tarp-expfam  (from benchmarks/results/table1_expfam.json)
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from _common import RESULTS_DIR, fit_all_backends  # noqa: E402

IMAGES = os.path.join(os.path.dirname(__file__), "..", "doc", "images")


def adult(seed=1):
    from scipy.special import expit

    from skdpvi import DPBayesianLogisticRegression
    from skdpvi.datasets import load_adult
    from skdpvi.models import LogisticRegressionModel
    from skdpvi.plotting import plot_calibration

    X, y = load_adult(subset="train", return_X_y=True)
    Xt, yt = load_adult(subset="test", return_X_y=True)
    Xa = np.column_stack([Xt, np.ones(len(Xt))])
    model = LogisticRegressionModel(X.shape[1])
    lam_c = DPBayesianLogisticRegression._default_learning_rate_scale(2 * model.n_params)
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharey=True)
    for ax, eps in zip(axes, (0.1, 1.0)):
        posts, _ = fit_all_backends(model, (X, y), epsilon=eps, clip_norm=11.0, seed=seed,
                                    learning_rate_scale=lam_c, n_draws=2000,
                                    methods=("emcee", "last_iterate"))
        probs = {}
        for method, label in (("emcee", "NA-DPVI (emcee)"), ("last_iterate", "naive last iterate")):
            theta = posts[method].sample(5000, random_state=0)
            probs[label] = expit(Xa @ theta.T).mean(1)
        plot_calibration(yt, probs, ax=ax)
        ax.set_title(f"UCI Adult test split, epsilon = {eps}")
    fig.tight_layout()
    path = os.path.join(IMAGES, "adult_calibration.png")
    fig.savefig(path, dpi=110)
    print("wrote", path)


def _tarp_figure(name, title, image, cell_label="{}", override=None):
    with open(os.path.join(RESULTS_DIR, name + ".json")) as f:
        data = json.load(f)
    cells = data["cells"]
    if override is not None and os.path.exists(os.path.join(RESULTS_DIR, override + ".json")):
        # rows of a later run on the same seeds replace those of the same method
        with open(os.path.join(RESULTS_DIR, override + ".json")) as f:
            later = json.load(f)
        for cell_name, cell in later["cells"].items():
            if cell_name in cells:
                cells[cell_name]["rows"].update(cell["rows"])
    try:  # epsilons in increasing order, whatever order the cells were run in
        cells = {k: cells[k] for k in sorted(cells, key=float)}
    except ValueError:
        pass
    fig, axes = plt.subplots(2, len(cells), figsize=(4 * len(cells), 7.5), squeeze=False)
    for j, (cell_name, cell) in enumerate(cells.items()):
        for i, scheme in enumerate(("posterior", "prior")):
            ax = axes[i, j]
            for method, row in cell["rows"].items():
                r = row[scheme]
                ax.plot(r["credibility"], r["coverage"], label=f"{method} ({r['rmse']:.3f})")
            ax.plot([0, 1], [0, 1], "k--", lw=1)
            ax.set_title(f"{cell_label.format(cell_name)}, {scheme} references", fontsize=10)
            ax.set_xlabel("credibility level")
            ax.set_ylabel("expected coverage")
            ax.legend(fontsize=7)
    fig.suptitle(f"{title}, TARP coverage, K = {data['n_sim']} simulations")
    fig.tight_layout()
    path = os.path.join(IMAGES, image)
    fig.savefig(path, dpi=100)
    print("wrote", path)


def tarp():
    # the statistics rows of the present default (thirteenth session's rerun), the
    # others from the run before it on the same seeds (results page, Table 2)
    _tarp_figure("table2_linear", "10-D linear regression", "table2_tarp_coverage.png",
                 cell_label="epsilon = {}", override="table2_linear_statistics")


def tarp_expfam():
    _tarp_figure("table1_expfam", "Exponential families, epsilon = 0.1",
                 "table1_tarp_coverage.png")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figure", choices=["adult", "tarp", "tarp-expfam"])
    args = parser.parse_args()
    {"adult": adult, "tarp": tarp, "tarp-expfam": tarp_expfam}[args.figure]()
