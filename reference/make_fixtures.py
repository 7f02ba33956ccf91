#!/usr/bin/env python3
"""Makes the tiny random reference models in tests/fixtures/<name>/ with Hugging Face
transformers' own classes, and records their fp32 outputs for tessera to match.

Run on the GPU machine (torch + transformers are there; see tests/fixtures/README.md):
    python3 reference/make_fixtures.py --out tests/fixtures [--only qwen3_tiny,...]

Per model it writes config.json, generation_config.json, model.safetensors (fp32) and
    reference.json      what was run, token ids, shapes, file index, versions (see README.md)
    logits_a.bin        f32 little-endian [len(prompt_a), vocab]: logits at every position
    logits_b.bin        f32 [len(prompt_b), vocab]: a second prompt (multi-sequence batching)
    intermediates_a.bin f32 tensors of prompt a by name (embeddings, every layer's output,
                        the final norm, and each submodule of layer 0), offsets in reference.json
Everything is seeded; weights are all perturbed (norm weights 1 + 0.2 N(0,1), biases nonzero)
so a wrong formula cannot hide behind an identity weight or a zero bias. Every value is
rounded to bf16 (and stored as fp32), so f16 / bf16 conversions lose nothing.
"""
import argparse
import json
import math
import os
import platform
import sys

import numpy as np
import torch
import transformers
from np_reference import np_forward  # reference/np_reference.py: float64 numpy forward pass
from transformers import (GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

SEED = 1234
N_PROMPT_A, N_PROMPT_B, N_GREEDY_PROMPT, N_NEW = 40, 23, 12, 16
N_GREEDY_CANDIDATES = 8

# No tokenizer comes with these models: no bos/eos, so greedy generation runs its full length.
NO_SPECIAL_TOKENS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)

