"""DP-SGD speed on Adult: skdpvi's engine, a naive torch loop and Opacus; the default fit.

All three run the same DP-SGD with the settings of the default
``DPBayesianLogisticRegression()`` on Adult (30,162 rows, 57 parameters, d = 114,
epsilon 1, kappa = 0.1, C = sqrt(57), the heuristic learning rate and the default
preconditioner): Poisson subsamples, per-example gradients of the negative ELBO with
10 shared Monte Carlo draws, clipping, Gaussian noise, the step.

- skdpvi: ``skdpvi.dpvi.run_dpvi`` with the estimator's engine settings (since the
  forty-fourth session its steps run in the compiled kernel,
  :mod:`skdpvi.dpvi.logistic_kernel`);
- skdpvi, torch step: the same run with the kernel switched off (the engine's torch
  step, the path of every earlier session's figure);
- naive: the straightforward torch loop of the same arithmetic (a Bernoulli mask over
  all N rows per step, the closed-form per-example gradients of the logistic ELBO
  as a (B, 114) block, clip, noise, step);
- Opacus: a torch module computing the per-example loss, wrapped in
  ``GradSampleModule`` (functorch per-sample gradients), clipped and noised by hand.

skdpvi and the naive loop alternate ``--reps`` times in one process (the minimum and
the median per step are reported, which is robust to other jobs on the machine);
Opacus is timed on ``--opacus-steps`` and scaled. Then the default fit,
``DPBayesianLogisticRegression(random_state=0).fit(X, y)`` with T = 10,000 and its
emcee post-processing, split into the accountant, DP-SGD and post-processing: the
first fit in a process (the accountant's first search included) and a second one
(the accountant's cache hit). Then the engine on 1 and 2 torch threads (the torch
step: the kernel uses one thread whatever torch's setting), and the kernel's
compilation: a short run in a fresh process with an empty numba cache, then with the
cache it wrote.
Everything runs on one torch thread unless said otherwise.

Run: python benchmarks/bench_engine.py [--steps 10000] [--reps 3] [--opacus-steps 500]
"""

import argparse
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

from _common import machine, save
from skdpvi import DPBayesianLogisticRegression
from skdpvi.datasets import load_adult
import skdpvi.dpvi.loop as loop
from skdpvi.dpvi import run_dpvi


def naive_loop(X, y, settings, n_steps, seed=0):
    """The DP-SGD of the engine, written the straightforward way."""
    gen = torch.Generator().manual_seed(seed)
    n_examples = len(X)
    Xt = torch.cat([torch.tensor(X, dtype=torch.float32), torch.ones(n_examples, 1)], 1)
    yt = torch.tensor(y, dtype=torch.float32)
    n = Xt.shape[1]
    sigma, clip = settings["noise_multiplier"], settings["clip_norm"]
    lam, beta_rho, q = settings["learning_rate"], settings["preconditioner"], settings["sampling_rate"]
    n_draws = settings["n_mc_samples"]
    prior_var = settings["model"].prior_scale ** 2
    beta = torch.cat([torch.ones(n), torch.full((n,), beta_rho)])
    mu = torch.zeros(n)
    rho = torch.full((n,), math.log(math.expm1(0.01)))
    for _ in range(n_steps):
        idx = torch.nonzero(torch.rand(n_examples, generator=gen) < q).squeeze(1)
        Xb, yb = Xt[idx], yt[idx]
        eps = torch.randn(n_draws, n, generator=gen)
        eps = (eps - eps.mean(0)) * math.sqrt(n_draws / (n_draws - 1))
        scale, dscale = F.softplus(rho), torch.sigmoid(rho)
        theta = mu + scale * eps
        r = yb[:, None] - torch.sigmoid(Xb @ theta.T)  # (B, S)
        reg_mu = theta.mean(0) / prior_var / n_examples
        reg_rho = ((theta * eps).mean(0) / prior_var - 1 / scale) * dscale / n_examples
        g_mu = reg_mu - r.mean(1, keepdim=True) * Xb
        g_rho = reg_rho - (r @ eps / n_draws) * Xb * dscale
        rows = torch.cat([g_mu, g_rho], 1) * beta  # preconditioned per-example gradients
        factors = torch.clamp(clip / (rows.norm(dim=1) + 1e-12), max=1.0)
        noisy = (factors @ rows + sigma * clip * torch.randn(2 * n, generator=gen)) / beta
        step = lam * beta * noisy
        mu, rho = mu - step[:n], rho - step[n:]
    return mu


