import gzip
import sys
from pathlib import Path

import numpy as np
import pytest

import skdpvi
from skdpvi.datasets import (
    load_adult,
    make_beta_bernoulli,
    make_dirichlet_categorical,
    make_gamma_exponential,
    make_nig_linear_regression,
)
from skdpvi.datasets import _adult
from skdpvi.noise_aware import find_onehot_blocks

# ---------------------------------------------------------------- load_adult


@pytest.mark.parametrize(
    "subset, drop_missing, n_rows, n_features",
    [
        ("train", True, 30162, 56),
        ("test", True, 15060, 56),
        ("all", True, 45222, 56),
        ("train", False, 32561, 57),
        ("test", False, 16281, 57),
        ("all", False, 48842, 57),
    ],
)
def test_adult_shapes(subset, drop_missing, n_rows, n_features):
    bunch = load_adult(subset=subset, drop_missing=drop_missing)
    assert bunch.data.shape == (n_rows, n_features)
    assert bunch.target.shape == (n_rows,)
    assert len(bunch.feature_names) == n_features
    assert bunch.target_names == ["<=50K", ">50K"]
    assert bunch.frame is None and "Adult" in bunch.DESCR
    X = bunch.data
    assert X.dtype == np.float64 and not np.isnan(X).any()
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert set(np.unique(bunch.target)) == {0, 1}


@pytest.mark.parametrize("drop_missing", [True, False])
def test_adult_one_hot_groups(drop_missing):
    bunch = load_adult(subset="all", drop_missing=drop_missing)
    names = np.array(bunch.feature_names)
    assert list(names[:5]) == list(_adult.CONTINUOUS_BOUNDS)
    for column in _adult.CATEGORIES:
        mask = np.char.startswith(names, column + "_")
        sums = bunch.data[:, mask].sum(axis=1)
        assert set(np.unique(bunch.data[:, mask])) <= {0.0, 1.0}
        if drop_missing:
            assert np.all(sums == 1)
        else:  # a missing workclass/occupation gives an all-zero group
            assert set(np.unique(sums)) <= {0.0, 1.0}
    for dropped in _adult.DROPPED_COLUMNS:
        assert not any(n.startswith(dropped) for n in names)
    assert ("workclass_Never-worked" in names) == (not drop_missing)
    # the declared blocks are exactly the complete groups, and the fit's input check
    # finds nothing else
    blocks = bunch.onehot_blocks
    assert len(blocks) == (6 if drop_missing else 4)
    for block in blocks:
        group = {name.split("_")[0] for name in names[block]}
        assert len(group) == 1 and np.all(bunch.data[:, block].sum(axis=1) == 1)
    assert find_onehot_blocks(bunch.data) == blocks


@pytest.mark.parametrize("drop_missing", [True, False])
def test_adult_row_norms_within_the_public_schema_bound(drop_missing):
    # the main example clips at this bound, computed from the public constants
    # alone: every row (with its intercept) must lie inside it, or clipping would
    # bias the fit where the example promises it does not
    bound = np.sqrt(len(_adult.CONTINUOUS_BOUNDS) + len(_adult.CATEGORIES) + 1)
    assert bound == pytest.approx(np.sqrt(12))
    X = load_adult(subset="all", drop_missing=drop_missing).data
    norms = np.linalg.norm(np.column_stack([X, np.ones(len(X))]), axis=1)
    assert norms.max() <= bound + 1e-12


def test_adult_positive_rate_and_test_labels():
    _, y_train = load_adult(return_X_y=True)
    _, y_test = load_adult(subset="test", return_X_y=True)
    assert y_train.mean() == pytest.approx(7508 / 30162)  # 24.9 %
    assert y_test.mean() == pytest.approx(0.2457, abs=5e-4)  # needs "." stripped
    assert y_test.sum() > 0
    raw_labels = {row[-1] for row in _adult._read_raw("adult.test.gz")}
    assert raw_labels == {"<=50K.", ">50K."}


def test_adult_returns_copies():
    X, y = load_adult(return_X_y=True)
    X[:] = -1.0
    y[:] = 7
    X2, y2 = load_adult(return_X_y=True)
    assert X2.min() >= 0.0 and set(np.unique(y2)) == {0, 1}


def test_adult_without_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    X, y = load_adult(return_X_y=True)
    assert X.shape == (30162, 56)
    with pytest.raises(ImportError, match="pandas"):
        load_adult(as_frame=True)


