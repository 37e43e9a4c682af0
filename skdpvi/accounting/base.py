"""The interface every privacy accountant implements.

An accountant answers two questions about Poisson-subsampled Gaussian DP-SGD
(:class:`~skdpvi.accounting.mechanism.DPSGDMechanism`): what epsilon a composition
of mechanisms spends at a given delta, and which noise multiplier makes one
mechanism (epsilon, delta)-DP. Both answers are *certified*: the epsilon reported is
an upper bound, never a point estimate. The public functions of
:mod:`skdpvi.accounting` validate their inputs (:mod:`~skdpvi.accounting.budget`)
before an accountant sees them.

One accountant per module: :mod:`~skdpvi.accounting.prv` is the PRV accountant most
fits use, :mod:`~skdpvi.accounting.gaussian` the exact one of full-batch runs and
:mod:`~skdpvi.accounting.pld` the fallback where the PRV grid cannot serve a budget;
:mod:`skdpvi.accounting.api` chooses among them, and
:mod:`~skdpvi.accounting.calibrate` holds the noise-multiplier search they share.
"""

import abc

__all__ = ["Accountant"]


class Accountant(abc.ABC):
    """Certified privacy accounting of DP-SGD mechanisms."""

    @abc.abstractmethod
    def epsilon(self, mechanisms, delta):
        """Certified epsilon of the composition of ``mechanisms`` at ``delta``.

        Parameters
        ----------
        mechanisms : sequence of DPSGDMechanism
            Validated, at least one.
        delta : float
            In (0, 1).

        Returns
        -------
        epsilon : float
            An upper bound on the privacy loss.
        """

    @abc.abstractmethod
    def noise_multiplier(self, epsilon, delta, sampling_rate, steps, fixed=()):
        """The noise multiplier that makes one DP-SGD mechanism (epsilon, delta)-DP.

        Parameters
        ----------
        epsilon, delta, sampling_rate, steps
            The (validated) budget and the mechanism's rate and length.
        fixed : sequence of DPSGDMechanism, default=()
            Mechanisms run on the same data beside it (fixed noise): the budget
            covers their composition.

        Returns
        -------
        sigma : float
        epsilon_achieved : float
            The certified epsilon spent with ``sigma``, ``<= epsilon``.

        Raises
        ------
        ValueError
            If no noise level reaches the budget.
        """
