#!/usr/bin/env python3
"""Makes the tiny random hybrid (Gated DeltaNet + gated attention) reference models in
tests/fixtures/<name>/ with Hugging Face transformers' own classes, and records their fp32
outputs for tessera to match: Qwen3.5-MoE, dense Qwen3.5 and Qwen3-Next.

Run on the GPU machine (torch + transformers are there; see tests/fixtures/README.md):
    python3 reference/make_hybrid_fixtures.py --out tests/fixtures [--only qwen35moe_tiny,...]

Same conventions as reference/make_fixtures.py (reference.json, logits_a.bin, logits_b.bin,
intermediates_a.bin), with these differences:
  - prompt a is 150 tokens long, so the chunked GDN prefill (chunk 64) crosses two chunk
    boundaries; prompt b is 23 tokens; the greedy prompt 12 tokens + 16 new.
  - the checkpoint is stored in bf16 (as the real Qwen3.5 / Qwen3-Next checkpoints are); every
    value was rounded to bf16 before the fp32 reference run, so nothing is lost.
  - Qwen3.5 models are saved as the multimodal ...ForConditionalGeneration class with a tiny
    vision tower, like the real checkpoints: `model.language_model.*`, `model.visual.*`,
    `lm_head.weight`, and a config.json with a nested `text_config`. Text-only logits.
  - qwen35moe_tiny carries one multi-token-prediction layer (`mtp.*`, the names the real
    checkpoints use; transformers ignores them, so they do not touch the logits).
Everything is seeded; every weight is perturbed, including the zero-centred (1 + w) RMSNorm
weights (w about 0.2 N(0,1) around 0, chosen so that 1 + w is bf16-exact too), the GDN output norm (plain w = 1 + 0.2 N(0,1)), A_log,
dt_bias, conv1d, router and shared-expert gate.
"""
import argparse
import json
import math
import os
import platform
import re
import sys

import numpy as np
import torch
import transformers
from make_fixtures import eager_model, greedy, logits_of, top2_margin, write_f32
from safetensors.torch import load_file, save_file
from transformers import GenerationConfig

SEED = 4321
N_PROMPT_A, N_PROMPT_B, N_GREEDY_PROMPT = 150, 23, 12
N_GREEDY_CANDIDATES = 8
NO_SPECIAL_TOKENS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)

# Shared by all three: head_dim 32 with partial rotary 0.25 (8 rotary dims, NeoX halves of 4),
# GDN key/value head dim 32, conv kernel 4, the full-attention interval 4 (layers 3, 7 attend).
# Every matrix's input width is a multiple of 64, so MLX affine 4-bit (group 64) applies to all.
COMMON = dict(vocab_size=1000, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
              linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
              max_position_embeddings=4096, rms_norm_eps=1e-6, hidden_act="silu", **NO_SPECIAL_TOKENS)
# Qwen3.5's multimodal rope: sections of the 4 rotary frequencies (t, h, w); for text all three
# positions are equal, so it is plain 1-D NeoX rope on the first 8 dims of each head.
QWEN35_ROPE = {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
               "mrope_section": [2, 1, 1], "mrope_interleaved": True}
TINY_VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=4,
                   temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=16)


def qwen35moe():
    from transformers import Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration
    text = dict(COMMON, num_hidden_layers=8, linear_num_key_heads=2, linear_num_value_heads=4,
                num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
                shared_expert_intermediate_size=64, rope_parameters=dict(QWEN35_ROPE),
                tie_word_embeddings=False)
    cfg = Qwen3_5MoeConfig(text_config=text, vision_config=dict(TINY_VISION, out_hidden_size=64),
                           tie_word_embeddings=False)
    return Qwen3_5MoeForConditionalGeneration, cfg


def qwen35():
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    # Dense SwiGLU, tied embeddings, 3 value heads per key head (r = 3).
    text = dict(COMMON, num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=6,
                intermediate_size=128, rope_parameters=dict(QWEN35_ROPE), tie_word_embeddings=True)
    cfg = Qwen3_5Config(text_config=text, vision_config=dict(TINY_VISION, out_hidden_size=64),
                        tie_word_embeddings=True)
    return Qwen3_5ForConditionalGeneration, cfg


