"""Accounting of fitted estimators and model searches (skdpvi.accounting.api)."""

import pytest
from sklearn.base import BaseEstimator

from skdpvi.accounting import DPSGDMechanism, compose_epsilon, total_privacy_spent


def test_total_privacy_spent_of_fitted_estimators():
    class Fit:
        noise_multiplier_, sampling_rate, n_iter_, delta_ = 10.0, 0.1, 1000, 1e-5

    eps, delta = total_privacy_spent([Fit(), Fit()])
    assert delta == pytest.approx(2e-5)
    assert eps == pytest.approx(compose_epsilon([(10.0, 0.1, 2000)], 2e-5))
    with pytest.raises(ValueError, match="not a fitted"):
        total_privacy_spent([object()])


class _Candidate(BaseEstimator):
    """Describes its mechanism as the skdpvi estimators do, without fitting."""

    def __init__(self, noise=10.0, delta=1e-5):
        self.noise = noise
        self.delta = delta

    def _dp_mechanism(self):
        return DPSGDMechanism(self.noise, 0.1, 1000), self.delta


class _Search:
    """Stands in for a fitted GridSearchCV: two candidates, 3 folds each, a refit."""

    estimator = _Candidate()
    cv_results_ = {"params": [{"noise": 10.0}, {"noise": 20.0}]}
    n_splits_ = 3
    refit = True
    best_estimator_ = _Candidate(noise=20.0)


def test_total_privacy_spent_asks_every_candidate_of_a_search():
    eps, delta = total_privacy_spent(_Search())
    assert delta == pytest.approx(7e-5)
    assert eps == compose_epsilon([(10.0, 0.1, 3000), (20.0, 0.1, 4000)], delta)


def test_total_privacy_spent_of_a_search_over_a_pipeline():
    # the candidates of a search over a Pipeline are pipelines: their last step's
    # mechanism counts (an AttributeError before)
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    class _PipelineSearch(_Search):
        estimator = make_pipeline(StandardScaler(), _Candidate())
        cv_results_ = {"params": [{"_candidate__noise": 10.0}, {"_candidate__noise": 20.0}]}
        best_estimator_ = make_pipeline(StandardScaler(), _Candidate(noise=20.0))

    assert total_privacy_spent(_PipelineSearch()) == total_privacy_spent(_Search())


def test_a_noise_multiplier_too_small_to_account_for_raises_a_value_error():
    # was the PLD accountant's private _TooFine("59978030")
    from skdpvi.accounting import epsilon_spent

    with pytest.raises(ValueError, match="too small to account for"):
        epsilon_spent(0.01, 1e-5, 0.1, 10)


@pytest.mark.parametrize("rate", [1.0, 0.1], ids=["gaussian", "prv"])
def test_noise_multiplier_composed_with_fixed_mechanisms_spends_exactly_the_budget(rate):
    from skdpvi.accounting import compose_epsilon, noise_multiplier

    fixed = [(20.0, 1.0, 1)]
    alone, _ = noise_multiplier(1.0, 1e-5, rate, 500)
    sigma, achieved = noise_multiplier(1.0, 1e-5, rate, 500, composed_with=fixed)
    assert sigma > alone
    assert 0.995 <= achieved <= 1.0
    assert compose_epsilon([(sigma, rate, 500), *fixed], 1e-5) == pytest.approx(achieved,
                                                                                 rel=2e-3)
    # a fixed mechanism that spends the whole budget alone leaves nothing to calibrate
    with pytest.raises(ValueError, match="epsilon"):
        noise_multiplier(1.0, 1e-5, rate, 500, composed_with=[(1.0, 1.0, 1)])


def test_pld_fallback_composes_the_fixed_mechanisms_too():
    from skdpvi.accounting import DPSGDMechanism, compose_epsilon
    from skdpvi.accounting.pld import PLDAccountant

    fixed = (DPSGDMechanism(20.0, 1.0, 1),)
    sigma, achieved = PLDAccountant().noise_multiplier(1.0, 1e-5, 0.1, 200, fixed)
    alone, _ = PLDAccountant().noise_multiplier(1.0, 1e-5, 0.1, 200)
    assert sigma > alone and 0.995 <= achieved <= 1.0
    assert compose_epsilon([(sigma, 0.1, 200), fixed[0]], 1e-5) == pytest.approx(achieved,
                                                                                  rel=0.01)
