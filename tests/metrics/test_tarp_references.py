"""Tests of the TARP reference points (skdpvi.metrics._tarp.references)."""

import numpy as np

from skdpvi.metrics import tarp_coverage

from ._posteriors import gaussian_posteriors


def test_posterior_references_follow_authors_scheme():
    samples, theta = gaussian_posteriors(n_sim=50, n_draws=100)
    res = tarp_coverage(samples, theta, random_state=3)
    offset = (res.references - samples.mean(axis=1)) / samples.std(axis=1)
    assert np.all(np.abs(offset) <= 4) and np.abs(offset).max() > 3
    again = tarp_coverage(samples, theta, random_state=3)
    np.testing.assert_array_equal(res.references, again.references)
    other = tarp_coverage(samples, theta, random_state=4)
    assert not np.array_equal(res.references, other.references)
