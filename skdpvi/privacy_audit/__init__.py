"""Empirical privacy auditing: a lower bound on the epsilon of skdpvi's mechanism.

The accountant (:mod:`skdpvi.accounting`) *claims* an upper bound on epsilon for a
run; an audit *measures* a lower bound by playing the distinguishing game of
differential privacy many times: run DP-SGD on a data set with and without a canary
row, guess from the released outputs whether the canary was in, and turn the true
and false positive counts into a confidence bound on epsilon with Clopper-Pearson
intervals (Jagielski, Ullman & Oprea, 2020; Nasr et al., "Adversary instantiation",
IEEE S&P 2021). The canaries are white-box *gradient* canaries: each has a feature of
its own, so its clipped gradient is C along one coordinate that no other row touches,
and the adversary reads the released noisy gradients in that coordinate.

A lower bound above the claimed epsilon proves the mechanism broken (the audit
catches noise scaled down, clipping skipped, a sampling rate above the accounted one
and noise reused across steps: see :mod:`~skdpvi.privacy_audit.mechanisms`); a bound
below the claim proves nothing about the accountant but bounds how wrong it could be,
and for the full-batch Gaussian mechanism, where the optimal test is known, the audit
comes within a factor of about two of the claim.

Modules:

``canaries``    the audit's data set and the canaries
``mechanisms``  the real engine and the broken variants
``statistics``  projections of the released gradients, candidate test statistics
``bounds``      Clopper-Pearson intervals, lower bounds, choosing the test
``audit``       :func:`audit_dpvi`, the whole game
"""

from .audit import AuditResult, audit_dpvi
from .bounds import clopper_pearson, epsilon_lower_bound
from .canaries import CanaryData, make_canary_data
from .mechanisms import BROKEN_VARIANTS, MECHANISMS

__all__ = [
    "audit_dpvi",
    "AuditResult",
    "epsilon_lower_bound",
    "clopper_pearson",
    "make_canary_data",
    "CanaryData",
    "BROKEN_VARIANTS",
    "MECHANISMS",
]
