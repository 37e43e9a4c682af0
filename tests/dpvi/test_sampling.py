"""Poisson subsamples and centred Monte Carlo draws (skdpvi.dpvi.sampling)."""

import numpy as np
import pytest
import torch
from scipy import stats

from skdpvi.dpvi import poisson_subsample, poisson_subsamples
from skdpvi.dpvi.sampling import _centred_normal


def test_batch_sizes_follow_binomial():
    gen = torch.Generator().manual_seed(0)
    n, q = 60, 0.05  # P(empty batch) = 0.95^60 = 4.6 %
    sizes = np.array([len(poisson_subsample(n, q, gen)) for _ in range(5000)])
    assert sizes.mean() == pytest.approx(n * q, rel=0.03)
    assert sizes.var() == pytest.approx(n * q * (1 - q), rel=0.1)
    assert (sizes == 0).any()  # empty batches happen and are allowed
    counts = np.bincount(sizes, minlength=20)[:20]
    expected = stats.binom.pmf(np.arange(20), n, q) * len(sizes)
    keep = expected > 5
    chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3
    # indices are distinct examples (sampling without replacement)
    idx = poisson_subsample(n, 0.5, gen)
    assert len(torch.unique(idx)) == len(idx)


@pytest.mark.parametrize("chunk", [None, 3], ids=["default", "tiny-chunks"])
def test_block_of_subsamples_includes_every_example_with_the_rate(chunk):
    # many steps drawn at once; tiny chunks force the rows to be continued
    gen = torch.Generator().manual_seed(1)
    n, q, steps = 40, 0.2, 4000
    batches = poisson_subsamples(n, q, steps, gen, chunk=chunk)
    assert len(batches) == steps
    member = torch.zeros(steps, n)
    for t, idx in enumerate(batches):
        assert torch.all(idx[1:] > idx[:-1]) and (len(idx) == 0 or (0 <= idx[0] and idx[-1] < n))
        member[t, idx] = 1
    # every example independently with rate q: marginal rates and no correlation
    np.testing.assert_allclose(member.mean(0).numpy(), q, atol=4 * np.sqrt(q * (1 - q) / steps))
    corr = np.corrcoef(member[:, :10].T.numpy())
    assert np.abs(corr[np.triu_indices(10, 1)]).max() < 0.08
    sizes = member.sum(1).numpy()
    assert sizes.var() == pytest.approx(n * q * (1 - q), rel=0.1)


def test_centred_monte_carlo_draws_sum_to_zero_and_keep_unit_variance():
    gen = torch.Generator().manual_seed(0)
    eps = _centred_normal((20_000, 10, 3), gen, "cpu")
    torch.testing.assert_close(eps.sum(1), torch.zeros(20_000, 3, dtype=torch.float64),
                               atol=1e-12, rtol=0)
    assert eps.var().item() == pytest.approx(1.0, rel=0.01)  # each draw is N(0, 1)
    assert stats.kstest(eps[:, 0, 0].numpy(), "norm").pvalue > 1e-3


@pytest.mark.parametrize("chunk", [None, 3], ids=["default", "tiny-chunks"])
def test_padded_block_holds_the_subsamples_of_the_same_draws(chunk):
    from skdpvi.dpvi.sampling import _poisson_block

    lists = poisson_subsamples(50, 0.2, 300, torch.Generator().manual_seed(4), chunk=chunk)
    index, counts = _poisson_block(50, 0.2, 300, torch.Generator().manual_seed(4), chunk=chunk)
    assert index.dtype == torch.int32 and index.shape[0] == 300
    for t, idx in enumerate(lists):
        assert counts[t] == len(idx)
        torch.testing.assert_close(index[t, : counts[t]].long(), idx)
        assert torch.all(index[t, counts[t]:] == 0)  # padding points at example 0


def test_gaps_drawn_in_pieces_are_the_gaps_drawn_at_once(monkeypatch):
    import skdpvi.dpvi.sampling as sampling

    whole = sampling._poisson_block(1000, 0.1, 64, torch.Generator().manual_seed(2))
    monkeypatch.setattr(sampling, "_GAP_ELEMENTS", 300)  # two rows at a time
    pieces = sampling._poisson_block(1000, 0.1, 64, torch.Generator().manual_seed(2))
    torch.testing.assert_close(pieces[0], whole[0], rtol=0, atol=0)


def test_large_data_draw_fewer_steps_at_once():
    from skdpvi.dpvi.sampling import _LARGE_BLOCK_ELEMENTS, _block_steps, _chunk

    assert _block_steps(30_162, 0.1, 10_000) == 512  # Adult: the block of the paper runs
    assert _block_steps(5000, 0.1, 300) == 300
    # 10^6 rows at q = 0.02: a step's padded gaps are 20,864 wide, so 25 steps fill the
    # large-data budget of 2^19 elements (not 512, which would be 10.7 million)
    assert _chunk(10**6, 0.02) == 20_864
    assert _block_steps(10**6, 0.02, 10_000) == 25
    assert _block_steps(10**6, 0.02, 10_000) * _chunk(10**6, 0.02) <= _LARGE_BLOCK_ELEMENTS
    assert _block_steps(10**7, 0.1, 10_000) == 1


def test_positions_are_the_cumulative_sums_of_the_geometric_gaps():
    # The block's positions are summed in place into one reused buffer (no per-piece
    # temporaries); they are still the cumulative gaps minus one, from the same draws.
    from skdpvi.dpvi.sampling import _chunk, _poisson_block

    n, q, steps = 2000, 0.1, 9
    index, counts = _poisson_block(n, q, steps, torch.Generator().manual_seed(7))
    generator = torch.Generator().manual_seed(7)
    gaps = torch.empty((steps, _chunk(n, q)), dtype=torch.float64).geometric_(
        q, generator=generator)
    expected = torch.cumsum(gaps, 1).to(torch.int64) - 1
    for t in range(steps):
        torch.testing.assert_close(index[t, : counts[t]].long(), expected[t, : counts[t]],
                                   rtol=0, atol=0)
        assert counts[t] == int((expected[t] < n).sum())


@pytest.mark.parametrize("args, name", [
    ((100, 1.5, 3), "sampling_rate"), ((100, 0.0, 3), "sampling_rate"),
    ((100, float("nan"), 3), "sampling_rate"), ((-5, 0.1, 3), "n_examples"),
    ((2.5, 0.1, 3), "n_examples"), ((100, 0.1, 0), "n_steps"), ((100, 0.1, 2.5), "n_steps"),
])
def test_poisson_subsamples_name_a_bad_setting(args, name):
    # a rate above 1 would silently take every row; others failed deep inside torch
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=name):
        poisson_subsamples(*args, gen)
    with pytest.raises(ValueError, match="chunk"):
        poisson_subsamples(100, 0.1, 3, gen, chunk=0)
