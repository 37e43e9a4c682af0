"""One step's clipped sum on Adult: the engine's paths and a factored closed form.

A probe for issue 15's single-fit target (twenty-third session): the clipped sum of
one Poisson batch of Adult (about 3,000 of 30,162 rows, 57 parameters; the default
clip norm 5.34), timed per call on one torch thread, for

- ``monte_carlo``: the engine's default path (:class:`skdpvi.dpvi.mechanism._GLMClip`,
  10 Monte Carlo draws);
- ``closed_form``: the engine's ``elbo_gradients="closed_form"`` path (Gauss-Hermite
  expectations; it still forms the (B, 57) block of the scales' rows);
- ``factored``: the same closed-form arithmetic with the scales' rows never formed: by
  Stein's lemma a row is ``c + k_i u * x_i^2``, so its squared norm and the clipped
  sum come from products of the batch with x^2 and x^4 (checked against
  ``closed_form`` to float32 rounding);

and the gather of the batch's rows. Not adopted: the factored form was 10-15 % faster
than the Monte Carlo path, far from the 1.45x the 5-second fit needs (see
``doc/performance.rst``).

Run: python benchmarks/bench_clip_variants.py [--calls 2000]
"""

import argparse
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from skdpvi.datasets import load_adult
from skdpvi.dpvi.gradients import _expected_regulariser
from skdpvi.dpvi.mechanism import _GLMClip
from skdpvi.models import LogisticRegressionModel
from skdpvi.models.base import gauss_hermite


class FactoredClosedForm:
    """The closed-form clipped sum without the (B, p) block of the scales' rows."""

    def __init__(self, model, n_examples, preconditioner, clip_norm):
        self.model, self.n_examples, self.clip_norm = model, n_examples, clip_norm
        self.n = model.n_params
        self.beta_mu, self.beta_rho = preconditioner[: self.n], preconditioner[self.n:]
        self.nodes, self.weights = gauss_hermite(model.n_quadrature_nodes, torch.float32, "cpu")

    def __call__(self, phi, X, y, row_sq_norms):
        mu, rho = phi[: self.n], phi[self.n:]
        scale = F.softplus(rho)
        u = self.beta_rho * torch.sigmoid(rho) * scale
        reg = _expected_regulariser(self.model, mu, rho, scale, self.n_examples)
        a, c = reg[: self.n] * self.beta_mu, reg[self.n:] * self.beta_rho
        X2 = X * X
        P1 = torch.stack([mu, self.beta_mu * a]) @ X.mT
        P2 = torch.stack([scale * scale, c * u]) @ X2.mT
        x4u = (X2 * X2) @ (u * u)
        prob = torch.sigmoid(P1[0].unsqueeze(-1) + P2[0].sqrt().unsqueeze(-1) * self.nodes)
        r = y - prob @ self.weights
        k = (prob * (1 - prob)) @ self.weights
        sq = (a @ a - 2 * r * P1[1] + r * r * row_sq_norms
              + c @ c + 2 * k * P2[1] + k * k * x4u)
        norms = sq.clamp(min=0.0).sqrt()
        f = torch.clamp(self.clip_norm / (norms + 1e-12), max=1.0)
        total = f.sum()
        sum_w = total * a - self.beta_mu * ((f * r) @ X)
        sum_s = total * c + u * ((f * k) @ X2)
        return torch.cat([sum_w, sum_s]).double(), norms


def per_call(fn, calls):
    for _ in range(50):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, y = load_adult(return_X_y=True)
    X = np.hstack([X, np.ones((len(X), 1))]).astype(np.float32)
    N, p = X.shape
    Xt, yt = torch.tensor(X), torch.tensor(y, dtype=torch.float32)
    model = LogisticRegressionModel(n_features=p - 1)
    exact = LogisticRegressionModel(n_features=p - 1, exact_expectations=True)
    beta = torch.cat([torch.ones(p), torch.full((p,), 0.3)])
    gen = torch.Generator().manual_seed(0)
    phi = torch.cat([0.3 * torch.randn(p, generator=gen),
                     torch.full((p,), math.log(math.expm1(0.05)))])
    eps = torch.randn(10, p, generator=gen)
    rows = torch.nonzero(torch.rand(N, generator=gen) < 0.1).squeeze(1)
    Xb, yb = Xt[rows], yt[rows]
    sq = (Xb * Xb).sum(1)
    clip = 5.34
    paths = {"monte_carlo": _GLMClip(model, N, beta, clip),
             "closed_form": _GLMClip(exact, N, beta, clip)}
    factored = FactoredClosedForm(exact, N, beta, clip)
    reference = paths["closed_form"](phi, eps, Xb, yb, sq)[0]
    got = factored(phi, Xb, yb, sq)[0]
    print(f"batch of {len(rows)} rows, {p} parameters; factored vs closed_form: max "
          f"difference {float((got - reference).abs().max()):.2e} of "
          f"{float(reference.abs().max()):.1f}")
    out = torch.empty_like(Xb)
    for r in range(args.rounds):
        times = {name: per_call(lambda f=f: f(phi, eps, Xb, yb, sq), args.calls)
                 for name, f in paths.items()}
        times["factored"] = per_call(lambda: factored(phi, Xb, yb, sq), args.calls)
        times["gather"] = per_call(lambda: torch.index_select(Xt, 0, rows, out=out), args.calls)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:.0f} us" for k, v in times.items()))


if __name__ == "__main__":
    main()
