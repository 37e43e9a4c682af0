"""Ablation prototype: a burn-in whose step is larger along the coefficient vector only.

The lag of the results page ("The wander's bias read off the release"): the trace
relaxes slowest along the coefficient vector (the smallest curvature), so the
recording window starts before that direction has settled. A larger step everywhere
during the burn-in (``designs.py --burn-in-step 4``) ends the lag but makes a
direction that only the prior restrains (a one-hot block beside the intercept)
random-walk further. This prototype multiplies, during the burn-in only, the means'
released gradient by ``I + (c - 1) v v^T`` with ``v = mu_t / |mu_t|`` (the current
means: post-processing of released values, so no privacy cost), which speeds up the
relaxation along the coefficient vector by c and leaves the directions orthogonal to
it, the prior-only one among them, as they were. From the burn-in on the engine is
untouched, and so is everything the post-processing reads.

It is not an engine option: importing this module (with the environment variables
``RADIAL_C`` = c and ``N_MEANS`` = the number of means) wraps the private engine's
``descend`` so that every run in the process, joblib's workers included when they
import it too, uses it. ``designs.py`` picks it up through a ``sitecustomize.py``
that imports it when ``RADIAL_C`` is set:

    mkdir -p /tmp/radial && echo 'import os
    if os.environ.get("RADIAL_C"): import radial_burn_in' > /tmp/radial/sitecustomize.py
    RADIAL_C=4 N_MEANS=21 PYTHONPATH=/tmp/radial:benchmarks/ablation_logistic:. \\
        python benchmarks/ablation_logistic/designs.py --d 20 --n 10000 --k 200 \\
        --methods emcee emcee+probit emcee+dense emcee+dense+probit
"""

import os

from skdpvi.dpvi import loop

RADIAL_C = float(os.environ.get("RADIAL_C", "1"))
N_MEANS = int(os.environ.get("N_MEANS", "0"))
_descend = loop._Engine.descend


def _radial(x, mu, c):
    """``(I + (c - 1) v v^T) x`` on the means' part, v = mu / |mu|, in place."""
    v = mu / mu.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    head = x[..., :N_MEANS]
    head += (c - 1.0) * (head * v).sum(-1, keepdim=True) * v


def descend(self, phi, draw_block, progress=None):
    burn_in, state = self.settings["burn_in"], {"t": 0}

    def radial_block(n_block):
        noise, step = draw_block(n_block)

        def radial_step(j, phi_j):
            clipped_sum, norms, mask = step(j, phi_j)
            if state["t"] < burn_in:  # the release g = (clipped sum + noise) / beta
                clipped_sum = clipped_sum.clone()
                _radial(clipped_sum, phi_j[..., :N_MEANS], RADIAL_C)
                _radial(noise[j], phi_j[..., :N_MEANS], RADIAL_C)
            state["t"] += 1
            return clipped_sum, norms, mask
        return noise, radial_step

    return _descend(self, phi, radial_block, progress)


if RADIAL_C != 1.0:
    if N_MEANS < 1:
        raise ValueError("set N_MEANS, the number of means (n_features + 1)")
    loop._Engine.descend = descend
