"""Tests of skdpvi.metrics.run_tarp_study with a fake conjugate estimator."""

import threading

import joblib
import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone

from skdpvi.metrics import run_tarp_study

N_OBS = 20
NOISE_SD = 8.0  # sd of the "privacy" noise added to the sufficient statistic


class FakePosterior:
    """Gaussian posterior over mu; theta = (mu_0, exp(mu_1))."""

    def __init__(self, mean, sd):
        self.mean = mean
        self.sd = sd

    def to_unconstrained(self, theta):
        theta = np.array(theta, dtype=float)
        theta[..., 1] = np.log(theta[..., 1])
        return theta

    def to_constrained(self, mu):
        mu = np.array(mu, dtype=float)
        mu[..., 1] = np.exp(mu[..., 1])
        return mu


class NoisyGaussianMean(BaseEstimator):
    """Conjugate Gaussian mean with a noise-aware posterior, sklearn style.

    Model: mu ~ N(0, I_2), y_i ~ N(mu, I_2); parameters theta = (mu_0,
    exp(mu_1)). ``fit`` releases s = sum(y) + N(0, NOISE_SD^2) (the noise
    seeded by ``random_state``) and computes the exact posterior of mu given
    s when ``noise_aware``, or ignores the noise otherwise. ``sd_scale``
    rescales the posterior sd (1 = calibrated).
    """

    def __init__(self, sd_scale=1.0, noise_aware=True, epsilon=1.0, random_state=None):
        self.sd_scale = sd_scale
        self.noise_aware = noise_aware
        self.epsilon = epsilon
        self.random_state = random_state

    def fit(self, X, y):
        rng = np.random.default_rng(self.random_state)
        n = len(y)
        s = y.sum(axis=0) + NOISE_SD * rng.normal(size=y.shape[1])
        var_s = n + (NOISE_SD**2 if self.noise_aware else 0.0)
        precision = 1.0 + n**2 / var_s
        self.posterior_ = FakePosterior(
            mean=(n * s / var_s) / precision,
            sd=self.sd_scale / np.sqrt(precision),
        )
        self.param_names_ = ["mu0", "sigma1"]
        self.epsilon_ = self.epsilon
        self.fit_seed_ = self.random_state
        return self

    def sample_posterior(self, n_samples, *, random_state=None, unconstrained=False):
        rng = np.random.default_rng(random_state)
        mu = self.posterior_.mean + self.posterior_.sd * rng.normal(size=(n_samples, 2))
        return mu if unconstrained else self.posterior_.to_constrained(mu)


def simulator(rng):
    mu = rng.normal(size=2)
    theta = np.array([mu[0], np.exp(mu[1])])
    y = mu + rng.normal(size=(N_OBS, 2))
    return theta, np.zeros((N_OBS, 1)), y


def prior_sampler(n, rng):
    mu = rng.normal(size=(n, 2))
    mu[:, 1] = np.exp(mu[:, 1])
    return mu


THREAD_NAMES = []


def recording_simulator(rng):
    THREAD_NAMES.append(threading.current_thread().name)
    return simulator(rng)


def high_level_error(result):
    hi = result.credibility >= 0.5
    return np.mean((result.coverage - result.credibility)[..., hi], axis=-1)


def assert_same_study(a, b):
    np.testing.assert_array_equal(a.samples, b.samples)
    np.testing.assert_array_equal(a.theta_true, b.theta_true)
    np.testing.assert_array_equal(a.frequencies, b.frequencies)
    np.testing.assert_array_equal(a.epsilons, b.epsilons)
    np.testing.assert_array_equal(a.tarp.coverage, b.tarp.coverage)
    np.testing.assert_array_equal(a.marginal.coverage, b.marginal.coverage)


def test_identical_for_any_n_jobs():
    kw = dict(n_simulations=24, n_draws=50, random_state=0, n_bootstrap=10)
    serial = run_tarp_study(NoisyGaussianMean(), simulator, n_jobs=1, **kw)
    parallel = run_tarp_study(NoisyGaussianMean(), simulator, n_jobs=2, **kw)
    assert_same_study(serial, parallel)
    np.testing.assert_array_equal(serial.tarp.bootstrap_rmse, parallel.tarp.bootstrap_rmse)
    again = run_tarp_study(NoisyGaussianMean(), simulator, **kw)
    assert_same_study(serial, again)
    other = run_tarp_study(NoisyGaussianMean(), simulator, **dict(kw, random_state=1))
    assert not np.array_equal(serial.theta_true, other.theta_true)


