#!/usr/bin/env python3
"""Makes MLX affine 4-bit versions of the tiny hybrid fixtures with mlx-lm's own converter, and
records mlx-lm's logits for them: tests/fixtures/<name>_mlx4/ from tests/fixtures/<name>/.

Runs on the CPU (Linux: `pip install "mlx[cpu]" mlx-lm`; no torch needed):
    python3 reference/make_mlx_fixtures.py --fixtures tests/fixtures [--only qwen35moe_tiny]

The conversion is mlx_lm.convert.convert(quantize=True, q_group_size=64, q_bits=4,
dtype="bfloat16"): mlx-lm's own per-module rules apply (for the MoE models the router `mlp.gate`
and `shared_expert_gate` at 8 bits; A_log not cast), its sanitize step (expert stacking into
switch_mlp, conv1d to [C, K, 1], +1 folded into the (1 + w) norms) and its writer. The fixtures
have no tokenizer, so mlx-lm's tokenizer loading and saving are stood in for by a no-op.

Logits: the converted model is loaded back with mlx_lm.utils.load_model, every floating-point
parameter (bf16 scales, biases, norms) is upcast to float32 (exact), and the forward pass runs in
float32 on the CPU, so tessera's fp32 path over the dequantized weights must match closely.
reference.json has the format of the source fixture's (prompts a and b with logits_a.bin /
logits_b.bin, greedy), no intermediates; numpy_f64_max_abs_diff compares with
reference/np_hybrid_reference.py, which dequantizes the MLX files on its own.
"""
import argparse
import json
import os
import platform
import shutil
import sys
import tempfile

import numpy as np

SOURCES = ["qwen35moe_tiny", "qwen3next_tiny", "qwen35_tiny"]
N_NEW = 16
N_GREEDY_CANDIDATES = 8
SEED = 6464


def log(msg):
    print(f"make_mlx_fixtures: {msg}", flush=True)


class _NoTokenizer:
    def save_pretrained(self, *_a, **_k):
        pass


def convert(src, dst):
    import importlib
    mconv = importlib.import_module("mlx_lm.convert")   # the module (mlx_lm.convert is also a function)
    mutils = importlib.import_module("mlx_lm.utils")
    saved = mutils.load_tokenizer
    mutils.load_tokenizer = lambda *a, **k: _NoTokenizer()
    try:
        mconv.convert(src, dst, quantize=True, q_group_size=64, q_bits=4, dtype="bfloat16")
    finally:
        mutils.load_tokenizer = saved
    readme = os.path.join(dst, "README.md")   # mlx-lm's model card (hub boilerplate)
    if os.path.exists(readme):
        os.remove(readme)


def load_f32(path):
    import mlx.core as mx
    from mlx.utils import tree_map
    from mlx_lm.utils import load_model
    model, config = load_model(__import__("pathlib").Path(path))
    model.update(tree_map(lambda v: v.astype(mx.float32) if mx.issubdtype(v.dtype, mx.floating) else v,
                          model.parameters()))
    mx.eval(model.parameters())
    return model, config


def logits_of(model, ids):
    import mlx.core as mx
    out = model(mx.array([ids]))
    mx.eval(out)
    return np.array(out[0].astype(mx.float32))


