"""Probabilistic models: per-example log-likelihood, prior and parameter transforms."""

from .base import GLMModel, Model
from .exponential_family import (
    BetaBernoulliModel,
    DirichletCategoricalModel,
    GammaExponentialModel,
)
from .linear import LinearRegressionModel
from .logistic import LogisticRegressionModel

__all__ = [
    "Model",
    "GLMModel",
    "LogisticRegressionModel",
    "LinearRegressionModel",
    "GammaExponentialModel",
    "BetaBernoulliModel",
    "DirichletCategoricalModel",
]
