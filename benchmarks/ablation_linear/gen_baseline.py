import sys, numpy as np, torch, time
torch.set_num_threads(1)
from common import *
eps = float(sys.argv[1]); K = int(sys.argv[2]); tag = sys.argv[3] if len(sys.argv) > 3 else "base"
seeds = list(range(1000, 1000 + K))
S = sims(seeds)
sigma, lam, beta = settings(eps)
phi0 = np.r_[MODEL.init_mean(), np.full(12, np.log(np.expm1(0.01)))]
t = time.time()
tps, tgs, cls = [], [], []
for i in range(0, K, 32):
    tp, tg, cl = run_phases(MODEL, [(X, y) for X, y, _ in S[i:i+32]], seeds[i:i+32], sigma=sigma, clip=CLIP, q=Q,
                            phases=[(T, lam * beta, beta)], phi0=phi0)
    tps.append(tp); tgs.append(tg); cls.append(cl[0])
np.savez(f"out/{tag}_eps{eps}.npz", tp=np.concatenate(tps, 1), tg=np.concatenate(tgs, 1), clipped=np.concatenate(cls),
         theta=np.array([th for _, _, th in S]), sigma=sigma, lam=lam, beta=beta,
         X2=np.array([(X**2).mean(0) for X, _, _ in S]))
print(eps, time.time() - t)