class ELBOModule(torch.nn.Module):
    """Per-example negative ELBO of Bayesian logistic regression, as a torch module."""

    def __init__(self, n_params, n_examples):
        super().__init__()
        self.mu = torch.nn.Parameter(torch.zeros(n_params))
        self.rho = torch.nn.Parameter(torch.full((n_params,), float(np.log(np.expm1(0.01)))))
        self.eps = torch.zeros(10, n_params)  # a plain attribute: Opacus rejects buffers
        self.n_examples = n_examples

    def forward(self, xy):
        # one input tensor: Opacus' functorch path differentiates a layer of one input
        x, y = xy[:, :-1], xy[:, -1]
        scale = F.softplus(self.rho)
        theta = self.mu + scale * self.eps  # (S, n)
        z = x @ theta.T  # (B, S)
        ll = -F.softplus(-(2 * y[:, None] - 1) * z).mean(1)
        log_q = -torch.log(scale).sum()
        log_p = -0.5 * (theta**2).sum(1).mean()
        return -ll + (log_q - log_p) / self.n_examples  # (B,)


def run_opacus(X, y, settings, steps, seed=0):
    from opacus import GradSampleModule

    gen = torch.Generator().manual_seed(seed)
    n, p = X.shape
    sigma, clip, lam = (settings["noise_multiplier"], settings["clip_norm"],
                        settings["learning_rate"])
    XY = torch.cat([X, y[:, None]], 1)
    module = GradSampleModule(ELBOModule(p, n), force_functorch=True)
    for _ in range(steps):
        module.zero_grad(set_to_none=True)
        module._module.eps.copy_(torch.randn(10, p, generator=gen))
        idx = torch.nonzero(torch.rand(n, generator=gen) < 0.1).squeeze(1)
        if len(idx) == 0:
            continue
        loss = module(XY[idx]).sum()
        loss.backward()
        grads = torch.cat([module._module.mu.grad_sample, module._module.rho.grad_sample], 1)
        norms = grads.norm(dim=1)
        summed = (grads * torch.clamp(clip / (norms + 1e-12), max=1.0)[:, None]).sum(0)
        noisy = summed + sigma * clip * torch.randn(2 * p, generator=gen)
        with torch.no_grad():
            module._module.mu -= lam * noisy[:p]
            module._module.rho -= lam * noisy[p:]


@contextlib.contextmanager
def torch_step_only():
    """Runs inside use the engine's torch step, not the compiled kernel."""
    original = loop.kernel_layout
    loop.kernel_layout = lambda *args: None
    try:
        yield
    finally:
        loop.kernel_layout = original


_COMPILE_PROBE = """
import time
start = time.perf_counter()
from skdpvi.datasets import load_adult
import skdpvi.dpvi.loop as loop
from skdpvi.dpvi import run_dpvi
from skdpvi.models import LogisticRegressionModel
X, y = load_adult(return_X_y=True)
run_dpvi(LogisticRegressionModel(X.shape[1]), (X, y), noise_multiplier=10.0, clip_norm=5.0,
         sampling_rate=0.1, n_steps=100, burn_in=20)
print(time.perf_counter() - start)
"""


