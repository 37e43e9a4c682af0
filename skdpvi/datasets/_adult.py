"""Loader for the bundled UCI Adult ("Census Income") data set."""

import csv
import functools
import gzip
from pathlib import Path
from types import MappingProxyType

import numpy as np
from sklearn.utils import Bunch

__all__ = ["load_adult", "ADULT_CONTINUOUS_BOUNDS", "ADULT_CATEGORIES"]

_DATA_DIR = Path(__file__).resolve().parent / "data"
_FILES = {"train": "adult.data.gz", "test": "adult.test.gz"}

COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num",
    "marital-status", "occupation", "relationship", "race", "sex",
    "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
)
DROPPED_COLUMNS = ("education-num", "relationship", "native-country")

# Public, fixed min-max bounds (low, high) of the continuous columns. They are
# constants, never computed from the rows; values outside are clipped.
CONTINUOUS_BOUNDS = {
    # The extraction rule in adult.names keeps only AAGE > 16; the Census
    # Bureau top-codes age at 90.
    "age": (17.0, 90.0),
    # Survey weight = number of people a respondent stands for: non-negative;
    # 1.5 million is a round a-priori cap.
    "fnlwgt": (0.0, 1_500_000.0),
    # The field has five digits; 99999 is the Census top-code for capital gain.
    "capital-gain": (0.0, 99_999.0),
    # A round cap on the scale of the $3,000 yearly limit on deductible net
    # capital losses in US tax law; larger losses are rare and are clipped.
    "capital-loss": (0.0, 5_000.0),
    # The extraction rule keeps only HRSWK > 0; the field has two digits (99).
    "hours-per-week": (1.0, 99.0),
}

# Category lists copied from adult.names (in that order), not from the rows.
CATEGORIES = {
    "workclass": (
        "Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov",
        "Local-gov", "State-gov", "Without-pay", "Never-worked",
    ),
    "education": (
        "Bachelors", "Some-college", "11th", "HS-grad", "Prof-school",
        "Assoc-acdm", "Assoc-voc", "9th", "7th-8th", "12th", "Masters",
        "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool",
    ),
    "marital-status": (
        "Married-civ-spouse", "Divorced", "Never-married", "Separated",
        "Widowed", "Married-spouse-absent", "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support", "Craft-repair", "Other-service", "Sales",
        "Exec-managerial", "Prof-specialty", "Handlers-cleaners",
        "Machine-op-inspct", "Adm-clerical", "Farming-fishing",
        "Transport-moving", "Priv-house-serv", "Protective-serv",
        "Armed-Forces",
    ),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
}

# The public, read-only views (see their entries in doc/api.rst).
ADULT_CONTINUOUS_BOUNDS = MappingProxyType(CONTINUOUS_BOUNDS)
ADULT_CATEGORIES = MappingProxyType(CATEGORIES)

#: The integer columns of the raw data (all others are strings).
_RAW_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss",
                "hours-per-week")

TARGET_NAMES = ("<=50K", ">50K")
_MISSING = "?"


def _categories(drop_missing):
    """Fixed category lists; they depend on ``drop_missing`` only.

    "Never-worked" always comes with a missing occupation ("?"), so once rows
    with missing values are dropped the category cannot occur and its column
    would be identically zero; it is left out in that case.
    """
    if not drop_missing:
        return CATEGORIES
    cats = dict(CATEGORIES)
    cats["workclass"] = tuple(c for c in cats["workclass"] if c != "Never-worked")
    return cats


def _onehot_blocks(drop_missing):
    """Column indices of the complete one-hot groups (exactly one 1 in every row).

    From the fixed schema, never the rows. With ``drop_missing=False`` a missing
    workclass or occupation is an all-zero group, so those two are not complete.
    """
    blocks, start = [], len(CONTINUOUS_BOUNDS)
    for column, cats in _categories(drop_missing).items():
        if drop_missing or column not in ("workclass", "occupation"):
            blocks.append(list(range(start, start + len(cats))))
        start += len(cats)
    return blocks