def test_caller_backend_is_respected():
    THREAD_NAMES.clear()
    kw = dict(n_simulations=24, n_draws=50, random_state=0)
    with joblib.parallel_config(backend="threading", n_jobs=2):
        threaded = run_tarp_study(NoisyGaussianMean(), recording_simulator, **kw)
    assert len(THREAD_NAMES) == 24
    assert threading.main_thread().name not in THREAD_NAMES
    assert_same_study(threaded, run_tarp_study(NoisyGaussianMean(), simulator, **kw))


def test_calibrated_estimator_is_near_diagonal():
    study = run_tarp_study(NoisyGaussianMean(epsilon=0.5), simulator, n_simulations=300,
                           n_draws=300, random_state=0)
    assert study.samples.shape == (300, 300, 2)
    assert study.theta_true.shape == (300, 2)
    assert study.frequencies.shape == (300,)
    np.testing.assert_array_equal(study.epsilons, np.full(300, 0.5))
    assert study.param_names == ["mu0", "sigma1"]
    assert study.marginal.param_names == ["mu0", "sigma1"]
    assert study.rmse == study.tarp.rmse < 0.06
    assert abs(high_level_error(study.tarp)) < 0.06
    assert np.all(study.marginal.rmse < 0.07)


def test_noise_unaware_estimator_is_over_confident():
    study = run_tarp_study(NoisyGaussianMean(noise_aware=False), simulator,
                           n_simulations=300, n_draws=300, random_state=0)
    assert high_level_error(study.tarp) < -0.1
    assert np.all(high_level_error(study.marginal) < -0.07)
    under = run_tarp_study(NoisyGaussianMean(sd_scale=2.0), simulator,
                           n_simulations=300, n_draws=300, random_state=0)
    assert high_level_error(under.tarp) > 0.07


def test_unconstrained_maps_truth_and_draws():
    kw = dict(n_simulations=21, n_draws=40, random_state=5)
    constrained = run_tarp_study(NoisyGaussianMean(), simulator, **kw)
    free = run_tarp_study(NoisyGaussianMean(), simulator, unconstrained=True, **kw)
    assert free.unconstrained and not constrained.unconstrained
    np.testing.assert_allclose(free.theta_true[:, 0], constrained.theta_true[:, 0])
    np.testing.assert_allclose(free.theta_true[:, 1], np.log(constrained.theta_true[:, 1]))
    np.testing.assert_allclose(free.samples[..., 1], np.log(constrained.samples[..., 1]))


def test_prior_references_with_unconstrained_space():
    study = run_tarp_study(NoisyGaussianMean(), simulator, n_simulations=300, n_draws=300,
                           references="prior", prior_sampler=prior_sampler,
                           unconstrained=True, random_state=0)
    # References were drawn in the constrained space and mapped: they match
    # draws from N(0, 1) in the unconstrained space.
    refs = study.tarp.references
    assert abs(refs.mean()) < 0.15 and abs(refs.std() - 1) < 0.1
    np.testing.assert_array_equal(study.marginal.references, refs)
    assert study.rmse < 0.06
    assert np.all(study.marginal.rmse < 0.07)
    over = run_tarp_study(NoisyGaussianMean(sd_scale=0.5), simulator, n_simulations=300,
                          n_draws=300, references="prior", prior_sampler=prior_sampler,
                          unconstrained=True, random_state=0)
    assert high_level_error(over.tarp) < -0.07


def test_fit_seeds_differ_between_simulations():
    seeds = []

    class Recording(NoisyGaussianMean):
        def fit(self, X, y):
            seeds.append(self.random_state)
            return super().fit(X, y)

    run_tarp_study(Recording(), simulator, n_simulations=21, n_draws=10, random_state=0,
                   n_jobs=1)
    assert len(set(seeds)) == 21 and all(isinstance(s, int) for s in seeds)


def test_estimator_without_random_state():
    class NoSeed(BaseEstimator):
        def fit(self, X, y):
            self.mean_ = y.mean(axis=0)
            return self

        def sample_posterior(self, n_samples, *, random_state=None, unconstrained=False):
            rng = np.random.default_rng(random_state)
            return self.mean_ + rng.normal(size=(n_samples, 2)) / np.sqrt(N_OBS)

    study = run_tarp_study(NoSeed(), simulator, n_simulations=21, n_draws=10,
                           random_state=0)
    assert np.all(np.isnan(study.epsilons))
    assert study.param_names is None
    with pytest.raises(ValueError, match="to_unconstrained"):
        run_tarp_study(NoSeed(), simulator, n_simulations=21, n_draws=10, unconstrained=True)


class BatchFitting(NoisyGaussianMean):
    """Fits several data sets at once through the ``_fit_batch`` protocol."""

    calls = []

    def _batch_fit_supported(self):
        return True

    def _fit_batch(self, datasets, random_states):
        type(self).calls.append(len(datasets))
        return [clone(self).set_params(random_state=s).fit(X, y)
                for (X, y), s in zip(datasets, random_states)]


