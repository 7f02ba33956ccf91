"""An independent float64 numpy forward pass of the dense llama-family models (Llama, Qwen2,
Qwen3) straight from config.json + model.safetensors: the formulas spelled out, no torch.
make_fixtures.py cross-checks transformers with it; check_fixtures.py checks the committed
fixtures with it.
"""
import json
import math
import os

import numpy as np


def np_rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def np_inv_freq(cfg, head_dim):
    rp = cfg.get("rope_parameters") or dict(cfg.get("rope_scaling") or {}, rope_theta=cfg.get("rope_theta"))
    theta = rp.get("rope_theta") or cfg.get("rope_theta") or 10000.0
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    kind = rp.get("rope_type", rp.get("type", "default"))
    if kind == "llama3":
        factor, lo, hi = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
        old = rp["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        inv = np.where(medium, smoothed, scaled)
    else:
        assert kind == "default", f"numpy reference knows no rope_type {kind}"
    return inv


def np_forward(model_dir, ids):
    from safetensors.numpy import load_file
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    W = {k: v.astype(np.float64) for k, v in load_file(os.path.join(model_dir, "model.safetensors")).items()}
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    eps, T = cfg["rms_norm_eps"], len(ids)
    inv = np_inv_freq(cfg, hd)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]          # [T, hd/2]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(x):                                                            # x: [T, n, hd]
        rot = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos[:, None, :] + rot * sin[:, None, :]

    def lin(x, name):
        y = x @ W[name + ".weight"].T
        return y + W[name + ".bias"] if name + ".bias" in W else y

    x = W["model.embed_tokens.weight"][ids]                                 # [T, H]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = np_rms(x, W[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj").reshape(T, nh, hd)
        k = lin(h, p + "self_attn.k_proj").reshape(T, nkv, hd)
        v = lin(h, p + "self_attn.v_proj").reshape(T, nkv, hd)
        if p + "self_attn.q_norm.weight" in W:
            q = np_rms(q, W[p + "self_attn.q_norm.weight"], eps)
            k = np_rms(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q), rope(k)
        out = np.empty((T, nh, hd))
        for head in range(nh):
            g = head // (nh // nkv)
            s = q[:, head] @ k[:, g].T / math.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            out[:, head] = (s / s.sum(-1, keepdims=True)) @ v[:, g]
        x = x + lin(out.reshape(T, nh * hd), p + "self_attn.o_proj")
        h = np_rms(x, W[p + "post_attention_layernorm.weight"], eps)
        gate, up = lin(h, p + "mlp.gate_proj"), lin(h, p + "mlp.up_proj")
        x = x + lin(gate / (1 + np.exp(-gate)) * up, p + "mlp.down_proj")
    x = np_rms(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return x @ head.T
