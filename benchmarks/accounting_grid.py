"""The accountant on a grid of budgets, against an independent accountant.

For epsilon in {0.05, 1, 8} x delta in {1e-9, 1e-5, 0.01, 0.2} x sampling rate in
{0.001, 0.1, 1} x steps in {1, 100, 10^4} (108 points), calls
``skdpvi.accounting.noise_multiplier`` and checks its answer against Google's
``dp_accounting`` PLD accountant (connect-the-dots, pessimistic, both directions of
the add/remove relation; ``pip install dp-accounting``):

- the certified epsilon is a real number in [0.995 epsilon, epsilon];
- it is not below dp_accounting's epsilon for the same noise multiplier (up to
  dp_accounting's own discretisation, 0.05 %): the certificate is a real upper bound;
- where noise_multiplier says no, the message names the reason, and dp_accounting
  confirms it (no noise is needed at all: its epsilon with sigma = 0.1 is 0);
- the noise multiplier decreases in epsilon and delta and grows with the steps.

Run: python benchmarks/accounting_grid.py [--quick]  (--quick: the test-suite subset)
Prints one line per point and a summary; writes benchmarks/results/accounting_grid.json.
``--report`` prints the saved results as the reStructuredText table of
doc/performance.rst.
"""

import argparse
import itertools
import json
import math
import time
import warnings
from pathlib import Path

from skdpvi.accounting import noise_multiplier

EPSILONS = (0.05, 1.0, 8.0)
DELTAS = (1e-9, 1e-5, 0.01, 0.2)
RATES = (0.001, 0.1, 1.0)
STEPS = (1, 100, 10_000)
#: dp_accounting's connect-the-dots epsilon is itself an upper bound with a small
#: discretisation error; ours may sit that much below it without being wrong.
REFERENCE_SLACK = 5e-4


def reference_epsilon(sigma, q, steps, delta, epsilon):
    """dp_accounting's PLD epsilon (both directions, pessimistic)."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    # finer than epsilon / 1000 and than 1/100 of one step's loss scale: a coarse
    # grid makes the pessimistic estimate loose over many steps
    step_scale = min(q * math.sqrt(math.expm1(min(1 / sigma**2, 50.0))), 1 / sigma)
    grid = min(1e-4, max(epsilon, 1e-3) / 1000, step_scale / 100)
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=grid)
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma))
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return accountant.get_epsilon(delta)


def check_point(epsilon, delta, q, steps):
    """One grid point: skdpvi's answer, the reference, and the verdict."""
    row = dict(epsilon=epsilon, delta=delta, sampling_rate=q, steps=steps)
    start = time.perf_counter()
    try:
        sigma, achieved = noise_multiplier(epsilon, delta, q, steps)
    except ValueError as exc:
        row.update(seconds=time.perf_counter() - start, error=str(exc))
        p_used = -math.expm1(steps * math.log1p(-q)) if q < 1 else 1.0
        # a correct refusal: no noise is needed at all, so dp_accounting's epsilon at
        # the smallest noise multiplier we search is 0
        ref = reference_epsilon(0.1, q, steps, delta, epsilon)
        row.update(reference_at_min_sigma=ref,
                   ok=("without noise" in str(exc) and delta >= p_used and ref == 0.0))
        return row
    row.update(seconds=time.perf_counter() - start, sigma=sigma, achieved=achieved)
    ref = reference_epsilon(sigma, q, steps, delta, epsilon)
    row["reference"] = ref
    row["ok"] = (isinstance(sigma, float) and isinstance(achieved, float)
                 and math.isfinite(sigma) and sigma > 0
                 and 0.995 * epsilon <= achieved <= epsilon
                 and achieved >= ref * (1 - REFERENCE_SLACK))
    return row