def _feature_names(drop_missing):
    names = list(CONTINUOUS_BOUNDS)
    for column, cats in _categories(drop_missing).items():
        names += [f"{column}_{c}" for c in cats]
    return names


@functools.lru_cache(maxsize=None)
def _read_raw(filename):
    """Parse one bundled gzip file into a tuple of 15-field string tuples."""
    with gzip.open(_DATA_DIR / filename, "rt", encoding="ascii", newline="") as f:
        reader = csv.reader(f, skipinitialspace=True)
        # Skips blank lines and the "|1x3 Cross validator" header of adult.test.
        return tuple(
            tuple(field.strip() for field in row)
            for row in reader
            if len(row) == len(COLUMNS)
        )


@functools.lru_cache(maxsize=None)
def _encode(filename, drop_missing):
    """Encode one split into read-only ``(X, y)`` arrays (cached)."""
    rows = _read_raw(filename)
    if drop_missing:
        rows = [r for r in rows if _MISSING not in r]
    columns = dict(zip(COLUMNS, zip(*rows)))

    blocks = []
    for name, (low, high) in CONTINUOUS_BOUNDS.items():
        values = np.clip(np.asarray(columns[name], dtype=float), low, high)
        blocks.append(((values - low) / (high - low))[:, None])
    for name, cats in _categories(drop_missing).items():
        lookup = {c: k for k, c in enumerate(cats)}
        lookup[_MISSING] = -1  # a missing value gives an all-zero group
        unknown = set(columns[name]) - set(lookup)
        if unknown:
            raise ValueError(f"Unexpected {name} values in {filename}: {sorted(unknown)}")
        codes = np.array([lookup[v] for v in columns[name]])
        blocks.append((codes[:, None] == np.arange(len(cats))).astype(float))
    X = np.hstack(blocks)

    labels = [v.rstrip(".") for v in columns["income"]]  # adult.test: ">50K."
    if not set(labels) <= set(TARGET_NAMES):
        raise ValueError(f"Unexpected income labels in {filename}: {set(labels)}")
    y = (np.array(labels) == TARGET_NAMES[1]).astype(np.int64)

    X.flags.writeable = False
    y.flags.writeable = False
    return X, y


@functools.lru_cache(maxsize=None)
def _raw(filename, drop_missing):
    """The raw split: ({column: read-only array}, labels), "?" as NaN (cached).

    Integer columns are int64 (float64 cannot occur: they have no missing
    values); string columns are object arrays with NaN for a missing value.
    """
    rows = _read_raw(filename)
    if drop_missing:
        rows = [r for r in rows if _MISSING not in r]
    columns = dict(zip(COLUMNS, zip(*rows)))
    out = {}
    for name in COLUMNS[:-1]:
        if name in _RAW_NUMERIC:
            arr = np.asarray(columns[name], dtype=np.int64)
        else:
            arr = np.array([np.nan if v == _MISSING else v for v in columns[name]],
                           dtype=object)
        arr.flags.writeable = False
        out[name] = arr
    labels = np.array([v.rstrip(".") for v in columns["income"]], dtype=object)
    if not set(labels) <= set(TARGET_NAMES):
        raise ValueError(f"Unexpected income labels in {filename}: {set(labels)}")
    labels.flags.writeable = False
    return out, labels


def _load_raw(splits, drop_missing, as_frame):
    parts = [_raw(_FILES[s], drop_missing) for s in splits]
    features = list(COLUMNS[:-1])
    columns = {c: np.concatenate([p[0][c] for p in parts]) for c in features}
    y = np.concatenate([p[1] for p in parts])
    if not as_frame:
        X = np.empty((len(y), len(features)), dtype=object)
        for j, c in enumerate(features):
            X[:, j] = columns[c]
        return X, y, features, None
    import pandas as pd

    frame = pd.DataFrame(columns)
    frame["income"] = y
    return frame[features], frame["income"], features, frame


