"""The predictions of :class:`~skdpvi.DPBayesianLogisticRegression`: the posterior
predictive, averaged over the fitted posterior's draws (``_theta_draws``)."""

import numpy as np
from scipy.special import expit, log_expit


class _LogisticPredictions:
    """``predict_proba``, ``predict_log_proba``, ``decision_function`` and ``predict``
    of a fitted logistic estimator (``classes_``, ``_fitted_intercept``, ``_theta_draws``,
    ``_check_X``)."""

    def _draw_logits(self, X):
        X = self._check_X(X)
        n = X.shape[1]
        draws = self._theta_draws
        logits = X @ draws[:, :n].T
        if self._fitted_intercept:
            logits = logits + draws[:, n]
        return logits  # (n_samples, n_draws)

    def predict_proba(self, X):
        """Posterior predictive probabilities, averaged over posterior draws.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Columns in ``classes_`` order.

        Examples
        --------
        >>> from sklearn.datasets import make_classification
        >>> from skdpvi import DPBayesianLogisticRegression
        >>> X, y = make_classification(n_samples=1000, n_features=3, n_informative=2,
        ...                            n_redundant=0, random_state=1)
        >>> clf = DPBayesianLogisticRegression(max_iter=300, inference="exact",
        ...                                    random_state=0).fit(X, y)
        >>> clf.predict_proba(X[:3]).sum(1)
        array([1., 1., 1.])
        """
        p1 = expit(self._draw_logits(X)).mean(1)
        return np.column_stack([1 - p1, p1])

    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, computed stably.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Columns in ``classes_`` order.

        Examples
        --------
        >>> from sklearn.datasets import make_classification
        >>> from skdpvi import DPBayesianLogisticRegression
        >>> X, y = make_classification(n_samples=1000, n_features=3, n_informative=2,
        ...                            n_redundant=0, random_state=1)
        >>> clf = DPBayesianLogisticRegression(max_iter=300, inference="exact",
        ...                                    random_state=0).fit(X, y)
        >>> clf.predict_log_proba(X[:1]).shape
        (1, 2)
        """
        logits = self._draw_logits(X)
        k = logits.shape[1]
        log_p1 = np.logaddexp.reduce(log_expit(logits), axis=1) - np.log(k)
        log_p0 = np.logaddexp.reduce(log_expit(-logits), axis=1) - np.log(k)
        return np.column_stack([log_p0, log_p1])

    def decision_function(self, X):
        """Log-odds of the posterior predictive probability of ``classes_[1]``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)

        Examples
        --------
        >>> from sklearn.datasets import make_classification
        >>> from skdpvi import DPBayesianLogisticRegression
        >>> X, y = make_classification(n_samples=1000, n_features=3, n_informative=2,
        ...                            n_redundant=0, random_state=1)
        >>> clf = DPBayesianLogisticRegression(max_iter=300, inference="exact",
        ...                                    random_state=0).fit(X, y)
        >>> clf.decision_function(X[:2]).shape
        (2,)
        """
        log_p = self.predict_log_proba(X)
        return log_p[:, 1] - log_p[:, 0]

    def predict(self, X):
        """Most probable class under the posterior predictive.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.

        Examples
        --------
        >>> from sklearn.datasets import make_classification
        >>> from skdpvi import DPBayesianLogisticRegression
        >>> X, y = make_classification(n_samples=1000, n_features=3, n_informative=2,
        ...                            n_redundant=0, random_state=1)
        >>> clf = DPBayesianLogisticRegression(max_iter=300, inference="exact",
        ...                                    random_state=0).fit(X, y)
        >>> set(clf.predict(X)) <= set(clf.classes_)
        True
        """
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]
