"""Per-coordinate z-scores of the truth under the exact noise-aware posterior (Table 1).

z = (posterior mean - truth) / posterior sd in the unconstrained space, over K
simulations of one exponential-family model at epsilon 0.1 (mean 0 and sd 1 for a
calibrated posterior), and the median wander variance of the trace after burn-in.

Run: python benchmarks/diagnose_expfam.py gamma_exponential 48
"""
import sys

import numpy as np
import torch

torch.set_num_threads(1)
from _common import _engine_settings, _post_process
from table1_expfam import MODELS
from skdpvi.dpvi import run_dpvi_batched
name = sys.argv[1]; K = int(sys.argv[2])
model, simulate = MODELS[name]
seeds = list(range(2000, 2000 + K))
sims = [simulate(5000, random_state=s) for s in seeds]
st = _engine_settings(model, epsilon=0.1, clip_norm=2.0, n_steps=10000, sampling_rate=0.1, delta=1e-5, burn_in=0.2, preconditioner=None, learning_rate_scale=1.0)
runs = run_dpvi_batched(model, [(np.asarray(x, float),) for x, _ in sims], random_states=seeds, **st)
z = []; zl = []; wander = []
for res, (_, theta) in zip(runs, sims):
    posts, _ = _post_process(res, model, 0, 1000, ("exact",))
    d = posts["exact"].sample(2000, random_state=0, unconstrained=True)
    tu = posts["exact"].to_unconstrained(np.atleast_1d(theta))
    z.append((d.mean(0) - tu) / d.std(0))
    s = res.stats; wander.append(s.sum_xx / s.count - (s.sum_x / s.count) ** 2)
z = np.array(z)
print(name, "z mean", z.mean(0).round(2), "z sd", z.std(0).round(2))
print("wander var (mu, rho)", np.median(np.array(wander), 0))
