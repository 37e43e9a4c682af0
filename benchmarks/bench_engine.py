"""DP-SGD speed: skdpvi's engine against a straightforward Opacus implementation.

Both run the same DP-SGD (Poisson rate 0.1, per-example clipping, Gaussian noise,
the same per-example negative ELBO with 10 shared Monte Carlo draws) on the Adult
logistic problem (30,162 rows, 57 parameters, d = 114), in one process, one after
the other. The Opacus version wraps a torch module computing the per-example loss
in ``GradSampleModule`` (functorch per-sample gradients) and clips and noises the
per-sample gradients itself.

Run: python benchmarks/bench_engine.py [--steps 10000] [--opacus-steps 1000]
The Opacus time is measured on --opacus-steps and scaled to --steps.
"""

import argparse
import platform
import time

import numpy as np
import torch
import torch.nn.functional as F

from skdpvi.accounting import noise_multiplier
from skdpvi.datasets import load_adult
from skdpvi.dpvi import run_dpvi
from skdpvi.models import LogisticRegressionModel


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


def run_opacus(X, y, sigma, clip, steps, seed=0):
    from opacus import GradSampleModule

    gen = torch.Generator().manual_seed(seed)
    n, p = X.shape
    XY = torch.cat([X, y[:, None]], 1)
    module = GradSampleModule(ELBOModule(p, n), force_functorch=True)
    lr = 1.0 / (sigma * clip * np.sqrt(steps))
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
            module._module.mu -= lr * noisy[:p]
            module._module.rho -= lr * noisy[p:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--opacus-steps", type=int, default=1000)
    args = parser.parse_args()
    X, y = load_adult(return_X_y=True)
    X_aug = np.column_stack([X, np.ones(len(X))])
    sigma, _ = noise_multiplier(1.0, 1e-5, 0.1, args.steps)
    clip = 11.0
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    start = time.perf_counter()
    run_dpvi(LogisticRegressionModel(X.shape[1]), (X, y), noise_multiplier=sigma,
             clip_norm=clip, sampling_rate=0.1, n_steps=args.steps, burn_in=args.steps // 5,
             preconditioner=5 * sigma * clip, random_state=0)
    ours = time.perf_counter() - start

    Xt = torch.tensor(X_aug, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    start = time.perf_counter()
    run_opacus(Xt, yt, sigma, clip, args.opacus_steps)
    theirs = (time.perf_counter() - start) * args.steps / args.opacus_steps

    print(f"skdpvi engine : {ours:7.1f} s for {args.steps} steps "
          f"({1e3 * ours / args.steps:.2f} ms/step)")
    print(f"Opacus GSM    : {theirs:7.1f} s for {args.steps} steps "
          f"(measured on {args.opacus_steps}, {1e3 * theirs / args.steps:.2f} ms/step)")
    print(f"speed-up      : {theirs / ours:.1f}x")


if __name__ == "__main__":
    main()
