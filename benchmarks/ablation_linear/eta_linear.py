"""Prototype: sufficient-statistic gradient model for NIG linear regression."""
import numpy as np
from numpy.polynomial.hermite_e import hermegauss

GH_X, GH_W = hermegauss(60)
GH_W = GH_W / GH_W.sum()


def softplus(x):
    return np.logaddexp(0.0, x)


def sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


def gh_expect(f, mu, s):
    """E[f(mu + s z)], d/dmu, d/ds for z ~ N(0,1); mu, s arrays (...)."""
    u = mu[..., None] + s[..., None] * GH_X
    val, der = f(u)
    e = (val * GH_W).sum(-1)
    dmu = (der * GH_W).sum(-1)
    ds = (der * GH_X * GH_W).sum(-1)
    return e, dmu, ds


def f_logvar(u):
    sp = softplus(u)
    return np.log(sp), sigmoid(u) / sp


def f_invvar(u):
    sp = softplus(u)
    return 1.0 / sp, -sigmoid(u) / sp**2


def f_logsig(u):
    return -softplus(-u), sigmoid(-u)


class LinearStats:
    """E[grad L(phi)] = J(phi) eta + r(phi), eta = (vech XtX, Xty, yty)."""

    def __init__(self, p, N, s2=4.0, a=20.0, b=0.5):
        self.p, self.N, self.s2, self.a, self.b = p, N, s2, a, b
        self.tril = np.tril_indices(p)
        self.n_eta = len(self.tril[0]) + p + 1
        self.d = 2 * (p + 1)

    def design(self, phi):
        """phi (T, d) -> J (T, d, n_eta), r (T, d), gradients wrt (mu, rho)."""
        p = self.p
        T = phi.shape[0]
        mu_w, mu_u = phi[:, :p], phi[:, p]
        rho_w, rho_u = phi[:, p + 1: 2 * p + 1], phi[:, 2 * p + 1]
        s_w, s_u = softplus(rho_w), softplus(rho_u)
        sig_w, sig_u = sigmoid(rho_w), sigmoid(rho_u)
        e0, e0m, e0s = gh_expect(f_logvar, mu_u, s_u)
        e1, e1m, e1s = gh_expect(f_invvar, mu_u, s_u)
        e2, e2m, e2s = gh_expect(f_logsig, mu_u, s_u)
        nt = len(self.tril[0])
        J = np.zeros((T, self.d, self.n_eta))
        r = np.zeros((T, self.d))
        I, K = self.tril
        # mean rows of w: e1 (XtX mu - Xty) + e1 mu / s2
        for c, (i, k) in enumerate(zip(I, K)):
            J[:, i, c] += e1 * mu_w[:, k]
            if i != k:
                J[:, k, c] += e1 * mu_w[:, i]
        J[:, np.arange(p), nt + np.arange(p)] = -e1[:, None]
        r[:, :p] = e1[:, None] * mu_w / self.s2
        # Q/2 coefficient vector: d Q / d eta
        dQ = np.zeros((T, self.n_eta))
        for c, (i, k) in enumerate(zip(I, K)):
            if i == k:
                dQ[:, c] = mu_w[:, i] ** 2 + s_w[:, i] ** 2
            else:
                dQ[:, c] = 2 * mu_w[:, i] * mu_w[:, k]
        dQ[:, nt: nt + p] = -2 * mu_w
        dQ[:, -1] = 1.0
        c0 = self.N / 2 + self.a + 1 + p / 2
        known = self.b + ((mu_w**2).sum(1) + (s_w**2).sum(1)) / (2 * self.s2)
        # mean row of u
        J[:, p, :] = 0.5 * e1m[:, None] * dQ
        r[:, p] = c0 * e0m + e1m * known - e2m
        # scale rows of w (in s, then * sig)
        diag_cols = [c for c, (i, k) in enumerate(zip(I, K)) if i == k]
        for j in range(p):
            J[:, p + 1 + j, diag_cols[j]] = e1 * s_w[:, j] * sig_w[:, j]
        r[:, p + 1: 2 * p + 1] = (e1[:, None] * s_w / self.s2 - 1 / s_w) * sig_w
        # scale row of u
        J[:, 2 * p + 1, :] = 0.5 * e1s[:, None] * dQ * sig_u[:, None]
        r[:, 2 * p + 1] = (c0 * e0s + e1s * known - e2s - 1 / s_u) * sig_u
        return J, r

    def unpack(self, eta):
        p = self.p
        nt = len(self.tril[0])
        XtX = np.zeros(eta.shape[:-1] + (p, p))
        XtX[..., self.tril[0], self.tril[1]] = eta[..., :nt]
        XtX = XtX + np.swapaxes(XtX, -1, -2) - XtX * np.eye(p)
        return XtX, eta[..., nt: nt + p], eta[..., -1]

    def pack(self, XtX, Xty, yty):
        return np.r_[XtX[self.tril], Xty, yty]


