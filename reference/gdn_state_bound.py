#!/usr/bin/env python3
"""A numpy study for the chunked GDN state pass (issue 9; docs/cuda-rounds.md, "Not yet, as of session 44"): how loose a
one-chunk bound on max|S| and max|Vn| is, from chunk-level scalars of the prep and the previous
chunk's exact max|S| (which the pass could reduce off its critical chain, while W·S runs).

The F16x3 passes split S and Vn under one power of two each, chosen from block-wide maxima — two
reductions and barriers on the chain of every chunk. With the bounds
    max|Vn_c| ≤ max|U_c| + (max_i Σ_j |W_c[i, j]|) · max|S_c|
    max|S_{c+1}| ≤ e^{Γlast} · max|S_c| + (max_r Σ_t |K̃_c[t, r]|) · bound(Vn_c)
the splits keep 22 bits relative to the bound, so log2(bound / actual) bits are lost. Random
l2-normalised q, k (dk = dv = 128), sigmoid β, softplus decays at three scales, 64 chunks of 64:

    python3 reference/gdn_state_bound.py
"""
import numpy as np


def l2n(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def study(decay_scale, dk=128, dv=128, chunk=64, chunks=64, seed=0):
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((dk, dv)) * 0.1
    ratio_s, ratio_v = [], []
    for _ in range(chunks):
        k, v = l2n(rng.standard_normal((chunk, dk))), rng.standard_normal((chunk, dv))
        beta = 1 / (1 + np.exp(-rng.standard_normal(chunk)))
        G = np.cumsum(-decay_scale * np.log1p(np.exp(rng.standard_normal(chunk))))  # Γ: cumulative log decay
        A = np.tril(beta[:, None] * (k @ k.T) * np.exp(G[:, None] - G[None, :]), -1)
        T = np.linalg.inv(np.eye(chunk) + A)
        W = T @ (beta[:, None] * np.exp(G)[:, None] * k)  # [chunk, dk]
        U = T @ (beta[:, None] * v)  # [chunk, dv]
        Kt = k * np.exp(G[-1] - G)[:, None]  # K̃
        m = np.abs(S).max()
        Vn = U - W @ S
        S_next = np.exp(G[-1]) * S + Kt.T @ Vn
        v_bound = np.abs(U).max() + np.abs(W).sum(axis=1).max() * m
        s_bound = np.exp(G[-1]) * m + np.abs(Kt).sum(axis=0).max() * v_bound
        ratio_v.append(v_bound / np.abs(Vn).max())
        ratio_s.append(s_bound / np.abs(S_next).max())
        S = S_next
    return np.array(ratio_s), np.array(ratio_v)


def main():
    print("| decay scale | S: bound / actual, median | max (bits lost) | Vn: median | max (bits lost) |")
    print("|---:|---:|---:|---:|---:|")
    for scale in (0.02, 0.2, 1.0):
        rs, rv = study(scale)
        print(f"| {scale} | {np.median(rs):.1f} | {rs.max():.1f} ({np.log2(rs.max()):.1f}) | {np.median(rv):.1f} | "
              f"{rv.max():.1f} ({np.log2(rv.max()):.1f}) |")


if __name__ == "__main__":
    main()
