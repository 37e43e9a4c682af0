"""emcee moves for targets that factorise over coordinates."""

import numpy as np

__all__ = ["CoordinatewiseStretchMove"]


class CoordinatewiseStretchMove:
    """An emcee move: the affine-invariant stretch move applied per coordinate.

    The target factorises over coordinates, so every coordinate gets an ensemble of
    its own: walker k's value in coordinate i is stretched towards a random partner's
    value *in the same coordinate* and accepted on that coordinate's log density
    alone. This is exactly d independent 1-D emcee ensembles, advanced together.
    A joint stretch move over all coordinates would instead need a single
    acceptance for hundreds of dimensions and hardly moves.

    Parameters
    ----------
    log_prob : callable
        Maps walker positions (W, d) to per-coordinate log densities (W, d).
    a : float, default=2.0
        Stretch scale.
    """

    def __init__(self, log_prob, a=2.0):
        self.log_prob = log_prob
        self.a = a
        self.n_proposed = 0
        self.n_accepted = None

    def tune(self, state, accepted):
        pass

    def propose(self, model, state):
        from emcee.state import State

        coords = state.coords.copy()
        n_walkers, dim = coords.shape
        if self.n_accepted is None:
            self.n_accepted = np.zeros(dim)
        current = self.log_prob(coords)
        random = model.random
        half = np.arange(n_walkers) % 2
        random.shuffle(half)
        cols = np.arange(dim)
        any_accepted = np.zeros(n_walkers, dtype=bool)
        for split in (0, 1):
            active = np.flatnonzero(half == split)
            partners = np.flatnonzero(half != split)
            z = ((self.a - 1.0) * random.rand(len(active), dim) + 1) ** 2 / self.a
            partner_values = coords[partners[random.randint(len(partners), size=(len(active), dim))], cols]
            proposal = partner_values + z * (coords[active] - partner_values)
            new = self.log_prob(proposal)
            # 1-D stretch move: the Jacobian factor z^(ndim - 1) is 1.
            accept = np.log(random.rand(len(active), dim)) < new - current[active]
            coords[active] = np.where(accept, proposal, coords[active])
            current[active] = np.where(accept, new, current[active])
            self.n_accepted += accept.sum(0)
            any_accepted[active] |= accept.any(1)
        self.n_proposed += n_walkers
        return State(coords, log_prob=current.sum(1), blobs=None), any_accepted

    @property
    def acceptance_fraction(self):
        """Fraction of accepted proposals per coordinate."""
        return self.n_accepted / max(self.n_proposed, 1)
