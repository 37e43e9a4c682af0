import math, os, numpy as np, torch, time
os.makedirs("out", exist_ok=True)
from skdpvi.accounting import noise_multiplier
from skdpvi.dpvi import heuristic_learning_rate
from skdpvi.datasets import make_nig_linear_regression
from skdpvi.models import LinearRegressionModel
from skdpvi.metrics import tarp_coverage, coverage_rmse_floor
from engine import run_phases

MODEL = LinearRegressionModel(10)
CLIP = 3.0 * np.sqrt(11) / np.sqrt(0.5 / 19)
T = 10_000; Q = 0.1; N = 5000

def settings(eps, T=T, lam_c=1.0, model=MODEL, clip=CLIP):
    sigma, _ = noise_multiplier(eps, 1e-5, Q, T)
    d = 2 * model.n_params
    lam = heuristic_learning_rate(sigma, clip, T, d, lam_c)
    beta = np.ones(d); beta[model.n_params:] = 1.0 / (lam * math.sqrt(T))
    return sigma, lam, beta

def sims(seeds, n=N):
    return [make_nig_linear_regression(n, random_state=int(s)) for s in seeds]

def unconstrain(theta):
    return MODEL.unconstrain(torch.tensor(theta)).numpy()

def prior_sampler(n, rng):
    out = np.empty((n, 12))
    for i in range(n):
        _, _, th = make_nig_linear_regression(2, random_state=rng)
        out[i] = th
    return MODEL.unconstrain(torch.tensor(out)).numpy()
