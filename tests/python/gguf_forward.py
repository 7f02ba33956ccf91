"""An independent float64 numpy forward pass of dense GGUF models (llama.cpp names and
conventions: llama's permuted q/k with interleaved rope and rope_freqs, qwen2/qwen3 rotate-half),
with weights decoded by llama.cpp's own `gguf` package. It shows what tessera must compute from
a GGUF file whatever its tensor types, separately from how lossy those types are."""
import numpy as np
import gguf
from gguf import quants


def load(path):
    r = gguf.GGUFReader(str(path))
    meta = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.")}
    W = {}
    for t in r.tensors:
        a = quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        W[t.name] = a.reshape([int(x) for x in reversed(t.shape)])
    return meta, W


def forward(path, ids):
    meta, W = load(path)
    arch = meta["general.architecture"]
    g = lambda k, d=None: meta.get(f"{arch}.{k}", d)
    H, L, nh = g("embedding_length"), g("block_count"), g("attention.head_count")
    nkv = g("attention.head_count_kv", nh)
    hd = g("attention.key_length", H // nh)
    rot = g("rope.dimension_count", hd)
    eps, theta = g("attention.layer_norm_rms_epsilon"), g("rope.freq_base", 10000.0)
    T = len(ids)
    inv = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
    if "rope_freqs.weight" in W:
        inv = inv / W["rope_freqs.weight"]
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]  # [T, rot/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):  # x: [T, n, hd]
        x = x.copy()
        if arch == "llama":  # interleaved pairs (2i, 2i+1)
            a, b = x[..., 0:rot:2].copy(), x[..., 1:rot:2].copy()
            x[..., 0:rot:2], x[..., 1:rot:2] = a * cos - b * sin, b * cos + a * sin
        else:  # rotate-half pairs (i, i + rot/2)
            a, b = x[..., : rot // 2].copy(), x[..., rot // 2 : rot].copy()
            x[..., : rot // 2], x[..., rot // 2 : rot] = a * cos - b * sin, b * cos + a * sin
        return x

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w

    def lin(x, name):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    x = W["token_embd.weight"][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(L):
        p = f"blk.{l}."
        h = rms(x, W[p + "attn_norm.weight"])
        q = lin(h, p + "attn_q").reshape(T, nh, hd)
        k = lin(h, p + "attn_k").reshape(T, nkv, hd)
        v = lin(h, p + "attn_v").reshape(T, nkv, hd)
        if p + "attn_q_norm.weight" in W:
            q, k = rms(q, W[p + "attn_q_norm.weight"]), rms(k, W[p + "attn_k_norm.weight"])
        q, k = rope(q), rope(k)
        o = np.zeros((T, nh, hd))
        for hh in range(nh):
            kv = hh // (nh // nkv)
            s = q[:, hh] @ k[:, kv].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(1, keepdims=True))
            o[:, hh] = (s / s.sum(1, keepdims=True)) @ v[:, kv]
        x = x + lin(o.reshape(T, nh * hd), p + "attn_output")
        h = rms(x, W[p + "ffn_norm.weight"])
        gt, up = lin(h, p + "ffn_gate"), lin(h, p + "ffn_up")
        x = x + lin(gt / (1 + np.exp(-gt)) * up, p + "ffn_down")
    out = W.get("output.weight", W["token_embd.weight"])
    return rms(x, W["output_norm.weight"]) @ out.T