def qwen3next():
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    cfg = Qwen3NextConfig(**COMMON, num_hidden_layers=4, linear_num_key_heads=2, linear_num_value_heads=4,
                          num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
                          shared_expert_intermediate_size=64, intermediate_size=128, norm_topk_prob=True,
                          decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                                           "partial_rotary_factor": 0.25})
    return Qwen3NextForCausalLM, cfg


MODELS = {"qwen35moe_tiny": qwen35moe, "qwen35_tiny": qwen35, "qwen3next_tiny": qwen3next}
MTP_LAYERS = {"qwen35moe_tiny": 1}
FUSED_EXPERTS = {"qwen35moe_tiny"}     # as the released Qwen3.5 / 3.6 MoE checkpoints store them
PER_EXPERT = {"qwen3next_tiny"}        # as the released Qwen3-Next checkpoints (and transformers' save)
# The released Qwen3-Next config.json (transformers 4.57 era) says rope_theta / partial_rotary_factor
# at the top, not rope_parameters; mlx-lm's qwen3_next reads only that form.
LEGACY_ROPE_CONFIG = {"qwen3next_tiny"}


def log(msg):
    print(f"make_hybrid_fixtures: {msg}", flush=True)


def text_config(config):
    return getattr(config, "text_config", None) or config


def text_model(model):
    """The decoder stack (embed_tokens, layers, norm) inside either class."""
    inner = model.model
    return getattr(inner, "language_model", inner)


def zero_centred(noise):
    """w = 0.2 N(0,1) around 0 such that both w and 1 + w are bf16-exact: converters that fold the
    1 in (GGUF, mlx-lm, both in bf16) then lose nothing either."""
    return (1.0 + 0.2 * noise).to(torch.bfloat16).float() - 1.0


def perturb_value(mod_cls, pname, shape, g, tied):
    n = lambda: torch.randn(shape, generator=g)
    if mod_cls.endswith("RMSNormGated"):      # GDN output norm: plain w
        return 1.0 + 0.2 * n()
    if mod_cls.endswith("RMSNorm"):           # zero-centred: the model multiplies by (1 + w)
        return zero_centred(n())
    if mod_cls in ("LayerNorm",):             # the vision tower's
        return (1.0 + 0.2 * n()) if pname == "weight" else 0.2 * n()
    if pname == "A_log":                      # decay rates A = exp(A_log) in [0.05, 4]
        lo, hi = math.log(0.05), math.log(4.0)
        return lo + (hi - lo) * torch.rand(shape, generator=g)
    if pname == "dt_bias":
        return 0.5 * n()
    if pname.endswith("bias"):
        return 0.2 * n()
    if mod_cls == "Conv1d":                   # depthwise [C, 1, K]: unit-variance outputs
        return n() / math.sqrt(shape[-1])
    if mod_cls == "Embedding":                # tied: also the lm_head, logits std about 3
        return (3.0 / math.sqrt(shape[1]) if tied else 0.25) * n()
    if pname == "lm_head.weight":
        return 3.0 * n() / math.sqrt(shape[-1])
    if len(shape) >= 2:                       # Linear [out, in], experts [E, out, in]
        return n() / math.sqrt(shape[-1])
    return 0.2 * n()


def perturb(model, seed, tied, prefix=""):
    """Replaces every parameter with seeded values by the kind of module it belongs to; bf16-exact."""
    g = torch.Generator().manual_seed(seed)
    owners = {}
    for mname, mod in model.named_modules():
        for pname, _ in mod.named_parameters(recurse=False):
            owners[f"{mname}.{pname}" if mname else pname] = (type(mod).__name__, pname)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            cls, pname = owners[name]
            v = perturb_value(cls, prefix + name if name == "lm_head.weight" else pname, p.shape, g, tied)
            p.copy_(v.to(torch.bfloat16).to(p.dtype))


