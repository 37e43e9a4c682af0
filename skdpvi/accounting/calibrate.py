"""The search for a noise multiplier, shared by the accountants.

Epsilon decreases in sigma, but it is not smooth in log-log space everywhere: it
reaches 0 at a finite sigma when delta is large (the privacy curve drops below delta
at epsilon = 0), and its local slope ranges from about -1 (large sigma) to below -2
(small sigma). A secant step in (log sigma, log epsilon) with a fixed slope -- the
previous search -- diverged or oscillated there. This one brackets the root in
log sigma and narrows the bracket (Illinois false position with bisection
safeguards), on a cheap estimate first and then on the certified bound, and always
returns a sigma together with the bound computed *for that sigma*.
"""

import math

__all__ = ["calibrate", "BudgetUnreachable", "TIGHTNESS", "MIN_SIGMA", "MAX_SIGMA"]

#: Relative slack of the certified epsilon: it lands in [(1 - TIGHTNESS) eps, eps].
TIGHTNESS = 0.005
#: The range of noise multipliers searched.
MIN_SIGMA, MAX_SIGMA = 0.1, 1e5


class BudgetUnreachable(RuntimeError):
    """No noise multiplier in [MIN_SIGMA, MAX_SIGMA] meets the budget."""

    def __init__(self, side):
        super().__init__(side)
        #: "epsilon too small" (sigma would exceed MAX_SIGMA) or "epsilon too large"
        self.side = side


def _root(f, lo, hi, f_lo, f_hi, done, max_evals):
    """Illinois false position on [lo, hi] (f_lo > 0 > f_hi); stops when ``done(x, fx)``.

    Returns (x, fx) of the last evaluation that satisfied ``done``, or None.
    """
    side = 0
    for _ in range(max_evals):
        if hi - lo < 1e-9:
            return None
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo) if math.isfinite(f_lo) else 0.5 * (lo + hi)
        # keep away from the ends: at least 5 % of the bracket inside, else bisect
        width = hi - lo
        if not lo + 0.05 * width <= x <= hi - 0.05 * width:
            x = 0.5 * (lo + hi)
        fx = f(x)
        if done(x, fx):
            return x, fx
        if fx > 0:
            lo, f_lo = x, fx
            if side == 1:
                f_hi /= 2
            side = 1
        else:
            hi, f_hi = x, fx
            if side == -1 and math.isfinite(f_lo):
                f_lo /= 2
            side = -1
    return None


def _bracket(f, x, step=math.log(2.0), lo_limit=math.log(MIN_SIGMA),
             hi_limit=math.log(MAX_SIGMA), max_step=math.log(2.0)):
    """(lo, hi, f_lo, f_hi) with f_lo > 0 >= f_hi, walking from x in log sigma.

    The step doubles up to a factor 2 in sigma: small noise multipliers are the
    expensive ones to account, so the walk does not leap far below the root.
    """
    fx = f(x)
    if fx > 0:  # too little noise: walk up
        lo, f_lo = x, fx
        while True:
            hi = min(lo + step, hi_limit)
            f_hi = f(hi)
            if f_hi <= 0:
                return lo, hi, f_lo, f_hi
            if hi >= hi_limit:
                raise BudgetUnreachable("epsilon too small")
            lo, f_lo = hi, f_hi
            step = min(2 * step, max_step)
    hi, f_hi = x, fx
    while True:
        lo = max(hi - step, lo_limit)
        f_lo = f(lo)
        if f_lo > 0:
            return lo, hi, f_lo, f_hi
        if lo <= lo_limit:
            raise BudgetUnreachable("epsilon too large")
        hi, f_hi = lo, f_lo
        step = min(2 * step, max_step)


def calibrate(certified, epsilon, sampling_rate, steps, estimate=None, offset=0.0,
              guess=None):
    """The noise multiplier whose certified epsilon lies in [(1 - TIGHTNESS) eps, eps].

    Parameters
    ----------
    certified : callable
        sigma -> certified (upper-bound) epsilon; may return inf (no bound) or 0.
    epsilon : float
        The target.
    sampling_rate, steps
        For the starting guess only.
    estimate : callable, optional
        A cheaper, roughly centred estimate of epsilon(sigma), to find the region first.
    offset : float, default=0
        How far the certified bound typically lies above the estimate: the estimate
        is aimed that much below the centre of the window.
    guess : float, optional
        Where to start the search (default: ``q sqrt(T) / epsilon``, a rough scale).
        A given guess is trusted to be close: the estimate's first bracket is 10 %
        wide in sigma instead of a factor of 2.

    Returns
    -------
    sigma, epsilon_certified : float

    Raises
    ------
    BudgetUnreachable
    """
    low_ok = (1 - TIGHTNESS) * epsilon
    aim = epsilon * (1 - TIGHTNESS / 2)
    close = guess is not None
    if guess is None:
        guess = min(max(sampling_rate * math.sqrt(steps) / epsilon, 0.5), 1e4)
    guess = math.log(min(max(guess, MIN_SIGMA), MAX_SIGMA))
    x = guess
    if estimate is not None:
        def f_est(x):
            return estimate(math.exp(x)) - (aim - offset)

        lo, hi, f_lo, f_hi = _bracket(f_est, guess, step=0.1 if close else math.log(2.0))
        found = _root(f_est, lo, hi, f_lo, f_hi,
                      lambda x, fx: abs(fx) <= 0.001 * epsilon, 60)
        x = found[0] if found else 0.5 * (lo + hi)

    cache = {}

    def f_cert(x):
        if x not in cache:
            cache[x] = certified(math.exp(x))
        return cache[x] - aim

    def done(x, fx):
        return low_ok <= fx + aim <= epsilon

    fx = f_cert(x)
    if done(x, fx):
        return math.exp(x), cache[x]
    # a small bracket around the estimate first: the certified bound is close to it
    lo, hi, f_lo, f_hi = _bracket(f_cert, x, step=0.01)
    for end, f_end in ((lo, f_lo), (hi, f_hi)):
        if done(end, f_end):
            return math.exp(end), cache[end]
    found = _root(f_cert, lo, hi, f_lo, f_hi, done, 60)
    if found is None:  # pragma: no cover - the bound is continuous in sigma
        raise RuntimeError(
            f"The noise calibration did not converge for epsilon={epsilon}; "
            "please report this with the arguments.")
    return math.exp(found[0]), cache[found[0]]