DESCR = """\
UCI Adult (Census Income) data set
----------------------------------

Binary classification: does a person earn more than $50K a year (1994 US
Current Population Survey extract)?

Official split: train = adult.data (32,561 rows), test = adult.test
(16,281 rows). Without rows with missing values ("?"): train 30,162 and
test 15,060 rows. Positive class ">50K": 24.9 % (train), 24.6 % (test).

Preprocessing (NA-DPVI paper, Appendix H.6):

- columns education-num, relationship and native-country are dropped;
- age, fnlwgt, capital-gain, capital-loss and hours-per-week are min-max
  scaled to [0, 1] with fixed public bounds (clipped outside);
- workclass, education, marital-status, occupation, race and sex are one-hot
  encoded with the fixed category lists of adult.names.

Result: 56 features (5 continuous + 51 one-hot) with the default
``drop_missing=True``; 57 with ``drop_missing=False``.

With ``raw=True`` the 14 original columns are returned unprocessed
(integers and strings, "?" as NaN) and the target is the income label; the
public bounds and category lists used above are
``skdpvi.datasets.ADULT_CONTINUOUS_BOUNDS`` and ``ADULT_CATEGORIES``.

Becker, B. & Kohavi, R. (1996). Adult. UCI Machine Learning Repository.
https://doi.org/10.24432/C5XW20. Licence: CC BY 4.0.
"""


