"""Noise calibration: skdpvi's accountant against Opacus' defaults, side by side.

For delta=1e-5, q=0.1, T=10,000 and several epsilons: the noise multiplier, the
certified epsilon it achieves (PRV upper bound at a fine discretisation) and the time,
for skdpvi.accounting.noise_multiplier (first call and cached call) and
opacus.accountants.utils.get_noise_multiplier with its default tolerances
(accountant="prv" and "rdp").

Run: python benchmarks/bench_accounting.py
"""

import time
import warnings

from opacus.accountants.utils import get_noise_multiplier

from skdpvi.accounting import epsilon_spent, noise_multiplier

DELTA, Q, T = 1e-5, 0.1, 10_000


def timed(f):
    start = time.perf_counter()
    try:
        out = f()
    except Exception as exc:  # Opacus RDP cannot reach small budgets
        out = exc
    return out, time.perf_counter() - start


def main():
    print(f"delta={DELTA}, q={Q}, T={T}")
    print(f"{'epsilon':>8} | {'skdpvi sigma':>12} {'achieved':>9} {'1st s':>6} {'cached s':>8} | "
          f"{'opacus-prv sigma':>16} {'achieved':>9} {'s':>5} | {'opacus-rdp sigma':>16} {'s':>5}")
    for eps in (0.1, 0.3, 1.0, 3.0):
        (sigma, achieved), first = timed(lambda: noise_multiplier(eps, DELTA, Q, T))
        _, cached = timed(lambda: noise_multiplier(eps, DELTA, Q, T))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prv, t_prv = timed(lambda: get_noise_multiplier(
                target_epsilon=eps, target_delta=DELTA, sample_rate=Q, steps=T, accountant="prv"))
            rdp, t_rdp = timed(lambda: get_noise_multiplier(
                target_epsilon=eps, target_delta=DELTA, sample_rate=Q, steps=T, accountant="rdp"))
        prv_eps = epsilon_spent(prv, DELTA, Q, T)
        rdp_txt = f"{rdp:16.2f}" if isinstance(rdp, float) else f"{'fails':>16}"
        print(f"{eps:8.2f} | {sigma:12.2f} {achieved:9.4f} {first:6.1f} {cached:8.5f} | "
              f"{prv:16.2f} {prv_eps:9.4f} {t_prv:5.1f} | {rdp_txt} {t_rdp:5.1f}")


if __name__ == "__main__":
    main()
