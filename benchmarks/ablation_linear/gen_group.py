import sys, numpy as np, torch, time
torch.set_num_threads(1)
from common import *
eps = float(sys.argv[1]); K = int(sys.argv[2]); tag = sys.argv[3]; capk = float(sys.argv[4])
seeds = list(range(1000, 1000 + K))
S = sims(seeds)
sigma, lam, beta = settings(eps)
cap = CLIP * N / (capk * np.sqrt(12))
beta[12:] = np.minimum(beta[12:], cap)
phi0 = np.r_[MODEL.init_mean(), np.full(12, np.log(np.expm1(0.01)))]
clip = CLIP; sig2 = sigma
shares = [float(x) for x in sys.argv[5].split(',')]
gc = [CLIP * s_ for s_ in shares]
print('group clips', gc, 'total', np.sqrt(sum(c*c for c in gc)))
t = time.time()
tps, tgs, cls = [], [], []
for i in range(0, K, 32):
    tp, tg, cl = run_phases(MODEL, [(X, y) for X, y, _ in S[i:i+32]], seeds[i:i+32], sigma=sig2, clip=clip, q=Q,
                            phases=[(2000, lam * beta, beta), (T - 2000, lam * beta, beta)], phi0=phi0, group_clips=gc)
    tps.append(tp); tgs.append(tg); cls.append(np.array(cl).T)
np.savez(f"out/{tag}_eps{eps}.npz", tp=np.concatenate(tps, 1), tg=np.concatenate(tgs, 1), clipped=np.concatenate(cls),
         theta=np.array([th for _, _, th in S]), sigma=sigma, lam=lam, beta=beta)
print(eps, time.time() - t, beta[-1], np.concatenate(cls).mean(0))
