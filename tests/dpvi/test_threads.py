"""The engine's thread policy (skdpvi.dpvi.threads)."""

import threading

import numpy as np
import pytest
import torch

import skdpvi.dpvi.loop as loop
import skdpvi.dpvi.threads as threads
from skdpvi import DPBayesianLinearRegression
from skdpvi.dpvi import run_dpvi
from skdpvi.models import LinearRegressionModel

KWARGS = dict(noise_multiplier=1.0, clip_norm=5.0, sampling_rate=0.1, n_steps=20, burn_in=5)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def seen(monkeypatch):
    """The thread counts torch had while the body of each run_dpvi ran."""
    counts = []
    original = loop._run

    def spy(*args, **kwargs):
        counts.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(loop, "_run", spy)
    return counts


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    return X, X @ [0.5, -0.2] + rng.normal(0, 0.3, 200)


def test_runs_use_one_thread_and_restore_the_callers_setting(two_threads, seen, monkeypatch):
    data = _data()
    run_dpvi(LinearRegressionModel(2), data, **KWARGS)
    run_dpvi(LinearRegressionModel(2), data, n_threads=2, **KWARGS)
    monkeypatch.setenv("SKDPVI_NUM_THREADS", "2")
    run_dpvi(LinearRegressionModel(2), data, **KWARGS)
    assert seen == [1, 2, 2] and torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="n_threads"):
        run_dpvi(LinearRegressionModel(2), data, n_threads=0, **KWARGS)
    monkeypatch.setenv("SKDPVI_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="SKDPVI_NUM_THREADS"):
        run_dpvi(LinearRegressionModel(2), data, **KWARGS)


def test_estimator_fits_run_dp_sgd_on_one_thread(two_threads, seen):
    DPBayesianLinearRegression(max_iter=50, inference="exact", n_posterior_samples=20,
                               random_state=0).fit(*_data())
    assert seen == [1] and torch.get_num_threads() == 2


def test_concurrent_runs_restore_the_setting_when_the_last_one_ends(two_threads):
    data = _data()
    workers = [threading.Thread(target=run_dpvi, args=(LinearRegressionModel(2), data),
                                kwargs=dict(random_state=k, **{**KWARGS, "n_steps": 200}))
               for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert torch.get_num_threads() == 2 and threads._state["users"] == 0


def _blas_threads():
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_runs_limit_numpys_blas_and_leave_torchs_openmp_as_they_found_it(two_threads,
                                                                         monkeypatch):
    # NumPy's BLAS runs on the run's thread count inside (the step matrix's small
    # regressions), and afterwards every library, torch's OpenMP included, is as before:
    # a limiter that restored all libraries reset torch's OpenMP to the run's 1 and
    # left it disagreeing with torch's own count (the next fit 2x slower)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        blas_before = _blas_threads()
        inside = []
        original = loop._run

        def spy(*args, **kwargs):
            inside.append(_blas_threads())
            return original(*args, **kwargs)

        monkeypatch.setattr(loop, "_run", spy)
        for _ in range(2):
            run_dpvi(LinearRegressionModel(2), _data(), **KWARGS)
            assert torch.get_num_threads() == 2
            assert _blas_threads() == blas_before
        assert inside and all(counts and set(counts) == {1} for counts in inside)
    from skdpvi.utils.blas import limit_blas_threads

    with limit_blas_threads(1):
        assert set(_blas_threads()) == {1} and torch.get_num_threads() == 2
    assert torch.get_num_threads() == 2


def _openmp_threads():
    """torch's OpenMP thread count for parallel regions started by the calling thread."""
    from threadpoolctl import ThreadpoolController

    return [c.num_threads for c in ThreadpoolController().select(user_api="openmp").lib_controllers
            if "torch" in c.filepath]


def test_the_draw_thread_runs_on_the_runs_thread_count(monkeypatch):
    # OpenMP's thread count is per thread: a fresh thread gets one thread per core
    # whatever torch.set_num_threads said in the caller's, and the draw thread's
    # second OpenMP thread spun beside the loop (a lockstep study task used 41 %
    # more CPU than it computed)
    counts = []
    original = loop._Engine.draw

    def spy(self, generator, n_block):
        counts.append((threading.current_thread().name, _openmp_threads()))
        return original(self, generator, n_block)

    monkeypatch.setattr(loop._Engine, "draw", spy)
    run_dpvi(LinearRegressionModel(2), _data(),
             **{**KWARGS, "n_steps": 1100, "burn_in": 100})
    drawn_elsewhere = [c for name, c in counts if name.startswith("skdpvi-draws")]
    assert len(drawn_elsewhere) == 3  # blocks of 512 steps, all drawn by the draw thread
    if not _openmp_threads():
        pytest.skip("this torch build has no OpenMP library that threadpoolctl sees")
    assert all(c == [1] for c in drawn_elsewhere)
