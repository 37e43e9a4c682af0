"""The DPVI engine: DP-SGD on the negative ELBO of a mean-field Gaussian.

One run of :func:`run_dpvi` is the private mechanism. Each step

1. draws a Poisson subsample (every example independently with rate kappa, so the
   batch size is Binomial(N, kappa) and may be zero),
2. computes per-example gradients of the negative of the paper's per-example ELBO
   (A56/A57) with respect to phi = (mu, rho), vectorised over the batch,
3. multiplies them by the preconditioner beta, clips each to norm C, sums them,
   adds N(0, (sigma C)^2 I) noise and divides by beta: the released noisy gradient
   ``g_tilde`` (paper A59),
4. updates ``phi <- phi - learning_rate * g_tilde`` with ``learning_rate = lambda * beta``.

The variational distribution is q(theta) = N(mu, diag(softplus(rho)^2)): softplus(rho)
is the *standard deviation*. Only the released pairs (phi_t, g_tilde_{t+1}) after
burn-in enter the post-processing, through six per-coordinate running sums
(:class:`TraceStatistics`), so its cost does not grow with T.
:func:`run_dpvi_batched` runs many data sets in lockstep, each exactly as
:func:`run_dpvi` would.

One concept per module, in the order of the data flow:

``data``        the private data, read one batch of rows at a time, never copied
                when large (float32/float64 arrays, memory maps, sparse CSR)
``sampling``    Poisson subsamples, centred Monte Carlo draws, the fixed draw order
``gradients``   per-example gradients of the negative ELBO
``mechanism``   clip, sum, add noise, undo the preconditioning
``schedule``    learning rate, preconditioner, starting point
``statistics``  running sums of the released pairs
``result``      what a run releases
``loop``        one run, and the step loop shared with ``batched``
``logistic_kernel``  the steps of a logistic regression a block at a time in
                compiled code (numba, in ``logistic_steps``), where faster than
                the torch step
``batched``     many runs in lockstep
``full_rank``   runs on a full-rank Gaussian (logistic regression), one or in
                lockstep (its step in ``full_rank_step``, its loop in
                ``full_rank_loop``)
``threads``     torch's thread count while a run goes (one, by default)
"""

from .batched import run_dpvi_batched
from .full_rank import FullRankRelease, run_dpvi_full_rank, run_dpvi_full_rank_batched
from .gradients import per_example_gradients
from .loop import run_dpvi
from .mechanism import clip_and_sum, glm_clip_and_sum, group_clip_norms, privatize, release
from .result import DPVIResult
from .sampling import poisson_subsample, poisson_subsamples
from .schedule import heuristic_learning_rate
from .statistics import TraceStatistics

__all__ = [
    "run_dpvi",
    "run_dpvi_batched",
    "run_dpvi_full_rank",
    "run_dpvi_full_rank_batched",
    "FullRankRelease",
    "heuristic_learning_rate",
    "DPVIResult",
    "TraceStatistics",
    "poisson_subsamples",
    "poisson_subsample",
    "clip_and_sum",
    "glm_clip_and_sum",
    "group_clip_norms",
    "privatize",
    "release",
    "per_example_gradients",
]
