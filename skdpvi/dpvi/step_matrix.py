"""The recording phase's step matrix (:func:`~skdpvi.dpvi.run_dpvi`'s ``step_matrix``):
when the engine asks the caller's function for it, and with which released pairs.

It is called at ``burn_in`` and at the start of each further tenth of the recording
window with the released pairs from step ``burn_in // 2`` up to then (arrays of shape
(t, d)), each run of a lockstep batch with its own; from the first call on a step is
``phi <- phi - M @ (lambda * beta * g_tilde)``. The function sees only released values (phi_t and the noisy gradients), so whatever
it returns is post-processing: the mechanism, and so the privacy guarantee, do not
depend on it.
"""

import numpy as np
import torch

#: How often a ``step_matrix`` is computed: at burn-in and at the start of every
#: further fraction 1 / this of the recording window.
_MATRIX_UPDATES = 10


class _StepMatrix:
    """A caller's ``step_matrix(trace_phi, trace_grad) -> M`` as the step loop uses it.

    Parameters
    ----------
    function : callable
    burn_in, n_steps : int
    record_trace : bool
        The function needs the recorded pairs.
    device : torch.device
    """

    def __init__(self, function, *, burn_in, n_steps, record_trace, device):
        if not record_trace:
            raise ValueError("step_matrix needs the burn-in trace: set record_trace=True.")
        if not 0 < burn_in < n_steps:
            raise ValueError("step_matrix needs 0 < burn_in < n_steps.")
        self.function = function
        self.device = device
        #: the pairs passed start here
        self.first = burn_in // 2
        #: the steps at which the matrix is (re)computed
        self.steps = {burn_in + k * (n_steps - burn_in) // _MATRIX_UPDATES
                      for k in range(_MATRIX_UPDATES)}

    def __call__(self, recorder, start, j, lead, d):
        """The matrix of every run (lead: () or (R,)), from its released pairs of
        steps ``first .. start + j - 1``; ``recorder`` holds the flushed ones and the
        current block's ``j``."""
        first = self.first
        # the current block's pairs into the trace (its flush writes the same values),
        # so that every run's pairs are a view of it: no copy of the whole trace
        recorder.trace_phi[start:start + j] = recorder.phi[:j].cpu().numpy()
        recorder.trace_grad[start:start + j] = recorder.grad[:j].cpu().numpy()
        phi = recorder.trace_phi[first:start + j].view()
        grad = recorder.trace_grad[first:start + j].view()
        phi.flags.writeable = grad.flags.writeable = False  # the caller's function reads
        runs = [()] if lead == () else [(slice(None), r) for r in range(lead[0])]
        out = []
        for run in runs:
            matrix = np.asarray(self.function(phi[run], grad[run]), dtype=float)
            if matrix.shape != (d, d) or not np.all(np.isfinite(matrix)):
                raise ValueError(f"step_matrix must return a finite ({d}, {d}) array, got "
                                 f"shape {matrix.shape}.")
            out.append(matrix)
        out = out[0] if lead == () else np.stack(out)
        return torch.tensor(out, dtype=torch.float64, device=self.device)
