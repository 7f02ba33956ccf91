"""Dense models (Llama / Qwen2 / Qwen3) against Hugging Face transformers' recorded outputs
(tests/fixtures/*_tiny, made by reference/make_fixtures.py): the HF directory and its GGUF
conversions must give the same logits and greedy continuations; quantized conversions are
measured against the reference."""
import json

import numpy as np
import pytest

import gguf_forward
from conftest import FIXTURES, run_tessera

MODELS = ["qwen3_tiny", "llama_tiny", "qwen2_tiny"]
# Gated DeltaNet hybrids (reference/make_hybrid_fixtures.py): HF checkpoints only, for now.
HYBRID = ["qwen35moe_tiny", "qwen35_tiny", "qwen3next_tiny"]
# The same models as mlx-community publishes them (mlx-lm's own 4-bit converter); the reference
# is mlx-lm's logits on the CPU (reference/make_mlx_fixtures.py), not the bf16 originals.
MLX = ["qwen35moe_tiny_mlx4", "qwen3next_tiny_mlx4", "qwen35_tiny_mlx4"]
ERRORS = {}  # (model, type) -> relative max error, printed at the end


def load_ref(name):
    d = FIXTURES / name
    if not (d / "reference.json").exists():
        pytest.fail(f"fixture {d} is missing (make it with reference/make_fixtures.py)")
    return d, json.loads((d / "reference.json").read_text())


def ref_logits(d, ref, tag):
    p = ref["prompts"][tag]
    return np.fromfile(d / p["logits"]["file"], dtype="<f4").reshape(p["logits"]["shape"])


def tessera_logits(model, ids, tmp_path, tag="x"):
    out = tmp_path / f"logits_{tag}.bin"
    run_tessera("logits", "--model", model, "--tokens", ",".join(map(str, ids)), "--out", out)
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