def load_adult(*, subset="train", return_X_y=False, as_frame=False, drop_missing=True,
               raw=False):
    """Load the UCI Adult data set (bundled with the package), preprocessed or raw.

    The data are read from gzip copies shipped in ``skdpvi/datasets/data``
    (no download). Preprocessing follows Appendix H.6 of the NA-DPVI paper:

    - the columns education-num, relationship and native-country are dropped;
    - the continuous columns (age, fnlwgt, capital-gain, capital-loss,
      hours-per-week) are min-max scaled to [0, 1] with the fixed bounds of
      :data:`ADULT_CONTINUOUS_BOUNDS` and clipped to that range. The bounds are public
      constants, deliberately *not* the minimum and maximum of the rows:
      bounds computed from private rows would themselves leak information
      about individual records and break the differential-privacy guarantee
      (and the feature scaling would differ between train and test);
    - workclass, education, marital-status, occupation, race and sex are
      one-hot encoded with the fixed category lists of ``adult.names``
      (:data:`ADULT_CATEGORIES`), so the feature set never depends on which
      rows are present;
    - the target is 1 for income ">50K" and 0 for "<=50K" (the trailing "."
      of the labels in ``adult.test`` is removed).

    With ``drop_missing=True`` (default) every row with a missing value ("?")
    is dropped, leaving 30,162 train and 15,060 test rows and 56 features
    (5 continuous + 51 one-hot). The category "Never-worked" is then not
    encoded: it only ever occurs with a missing occupation, so its column
    would always be zero. With ``drop_missing=False`` all 32,561 train and
    16,281 test rows are kept, there are 57 features, and a missing
    workclass or occupation is encoded as an all-zero one-hot group.

    With ``raw=True`` nothing is encoded: ``data`` has the 14 original columns
    (the six integer columns as int64, the others as strings, a missing value
    "?" as NaN) and ``target`` is the income label, ``"<=50K"`` or ``">50K"``
    (the trailing "." of ``adult.test`` removed). Build your own preprocessing
    from the public constants :data:`ADULT_CONTINUOUS_BOUNDS` and
    :data:`ADULT_CATEGORIES`, never from the rows; the user guide ("UCI Adult
    from raw columns") shows a ``ColumnTransformer`` that reproduces the
    preprocessed data.

    Parameters
    ----------
    subset : {"train", "test", "all"}, default="train"
        Which part of the official UCI split to load: "train" is
        ``adult.data``, "test" is ``adult.test``, and "all" is both (train
        rows first).
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.
    as_frame : bool, default=False
        If True, ``data`` is a pandas DataFrame and ``target`` a Series, and
        the Bunch gets a ``frame`` (data and target together). Requires
        pandas; an ImportError is raised if it is not installed.
    drop_missing : bool, default=True
        Whether to drop rows with missing values.
    raw : bool, default=False
        Return the original columns unprocessed (strings and integers), as
        scikit-learn's :func:`~sklearn.datasets.fetch_openml` does; best with
        ``as_frame=True``. With ``as_frame=False`` data is an object array.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with attributes

        data : ndarray of shape (n_samples, n_features) or DataFrame
            Float features in [0, 1]; with ``raw=True`` the 14 original columns.
        target : ndarray of shape (n_samples,) or Series
            Integer labels, 1 for ">50K"; with ``raw=True`` the label strings.
        feature_names : list of str
            Continuous column names, then one-hot columns named
            ``"<column>_<category>"``; with ``raw=True`` the original columns.
        onehot_blocks : list of list of int
            Not with ``raw=True``: the column indices of each one-hot group with
            exactly one 1 in every row (all six with ``drop_missing=True``; without
            workclass and occupation, whose missing values are all-zero rows,
            otherwise), from the public schema. Pass it as the estimators'
            ``onehot_blocks``.
        target_names : list of str
            ``["<=50K", ">50K"]``.
        frame : DataFrame
            Only when ``as_frame=True``: data with a last column "income".
        DESCR : str
            Description of the data set.
    (data, target) : tuple if ``return_X_y`` is True
        New arrays (or pandas objects); modifying them does not affect later
        calls.

    Notes
    -----
    Source: Becker, B. & Kohavi, R. (1996). Adult. UCI Machine Learning
    Repository. https://doi.org/10.24432/C5XW20, licensed under CC BY 4.0.
    Parsed files are cached in memory, so repeated calls are fast.

    Examples
    --------
    >>> from skdpvi.datasets import load_adult
    >>> X, y = load_adult(return_X_y=True)
    >>> X.shape
    (30162, 56)
    >>> round(float(y.mean()), 3)
    0.249
    >>> bunch = load_adult(subset="test")
    >>> bunch.data.shape, bunch.target_names
    ((15060, 56), ['<=50K', '>50K'])
    >>> [len(block) for block in bunch.onehot_blocks]
    [7, 16, 7, 14, 5, 2]
    >>> X_raw, y_raw = load_adult(raw=True, as_frame=True, return_X_y=True)
    >>> X_raw.shape, y_raw.iloc[0]
    ((30162, 14), '<=50K')
    >>> print(X_raw.loc[0, "age"], X_raw.loc[0, "workclass"])
    39 State-gov
    """
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be 'train', 'test' or 'all', got {subset!r}")
    if as_frame:
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "load_adult(as_frame=True) requires pandas; install pandas "
                "or use as_frame=False to get numpy arrays."
            ) from exc

    splits = ("train", "test") if subset == "all" else (subset,)
    if raw:
        X, y, feature_names, frame = _load_raw(splits, bool(drop_missing), as_frame)
        if return_X_y:
            return X, y
        return Bunch(data=X, target=y, frame=frame, feature_names=feature_names,
                     target_names=list(TARGET_NAMES), DESCR=DESCR)
    parts = [_encode(_FILES[s], bool(drop_missing)) for s in splits]
    # np.concatenate always returns a new, writeable array: the cache stays intact.
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    feature_names = _feature_names(bool(drop_missing))
    frame = None
    if as_frame:
        frame = pd.DataFrame(X, columns=feature_names)
        frame["income"] = y
        X, y = frame[feature_names], frame["income"]

    if return_X_y:
        return X, y
    return Bunch(
        data=X,
        target=y,
        frame=frame,
        feature_names=feature_names,
        onehot_blocks=_onehot_blocks(bool(drop_missing)),
        target_names=list(TARGET_NAMES),
        DESCR=DESCR,
    )
