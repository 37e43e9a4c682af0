"""The distinguishing game, played many times: :func:`audit_dpvi`.

1. Calibrate the noise multiplier sigma to the claimed (epsilon, delta) with the
   package's accountant, for the given sampling rate q and number of steps T.
2. Run the mechanism ``n_trials / n_canaries`` times on D plus K canaries and as
   often on D alone (add/remove-one neighbours for each canary), every run with its
   own seed, in lockstep through :func:`skdpvi.dpvi.run_dpvi_batched`.
3. Project every released noisy gradient on each canary's clipped gradient
   (:mod:`~skdpvi.privacy_audit.statistics`): one trial per canary and run.
4. On the first ``selection_fraction`` of the runs choose a statistic, a threshold
   and an orientation; on the rest, count true and false positives and turn them
   into a lower confidence bound on epsilon (:mod:`~skdpvi.privacy_audit.bounds`).

If the lower bound exceeds the claimed epsilon, the mechanism is not what the
accountant thinks it is (with probability at least ``confidence``).
"""

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..accounting import noise_multiplier as calibrated_noise_multiplier
from ..dpvi import heuristic_learning_rate
from ..utils.validation import is_int
from .bounds import evaluate_test, select_test
from .canaries import make_canary_data
from .mechanisms import MECHANISMS, run_mechanism
from .statistics import projections, statistics

__all__ = ["AuditResult", "audit_dpvi"]

#: Memory for the released traces of one chunk of runs (bytes).
_CHUNK_BYTES = 200e6


@dataclass
class AuditResult:
    """What an audit found.

    Attributes
    ----------
    mechanism : str
        ``"real"`` (the engine) or the variant audited.
    epsilon, delta : float
        The claimed budget.
    epsilon_lower : float
        Lower confidence bound on the epsilon of the mechanism.
    confidence : float
        Probability that ``epsilon_lower`` is below the mechanism's true epsilon.
    passed : bool
        ``epsilon_lower <= epsilon``: the audit found no violation.
    noise_multiplier, clip_norm, sampling_rate, n_steps
        The run's settings (sigma from the accountant for the claimed budget).
    n_trials : int
        Trials per hypothesis (with and without the canary), selection and
        evaluation together.
    n_evaluation : int
        Of which used to measure the bound (per hypothesis).
    statistic : str
        The test statistic chosen on the held-out trials.
    threshold : float
    orientation : tuple
        ("in" or "out": which hypothesis the test detects, "above" or "below" the
        threshold).
    true_positives, false_positives : int
        Counts on the evaluation trials.
    tpr, fpr : float
        Their rates.
    signal_per_step : float
        Mean projection with the canary minus without, per step, in units of C:
        ``q`` for the real mechanism (the canary adds C when sampled, and nothing
        else changes).
    noise_per_step : float
        Standard deviation of a step's projection without the canary, in units of
        sigma C: 1 for the real mechanism.
    seconds : float
        Wall time of the whole audit.
    """

    mechanism: str
    epsilon: float
    delta: float
    epsilon_lower: float
    confidence: float
    noise_multiplier: float
    clip_norm: float
    sampling_rate: float
    n_steps: int
    n_trials: int
    n_evaluation: int
    statistic: str
    threshold: float
    orientation: tuple
    true_positives: int
    false_positives: int
    tpr: float
    fpr: float
    signal_per_step: float
    noise_per_step: float
    seconds: float
    details: dict = field(default_factory=dict, repr=False)

    @property
    def passed(self):
        """True when the lower bound does not exceed the claimed epsilon."""
        return self.epsilon_lower <= self.epsilon

    def summary(self):
        """One line: mechanism, claim, bound, trials, time."""
        return (f"{self.mechanism:>12}: claimed epsilon {self.epsilon:g}, lower bound "
                f"{self.epsilon_lower:.3f} ({self.confidence:.0%} confidence, "
                f"{self.n_trials} trials per hypothesis, statistic {self.statistic}), "
                f"{self.seconds:.1f} s -> {'ok' if self.passed else 'VIOLATION'}")


