"""The wander-offset variants on Adult: calibration and AUC per seed (results page).

One DP-SGD run per seed with the estimator's defaults except the clip norm (argument;
the benchmarks use 11), its trace recorded, then each post-processing variant of
``designs.py`` (``emcee``, ``emcee+jensen``, ``emcee+jensenfd``, ``last_iterate``, ...):
calibration RMSE (10 equal-count bins), Brier score and ROC AUC on the test split.

Run: python benchmarks/ablation_logistic/adult_offsets.py 1.0 11 0,1,2 emcee,emcee+jensen,last_iterate
"""
import os
import sys
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import numpy as np, torch
from scipy.special import expit
from _common import _engine_settings
from designs import posterior_draws
from skdpvi import DPBayesianLogisticRegression
from skdpvi.datasets import load_adult
from skdpvi.models import LogisticRegressionModel
from skdpvi.metrics import calibration_rmse, brier_score_loss
from skdpvi.dpvi import run_dpvi
from sklearn.metrics import roc_auc_score
torch.set_num_threads(1)
eps = float(sys.argv[1]); C = float(sys.argv[2]); seeds = [int(s) for s in sys.argv[3].split(",")]
methods = sys.argv[4].split(",")
X, y = load_adult(subset="train", return_X_y=True)
Xt, yt = load_adult(subset="test", return_X_y=True)
model = LogisticRegressionModel(X.shape[1])
lam_c = DPBayesianLogisticRegression._default_learning_rate_scale(2 * model.n_params)
s = _engine_settings(model, epsilon=eps, clip_norm=C, n_steps=10000, sampling_rate=0.1, delta=1e-5,
                     burn_in=0.2, preconditioner=None, learning_rate_scale=lam_c, n_examples=len(X), record_trace=True)
Xa = np.column_stack([Xt, np.ones(len(Xt))])
for seed in seeds:
    res = run_dpvi(model, (X, y), random_state=seed, **s)
    line = f"eps {eps} C {C} seed {seed} clipped {res.diagnostics['clipped_fraction']:.4f}"
    for m in methods:
        d = posterior_draws(res, model, len(X), m, n_draws=4000)
        p = np.mean([expit(Xa @ c.T).mean(1) for c in np.array_split(d, 8)], 0)
        line += f" | {m} {calibration_rmse(yt, p):.4f} {brier_score_loss(yt, p):.4f} {roc_auc_score(yt, p):.4f}"
    print(line, flush=True)