def make_mtp(model, seed):
    """One MTP layer's tensors under the real checkpoints' names (mtp.fc, mtp.layers.0.*: a
    full-attention decoder layer with the same MoE, mtp.norm, mtp.pre_fc_norm_{hidden,embedding}),
    bf16. transformers does not run them (its loader ignores `mtp.*`)."""
    tcfg = text_config(model.config)
    layer_cls = type(text_model(model).layers[tcfg.layer_types.index("full_attention")])
    layer = layer_cls(tcfg, tcfg.layer_types.index("full_attention"))
    perturb(layer, seed, tied=False)
    H = tcfg.hidden_size
    g = torch.Generator().manual_seed(seed + 1)
    out = {}
    for k, v in layer.state_dict().items():
        if k == "mlp.experts.gate_up_proj":    # the MTP layer's experts are stored one by one
            inter = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"mtp.layers.0.mlp.experts.{e}.gate_proj.weight"] = v[e, :inter]
                out[f"mtp.layers.0.mlp.experts.{e}.up_proj.weight"] = v[e, inter:]
        elif k == "mlp.experts.down_proj":
            for e in range(v.shape[0]):
                out[f"mtp.layers.0.mlp.experts.{e}.down_proj.weight"] = v[e]
        else:
            out[f"mtp.layers.0.{k}"] = v
    out["mtp.fc.weight"] = torch.randn(H, 2 * H, generator=g) / math.sqrt(2 * H)
    for k in ("mtp.norm.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.pre_fc_norm_embedding.weight"):
        out[k] = zero_centred(torch.randn(H, generator=g))
    return {k: v.detach().to(torch.bfloat16).contiguous() for k, v in sorted(out.items())}


def fuse_experts(tensors):
    """transformers 5.17 saves Qwen3.5-MoE experts one by one (mlp.experts.{e}.gate_proj.weight, ...);
    the released Qwen3.5 / 3.6 checkpoints store them fused: mlp.experts.gate_up_proj [E, 2I, H]
    (gate rows first) and mlp.experts.down_proj [E, H, I]. Rewrites to the fused form (the MTP
    layer, added later, keeps per-expert names, as in the released checkpoints)."""
    pat = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
    groups = {}
    for k in list(tensors):
        m = pat.match(k)
        if m:
            groups.setdefault(m.group(1), {})[(int(m.group(2)), m.group(3))] = tensors.pop(k)
    for prefix, d in groups.items():
        E = 1 + max(e for e, _ in d)
        tensors[prefix + ".gate_up_proj"] = torch.stack(
            [torch.cat([d[(e, "gate_proj")], d[(e, "up_proj")]], 0) for e in range(E)]).contiguous()
        tensors[prefix + ".down_proj"] = torch.stack([d[(e, "down_proj")] for e in range(E)]).contiguous()
    return len(groups)


def fix_config_json(out, name):
    """What the real checkpoints' config.json also says (transformers drops it on save)."""
    path = os.path.join(out, "config.json")
    cfg = json.load(open(path))
    tc = cfg.get("text_config", cfg)
    tc["full_attention_interval"] = 4    # mlx-lm and llama.cpp read this rather than layer_types
    for sub in ("text_config", "vision_config"):   # the weights are bf16 (transformers wrote float32 here)
        if sub in cfg:
            cfg[sub]["dtype"] = "bfloat16"
    if name in LEGACY_ROPE_CONFIG:      # rope_theta + partial_rotary_factor + rope_scaling at the top
        rp = dict(tc.pop("rope_parameters"))
        tc["rope_theta"] = rp.pop("rope_theta")
        tc["partial_rotary_factor"] = rp.pop("partial_rotary_factor", tc.get("partial_rotary_factor", 1.0))
        assert rp.pop("rope_type", "default") == "default" and not rp, rp
        tc["rope_scaling"] = None
    if name in MTP_LAYERS:
        tc["mtp_num_hidden_layers"] = MTP_LAYERS[name]
        tc["mtp_use_dedicated_embeddings"] = False
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def as_rows(t):
    """Drops the batch dimension (batch 1, and every prompt here is longer than 1 token)."""
    a = t.detach().float().cpu().numpy()
    return a[0] if a.ndim >= 2 and a.shape[0] == 1 else a