def audit_dpvi(epsilon, delta, sampling_rate, n_steps, *, mechanism="real", clip_norm=1.0,
               n_trials=20_000, n_canaries=64, canary="gradient", canary_value=100.0,
               confidence=0.95, selection_fraction=0.3, n_samples=20, n_features=2,
               learning_rate=None, learning_rate_scale=None, n_mc_samples=10,
               preconditioner=None, random_state=0, device="cpu"):
    """Empirical lower bound on the epsilon of DP-SGD as skdpvi runs it.

    Plays the add/remove-one distinguishing game with worst-case gradient canaries
    (see :mod:`skdpvi.privacy_audit`) on the mechanism that a fit with
    ``epsilon``, ``delta``, ``sampling_rate`` and ``n_steps`` (``max_iter``) runs:
    the noise multiplier comes from :func:`skdpvi.accounting.noise_multiplier`.

    Parameters
    ----------
    epsilon, delta : float
        The claimed budget.
    sampling_rate : float
        Poisson sampling rate q.
    n_steps : int
        Steps T per run. The audit's cost grows with ``n_trials * n_steps``.
    mechanism : str, default="real"
        ``"real"``: the engine (:func:`~skdpvi.dpvi.run_dpvi_batched`); or one of
        the deliberately broken variants ``"weak_noise"``, ``"no_clipping"``,
        ``"double_rate"``, ``"reused_noise"``, or ``"reference"`` (the
        re-implementation the variants run on, unbroken), see
        :mod:`~skdpvi.privacy_audit.mechanisms`.
    clip_norm : float, default=1.0
        C.
    n_trials : int, default=20000
        Trials per hypothesis (with the canaries, without them), selection and
        evaluation together.
    n_canaries : int, default=64
        Canaries per run, each on its own coordinate, each one trial.
    canary : {"gradient", "null"}, default="gradient"
        Worst-case gradient canaries, or null canaries (rows of zeros), which change
        the run only through the number of rows: their bound should be about 0.
    canary_value : float, default=100.0
        The canary's feature value (its unclipped gradient norm).
    confidence : float, default=0.95
    selection_fraction : float, default=0.3
        Fraction of the runs on which the test is chosen; the rest measure it.
    n_samples, n_features : int
        Size of the simulated data set besides the canaries.
    learning_rate, learning_rate_scale, n_mc_samples, preconditioner
        As in :func:`~skdpvi.dpvi.run_dpvi`; lambda defaults to the heuristic for
        the calibrated sigma.
    random_state : int, default=0
    device : str, default="cpu"

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> from skdpvi.privacy_audit import audit_dpvi
    >>> result = audit_dpvi(2.0, 1e-5, 1.0, 1, n_trials=2000, n_canaries=64)
    >>> result.passed, result.n_trials
    (True, 2048)
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}.")
    if not 0 < selection_fraction < 1:
        raise ValueError(f"selection_fraction must be in (0, 1), got {selection_fraction!r}.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got confidence={confidence!r}.")
    for name, value in (("n_trials", n_trials), ("n_canaries", n_canaries),
                        ("n_steps", n_steps)):
        if not is_int(value) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {name}={value!r}.")
    start = time.perf_counter()
    sigma, _ = calibrated_noise_multiplier(epsilon, delta, sampling_rate, int(n_steps))
    data = make_canary_data(n_samples, n_features, n_canaries, canary_value, canary,
                            random_state)
    d = 2 * data.model.n_params
    lam = (heuristic_learning_rate(sigma, clip_norm, int(n_steps), d, learning_rate_scale)
           if learning_rate is None else float(learning_rate))
    n_runs = max(2, math.ceil(n_trials / n_canaries))
    chunk = int(max(1, min(512, _CHUNK_BYTES // (8 * n_steps * d))))
    seeds = np.random.SeedSequence(random_state).generate_state(2 * n_runs)
    settings = dict(noise_multiplier=sigma, clip_norm=clip_norm, sampling_rate=sampling_rate,
                    n_steps=int(n_steps), learning_rate=lam, n_mc_samples=n_mc_samples,
                    preconditioner=preconditioner, init_mean=data.init_mean, device=device)

    def trials(dataset, run_seeds):
        """Scores of every trial (run-major), and the sum, sum of squares and count of x."""
        scores, moments = [], np.zeros(3)
        for i in range(0, len(run_seeds), chunk):
            traces, beta = run_mechanism(mechanism, data.model, dataset,
                                         [int(s) for s in run_seeds[i:i + chunk]], **settings)
            x = projections(traces, beta, data.coordinates, sigma, clip_norm)  # (R, K, T)
            moments += (x.sum(), (x * x).sum(), x.size)
            scores.append(statistics(x.reshape(-1, x.shape[-1]), sigma, sampling_rate))
        return {name: np.concatenate([s[name] for s in scores]) for name in scores[0]}, moments

    scores_in, moments_in = trials(data.with_canaries, seeds[:n_runs])
    scores_out, moments_out = trials(data.without, seeds[n_runs:])
    cut = min(max(1, round(selection_fraction * n_runs)), n_runs - 1) * n_canaries

    def part(scores, selection):
        return {name: (v[:cut] if selection else v[cut:]) for name, v in scores.items()}

    test = select_test(part(scores_in, True), part(scores_out, True), delta, confidence)
    found = evaluate_test(test, part(scores_in, False), part(scores_out, False), delta,
                          confidence)
    mean_in, mean_out = moments_in[0] / moments_in[2], moments_out[0] / moments_out[2]
    noise = math.sqrt(max(moments_out[1] / moments_out[2] - mean_out**2, 0.0))
    return AuditResult(
        mechanism=mechanism, epsilon=float(epsilon), delta=float(delta),
        epsilon_lower=found["epsilon_lower"], confidence=confidence,
        noise_multiplier=sigma, clip_norm=float(clip_norm), sampling_rate=float(sampling_rate),
        n_steps=int(n_steps), n_trials=n_runs * n_canaries,
        n_evaluation=n_runs * n_canaries - cut, statistic=test["statistic"],
        threshold=test["threshold"], orientation=test["orientation"],
        true_positives=found["true_positives"], false_positives=found["false_positives"],
        tpr=found["true_positives"] / found["n_positive"],
        fpr=found["false_positives"] / found["n_negative"],
        signal_per_step=float((mean_in - mean_out) * sigma), noise_per_step=noise,
        seconds=time.perf_counter() - start,
        details=dict(selection_bound=test["bound"], n_runs=n_runs, learning_rate=lam,
                     canary=canary),
    )