def check_argmax(got, want, what):
    """Same argmax at every position, except where the reference's top-2 gap is a near-tie."""
    top2 = np.sort(want, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    tie = gap < 1e-4 * np.abs(want).max()
    bad = (got.argmax(1) != want.argmax(1)) & ~tie
    assert not bad.any(), f"{what}: argmax differs at positions {np.nonzero(bad)[0].tolist()}"


def rel_err(got, want):
    return float(np.abs(got - want).max() / np.abs(want).max())


def greedy(model, ref):
    g = ref["greedy"]
    p = run_tessera("run", model, "--tokens", ",".join(map(str, g["prompt_ids"])), "--ids", "--temperature", "0",
                    "--max-tokens", g["max_new_tokens"], "--ignore-eos")
    return [int(x) for x in p.stdout.split()]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """GGUF conversions of every fixture, made once: {(model, type): path}."""
    root = tmp_path_factory.mktemp("gguf")
    cache = {}

    def get(name, typ):
        if (name, typ) not in cache:
            out = root / f"{name}-{typ}.gguf"
            run_tessera("convert", FIXTURES / name, out, "--type", typ)
            cache[(name, typ)] = out
        return cache[(name, typ)]
    return get


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("form", ["hf", "f32", "f16"])
def test_logits_match_transformers(name, form, converted, tmp_path):
    d, ref = load_ref(name)
    model = d if form == "hf" else converted(name, form)
    for tag in ("a", "b"):
        want = ref_logits(d, ref, tag)
        got = tessera_logits(model, ref["prompts"][tag]["ids"], tmp_path, tag)
        err = rel_err(got, want)
        ERRORS[(name, form, tag)] = err
        assert err <= 1e-3, f"{name} ({form}) prompt {tag}: max |Δ| = {err:.2e} · max |ref|"
        check_argmax(got, want, f"{name} ({form}) prompt {tag}")


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("form", ["hf", "f32", "f16"])
def test_greedy_continuation(name, form, converted):
    d, ref = load_ref(name)
    model = d if form == "hf" else converted(name, form)
    assert greedy(model, ref) == ref["greedy"]["new_ids"]


@pytest.mark.parametrize("name", HYBRID)
@pytest.mark.parametrize("form", ["hf", "f32", "f16"])
def test_hybrid_logits_match_transformers(name, form, converted, tmp_path):
    """HF checkpoints and their GGUF conversions (Qwen3.5's value heads re-tiled as llama.cpp does)."""
    d, ref = load_ref(name)
    model = d if form == "hf" else converted(name, form)
    for tag in ("a", "b"):
        want = ref_logits(d, ref, tag)
        got = tessera_logits(model, ref["prompts"][tag]["ids"], tmp_path, tag)
        err = rel_err(got, want)
        assert err <= 1e-3, f"{name} prompt {tag}: max |Δ| = {err:.2e} · max |ref|"
        check_argmax(got, want, f"{name} prompt {tag}")


@pytest.mark.parametrize("name", MLX)
def test_mlx_4bit_matches_mlx_lm(name, tmp_path):
    d, ref = load_ref(name)
    for tag in ("a", "b"):
        want = ref_logits(d, ref, tag)
        got = tessera_logits(d, ref["prompts"][tag]["ids"], tmp_path, tag)
        err = rel_err(got, want)
        assert err <= 1e-3, f"{name} prompt {tag}: max |Δ| = {err:.2e} · max |ref|"
        check_argmax(got, want, f"{name} prompt {tag}")
    assert greedy(d, ref) == ref["greedy"]["new_ids"]


@pytest.mark.parametrize("name", HYBRID)
@pytest.mark.parametrize("form", ["hf", "f16"])
def test_hybrid_greedy_continuation(name, form, converted):
    d, ref = load_ref(name)
    assert greedy(d if form == "hf" else converted(name, form), ref) == ref["greedy"]["new_ids"]


@pytest.mark.parametrize("name,arch", [("qwen35moe_tiny", "qwen35moe"), ("qwen35_tiny", "qwen35"),
                                       ("qwen3next_tiny", "qwen3next")])
def test_hybrid_gguf_reads_back_in_gguf_py(name, arch, converted):
    import gguf
    d, ref = load_ref(name)
    cfg = json.loads((d / "config.json").read_text())
    cfg = {**cfg, **cfg.get("text_config", {})}
    r = gguf.GGUFReader(str(converted(name, "f16")))
    field = lambda k: r.fields[k].contents()
    assert field("general.architecture") == arch
    assert field(f"{arch}.ssm.group_count") == cfg["linear_num_key_heads"]
    assert field(f"{arch}.ssm.time_step_rank") == cfg["linear_num_value_heads"]
    assert field(f"{arch}.ssm.inner_size") == cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
    assert field(f"{arch}.full_attention_interval") == 4
    names = {t.name: t for t in r.tensors}
    assert "blk.0.ssm_a" in names and "blk.0.ssm_conv1d.weight" in names and "blk.3.attn_q.weight" in names
    assert names["blk.0.ssm_conv1d.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert not any(n.startswith("mtp.") or "visual" in n for n in names)
    if arch == "qwen3next":  # fused projections in HF's grouped order, as llama.cpp's ssm_in / ssm_ba
        assert "blk.0.ssm_in.weight" in names and "blk.0.ssm_ba.weight" in names
    else:
        assert "blk.0.attn_qkv.weight" in names and "blk.0.ssm_beta.weight" in names
    if "num_experts" in cfg:
        E = cfg["num_experts"]
        stacked = names.get("blk.0.ffn_gate_up_exps.weight") or names.get("blk.0.ffn_gate_exps.weight")
        assert stacked is not None and list(stacked.shape)[-1] == E  # ggml order: experts outermost
        assert f"{arch}.expert_count" in r.fields and field(f"{arch}.expert_count") == E


# Quantized conversions. Against transformers the error is the format's own loss (reported, and
# bounded loosely); against a float64 numpy forward over the same GGUF's weights, decoded by
# llama.cpp's `gguf` package, it is only tessera's arithmetic: exact for f32; for quantized
# weights the CPU path, like ggml, rounds activations to 8-bit blocks for integer dot products,
# which costs 1-3% of the largest logit on these small random models.
LOSS_BOUNDS = {"q8_0": 0.05, "q4_0": 0.6, "q4_k": 0.6}
ARITH_BOUNDS = {"f32": 1e-5, "q8_0": 5e-2, "q4_0": 5e-2, "q4_k": 5e-2, "q6_k": 5e-2}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("typ", list(LOSS_BOUNDS))
def test_quantized_conversions(name, typ, converted, tmp_path):
    d, ref = load_ref(name)
    ids = ref["prompts"]["a"]["ids"]
    want = ref_logits(d, ref, "a")
    model = converted(name, typ)
    got = tessera_logits(model, ids, tmp_path)
    exact = gguf_forward.forward(model, ids)
    loss, arith = rel_err(got, want), rel_err(got, exact)
    agree = float((got.argmax(1) == want.argmax(1)).mean())
    print(f"\n{name} {typ}: vs transformers {loss:.4f} (argmax agreement {agree:.0%}); "
          f"vs numpy on the same weights {arith:.2e}")
    assert arith <= ARITH_BOUNDS[typ], f"{name} {typ}: tessera differs from its own weights' math by {arith:.2e}"
    assert loss <= LOSS_BOUNDS[typ], f"{name} {typ}: relative error {loss:.3f}"


@pytest.fixture(scope="module")
def synth_models(tmp_path_factory):
    """Random-weight models from `tessera synth` (rows of 256: real K-quant blocks)."""
    root = tmp_path_factory.mktemp("synth")
    cache = {}

    def get(arch, typ):
        if (arch, typ) not in cache:
            out = root / f"{arch}-{typ}.gguf"
            run_tessera("synth", "--arch", arch, "--preset", "tiny", "--layers", 2, "--type", typ, "--out", out)
            cache[(arch, typ)] = out
        return cache[(arch, typ)]
    return get


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
@pytest.mark.parametrize("typ", list(ARITH_BOUNDS))
def test_gguf_native_models_match_numpy(arch, typ, synth_models, tmp_path):
    model = synth_models(arch, typ)
    ids = [(i * 37 + 11) % 500 for i in range(33)]
    got = tessera_logits(model, ids, tmp_path)
    err = rel_err(got, gguf_forward.forward(model, ids))
    print(f"\nsynth {arch} {typ}: vs numpy on the same weights {err:.2e}")
    assert err <= ARITH_BOUNDS[typ]


@pytest.mark.parametrize("name", MODELS)
def test_gguf_reads_back_in_gguf_py(name, converted):
    """llama.cpp's own reader accepts the conversion, with its names, shapes and metadata."""
    import gguf
    d, ref = load_ref(name)
    cfg = json.loads((d / "config.json").read_text())
    r = gguf.GGUFReader(str(converted(name, "f16")))
    arch = {"Qwen3ForCausalLM": "qwen3", "LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}[ref["architecture"]]
    field = lambda k: r.fields[k].contents()
    assert field("general.architecture") == arch
    assert field(f"{arch}.block_count") == cfg["num_hidden_layers"]
    assert field(f"{arch}.embedding_length") == cfg["hidden_size"]
    assert field(f"{arch}.attention.head_count_kv") == cfg["num_key_value_heads"]
    names = {t.name: t for t in r.tensors}
    assert "token_embd.weight" in names and "blk.0.attn_q.weight" in names
    V, H = cfg["vocab_size"], cfg["hidden_size"]
    assert list(names["token_embd.weight"].shape) == [H, V]  # ggml ne order: innermost first
    assert ("output.weight" in names) == (not cfg.get("tie_word_embeddings", False))
    assert names["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert names["blk.0.ffn_up.weight"].tensor_type == gguf.GGMLQuantizationType.F16
    if arch == "llama":
        assert "rope_freqs.weight" in names  # llama3 rope scaling travels as frequency factors


def test_bad_model_paths_give_clear_errors(tmp_path):
    p = run_tessera("logits", "--model", tmp_path / "nope", "--tokens", "1,2", "--out", tmp_path / "x", check=False)
    assert p.returncode != 0 and "no such file or directory" in p.stderr
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    p = run_tessera("run", bad, "--tokens", "1", "--ids", check=False)
    assert p.returncode != 0 and "error" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    d, ref = load_ref("qwen3_tiny")
    p = run_tessera("logits", "--model", d, "--tokens", "1,99999", "--out", tmp_path / "x", check=False)
    assert p.returncode != 0 and "out of range" in p.stderr


def test_synth_hybrid_gguf_loads_and_runs(tmp_path):
    """`tessera synth --arch qwen35moe` writes llama.cpp's qwen35moe layout: gguf-py reads it with the
    shapes the metadata implies, and tessera runs it (3 Gated DeltaNet layers + 1 attention)."""
    import gguf
    out = tmp_path / "h.gguf"
    run_tessera("synth", "--arch", "qwen35moe", "--preset", "tiny", "--type", "q4_0", "--out", out)
    r = gguf.GGUFReader(str(out))
    f = lambda k: r.fields[k].contents()
    assert f("general.architecture") == "qwen35moe"
    H, E = f("qwen35moe.embedding_length"), f("qwen35moe.expert_count")
    I, nv = f("qwen35moe.expert_feed_forward_length"), f("qwen35moe.ssm.time_step_rank")
    names = {t.name: t for t in r.tensors}
    assert list(names["blk.0.ffn_gate_exps.weight"].shape) == [H, I, E]
    assert list(names["blk.0.ssm_a"].shape) == [nv]
    assert "blk.3.attn_q.weight" in names and "blk.3.attn_qkv.weight" not in names
    assert names["blk.0.ssm_a"].data.max() < 0  # ssm_a = -exp(A_log)
    p = run_tessera("run", out, "--tokens", "1,2,3,4,5", "--ids", "--temperature", 0, "--max-tokens", 8)
    ids = [int(x) for x in p.stdout.split()]
    assert len(ids) == 8 and all(0 <= i < f("qwen35moe.vocab_size") for i in ids)
