"""The scikit-learn estimators: thin wrappers over model, engine and post-processing."""

from ._linear import DPBayesianLinearRegression
from ._logistic import DPBayesianLogisticRegression

__all__ = ["DPBayesianLinearRegression", "DPBayesianLogisticRegression"]