def test_adult_as_frame():
    pd = pytest.importorskip("pandas")
    bunch = load_adult(subset="test", as_frame=True)
    assert isinstance(bunch.data, pd.DataFrame)
    assert list(bunch.data.columns) == bunch.feature_names
    assert bunch.frame.shape == (15060, 57)
    np.testing.assert_array_equal(bunch.target.to_numpy(), load_adult(subset="test").target)


def test_adult_reads_package_data(monkeypatch):
    package_dir = Path(skdpvi.__file__).resolve().parent
    assert package_dir in _adult._DATA_DIR.parents
    opened = []
    real_open = gzip.open

    def spy(path, *args, **kwargs):
        opened.append(Path(path).resolve())
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(gzip, "open", spy)
    _adult._read_raw.cache_clear()
    _adult._encode.cache_clear()
    load_adult(subset="all")
    assert len(opened) == 2
    assert all(package_dir in path.parents for path in opened)
    sizes = sum(path.stat().st_size for path in opened)
    assert sizes < 2 * 2**20


def test_adult_bad_subset():
    with pytest.raises(ValueError, match="subset"):
        load_adult(subset="validation")


# ---------------------------------------------------------------- simulators

SIMULATORS = [
    lambda rs: make_nig_linear_regression(200, 4, random_state=rs),
    lambda rs: make_gamma_exponential(200, random_state=rs),
    lambda rs: make_beta_bernoulli(200, random_state=rs),
    lambda rs: make_dirichlet_categorical(200, random_state=rs),
]


def _flat(out):
    return np.concatenate([np.ravel(a) for a in out])


@pytest.mark.parametrize("simulate", SIMULATORS)
def test_simulators_reproducible(simulate):
    np.testing.assert_array_equal(_flat(simulate(0)), _flat(simulate(0)))
    assert not np.array_equal(_flat(simulate(0)), _flat(simulate(1)))
    np.testing.assert_array_equal(
        _flat(simulate(np.random.default_rng(3))), _flat(simulate(np.random.default_rng(3)))
    )
    np.testing.assert_array_equal(
        _flat(simulate(np.random.RandomState(3))), _flat(simulate(np.random.RandomState(3)))
    )
    simulate(None)


def test_simulator_shapes():
    X, y, theta = make_nig_linear_regression(50, 3, random_state=0)
    assert X.shape == (50, 3) and y.shape == (50,) and theta.shape == (5,)
    x, rate = make_gamma_exponential(50, random_state=0)
    assert x.shape == (50,) and np.all(x > 0) and rate > 0
    x, p = make_beta_bernoulli(50, random_state=0)
    assert x.shape == (50,) and set(np.unique(x)) <= {0, 1} and 0 < p < 1
    x, probs = make_dirichlet_categorical(50, random_state=0)
    assert x.shape == (50,) and x.dtype.kind == "i" and set(np.unique(x)) <= {0, 1, 2}
    assert probs.shape == (3,) and probs.sum() == pytest.approx(1.0)


def test_nig_prior_and_likelihood():
    rng = np.random.default_rng(0)
    draws = np.array(
        [make_nig_linear_regression(1, 2, random_state=rng)[2] for _ in range(4000)]
    )
    sigma2 = draws[:, -1]
    shape, scale = 20.0, 0.5
    mean = scale / (shape - 1)
    sd = mean / np.sqrt(shape - 2)
    assert abs(sigma2.mean() - mean) < 4 * sd / np.sqrt(len(sigma2))
    # weights / (2 sigma) ~ N(0, 1), for the coefficients and the intercept
    z = draws[:, :-1] / (2.0 * np.sqrt(sigma2[:, None]))
    assert abs(z.mean()) < 0.05 and abs(z.var() - 1.0) < 0.06
    # residual variance given theta is sigma2
    X, y, theta = make_nig_linear_regression(100_000, 3, random_state=1)
    resid = y - X @ theta[:3] - theta[3]
    assert resid.var() == pytest.approx(theta[4], rel=0.03)


def test_gamma_exponential_statistics():
    rates = np.array([make_gamma_exponential(1, random_state=s)[1] for s in range(2000)])
    assert abs(rates.mean() - 1.0) < 4 * np.sqrt(2 / 4) / np.sqrt(2000)  # Gamma(2, 2)
    x, theta = make_gamma_exponential(200_000, random_state=0)
    assert x.mean() == pytest.approx(1.0 / theta, rel=0.02)