def kernel_compile_seconds():
    """Seconds of a 100-step run in a fresh process: numba's cache empty, then filled."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        runs = [float(subprocess.run([sys.executable, "-c", _COMPILE_PROBE], env=env,
                                     check=True, capture_output=True, text=True).stdout)
                for _ in range(2)]
    return {"cold": runs[0], "warm": runs[1]}


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def default_fit_phases(X, y):
    """Seconds of the default fit: total, accountant, DP-SGD, post-processing."""
    import skdpvi.linear_model._base as base
    import skdpvi.linear_model._settings as settings

    phases = {}
    owners = {"noise_multiplier": settings, "run_dpvi": base}
    originals = {name: getattr(owner, name) for name, owner in owners.items()}

    def wrap(name):
        def timed_call(*args, **kwargs):
            start = time.perf_counter()
            out = originals[name](*args, **kwargs)
            phases[name] = phases.get(name, 0.0) + time.perf_counter() - start
            return out
        return timed_call

    try:
        for name, owner in owners.items():
            setattr(owner, name, wrap(name))
        total = timed(lambda: DPBayesianLogisticRegression(random_state=0).fit(X, y))
    finally:
        for name, f in originals.items():
            setattr(owners[name], name, f)
    return dict(total=total, accountant=phases["noise_multiplier"], dp_sgd=phases["run_dpvi"],
                post=total - phases["noise_multiplier"] - phases["run_dpvi"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--opacus-steps", type=int, default=500)
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, y = load_adult(return_X_y=True)
    payload = {"machine": machine(), "steps": args.steps, "load_before": os.getloadavg()}
    print(f"torch {torch.__version__}; load average {payload['load_before']}")

    # the first fit of a process: the accountant's search, then the cached settings
    fit_first = default_fit_phases(X, y)
    print(f"first default fit: {fit_first}", flush=True)
    # the default's private clipping norm reads the rows' noisy norm histogram
    settings = DPBayesianLogisticRegression()._engine_settings(*X.shape, X=X, seed=0).engine
    settings = {**settings, "n_steps": args.steps, "burn_in": args.steps // 5}

    ours, torch_step, naive = [], [], []
    for _ in range(args.reps):
        ours.append(timed(lambda: run_dpvi(data=(X, y), random_state=0, **settings)))
        with torch_step_only():
            torch_step.append(timed(lambda: run_dpvi(data=(X, y), random_state=0,
                                                     **settings)))
        naive.append(timed(lambda: naive_loop(X, y, settings, args.steps)))
    per = {k: 1e3 * np.array(v) / args.steps
           for k, v in (("skdpvi", ours), ("torch_step", torch_step), ("naive", naive))}
    opacus = timed(lambda: run_opacus(torch.tensor(np.column_stack([X, np.ones(len(X))]),
                                                   dtype=torch.float32),
                                      torch.tensor(y, dtype=torch.float32), settings,
                                      args.opacus_steps)) * 1e3 / args.opacus_steps
    fit_second = default_fit_phases(X, y)
    threads = {}
    with torch_step_only():
        for n_threads in (1, 2, 1, 2):
            threads.setdefault(n_threads, []).append(1e3 * timed(lambda: run_dpvi(
                data=(X, y), random_state=0, n_threads=n_threads,
                **{**settings, "n_steps": 2000, "burn_in": 400})) / 2000)
    compile_s = kernel_compile_seconds()
    payload["load_after"] = os.getloadavg()

    print(f"\nDP-SGD on Adult, ms per step (min / median of {args.reps}):")
    for k, v in per.items():
        print(f"  {k:<8} {v.min():6.3f} / {np.median(v):6.3f}   "
              f"({v.min() * args.steps / 1e3:5.1f} s for {args.steps} steps)")
    print(f"  Opacus   {opacus:6.3f}            (measured on {args.opacus_steps} steps)")
    ratio_naive = per["naive"].min() / per["skdpvi"].min()
    ratio_opacus = opacus / per["skdpvi"].min()
    print(f"  skdpvi takes {1 / ratio_naive:.2f} of the naive loop's time; "
          f"{ratio_opacus:.1f}x faster than Opacus")
    print(f"  the torch step takes {per['torch_step'].min() / per['naive'].min():.2f} of the "
          f"naive loop's time; the kernel {per['skdpvi'].min() / per['torch_step'].min():.2f} "
          "of the torch step's")
    print(f"kernel compilation: {compile_s['cold']:.2f} s for a 100-step run in a fresh "
          f"process with an empty numba cache, {compile_s['warm']:.2f} s with its cache")
    for label, fit in (("first fit of the process", fit_first), ("second fit", fit_second)):
        print(f"default fit ({label}): {fit['total']:.2f} s = accountant "
              f"{fit['accountant']:.2f} + DP-SGD {fit['dp_sgd']:.2f} + post-processing "
              f"{fit['post']:.2f}")
    print("torch step's threads, ms per step: " + ", ".join(
        f"{k} thread(s) {min(v):.3f}" for k, v in threads.items()))
    print(f"load average after: {payload['load_after']}")
    payload.update(ms_per_step={k: v.tolist() for k, v in per.items()}, opacus_ms=opacus,
                   fit_first=fit_first, fit_second=fit_second, threads_ms=threads,
                   kernel_compile_s=compile_s)
    save("bench_engine", payload)


if __name__ == "__main__":
    main()