def test_estimators_that_fit_batches_get_batches_and_the_same_results():
    BatchFitting.calls.clear()
    kw = dict(n_simulations=23, n_draws=50, random_state=0)
    batched = run_tarp_study(BatchFitting(), simulator, batch_size=10, **kw)
    assert BatchFitting.calls == [10, 10, 3]
    assert_same_study(batched, run_tarp_study(NoisyGaussianMean(), simulator, **kw))
    assert_same_study(batched, run_tarp_study(BatchFitting(), simulator, batch_size=1, **kw))
    BatchFitting.calls.clear()
    run_tarp_study(BatchFitting(), simulator, **kw)  # "auto": 12 and 11
    assert BatchFitting.calls == [12, 11]
    with pytest.raises(ValueError, match="batch_size"):
        run_tarp_study(BatchFitting(), simulator, batch_size=0, **kw)


def test_verbose_progress_bar(capsys):
    run_tarp_study(NoisyGaussianMean(), simulator, n_simulations=21, n_draws=10,
                   random_state=0, verbose=1)
    assert "TARP simulations" in capsys.readouterr().err


def test_bad_input():
    est = NoisyGaussianMean()
    with pytest.raises(ValueError, match="n_simulations"):
        run_tarp_study(est, simulator, n_simulations=10)
    with pytest.raises(ValueError, match="n_simulations"):
        run_tarp_study(est, simulator, n_simulations=0)
    with pytest.raises(ValueError, match="n_draws"):
        run_tarp_study(est, simulator, n_simulations=21, n_draws=0)
    with pytest.raises(ValueError, match="prior_sampler"):
        run_tarp_study(est, simulator, n_simulations=21, references="prior")
    with pytest.raises(ValueError, match="simulator"):
        run_tarp_study(est, "simulator", n_simulations=21)
    with pytest.raises(ValueError, match="sample_posterior method"):  # before any fit
        run_tarp_study(object(), simulator, n_simulations=21)
    with pytest.raises(ValueError, match="n_bootstrap"):
        run_tarp_study(est, simulator, n_simulations=21, n_bootstrap=-2)
    with pytest.raises(ValueError, match="n_bootstrap must be 0"):
        run_tarp_study(est, simulator, n_simulations=21, n_bootstrap=1)
    with pytest.raises(ValueError, match="references"):
        run_tarp_study(est, simulator, n_simulations=21, n_draws=5, references="uniform")

    def three_params(rng):
        theta, X, y = simulator(rng)
        return np.append(theta, 1.0), X, y

    with pytest.raises(ValueError, match="sample_posterior"):
        run_tarp_study(est, three_params, n_simulations=21, n_draws=5)


class WarningMean(NoisyGaussianMean):
    """Warns when its released statistic is small (a number in the text) and always
    with a second, fixed text: a study should show each kind once, with its count."""

    def fit(self, X, y):
        import warnings

        super().fit(X, y)
        if self.posterior_.mean[0] < 0:
            warnings.warn(f"released mean {self.posterior_.mean[0]:.3f} is below 0",
                          RuntimeWarning)
        warnings.warn("always warns", UserWarning)
        return self


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_fit_warnings_are_counted_once_per_kind(n_jobs):
    import warnings

    kw = dict(n_simulations=24, n_draws=50, random_state=0, n_jobs=n_jobs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study = run_tarp_study(WarningMean(), simulator, **kw)
    kinds = {g["category"]: g for g in study.fit_warnings}
    assert set(kinds) == {"RuntimeWarning", "UserWarning"}
    assert kinds["UserWarning"]["count"] == 24 and kinds["UserWarning"]["message"] == "always warns"
    assert 0 < kinds["RuntimeWarning"]["count"] < 24  # some released means are negative
    assert "below 0" in kinds["RuntimeWarning"]["message"]
    shown = [(w.category, str(w.message)) for w in caught]
    assert len(shown) == 2
    assert (UserWarning, "24 times in the study's 24 simulations (their fits' warnings, "
            "first of the kind shown): always warns") in shown
    # the same draws as a study whose fits do not warn
    assert_same_study(study, run_tarp_study(NoisyGaussianMean(), simulator, **kw))


def test_fit_warnings_in_a_thread_pool_are_shown_not_collected():
    # Python's warning capture is process-wide: threads would race on it
    import warnings

    kw = dict(n_simulations=24, n_draws=50, random_state=0, n_jobs=2)
    with warnings.catch_warnings(record=True) as caught, joblib.parallel_backend("threading"):
        warnings.simplefilter("always")
        study = run_tarp_study(WarningMean(), simulator, **kw)
    assert study.fit_warnings == []
    assert sum(str(w.message) == "always warns" for w in caught) == 24
