"""Research engine: batched DP-SGD with phases (per-phase lr and beta vectors), full traces."""
import math
import numpy as np
import torch
from torch.func import vmap
from torch.nn.utils.rnn import pad_sequence

from skdpvi.dpvi import per_example_gradients, clip_and_sum
from skdpvi.dpvi.sampling import _draw_block
from skdpvi.dpvi.data import _Data


def _prepare_data(model, data, real, device):
    """The model's prepared per-example tensors of one data set (all rows, ``real``)."""
    return tuple(a.to(real) for a in _Data(model, data, torch.device(device),
                                            prepare=True).columns)


def _padded(batches_per_run, device="cpu"):
    padded = [pad_sequence(b, batch_first=True) for b in batches_per_run]
    width = max(max(p.shape[1] for p in padded), 1)
    nb = len(batches_per_run[0])
    index = torch.zeros((nb, len(padded), width), dtype=torch.int64)
    for r, p in enumerate(padded):
        index[:, r, : p.shape[1]] = p
    sizes = torch.tensor([[len(b) for b in bs] for bs in batches_per_run]).T
    mask = torch.arange(width) < sizes[..., None]
    return index, mask


def group_clip_and_sum(pe, clips, n_w, weights):
    gm, gr = pe
    nw = torch.linalg.vector_norm(gm[:, :n_w], dim=1)
    nu = torch.sqrt(gm[:, n_w] ** 2 + gr[:, n_w] ** 2)
    nr = torch.linalg.vector_norm(gr[:, :n_w], dim=1)
    fw = torch.clamp(clips[0] / (nw + 1e-12), max=1.0) * weights
    fu = torch.clamp(clips[1] / (nu + 1e-12), max=1.0) * weights
    fr = torch.clamp(clips[2] / (nr + 1e-12), max=1.0) * weights
    out = torch.cat([fw @ gm[:, :n_w], fu @ gm[:, n_w:], fr @ gr[:, :n_w], fu @ gr[:, n_w:]]).to(torch.float64)
    clipped = (nw > clips[0]) | (nu > clips[1]) | (nr > clips[2])
    return out, clipped


def run_phases(model, datasets, seeds, *, sigma, clip, q, phases, phi0, n_mc=10,
               adapt=None, group_clips=None):
    """phases: list of (n_steps, lr (d,), beta (d,)). phi0: (d,) or (R, d).

    adapt: optional callable(phase_index, trace_phi_so_far (t+1,R,d), trace_g (t,R,d)) ->
    (lr (R,d) or (d,), beta (R,d) or (d,)) overriding the next phase's (per run).
    Returns trace_phi (T+1, R, d), trace_g (T, R, d), clipped fraction per phase (R,)."""
    real = torch.float32
    prepared = [_prepare_data(model, data, real, "cpu") for data in datasets]
    tensors = tuple(torch.stack(parts) for parts in zip(*prepared))
    R, N = tensors[0].shape[:2]
    n = model.n_params
    d = 2 * n
    phi = torch.as_tensor(np.broadcast_to(phi0, (R, d)).copy(), dtype=torch.float64)
    gens = []
    for s in seeds:
        g = torch.Generator(); g.manual_seed(int(s)); gens.append(g)
    noise_std = sigma * clip

    def one_run(phi_r, eps_r, mask_r, beta_r, *batch_r):
        pe = per_example_gradients(model, phi_r, eps_r, batch_r, N, beta_r)
        if group_clips is not None:
            return group_clip_and_sum(pe, group_clips, model.n_weights, mask_r)
        return clip_and_sum(pe, clip, weights=mask_r)

    step = vmap(one_run)
    offsets = torch.arange(R)[:, None] * N
    flat = tuple(a.reshape(R * N, *a.shape[2:]) for a in tensors)

    def gather(src, index):
        rows = index.shape[1]
        return src.index_select(0, index.reshape(-1)).reshape(R, rows, *src.shape[1:])

    T = sum(p[0] for p in phases)
    tp = np.empty((T + 1, R, d)); tg = np.empty((T, R, d))
    clipped = []
    t = 0
    for k, (n_steps, lr, beta) in enumerate(phases):
        if adapt is not None and k > 0:
            lr, beta = adapt(k, tp[: t + 1], tg[:t])
        lr_t = torch.as_tensor(np.broadcast_to(lr, (R, d)).copy(), dtype=torch.float64)
        beta_t = torch.as_tensor(np.broadcast_to(beta, (R, d)).copy(), dtype=torch.float64)
        beta_r = beta_t.to(real)
        nclip = torch.zeros(R, dtype=torch.float64); nseen = torch.zeros(R, dtype=torch.float64)
        block = 512
        for start in range(0, n_steps, block):
            stop = min(start + block, n_steps)
            draws = [_draw_block(g, stop - start, n_mc, n, N, q, "cpu") for g in gens]
            eps_b = torch.stack([e for e, _, _ in draws], 1)
            noise_b = torch.stack([z for _, _, z in draws], 1)
            idx_b, mask_b = _padded([b for _, b, _ in draws])
            w_b = mask_b.to(real)
            for j in range(stop - start):
                tp[t] = phi.numpy()
                index = idx_b[j] + offsets
                batch = tuple(gather(a, index) for a in flat)
                csum, norms = step(phi, eps_b[j], w_b[j], beta_r, *batch)
                g = (csum + noise_std * noise_b[j]) / beta_t
                if group_clips is not None:
                    nclip += (norms & mask_b[j]).sum(1)
                else:
                    nclip += ((norms > clip) & mask_b[j]).sum(1)
                nseen += mask_b[j].sum(1)
                tg[t] = g.numpy()
                phi = phi - lr_t * g
                t += 1
        clipped.append((nclip / nseen.clamp(min=1)).numpy())
    tp[T] = phi.numpy()
    return tp, tg, clipped