def greedy(model, ids):
    """mlx-lm's own generation loop (prefill, then cached one-token steps), argmax sampling."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    new = []
    for tok, _ in generate_step(mx.array(ids), model, max_tokens=N_NEW, sampler=lambda lp: mx.argmax(lp, axis=-1)):
        new.append(int(tok.item() if hasattr(tok, "item") else tok))
    full = logits_of(model, ids + new)[len(ids) - 1:-1]
    assert full.argmax(-1).tolist() == new, "mlx-lm generation disagrees with its teacher-forced forward pass"
    return new, top2_margin(full)


def top2_margin(logits):
    top2 = np.sort(logits, -1)[:, -2:]
    return float((top2[:, 1] - top2[:, 0]).min())


def make(name, root):
    import mlx.core as mx
    import mlx_lm
    src = os.path.join(root, name)
    dst = os.path.join(root, name + "_mlx4")
    src_ref = json.load(open(os.path.join(src, "reference.json")))
    if os.path.exists(dst):
        shutil.rmtree(dst)
    with tempfile.TemporaryDirectory() as tmp:   # mlx-lm's convert refuses an existing directory
        out = os.path.join(tmp, "m")
        convert(src, out)
        shutil.copytree(out, dst)
    model, config = load_f32(dst)
    V = src_ref["vocab_size"]
    ids_a, ids_b = src_ref["prompts"]["a"]["ids"], src_ref["prompts"]["b"]["ids"]
    logits_a, logits_b = logits_of(model, ids_a), logits_of(model, ids_b)
    assert logits_a.shape == (len(ids_a), V), logits_a.shape
    np.testing.assert_allclose(logits_of(model, ids_a[:len(ids_b)]), logits_a[:len(ids_b)], rtol=1e-4, atol=1e-4)
    # Of the source fixture's greedy prompt and 7 seeded others, the one whose continuation has at
    # least 8 distinct tokens and the widest top-2 margin (4-bit changed which prompt is safest).
    rng = np.random.default_rng(SEED)
    candidates = [src_ref["greedy"]["prompt_ids"]] + [
        rng.integers(0, V, len(src_ref["greedy"]["prompt_ids"])).tolist() for _ in range(N_GREEDY_CANDIDATES - 1)]
    ids_g, new_ids, margin = max(((c,) + greedy(model, c) for c in candidates),
                                 key=lambda r: (len(set(r[1])) >= 8, r[2]))
    from np_hybrid_reference import np_hybrid_forward   # independent: dequantizes the files itself
    np_err = {tag: float(np.abs(np_hybrid_forward(dst, ids) - ref).max())
              for tag, ids, ref in (("a", ids_a, logits_a), ("b", ids_b, logits_b))}
    # How far 4-bit moved the logits from the bf16 model's.
    ref_a = np.fromfile(os.path.join(src, "logits_a.bin"), "<f4").reshape(len(ids_a), V)
    quant_drift = float(np.abs(logits_a - ref_a).max())
    argmax_agree = float((logits_a.argmax(-1) == ref_a.argmax(-1)).mean())
    np.ascontiguousarray(logits_a, "<f4").tofile(os.path.join(dst, "logits_a.bin"))
    np.ascontiguousarray(logits_b, "<f4").tofile(os.path.join(dst, "logits_b.bin"))
    q = config.get("quantization", {})
    overrides = {k: v for k, v in q.items() if isinstance(v, dict)}
    ref = {
        "model": name + "_mlx4",
        "source": f"tests/fixtures/{name} (its model.safetensors, converted)",
        "architecture": config.get("architectures", [None])[0],
        "made_with": {"mlx": mx.__version__, "mlx_lm": mlx_lm.__version__, "numpy": np.__version__,
                      "python": platform.python_version(), "device": f"cpu ({platform.machine()})",
                      "convert": "mlx_lm.convert.convert(quantize=True, q_group_size=64, q_bits=4, dtype='bfloat16')",
                      "dtype": "float32 (bf16 scales/biases/norms upcast after loading; activations f32)",
                      "command": "python3 reference/make_mlx_fixtures.py " + " ".join(sys.argv[1:])},
        "vocab_size": V,
        "quantization": {"group_size": q.get("group_size"), "bits": q.get("bits"), "mode": q.get("mode"),
                         "overrides": overrides},
        "prompts": {
            "a": {"ids": ids_a, "logits": {"file": "logits_a.bin", "dtype": "f32", "shape": [len(ids_a), V]},
                  "min_top2_margin": top2_margin(logits_a)},
            "b": {"ids": ids_b, "logits": {"file": "logits_b.bin", "dtype": "f32", "shape": [len(ids_b), V]},
                  "min_top2_margin": top2_margin(logits_b)},
        },
        "greedy": {"prompt_ids": ids_g, "new_ids": new_ids, "max_new_tokens": N_NEW, "min_top2_margin": margin,
                   "chosen_of": N_GREEDY_CANDIDATES},
        "numpy_f64_max_abs_diff": np_err,
        "vs_source_bf16_logits_a": {"max_abs_diff": quant_drift, "argmax_agreement": argmax_agree},
    }
    with open(os.path.join(dst, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(dst, x)) for x in os.listdir(dst))
    log(f"{name}_mlx4: {size / 1e6:.2f} MB, {len(overrides)} per-module overrides, greedy {new_ids} "
        f"(margin {margin:.3f}), numpy f64 {np_err}, vs bf16 source: max |diff| {quant_drift:.3f}, argmax agree {argmax_agree:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default="tests/fixtures")
    ap.add_argument("--only", default="", help="comma-separated source fixtures (default: all)")
    a = ap.parse_args()
    import mlx.core as mx
    mx.set_default_device(mx.cpu)
    names = [n for n in a.only.split(",") if n] or SOURCES
    for n in names:
        make(n, a.fixtures)


if __name__ == "__main__":
    main()