def record_intermediates(model, ids, device):
    """Runs ids through the model with hooks; returns (logits, [(name, array)]).

    Layer 0 (GDN) and the first full-attention layer get every submodule; GDN internals that are
    functions, not modules, are caught by wrapping them: the causal conv (after SiLU) and the
    core output before the gated norm (the norm's input)."""
    inner = text_model(model)
    tcfg = text_config(model.config)
    T = len(ids)
    first_attn = tcfg.layer_types.index("full_attention")
    records, hooks = [], []

    def hook(name, reshape=None):
        def f(_module, _inputs, out):
            if isinstance(out, (tuple, list)):
                if name.endswith("mlp.gate"):   # router: (logits [T, E], top-k weights, top-k ids)
                    records.append((name, as_rows(out[0])))
                    records.append((name + ".top_k_weights", as_rows(out[1])))
                    records.append((name + ".top_k_index", as_rows(out[2]).astype(np.float32)))
                    return
                out = out[0]
            a = as_rows(out)
            records.append((name, a.reshape(reshape) if reshape else a))
        return f

    def pre_hook(name, reshape=None):
        def f(_module, inputs):
            a = as_rows(inputs[0])
            records.append((name, a.reshape(reshape) if reshape else a))
        return f

    hooks.append(inner.embed_tokens.register_forward_hook(hook("embed")))
    for li in (0, first_attn):
        layer = inner.layers[li]
        p = f"layer.{li}"
        for sub_name, sub in layer.named_modules():
            if not sub_name or sub_name.endswith(("act_fn", "rotary_emb", "dropout")):
                continue
            if sub_name == "linear_attn.conv1d":   # the module is never called (its weight is used)
                continue
            if sub_name == "linear_attn.norm":     # gated RMSNorm over [T*nv, dv]
                nv = tcfg.linear_num_value_heads
                hooks.append(sub.register_forward_pre_hook(pre_hook(f"{p}.linear_attn.core", (T, nv, -1))))
                hooks.append(sub.register_forward_hook(hook(f"{p}.{sub_name}", (T, -1))))
                continue
            hooks.append(sub.register_forward_hook(hook(f"{p}.{sub_name}")))
        if hasattr(layer, "self_attn"):
            hooks.append(layer.self_attn.o_proj.register_forward_pre_hook(pre_hook(f"{p}.self_attn.o_proj.input")))
        mlp = layer.mlp
        down = mlp.shared_expert.down_proj if hasattr(mlp, "shared_expert") else mlp.down_proj
        dname = "mlp.shared_expert.down_proj.input" if hasattr(mlp, "shared_expert") else "mlp.down_proj.input"
        hooks.append(down.register_forward_pre_hook(pre_hook(f"{p}.{dname}")))
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(hook(f"layer.{i}")))
    hooks.append(inner.norm.register_forward_hook(hook("norm")))

    # The causal conv of layer 0's GDN is a module-level function: wrap it while layer 0 runs.
    mod = sys.modules[type(inner.layers[0].linear_attn).__module__]
    orig_conv = mod.causal_conv1d_fn
    in_layer0 = [False]

    def conv_wrapper(*args, **kwargs):
        out = orig_conv(*args, **kwargs)
        if in_layer0[0]:
            records.append(("layer.0.linear_attn.conv1d", as_rows(out).T.copy()))   # [T, conv_dim], after SiLU
        return out

    gdn0 = inner.layers[0].linear_attn
    hooks.append(gdn0.register_forward_pre_hook(lambda *_: in_layer0.__setitem__(0, True)))
    hooks.append(gdn0.register_forward_hook(lambda *_: in_layer0.__setitem__(0, False)))
    mod.causal_conv1d_fn = conv_wrapper
    try:
        with torch.no_grad():
            logits = model(torch.tensor([ids], device=device)).logits[0].float().cpu().numpy()
    finally:
        mod.causal_conv1d_fn = orig_conv
        for h in hooks:
            h.remove()
    names = [n for n, _ in records]
    assert "layer.0.linear_attn.conv1d" in names, "conv wrapper did not fire (a kernel replaced causal_conv1d_fn?)"
    assert len(names) == len(set(names)), f"duplicate intermediate names: {names}"
    return logits, records