def monotone(rows):
    """Pairs of grid neighbours whose noise multipliers are in the wrong order."""
    sigma = {(r["epsilon"], r["delta"], r["sampling_rate"], r["steps"]): r.get("sigma")
             for r in rows}
    bad = []
    for key, s in sigma.items():
        if s is None:
            continue
        eps, delta, q, steps = key
        for axis, values, decreasing in ((0, EPSILONS, True), (1, DELTAS, True),
                                         (3, STEPS, False)):
            i = values.index(key[axis])
            if i + 1 == len(values):
                continue
            other = list(key)
            other[axis] = values[i + 1]
            t = sigma.get(tuple(other))
            if t is None:
                continue
            if (t > s) if decreasing else (t < s):
                bad.append((key, tuple(other), s, t))
    return bad


#: The test-suite subset: the points that failed before issue 16 and a few that did not.
QUICK = [
    (1.0, 0.01, 0.001, 1), (8.0, 0.2, 0.1, 1), (0.05, 0.2, 0.001, 100),  # refused
    (0.05, 0.2, 1.0, 100), (8.0, 0.2, 1.0, 1),  # were complex
    (8.0, 0.01, 0.1, 1),  # "cannot be reached"
    (1.0, 0.2, 0.1, 100), (8.0, 0.2, 0.1, 100),
    (1.0, 1e-5, 0.1, 100), (8.0, 1e-9, 0.001, 100), (1.0, 0.01, 1.0, 10_000),
]


def report():
    """The saved grid as a reStructuredText table: sigma per budget, or "refused"."""
    saved = json.loads((Path(__file__).parent / "results" / "accounting_grid.json").read_text())
    cell = {(r["epsilon"], r["delta"], r["sampling_rate"], r["steps"]): r for r in saved["rows"]}
    head = ["delta", "q", "steps"] + [f"eps={e:g}: sigma (s)" for e in EPSILONS]
    body = []
    for delta, q, steps in itertools.product(DELTAS, RATES, STEPS):
        row = [f"{delta:g}", f"{q:g}", f"{steps:d}"]
        for eps in EPSILONS:
            r = cell[(eps, delta, q, steps)]
            flag = "" if r["ok"] else " WRONG"
            row.append(("refused" if "error" in r else f"{r['sigma']:.4g}")
                       + f" ({r['seconds']:.1f}){flag}")
        body.append(row)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    rule = "  ".join("=" * w for w in widths)
    print(rule)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    print(rule)
    for row in body:
        print("  ".join(x.ljust(w) for x, w in zip(row, widths)))
    print(rule)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if args.report:
        report()
        return
    warnings.simplefilter("ignore")
    points = QUICK if args.quick else list(itertools.product(EPSILONS, DELTAS, RATES, STEPS))
    rows = []
    print(f"{'epsilon':>7} {'delta':>6} {'q':>6} {'steps':>6} | {'sigma':>10} "
          f"{'certified':>10} {'dp_acc.':>10} {'s':>6} | verdict")
    for point in points:
        row = check_point(*point)
        rows.append(row)
        if "error" in row:
            body = f"{'refused':>10} {'':>10} {row['reference_at_min_sigma']:10.4g}"
        else:
            body = f"{row['sigma']:10.4g} {row['achieved']:10.5g} {row['reference']:10.5g}"
        print(f"{point[0]:7g} {point[1]:6g} {point[2]:6g} {point[3]:6d} | {body} "
              f"{row['seconds']:6.1f} | {'ok' if row['ok'] else 'WRONG'}"
              + (f" ({row['error'][:60]}...)" if "error" in row else ""), flush=True)
    bad = monotone(rows)
    n_ok = sum(r["ok"] for r in rows)
    n_refused = sum("error" in r for r in rows)
    seconds = [r["seconds"] for r in rows]
    print(f"\n{n_ok}/{len(rows)} points right ({n_refused} correctly refused); "
          f"{len(bad)} monotonicity violations; time per point: median "
          f"{sorted(seconds)[len(seconds) // 2]:.1f} s, max {max(seconds):.1f} s, "
          f"total {sum(seconds):.0f} s")
    for b in bad:
        print("  not monotone:", b)
    if not args.quick:
        out = Path(__file__).parent / "results" / "accounting_grid.json"
        out.write_text(json.dumps(dict(rows=rows, monotonicity_violations=bad), indent=1))
        print("wrote", out)


if __name__ == "__main__":
    main()