# name -> (model class, config class, config arguments)
MODELS = {
    # q/k RMSNorm, tied embeddings, head_dim 32 while hidden / heads = 16.
    "qwen3_tiny": (Qwen3ForCausalLM, Qwen3Config, dict(
        vocab_size=1000, hidden_size=64, intermediate_size=192, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=4096,
        rms_norm_eps=1e-6, tie_word_embeddings=True, **NO_SPECIAL_TOKENS,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    # Untied lm_head, GQA, llama3 rope scaling with a small original context so that every
    # band (kept, smoothed, divided by factor) is used at these short positions. Its config.json
    # is rewritten in the legacy form (rope_theta + rope_scaling) that hub checkpoints use.
    "llama_tiny": (LlamaForCausalLM, LlamaConfig, dict(
        vocab_size=1024, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=4096,
        rms_norm_eps=1e-6, tie_word_embeddings=False, **NO_SPECIAL_TOKENS,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64})),
    # q/k/v biases, untied, a different theta.
    "qwen2_tiny": (Qwen2ForCausalLM, Qwen2Config, dict(
        vocab_size=1000, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        rms_norm_eps=1e-6, tie_word_embeddings=False, **NO_SPECIAL_TOKENS,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
}


LEGACY_ROPE_CONFIG = {"llama_tiny"}


def log(msg):
    print(f"make_fixtures: {msg}", flush=True)


def perturb(model, seed):
    """Replaces every parameter with seeded random values (norms around 1, biases nonzero)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.ndim == 1 and "norm" in name:
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                v = 0.2 * torch.randn(p.shape, generator=g)
            elif "embed_tokens" in name:  # small, so a tied lm_head does not just echo the input
                v = 0.25 * torch.randn(p.shape, generator=g)
            elif name.startswith("lm_head"):  # logits with a std of about 3, like a real model's
                v = 3.0 * torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1])
            else:  # Linear [out, in]: unit-variance outputs
                v = torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1])
            # bf16-exact values (kept in fp32): GGUF conversions to f16 / bf16 are then lossless,
            # so every form of the model must match these logits to fp32 rounding.
            p.copy_(v.to(torch.bfloat16).to(p.dtype))


def legacy_rope_config(model_dir):
    """transformers 5 writes rope_parameters; checkpoints on the hub say rope_theta + rope_scaling."""
    path = os.path.join(model_dir, "config.json")
    cfg = json.load(open(path))
    rp = dict(cfg.pop("rope_parameters"))
    cfg["rope_theta"] = rp.pop("rope_theta")
    cfg["rope_scaling"] = rp if rp.get("rope_type", "default") != "default" else None
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def eager_model(cls, path_or_config):
    load = cls.from_pretrained if isinstance(path_or_config, str) else cls._from_config
    try:
        m = load(path_or_config, attn_implementation="eager", dtype=torch.float32)
    except TypeError:  # older transformers: torch_dtype
        m = load(path_or_config, attn_implementation="eager", torch_dtype=torch.float32)
    m = m.float()
    assert m.config._attn_implementation == "eager", m.config._attn_implementation
    return m.eval()


def record_intermediates(model, ids, device):
    """Runs ids through the model with hooks; returns (logits, [(name, array)])."""
    inner = model.model
    records, hooks = [], []

    def hook(name):
        def f(_module, _inputs, out):
            t = out[0] if isinstance(out, (tuple, list)) else out
            records.append((name, t.detach().float().cpu().numpy()[0]))
        return f

    def pre_hook(name):
        def f(_module, inputs):
            records.append((name, inputs[0].detach().float().cpu().numpy()[0]))
        return f

    hooks.append(inner.embed_tokens.register_forward_hook(hook("embed")))
    layer0 = inner.layers[0]
    # The inputs of o_proj and down_proj: attention's output before the projection, and SwiGLU's.
    hooks.append(layer0.self_attn.o_proj.register_forward_pre_hook(pre_hook("layer.0.self_attn.o_proj.input")))
    hooks.append(layer0.mlp.down_proj.register_forward_pre_hook(pre_hook("layer.0.mlp.down_proj.input")))
    for sub_name, sub in inner.layers[0].named_modules():
        if sub_name and not sub_name.endswith(("act_fn", "rotary_emb", "dropout")):
            hooks.append(sub.register_forward_hook(hook(f"layer.0.{sub_name}")))
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(hook(f"layer.{i}")))
    hooks.append(inner.norm.register_forward_hook(hook("norm")))
    try:
        with torch.no_grad():
            logits = model(torch.tensor([ids], device=device)).logits[0].float().cpu().numpy()
    finally:
        for h in hooks:
            h.remove()
    return logits, records


def logits_of(model, ids, device):
    with torch.no_grad():
        return model(torch.tensor([ids], device=device)).logits[0].float().cpu().numpy()


def greedy(model, ids, device, name):
    """Returns (ids, N_NEW greedy tokens from generate(), smallest top-1 - top-2 logit gap)."""
    with torch.no_grad():
        gen = model.generate(torch.tensor([ids], device=device), attention_mask=torch.ones(1, len(ids),
                             dtype=torch.long, device=device), do_sample=False, max_new_tokens=N_NEW,
                             eos_token_id=None, pad_token_id=0)
    new_ids = gen[0, len(ids):].tolist()
    assert len(new_ids) == N_NEW, f"{name}: generated {len(new_ids)} tokens"
    # Greedy = argmax of the teacher-forced logits at every step.
    full = logits_of(model, ids + new_ids, device)[len(ids) - 1:-1]        # [N_NEW, V]
    assert full.argmax(-1).tolist() == new_ids, f"{name}: generate disagrees with the forward pass"
    return ids, new_ids, top2_margin(full)


def top2_margin(logits):  # the smallest top-1 - top-2 gap over rows: how safe an argmax test is
    top2 = np.sort(logits, -1)[:, -2:]
    return float((top2[:, 1] - top2[:, 0]).min())


def write_f32(path, a):
    np.ascontiguousarray(a, dtype="<f4").tofile(path)


# ---- one model -------------------------------------------------------------------------------

def make(name, out_root, device, seed):
    cls, cfg_cls, args = MODELS[name]
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(seed)
    config = cfg_cls(**args)
    model = eager_model(cls, config)
    perturb(model, seed)
    model.generation_config = GenerationConfig(do_sample=False)
    model.save_pretrained(out, safe_serialization=True)
    if not os.path.exists(os.path.join(out, "generation_config.json")):
        model.generation_config.save_pretrained(out)
    if name in LEGACY_ROPE_CONFIG:
        legacy_rope_config(out)

    rng = np.random.default_rng(seed)
    V = config.vocab_size
    ids_a = rng.integers(0, V, N_PROMPT_A).tolist()
    ids_b = rng.integers(0, V, N_PROMPT_B).tolist()
    candidates = [rng.integers(0, V, N_GREEDY_PROMPT).tolist() for _ in range(N_GREEDY_CANDIDATES)]

    # Everything below comes from the model as reloaded from the saved files.
    before = logits_of(model.to(device), ids_a, device)
    model = eager_model(cls, out).to(device)
    logits_a, inter = record_intermediates(model, ids_a, device)
    # Same logits from the saved files (and, for a legacy config, the same rope read back).
    np.testing.assert_allclose(logits_a, before, rtol=1e-6, atol=1e-6, err_msg=f"{name}: reloaded model differs")
    logits_b = logits_of(model, ids_b, device)
    np.testing.assert_allclose(inter[-1][1] @ (model.lm_head.weight.detach().float().cpu().numpy().T),
                               logits_a, rtol=1e-4, atol=1e-4)

    # Of a few seeded prompts, the one whose greedy continuation has the widest top-2 margin, so
    # that a correct engine's rounding cannot flip a token.
    ids_g, new_ids, margin = max((greedy(model, c, device, name) for c in candidates), key=lambda r: r[2])

    write_f32(os.path.join(out, "logits_a.bin"), logits_a)
    write_f32(os.path.join(out, "logits_b.bin"), logits_b)
    index, offset = [], 0
    with open(os.path.join(out, "intermediates_a.bin"), "wb") as f:
        for n, a in inter:
            a = np.ascontiguousarray(a, dtype="<f4")
            f.write(a.tobytes())
            index.append({"name": n, "shape": list(a.shape), "offset": offset})
            offset += a.size
    np_err = {}
    for tag, ids, ref in (("a", ids_a, logits_a), ("b", ids_b, logits_b)):
        np_err[tag] = float(np.abs(np_forward(out, ids) - ref).max())

    ref = {
        "model": name,
        "architecture": cls.__name__,
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "numpy": np.__version__, "python": platform.python_version(),
                      "device": torch.cuda.get_device_name(0) if device == "cuda" else f"cpu ({platform.machine()})",
                      "dtype": "float32", "attn_implementation": "eager",
                      "command": "python3 reference/make_fixtures.py " + " ".join(sys.argv[1:])},
        "seed": seed,
        "vocab_size": V,
        "prompts": {
            "a": {"ids": ids_a, "logits": {"file": "logits_a.bin", "dtype": "f32", "shape": [len(ids_a), V]},
                  "min_top2_margin": top2_margin(logits_a)},
            "b": {"ids": ids_b, "logits": {"file": "logits_b.bin", "dtype": "f32", "shape": [len(ids_b), V]},
                  "min_top2_margin": top2_margin(logits_b)},
        },
        "greedy": {"prompt_ids": ids_g, "new_ids": new_ids, "max_new_tokens": N_NEW,
                   "min_top2_margin": margin, "chosen_of": N_GREEDY_CANDIDATES},
        "intermediates": {"file": "intermediates_a.bin", "dtype": "f32", "prompt": "a",
                          "offsets_in": "elements", "tensors": index},
        "config_format": "legacy rope_theta + rope_scaling" if name in LEGACY_ROPE_CONFIG else "rope_parameters",
        "numpy_f64_max_abs_diff": np_err,
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out, x)) for x in os.listdir(out))
    log(f"{name}: {size / 1e6:.2f} MB, greedy {new_ids} ({len(set(new_ids))} distinct, min top-2 margin {margin:.3f}), "
        f"numpy f64 forward max |diff| a={np_err['a']:.2e} b={np_err['b']:.2e}")


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
            sys.exit(f"make_fixtures: unknown model {n!r} (known: {', '.join(MODELS)})")
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, device {a.device}")
    failed = []
    for i, n in enumerate(names):
        try:
            make(n, a.out, a.device, SEED + i)
        except Exception as e:  # keep going: one broken model should not cost the others
            import traceback
            traceback.print_exc()
            failed.append(f"{n}: {e}")
    if failed:
        sys.exit("make_fixtures: failed: " + "; ".join(failed))


if __name__ == "__main__":
    main()