def eta_posterior(stats, tp, tg, kappa, tau, burn, prior_prec=None, infl=False):
    """Gaussian posterior of eta from the trace after burn-in. tau: (d,) noise sd of g."""
    phi = tp[burn:-1]
    g = tg[burn:]
    J, r = stats.design(phi)
    y = g / kappa - r
    w = (kappa / tau) ** 2  # precision of y
    P = np.einsum("tdi,d,tdj->ij", J, w, J)
    h = np.einsum("tdi,d,td->i", J, w, y)
    if prior_prec is not None:
        P = P + prior_prec
    cov = np.linalg.inv(P)
    mean = cov @ h
    if infl:
        res = y - J @ mean
        ratio = (res**2).mean(0) * w
        return mean, cov, ratio
    return mean, cov


def nig_posterior_draws(stats, eta, n, rng):
    """Exact NIG posterior draws of (w, u) given statistics eta (one draw per eta row)."""
    XtX, Xty, yty = stats.unpack(eta)
    p = stats.p
    out = np.empty((len(eta), p + 1))
    ok = np.ones(len(eta), bool)
    for m in range(len(eta)):
        Vinv = XtX[m] + np.eye(p) / stats.s2
        try:
            L = np.linalg.cholesky(Vinv)
        except np.linalg.LinAlgError:
            ok[m] = False
            continue
        mn = np.linalg.solve(Vinv, Xty[m])
        an = stats.a + stats.N / 2
        bn = stats.b + 0.5 * (yty[m] - mn @ Vinv @ mn)
        if bn <= 0:
            ok[m] = False
            continue
        var = bn / rng.gamma(an)
        z = rng.standard_normal(p)
        w = mn + np.sqrt(var) * np.linalg.solve(L.T, z)
        out[m, :p] = w
        out[m, p] = var + np.log(-np.expm1(-var))  # softplus^-1
    return out, ok


def offdiag_prior(stats, diag, gamma):
    """Prior precision on eta: off-diagonal XtX_jk ~ N(0, gamma^2 D_j D_k); other entries flat."""
    I, K = stats.tril
    prec = np.zeros(stats.n_eta)
    for c, (i, k) in enumerate(zip(I, K)):
        if i != k:
            prec[c] = 1.0 / (gamma**2 * diag[i] * diag[k]) if gamma > 0 else 1e30
    return np.diag(prec)


def prior_predictive_logw(stats, eta):
    """log p(eta) up to a constant under the NIG prior, flat on XtX (rows of eta)."""
    XtX, Xty, yty = stats.unpack(eta)
    p, N = stats.p, stats.N
    k = N - p
    out = np.full(len(eta), -np.inf)
    for m in range(len(eta)):
        try:
            L = np.linalg.cholesky(XtX[m])
        except np.linalg.LinAlgError:
            continue
        what = np.linalg.solve(XtX[m], Xty[m])
        rss = yty[m] - Xty[m] @ what
        if rss <= 0:
            continue
        Minv_inv = np.linalg.inv(stats.s2 * np.eye(p) + np.linalg.inv(XtX[m]))
        Qw = what @ Minv_inv @ what
        logdetM = -np.linalg.slogdet(Minv_inv)[1]
        A = stats.a + (p + k) / 2
        B = stats.b + (Qw + rss) / 2
        logdetXtX = 2 * np.log(np.diag(L)).sum()
        out[m] = -0.5 * logdetM + (k / 2 - 1) * np.log(rss) - A * np.log(B) - logdetXtX
    return out


def weighted_nig_draws(stats, mean, cov, M, rng, n_prop=20):
    Lc = np.linalg.cholesky(cov + 1e-12 * np.eye(len(cov)) * np.diag(cov).max())
    etas = mean + rng.standard_normal((n_prop * M, len(mean))) @ Lc.T
    lw = prior_predictive_logw(stats, etas)
    w = np.exp(lw - lw.max()); w /= w.sum()
    ess = 1.0 / (w**2).sum()
    idx = rng.choice(len(etas), size=M, p=w)
    draws, ok = nig_posterior_draws(stats, etas[idx], M, rng)
    return draws[ok], ess
