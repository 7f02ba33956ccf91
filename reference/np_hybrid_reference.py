#!/usr/bin/env python3
"""A float64 numpy forward pass of the hybrid models (Qwen3.5 / Qwen3.5-MoE / Qwen3-Next) over a
saved checkpoint directory, written from the formulas (see /work/shared/REFERENCE.md), not from
transformers' code: RMSNorm with (1 + w), the Gated DeltaNet in its plain recurrent form (one
token at a time, where transformers' prefill runs the chunked form), gated attention with partial
NeoX rope, top-k MoE with a sigmoid-gated shared expert. No torch: numpy only (bf16 safetensors
are read by hand).

    python3 reference/np_hybrid_reference.py tests/fixtures/qwen35moe_tiny [...]
checks a fixture directory: logits of prompts a and b against logits_*.bin, and greedy tokens.
An mlx-lm 4-bit directory (config.json with "quantization") is dequantized here first.
"""
import json
import os
import struct
import sys

import numpy as np

_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "bf16", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U32": "<u4",
           "U8": "u1", "I8": "i1"}


def load_safetensors(path):
    """{name: float64 array} (uint32 / int tensors stay integer)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        raw = data[a:b]
        dt = _DTYPES[v["dtype"]]
        if dt == "bf16":
            arr = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            arr = np.frombuffer(raw, dt)
            if arr.dtype.kind == "f":
                arr = arr.astype(np.float64)
        out[k] = arr.reshape(v["shape"])
    return out


def dequantize_mlx(w, scales, biases, bits, group):
    """MLX affine: element e of a row sits at bits (bits*e) % 32 of uint32 word (bits*e) // 32;
    value = scale * q + bias per group of `group` elements along the row."""
    per = 32 // bits
    q = (w[..., :, None] >> (np.arange(per, dtype=np.uint32) * bits)) & ((1 << bits) - 1)
    q = q.reshape(*w.shape[:-1], w.shape[-1] * per).astype(np.float64)
    g = q.reshape(*q.shape[:-1], -1, group)
    return (g * scales[..., None] + biases[..., None]).reshape(q.shape)


def load_mlx(model_dir, cfg):
    """An mlx-lm 4-bit checkpoint as float64 tensors under transformers' names: dequantized,
    switch_mlp back to fused experts, conv1d [C, K, 1] -> [C, 1, K], and the 1 that mlx-lm folds
    into the (1 + w) norms taken out again."""
    w = load_safetensors(os.path.join(model_dir, "model.safetensors"))
    q = cfg["quantization"]
    out = {}
    for k in list(w):
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        base = k[:-len(".weight")] if k.endswith(".weight") else k
        v = w[k]
        if base + ".scales" in w:
            qp = q[base] if isinstance(q.get(base), dict) else q    # per-module override (8-bit routers)
            v = dequantize_mlx(v, w[base + ".scales"], w[base + ".biases"], qp["bits"], qp["group_size"])
        name = k.replace("language_model.model.", "model.language_model.").replace("language_model.lm_head", "lm_head")
        if name.endswith("conv1d.weight"):
            v = v.transpose(0, 2, 1)
        if name.endswith(("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight",
                          "k_norm.weight")) or name in ("model.norm.weight", "model.language_model.norm.weight"):
            v = v - 1.0
        out[name] = v
    for k in [k for k in out if k.endswith("switch_mlp.gate_proj.weight")]:
        p = k[:-len("switch_mlp.gate_proj.weight")]
        out[p + "experts.gate_up_proj"] = np.concatenate([out.pop(k), out.pop(p + "switch_mlp.up_proj.weight")], 1)
        out[p + "experts.down_proj"] = out.pop(p + "switch_mlp.down_proj.weight")
    return out


def rms(x, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def l2norm(x, eps=1e-6):
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + eps)


class Hybrid:
    def __init__(self, model_dir):
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        self.cfg = c = cfg.get("text_config", cfg)
        self.tied = self.tied or bool(c.get("tie_word_embeddings", False))
        self.w = (load_mlx(model_dir, cfg) if "quantization" in cfg
                  else load_safetensors(os.path.join(model_dir, "model.safetensors")))
        self.prefix = "model.language_model." if any(k.startswith("model.language_model.") for k in self.w) else "model."
        self.next_layout = any("in_proj_qkvz" in k for k in self.w)   # Qwen3-Next's interleaved projections
        self.eps = c["rms_norm_eps"]
        n = c["num_hidden_layers"]
        interval = c.get("full_attention_interval", 4)
        self.layer_types = c.get("layer_types") or [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]

    def W(self, name):
        return self.w[self.prefix + name]

    def norm1p(self, x, name):  # zero-centred RMSNorm
        return rms(x, self.eps) * (1.0 + self.W(name))

    # ---- Gated DeltaNet, recurrent form --------------------------------------------------------
    def gdn(self, x, p):
        c = self.cfg
        T = x.shape[0]
        nk, nv, dk, dv, K = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                             c["linear_value_head_dim"], c["linear_conv_kernel_dim"])
        r = nv // nk
        if self.next_layout:
            qkvz = (x @ self.W(p + "in_proj_qkvz.weight").T).reshape(T, nk, 2 * dk + 2 * r * dv)
            q, k = qkvz[..., :dk], qkvz[..., dk:2 * dk]
            v = qkvz[..., 2 * dk:2 * dk + r * dv].reshape(T, nv * dv)
            z = qkvz[..., 2 * dk + r * dv:].reshape(T, nv, dv)
            ba = (x @ self.W(p + "in_proj_ba.weight").T).reshape(T, nk, 2 * r)
            b, a = ba[..., :r].reshape(T, nv), ba[..., r:].reshape(T, nv)
            mixed = np.concatenate([q.reshape(T, -1), k.reshape(T, -1), v], -1)
        else:
            mixed = x @ self.W(p + "in_proj_qkv.weight").T
            z = (x @ self.W(p + "in_proj_z.weight").T).reshape(T, nv, dv)
            b = x @ self.W(p + "in_proj_b.weight").T
            a = x @ self.W(p + "in_proj_a.weight").T
        cw = self.W(p + "conv1d.weight").reshape(mixed.shape[1], K)     # [C, K]
        padded = np.concatenate([np.zeros((K - 1, mixed.shape[1])), mixed], 0)
        conv = silu(sum(cw[:, i] * padded[i:i + T] for i in range(K)))
        q = l2norm(conv[:, :nk * dk].reshape(T, nk, dk)) / np.sqrt(dk)
        k = l2norm(conv[:, nk * dk:2 * nk * dk].reshape(T, nk, dk))
        v = conv[:, 2 * nk * dk:].reshape(T, nv, dv)
        beta = sigmoid(b)
        g = -np.exp(self.W(p + "A_log")) * softplus(a + self.W(p + "dt_bias"))
        o = np.zeros((T, nv, dv))
        for h in range(nv):
            kh = h // r
            S = np.zeros((dk, dv))
            for t in range(T):
                S *= np.exp(g[t, h])
                u = S.T @ k[t, kh]
                S += np.outer(k[t, kh], beta[t, h] * (v[t, h] - u))
                o[t, h] = S.T @ q[t, kh]
        o = rms(o, self.eps) * self.W(p + "norm.weight") * silu(z)       # plain w
        return o.reshape(T, nv * dv) @ self.W(p + "out_proj.weight").T

    # ---- gated attention -----------------------------------------------------------------------
    def attention(self, x, p):
        c = self.cfg
        T = x.shape[0]
        nh, nkv, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        qg = (x @ self.W(p + "q_proj.weight").T).reshape(T, nh, 2 * D)
        q, gate = qg[..., :D], qg[..., D:].reshape(T, nh * D)
        k = (x @ self.W(p + "k_proj.weight").T).reshape(T, nkv, D)
        v = (x @ self.W(p + "v_proj.weight").T).reshape(T, nkv, D)
        q = self.norm1p(q, p + "q_norm.weight")
        k = self.norm1p(k, p + "k_norm.weight")
        rp = c.get("rope_parameters") or {}
        theta = rp.get("rope_theta", c.get("rope_theta", 10000.0))
        partial = rp.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0))
        rot = int(D * partial)
        inv = theta ** (-np.arange(0, rot, 2, dtype=np.float64) / rot)
        ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

        def rope(t):
            h = rot // 2
            x1, x2 = t[..., :h], t[..., h:rot]
            return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, t[..., rot:]], -1)

        q, k = rope(q), rope(k)
        out = np.zeros((T, nh, D))
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for h in range(nh):
            kv = h // (nh // nkv)
            s = q[:, h] @ k[:, kv].T / np.sqrt(D) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            out[:, h] = (s / s.sum(-1, keepdims=True)) @ v[:, kv]
        return (out.reshape(T, nh * D) * sigmoid(gate)) @ self.W(p + "o_proj.weight").T

    # ---- FFN -----------------------------------------------------------------------------------
    def swiglu(self, x, gate_w, up_w, down_w):
        return (silu(x @ gate_w.T) * (x @ up_w.T)) @ down_w.T

    def ffn(self, x, p):
        if self.prefix + p + "gate.weight" not in self.w:     # dense
            return self.swiglu(x, self.W(p + "gate_proj.weight"), self.W(p + "up_proj.weight"),
                               self.W(p + "down_proj.weight"))
        c = self.cfg
        E, k = c["num_experts"], c["num_experts_per_tok"]
        logits = x @ self.W(p + "gate.weight").T
        prob = np.exp(logits - logits.max(-1, keepdims=True))
        prob /= prob.sum(-1, keepdims=True)
        if self.prefix + p + "experts.gate_up_proj" in self.w:
            gu, dn = self.W(p + "experts.gate_up_proj"), self.W(p + "experts.down_proj")
            I = gu.shape[1] // 2
            experts = [(gu[e, :I], gu[e, I:], dn[e]) for e in range(E)]
        else:
            experts = [tuple(self.W(f"{p}experts.{e}.{n}_proj.weight") for n in ("gate", "up", "down"))
                       for e in range(E)]
        out = np.zeros_like(x)
        for t in range(x.shape[0]):
            top = np.argsort(-prob[t], kind="stable")[:k]
            wts = prob[t, top]
            if c.get("norm_topk_prob", True):
                wts = wts / wts.sum()
            for e, wt in zip(top, wts):
                out[t] += wt * self.swiglu(x[t:t + 1], *experts[e])[0]
        shared = self.swiglu(x, self.W(p + "shared_expert.gate_proj.weight"), self.W(p + "shared_expert.up_proj.weight"),
                             self.W(p + "shared_expert.down_proj.weight"))
        return out + sigmoid(x @ self.W(p + "shared_expert_gate.weight").T) * shared

    def forward(self, ids):
        x = self.W("embed_tokens.weight")[np.asarray(ids)]
        for i, lt in enumerate(self.layer_types):
            p = f"layers.{i}."
            h = self.norm1p(x, p + "input_layernorm.weight")
            x = x + (self.gdn(h, p + "linear_attn.") if lt == "linear_attention" else self.attention(h, p + "self_attn."))
            x = x + self.ffn(self.norm1p(x, p + "post_attention_layernorm.weight"), p + "mlp.")
        x = self.norm1p(x, "norm.weight")
        head = self.W("embed_tokens.weight") if self.tied else self.w["lm_head.weight"]
        return x @ head.T


TOLERANCE = 2e-3


def np_hybrid_forward(model_dir, ids):
    return Hybrid(model_dir).forward(ids)


def check(d):
    ref = json.load(open(os.path.join(d, "reference.json")))
    m = Hybrid(d)
    worst = 0.0
    for tag in ("a", "b"):
        pr = ref["prompts"][tag]
        want = np.fromfile(os.path.join(d, pr["logits"]["file"]), "<f4").reshape(pr["logits"]["shape"])
        got = m.forward(pr["ids"])
        worst = max(worst, float(np.abs(got - want).max()))
    g = ref["greedy"]
    n = len(g["prompt_ids"])
    # Causal, so the teacher-forced argmax at each step is what greedy decoding picks.
    ok_greedy = m.forward(g["prompt_ids"] + g["new_ids"])[n - 1:-1].argmax(-1).tolist() == g["new_ids"]
    # fp32 rounding is amplified layer by layer (the GDN's output RMSNorm over small per-head
    # vectors): transformers' fp32 logits sit about 1e-4 .. 5e-4 from this float64 pass.
    ok = worst < TOLERANCE and ok_greedy
    print(f"{d}: max |logit diff| {worst:.2e}, greedy {'equal' if ok_greedy else 'DIFFERS'}: {'ok' if ok else 'FAIL'}")
    return ok


if __name__ == "__main__":
    dirs = sys.argv[1:]
    if not dirs:
        sys.exit(__doc__)
    sys.exit(0 if all([check(d) for d in dirs]) else 1)