def test_beta_bernoulli_statistics():
    ps = np.array([make_beta_bernoulli(1, random_state=s)[1] for s in range(2000)])
    assert abs(ps.mean() - 0.5) < 4 * np.sqrt(0.05) / np.sqrt(2000)  # Beta(2, 2)
    x, theta = make_beta_bernoulli(100_000, random_state=0)
    assert x.mean() == pytest.approx(theta, abs=0.01)


def test_dirichlet_categorical_statistics():
    probs = np.array([make_dirichlet_categorical(1, random_state=s)[1] for s in range(2000)])
    np.testing.assert_allclose(probs.mean(axis=0), 1 / 3, atol=4 * np.sqrt(2 / 63 / 2000))
    x, theta = make_dirichlet_categorical(100_000, random_state=0)
    np.testing.assert_allclose(np.bincount(x, minlength=3) / x.size, theta, atol=0.01)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: make_nig_linear_regression(0), "n_samples"),
        (lambda: make_nig_linear_regression(10, 0), "n_features"),
        (lambda: make_nig_linear_regression(2.5), "n_samples"),
        (lambda: make_nig_linear_regression(prior_weight_scale=0), "prior_weight_scale"),
        (lambda: make_nig_linear_regression(prior_noise_shape=-1), "prior_noise_shape"),
        (lambda: make_nig_linear_regression(prior_noise_scale=np.inf), "prior_noise_scale"),
        (lambda: make_gamma_exponential(0), "n_samples"),
        (lambda: make_gamma_exponential(prior_shape=0), "prior_shape"),
        (lambda: make_gamma_exponential(prior_rate=-2), "prior_rate"),
        (lambda: make_beta_bernoulli(-5), "n_samples"),
        (lambda: make_beta_bernoulli(prior_a=0), "prior_a"),
        (lambda: make_beta_bernoulli(prior_b=-1), "prior_b"),
        (lambda: make_dirichlet_categorical(0), "n_samples"),
        (lambda: make_dirichlet_categorical(prior_alpha=(1.0, 0.0, 1.0)), "prior_alpha"),
        (lambda: make_dirichlet_categorical(prior_alpha=(1.0,)), "prior_alpha"),
        (lambda: make_beta_bernoulli(random_state="seed"), "random_state"),
    ],
)
def test_simulators_bad_arguments(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ------------------------------------------------------ raw Adult and pipelines


def test_adult_raw_columns_and_missing_values():
    pd = pytest.importorskip("pandas")
    X, y = load_adult(raw=True, as_frame=True, return_X_y=True)
    assert X.shape == (30162, 14) and list(X.columns) == list(_adult.COLUMNS[:-1])
    assert X["age"].dtype == np.int64 and X["fnlwgt"].dtype == np.int64
    assert X.loc[0, "workclass"] == "State-gov" and X.loc[0, "native-country"] == "United-States"
    assert set(y) == {"<=50K", ">50K"} and (y == ">50K").mean() == pytest.approx(7508 / 30162)
    assert not X.isna().any().any()
    full = load_adult(subset="test", raw=True, as_frame=True, drop_missing=False)
    assert full.frame.shape == (16281, 15) and set(full.target) == {"<=50K", ">50K"}
    assert full.data["occupation"].isna().sum() > 0  # "?" is NaN, not a category
    assert not (full.data == "?").any().any()
    arr, labels = load_adult(raw=True, return_X_y=True)  # numpy: an object array
    assert arr.dtype == object and arr.shape == (30162, 14) and arr[0, 0] == 39
    assert isinstance(labels, np.ndarray) and labels[0] == "<=50K"
    arr[:] = None  # a copy: the cache is untouched
    assert load_adult(raw=True, return_X_y=True)[0][0, 1] == "State-gov"
    assert isinstance(pd.DataFrame(arr), pd.DataFrame)


def test_adult_public_constants_are_read_only():
    from skdpvi.datasets import ADULT_CATEGORIES, ADULT_CONTINUOUS_BOUNDS

    assert ADULT_CONTINUOUS_BOUNDS["age"] == (17.0, 90.0)
    assert ADULT_CATEGORIES["sex"] == ("Female", "Male")
    assert list(ADULT_CONTINUOUS_BOUNDS) == list(load_adult().feature_names[:5])
    with pytest.raises(TypeError):
        ADULT_CONTINUOUS_BOUNDS["age"] = (0.0, 1.0)


def _public_adult_preprocessor():
    """The ColumnTransformer of the user guide ("UCI Adult from raw columns")."""
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

    from skdpvi.datasets import ADULT_CATEGORIES, ADULT_CONTINUOUS_BOUNDS

    low, high = np.array(list(ADULT_CONTINUOUS_BOUNDS.values())).T

    def scale_with_public_bounds(X):
        return np.clip((np.asarray(X, dtype=float) - low) / (high - low), 0.0, 1.0)

    return ColumnTransformer(
        [("continuous", FunctionTransformer(scale_with_public_bounds,
                                            feature_names_out="one-to-one"),
          list(ADULT_CONTINUOUS_BOUNDS)),
         ("categorical", OneHotEncoder(categories=[list(c) for c in ADULT_CATEGORIES.values()],
                                       handle_unknown="ignore", sparse_output=False),
          list(ADULT_CATEGORIES))],
        verbose_feature_names_out=False,
    )


@pytest.mark.parametrize("drop_missing", [True, False])
def test_public_pipeline_on_raw_adult_reproduces_load_adult(drop_missing):
    pd = pytest.importorskip("pandas")
    X_raw = load_adult(subset="test", raw=True, as_frame=True, drop_missing=drop_missing).data
    pre = _public_adult_preprocessor().set_output(transform="pandas")
    encoded = pre.fit_transform(X_raw)
    expected = load_adult(subset="test", as_frame=True, drop_missing=drop_missing).data
    # adult.names lists "Never-worked"; load_adult drops its column (always 0)
    # together with the rows with missing values.
    assert set(encoded.columns) - set(expected.columns) == (
        {"workclass_Never-worked"} if drop_missing else set())
    np.testing.assert_array_equal(encoded[expected.columns].to_numpy(), expected.to_numpy())
    assert isinstance(encoded, pd.DataFrame)


def test_frozen_min_max_scaler_from_public_bounds_fits_nothing():
    """The documented alternative: a MinMaxScaler fitted on the bounds, then frozen."""
    pd = pytest.importorskip("pandas")
    from sklearn.compose import ColumnTransformer
    from sklearn.frozen import FrozenEstimator
    from sklearn.preprocessing import MinMaxScaler

    from skdpvi.datasets import ADULT_CONTINUOUS_BOUNDS

    bounds = pd.DataFrame(dict(ADULT_CONTINUOUS_BOUNDS))  # two rows: low, high
    scaler = FrozenEstimator(MinMaxScaler(clip=True).fit(bounds))
    pre = ColumnTransformer([("continuous", scaler, list(ADULT_CONTINUOUS_BOUNDS))])
    X_raw = load_adult(subset="test", raw=True, as_frame=True).data
    np.testing.assert_allclose(pre.fit_transform(X_raw), load_adult(subset="test").data[:, :5],
                               atol=1e-12)
    # refitting the pipeline leaves the public bounds in place
    np.testing.assert_array_equal(pre.transformers_[0][1].estimator.data_min_,
                                  [low for low, _ in ADULT_CONTINUOUS_BOUNDS.values()])


def test_raw_adult_pipeline_fits_the_private_classifier_with_named_parameters():
    pytest.importorskip("pandas")
    from sklearn.pipeline import make_pipeline

    from skdpvi import DPBayesianLogisticRegression

    X_raw, y = load_adult(subset="test", raw=True, as_frame=True, return_X_y=True)
    X_raw, y = X_raw.iloc[:3000], y.iloc[:3000]
    pipe = make_pipeline(
        _public_adult_preprocessor().set_output(transform="pandas"),
        DPBayesianLogisticRegression(epsilon=1.0, clip_norm=11.0, max_iter=200,
                                     inference="exact", n_posterior_samples=200,
                                     random_state=0),
    ).fit(X_raw, y)
    clf = pipe[-1]
    assert list(clf.classes_) == ["<=50K", ">50K"]
    assert clf.param_names_[0] == "coef[age]" and clf.param_names_[-1] == "intercept"
    assert "coef[workclass_Private]" in clf.param_names_ and len(clf.param_names_) == 58
    assert pipe.predict_proba(X_raw.iloc[:5]).shape == (5, 2)
    assert set(pipe.predict(X_raw.iloc[:5])) <= {"<=50K", ">50K"}
