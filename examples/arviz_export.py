"""Raw UCI Adult through a public-bounds pipeline, named intervals, and ArviZ.

Loads the raw Adult columns (strings and numbers), encodes them with a
ColumnTransformer built only from the public bounds and category lists of
skdpvi.datasets (nothing is fitted on the private rows), fits
DPBayesianLogisticRegression (epsilon=1, ``inference="emcee"``: the paper's
gradient model sampled with emcee instead of the default dense model), prints the
posterior of a few coefficients by name, draws their credible intervals (forest
plot), and exports the fit to ArviZ: its summary of the posterior, and the ESS and
R-hat of the post-processing sampler's (emcee's) chains.

Needs pandas, matplotlib and ArviZ: pip install "skdpvi[arviz,plots]" pandas

Run: python examples/arviz_export.py [--quick]
"""

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder  # noqa: E402

from skdpvi import DPBayesianLogisticRegression  # noqa: E402
from skdpvi.datasets import ADULT_CATEGORIES, ADULT_CONTINUOUS_BOUNDS, load_adult  # noqa: E402
from skdpvi.integrations import to_inference_data  # noqa: E402
from skdpvi.plotting import plot_intervals  # noqa: E402

with warnings.catch_warnings():  # ArviZ 0.x announces its 1.0 refactor on import
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az  # noqa: E402

LOW, HIGH = np.array(list(ADULT_CONTINUOUS_BOUNDS.values())).T


def scale_with_public_bounds(X):
    """Min-max scaling with the public bounds: a fixed function, nothing is fitted."""
    return np.clip((np.asarray(X, dtype=float) - LOW) / (HIGH - LOW), 0.0, 1.0)


def public_preprocessor():
    return ColumnTransformer(
        [("continuous", FunctionTransformer(scale_with_public_bounds,
                                            feature_names_out="one-to-one"),
          list(ADULT_CONTINUOUS_BOUNDS)),
         ("categorical", OneHotEncoder(categories=[list(c) for c in ADULT_CATEGORIES.values()],
                                       handle_unknown="ignore", sparse_output=False),
          list(ADULT_CATEGORIES))],
        verbose_feature_names_out=False,  # columns "age", "sex_Male", ...
    ).set_output(transform="pandas")  # the classifier sees the column names


def onehot_blocks():
    """The one-hot groups' columns in the preprocessor's output (public schema)."""
    blocks, start = [], len(ADULT_CONTINUOUS_BOUNDS)
    for categories in ADULT_CATEGORIES.values():
        blocks.append(list(range(start, start + len(categories))))
        start += len(categories)
    return blocks


def main(quick=False):
    X, y = load_adult(raw=True, as_frame=True, return_X_y=True)
    if quick:  # a smoke run for the test suite
        X, y = X.iloc[:3000], y.iloc[:3000]
    print(f"raw UCI Adult: {X.shape[0]} rows, {X.shape[1]} columns "
          f"({', '.join(X.columns[:4])}, ...)")
    pipe = make_pipeline(
        public_preprocessor(),
        # the paper's gradient model sampled with emcee (not the default dense
        # model, which is computed exactly): its chains go to ArviZ below
        DPBayesianLogisticRegression(epsilon=1.0, delta=1e-5, clip_norm=11.0,
                                     inference="emcee", max_iter=500 if quick else 10_000,
                                     onehot_blocks=onehot_blocks(), random_state=0,
                                     verbose=1),
    ).fit(X, y)
    clf = pipe[-1]
    print(f"epsilon spent: {clf.epsilon_:.4f} (delta={clf.delta_:g})")

    shown = ["coef[age]", "coef[hours-per-week]", "coef[capital-gain]",
             "coef[sex_Female]", "coef[sex_Male]", "intercept"]
    print("\nposterior (90% central intervals) of a few parameters:")
    print(clf.posterior_.summary(0.9).loc[shown].round(3).to_string())
    # Every one-hot group sums to the intercept column, so only differences
    # within a group are pinned down by the data, e.g. Male - Female:
    draws = clf.sample_posterior(4000, random_state=0)
    names = list(clf.param_names_)
    diff = draws[:, names.index("coef[sex_Male]")] - draws[:, names.index("coef[sex_Female]")]
    lo, hi = np.quantile(diff, [0.05, 0.95])
    print(f"coef[sex_Male] - coef[sex_Female]: mean {diff.mean():.3f}, "
          f"90% interval [{lo:.3f}, {hi:.3f}]")

    ax = plot_intervals(clf, params=shown, label="noise-aware 90% interval")
    ax.figure.set_size_inches(7, 3.5)
    ax.figure.tight_layout()
    path = Path("arviz_export_intervals.png").resolve()
    ax.figure.savefig(path, dpi=100)
    plt.close(ax.figure)
    print(f"interval plot saved to {path}")

    idata = to_inference_data(clf)
    print(f"\nInferenceData groups: {', '.join(idata.groups())}")
    print("ArviZ summary of the posterior (first rows):")
    print(az.summary(idata, var_names=["coef"], kind="stats").head(4).to_string())
    chains = az.summary(idata, group="post_processing", var_names=["v"], kind="diagnostics")
    print(f"\npost-processing chains (emcee, {idata.post_processing.sizes['chain']} walkers): "
          f"ESS bulk min {chains['ess_bulk'].min():.0f}, "
          f"R-hat max {chains['r_hat'].max():.3f} over {len(chains)} coordinates")
    axes = az.plot_trace(idata.post_processing, var_names=["curvature"],
                         coords={"component": ["mu"], "param": ["coef[age]"]})
    fig = np.ravel(axes)[0].figure
    path = Path("arviz_export_trace.png").resolve()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    print(f"trace plot saved to {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small, fast run")
    main(parser.parse_args().quick)
