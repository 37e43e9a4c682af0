"""skdpvi: noise-aware differentially private variational inference.

Data flow, read top-down:

``skdpvi.accounting``   noise multiplier for an (epsilon, delta) budget (PRV, exact, PLD)
``skdpvi.models``       probabilistic models: likelihood, prior, parameter transforms
``skdpvi.dpvi``         the DP-SGD engine on the negative ELBO, recording trace statistics
``skdpvi.noise_aware``  post-processing: the linear-Gaussian gradient model and its backends
``skdpvi.posterior``    the mixture posterior that carries the DP noise
``skdpvi.linear_model`` the scikit-learn estimators
``skdpvi.metrics``      TARP coverage, calibration, scorers and simulation studies
``skdpvi.datasets``     the bundled UCI Adult data and simulators of the paper's models
``skdpvi.plotting``     coverage, calibration and credible-interval plots (matplotlib)
``skdpvi.integrations`` export a fit to ArviZ (``to_inference_data``)
``skdpvi.exceptions``   ``PrivacyWarning``, ``IdentifiabilityWarning``
``skdpvi.privacy_audit`` an empirical lower bound on epsilon, checking the privacy claim
"""

__version__ = "0.1.0"

from .linear_model import DPBayesianLinearRegression, DPBayesianLogisticRegression
from .posterior import NoiseAwarePosterior

__all__ = [
    "DPBayesianLinearRegression",
    "DPBayesianLogisticRegression",
    "NoiseAwarePosterior",
    "__version__",
]