def make(name, out_root, device, seed):
    cls, config = MODELS[name]()
    tcfg = text_config(config)
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    torch.manual_seed(seed)
    model = eager_model(cls, config)
    tied = bool(tcfg.tie_word_embeddings)
    perturb(model, seed, tied)
    if tied:
        assert model.lm_head.weight.data_ptr() == text_model(model).embed_tokens.weight.data_ptr()
    model.generation_config = GenerationConfig(do_sample=False)

    rng = np.random.default_rng(seed)
    V = tcfg.vocab_size
    ids_a = rng.integers(0, V, N_PROMPT_A).tolist()
    ids_b = rng.integers(0, V, N_PROMPT_B).tolist()
    candidates = [rng.integers(0, V, N_GREEDY_PROMPT).tolist() for _ in range(N_GREEDY_CANDIDATES)]
    before = logits_of(model.to(device), ids_a, device)

    # Saved in bf16 (exact: every value is bf16 already), as real checkpoints are.
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    if not os.path.exists(os.path.join(out, "generation_config.json")):
        model.generation_config.save_pretrained(out)
    del model
    fix_config_json(out, name)
    st_path = os.path.join(out, "model.safetensors")
    mtp_names = []
    expert_layout = "per-expert (mlp.experts.{e}.{gate,up,down}_proj.weight)" if name in PER_EXPERT else None
    if name in FUSED_EXPERTS or name in MTP_LAYERS:
        tensors = load_file(st_path)
        if name in FUSED_EXPERTS:
            assert fuse_experts(tensors) == tcfg.num_hidden_layers
            expert_layout = "fused (mlp.experts.gate_up_proj [E, 2I, H] gate rows first, mlp.experts.down_proj [E, H, I])"
        if name in MTP_LAYERS:
            mtp = make_mtp(eager_model(cls, config), seed + 100)
            mtp_names = list(mtp)
            tensors.update(mtp)
        save_file(dict(sorted(tensors.items())), st_path, metadata={"format": "pt"})
    stored = load_file(st_path)
    dtypes = sorted({str(v.dtype).replace("torch.", "") for v in stored.values()})

    # Everything below comes from the model as reloaded from the saved files.
    model = eager_model(cls, out).to(device)
    logits_a, inter = record_intermediates(model, ids_a, device)
    np.testing.assert_allclose(logits_a, before, rtol=1e-6, atol=1e-6, err_msg=f"{name}: reloaded model differs")
    logits_b = logits_of(model, ids_b, device)
    norm_out = dict(inter)["norm"]
    np.testing.assert_allclose(norm_out @ model.lm_head.weight.detach().float().cpu().numpy().T, logits_a,
                               rtol=1e-4, atol=1e-4)
    # A batch of one sequence = prefix of a longer one (causal): prompt a's first 23 positions.
    np.testing.assert_allclose(logits_of(model, ids_a[:N_PROMPT_B], device), logits_a[:N_PROMPT_B],
                               rtol=1e-4, atol=1e-4)

    # Generation runs the recurrent (decode) form of the GDN; the teacher-forced pass runs the chunked
    # form: greedy() checks that both pick the same tokens.
    # Of those with at least 8 distinct new tokens (a tied tiny model tends to repeat itself), the
    # widest margin.
    ids_g, new_ids, margin = max((greedy(model, c, device, name) for c in candidates),
                                 key=lambda r: (len(set(r[1])) >= 8, r[2]))

    write_f32(os.path.join(out, "logits_a.bin"), logits_a)
    write_f32(os.path.join(out, "logits_b.bin"), logits_b)
    index, offset = [], 0
    with open(os.path.join(out, "intermediates_a.bin"), "wb") as f:
        for n, a in inter:
            a = np.ascontiguousarray(a, dtype="<f4")
            f.write(a.tobytes())
            index.append({"name": n, "shape": list(a.shape), "offset": offset})
            offset += a.size
    layer_rms = [float(np.sqrt((a ** 2).mean())) for n, a in inter if n.startswith("layer.") and n.count(".") == 1]

    np_err = None
    try:  # the independent float64 numpy forward pass (recurrent GDN), if it is there
        from np_hybrid_reference import np_hybrid_forward
        np_err = {tag: float(np.abs(np_hybrid_forward(out, ids) - ref).max())
                  for tag, ids, ref in (("a", ids_a, logits_a), ("b", ids_b, logits_b))}
    except ImportError:
        pass

    ref = {
        "model": name,
        "architecture": type(model).__name__,
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "numpy": np.__version__, "python": platform.python_version(),
                      "device": torch.cuda.get_device_name(0) if device == "cuda" else f"cpu ({platform.machine()})",
                      "dtype": "float32", "attn_implementation": "eager",
                      "command": "python3 reference/make_hybrid_fixtures.py " + " ".join(sys.argv[1:])},
        "seed": seed,
        "vocab_size": V,
        "checkpoint_dtypes": dtypes,
        "expert_layout": expert_layout,
        "layer_types": list(tcfg.layer_types),
        "gdn_chunk_size": 64,
        "prompts": {
            "a": {"ids": ids_a, "logits": {"file": "logits_a.bin", "dtype": "f32", "shape": [len(ids_a), V]},
                  "min_top2_margin": top2_margin(logits_a)},
            "b": {"ids": ids_b, "logits": {"file": "logits_b.bin", "dtype": "f32", "shape": [len(ids_b), V]},
                  "min_top2_margin": top2_margin(logits_b)},
        },
        "greedy": {"prompt_ids": ids_g, "new_ids": new_ids, "max_new_tokens": len(new_ids),
                   "min_top2_margin": margin, "chosen_of": N_GREEDY_CANDIDATES},
        "intermediates": {"file": "intermediates_a.bin", "dtype": "f32", "prompt": "a",
                          "offsets_in": "elements", "tensors": index},
        "layer_output_rms": layer_rms,
        "logits_std": float(logits_a.std()),
        "mtp": {"num_hidden_layers": MTP_LAYERS[name], "tensors": mtp_names, "used_in_logits": False}
               if name in MTP_LAYERS else None,
        "config_format": ("legacy rope_theta + partial_rotary_factor + rope_scaling" if name in LEGACY_ROPE_CONFIG
                          else "rope_parameters"),
        "numpy_f64_max_abs_diff": np_err,
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out, x)) for x in os.listdir(out))
    log(f"{name}: {size / 1e6:.2f} MB ({dtypes}), logits std {logits_a.std():.2f}, layer rms "
        f"{' '.join(f'{r:.2f}' for r in layer_rms)}, greedy {new_ids} ({len(set(new_ids))} distinct, "
        f"min top-2 margin {margin:.3f}), prompt a min margin {top2_margin(logits_a):.4f}, numpy f64 {np_err}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where torch runs (cpu: plain fp32, no TF32 question)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.use_deterministic_algorithms(True, warn_only=True)
    names = [n for n in a.only.split(",") if n] or list(MODELS)
    for n in names:
        if n not in MODELS:
            sys.exit(f"make_hybrid_fixtures: unknown model {n!r} (known: {', '.join(MODELS)})")
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, device {a.device}")
    failed = []
    for i, n in enumerate(names):
        try:
            make(n, a.out, a.device, SEED + list(MODELS).index(n))
        except Exception as e:  # keep going: one broken model should not cost the others
            import traceback
            traceback.print_exc()
            failed.append(f"{n}: {e}")
    if failed:
        sys.exit("make_hybrid_fixtures: failed: " + "; ".join(failed))


if __name__ == "__main__":
    main()
