"""`tessera synth`: random-weight models with real architectures' names, shapes and metadata.

Written files are read back with llama.cpp's own `gguf` package (or `safetensors` for MLX) and
checked against layouts and published sizes written out here independently of tessera's code;
every written model must load and run in tessera. Real-size presets are checked through
`--dry-run` (the plan as JSON), so no test writes gigabytes.
"""
import json
import re
import struct

import numpy as np
import pytest

from conftest import FIXTURES, SHARED, run_tessera

ARCHS = ["qwen3", "llama", "qwen35moe", "qwen3next"]
TYPES = ["q4_0", "q4_k", "q8_0", "bf16"]
QWEN3_TOKENIZER = SHARED / "data" / "tokenizers" / "qwen3" / "tokenizer.json"

# The tiny presets (tessera's test sizes): vocab, hidden, layers, heads, kv heads, head dim, ffn.
TINY_DENSE = dict(V=512, H=256, L=4, nh=4, nkv=2, D=64, F=768)
# ... and the hybrids': GDN key/value heads and dims, experts, top-k, expert / shared ffn.
TINY_HYBRID = dict(V=512, H=256, L=4, nh=4, nkv=2, D=64, nk=2, nv=4, dk=64, dv=64, E=8, k=2, I=256, S=256)

# Published config.json values of the real-size presets.
PUBLISHED = {
    # Qwen/Qwen3-8B
    ("qwen3", "qwen3-8b"): dict(V=151936, H=4096, L=36, nh=32, nkv=8, D=128, F=12288, tied=False, theta=1e6,
                                ctx=40960, eps=1e-6, params=8.19e9),
    # Qwen/Qwen3-0.6B
    ("qwen3", "qwen3-0.6b"): dict(V=151936, H=1024, L=28, nh=16, nkv=8, D=128, F=3072, tied=True, theta=1e6,
                                  ctx=40960, eps=1e-6, params=0.60e9),
    # meta-llama/Meta-Llama-3-8B (8,030,261,248 parameters)
    ("llama", "llama-3-8b"): dict(V=128256, H=4096, L=32, nh=32, nkv=8, D=128, F=14336, tied=False, theta=5e5,
                                  ctx=8192, eps=1e-5, params=8.03e9),
    # Qwen3.6-35B-A3B (REFERENCE.md)
    ("qwen35moe", "qwen3.6-35b-a3b"): dict(V=248320, H=2048, L=40, nh=16, nkv=2, D=256, nk=16, nv=32, dk=128, dv=128,
                                           E=256, k=8, I=512, S=512, tied=False, theta=1e7, params=35e9),
    # Qwen3-Next-80B-A3B (REFERENCE.md)
    ("qwen3next", "qwen3-next-80b-a3b"): dict(V=151936, H=2048, L=48, nh=16, nkv=2, D=256, nk=16, nv=32, dk=128, dv=128,
                                              E=512, k=10, I=512, S=512, tied=False, theta=1e7, params=80e9),
}


def gguf_layout(arch, c, tied=False):
    """llama.cpp's GGUF tensor names -> shapes (outermost first) for `arch` with sizes `c`."""
    H, D = c["H"], c["D"]
    t = {"token_embd.weight": (c["V"], H), "output_norm.weight": (H,)}
    if not tied:
        t["output.weight"] = (c["V"], H)
    for i in range(c["L"]):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = (H,)
        if arch in ("qwen3", "llama"):
            t.update({p + "attn_q.weight": (c["nh"] * D, H), p + "attn_k.weight": (c["nkv"] * D, H),
                      p + "attn_v.weight": (c["nkv"] * D, H), p + "attn_output.weight": (H, c["nh"] * D),
                      p + "ffn_norm.weight": (H,), p + "ffn_gate.weight": (c["F"], H), p + "ffn_up.weight": (c["F"], H),
                      p + "ffn_down.weight": (H, c["F"])})
            if arch == "qwen3":
                t.update({p + "attn_q_norm.weight": (D,), p + "attn_k_norm.weight": (D,)})
            continue
        nk, nv, dk, dv, E, I, S = (c[x] for x in ("nk", "nv", "dk", "dv", "E", "I", "S"))
        conv = 2 * nk * dk + nv * dv
        t[p + "post_attention_norm.weight"] = (H,)
        if (i + 1) % 4 == 0:  # gated full attention: q and its gate interleaved per head
            t.update({p + "attn_q.weight": (c["nh"] * D * 2, H), p + "attn_k.weight": (c["nkv"] * D, H),
                      p + "attn_v.weight": (c["nkv"] * D, H), p + "attn_output.weight": (H, c["nh"] * D),
                      p + "attn_q_norm.weight": (D,), p + "attn_k_norm.weight": (D,)})
        else:  # Gated DeltaNet
            t.update({p + "attn_qkv.weight": (conv, H), p + "attn_gate.weight": (nv * dv, H),
                      p + "ssm_conv1d.weight": (conv, 4), p + "ssm_dt.bias": (nv,), p + "ssm_a": (nv,),
                      p + "ssm_norm.weight": (dv,), p + "ssm_out.weight": (H, nv * dv)})
            if arch == "qwen3next":
                t[p + "ssm_ba.weight"] = (2 * nv, H)
            else:
                t.update({p + "ssm_beta.weight": (nv, H), p + "ssm_alpha.weight": (nv, H)})
        t.update({p + "ffn_gate_inp.weight": (E, H), p + "ffn_gate_exps.weight": (E, I, H),
                  p + "ffn_up_exps.weight": (E, I, H), p + "ffn_down_exps.weight": (E, H, I),
                  p + "ffn_gate_inp_shexp.weight": (1, H), p + "ffn_gate_shexp.weight": (S, H),
                  p + "ffn_up_shexp.weight": (S, H), p + "ffn_down_shexp.weight": (H, S)})
    return t


def is_matrix(name, shape):
    """Stored in the requested type: 2-D+ weights except routers and conv taps (f32 in llama.cpp)."""
    return len(shape) >= 2 and "ffn_gate_inp" not in name and "ssm_conv1d" not in name


def synth(*args):
    return run_tessera("synth", *args)


def run_ids(model, n=8):
    p = run_tessera("run", model, "--tokens", "1,2,3,4,5", "--ids", "--temperature", 0, "--max-tokens", n,
                    "--ignore-eos")
    return [int(x) for x in p.stdout.split()]


def logits(model, tmp_path, ids=(1, 2, 3, 4, 5, 6, 7), vocab=512):
    out = tmp_path / "logits.bin"
    run_tessera("logits", "--model", model, "--tokens", ",".join(map(str, ids)), "--out", out)
    return np.fromfile(out, "<f4").reshape(len(ids), vocab)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """tiny (arch, type) -> path of the written GGUF (each written once)."""
    root = tmp_path_factory.mktemp("synth")
    cache = {}

    def get(arch, typ):
        if (arch, typ) not in cache:
            out = root / f"{arch}-{typ}.gguf"
            synth("--arch", arch, "--preset", "tiny", "--type", typ, "--out", out)
            cache[(arch, typ)] = out
        return cache[(arch, typ)]
    yield get
    for path in cache.values():  # keep /tmp small: pytest retains its last temp folders
        path.unlink()


@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_tiny_gguf_reads_back_in_gguf_py_and_runs(arch, typ, tiny, tmp_path):
    import gguf
    path = tiny(arch, typ)
    r = gguf.GGUFReader(str(path))
    f = lambda k: r.fields[k].contents()
    dense = arch in ("qwen3", "llama")
    c = TINY_DENSE if dense else TINY_HYBRID
    want = gguf_layout(arch, c)
    got = {t.name: t for t in r.tensors}
    assert set(got) == set(want)
    want_type = getattr(gguf.GGMLQuantizationType, typ.upper())
    for name, shape in want.items():
        t = got[name]
        assert [int(x) for x in t.shape] == list(reversed(shape)), name  # ggml order: innermost first
        assert t.tensor_type == (want_type if is_matrix(name, shape) else gguf.GGMLQuantizationType.F32), name
    assert f("general.architecture") == arch
    assert f(f"{arch}.block_count") == c["L"] and f(f"{arch}.embedding_length") == c["H"]
    assert f(f"{arch}.attention.head_count") == c["nh"] and f(f"{arch}.attention.head_count_kv") == c["nkv"]
    assert f(f"{arch}.vocab_size") == c["V"] and len(f("tokenizer.ggml.tokens")) == c["V"]
    if dense:
        assert f(f"{arch}.feed_forward_length") == c["F"] and f(f"{arch}.rope.dimension_count") == c["D"]
    else:
        assert f(f"{arch}.rope.dimension_count") == c["D"] // 4  # partial rotary 0.25
        assert f(f"{arch}.full_attention_interval") == 4
        assert f(f"{arch}.ssm.group_count") == c["nk"] and f(f"{arch}.ssm.time_step_rank") == c["nv"]
        assert f(f"{arch}.ssm.state_size") == c["dk"] and f(f"{arch}.ssm.inner_size") == c["nv"] * c["dv"]
        assert f(f"{arch}.ssm.conv_kernel") == 4
        assert f(f"{arch}.expert_count") == c["E"] and f(f"{arch}.expert_used_count") == c["k"]
        assert f(f"{arch}.expert_feed_forward_length") == c["I"]
        assert f(f"{arch}.expert_shared_feed_forward_length") == c["S"]
        assert got["blk.0.ssm_a"].data.max() < 0  # ssm_a = -exp(A_log)
        if arch == "qwen35moe":  # llama.cpp's qwen35moe loader requires the MRoPE sections
            assert sum(f("qwen35moe.rope.dimension_sections")) == c["D"] // 4 // 2
    ids = run_ids(path)
    assert len(ids) == 8 and all(0 <= i < c["V"] for i in ids)
    assert len(set(ids)) >= 2, f"degenerate output {ids}"
    lg = logits(path, tmp_path)
    assert np.isfinite(lg).all() and lg.std() > 1e-3


@pytest.mark.parametrize("arch", ARCHS)
def test_activations_stay_finite_through_many_layers(arch, tmp_path):
    """The scaling keeps every layer's output O(1): 64 layers still give finite, spread logits."""
    out = tmp_path / "deep.gguf"
    synth("--arch", arch, "--preset", "tiny", "--layers", 64, "--type", "q4_0", "--out", out)
    lg = logits(out, tmp_path)
    out.unlink()
    assert np.isfinite(lg).all()
    assert 0.1 < lg.std() < 10 and len(set(lg.argmax(1).tolist())) >= 3


@pytest.mark.parametrize("typ", ["q4_0", "q4_k", "q8_0"])
def test_random_codes_have_the_float_recipes_std(typ, tiny):
    """Quantized weights are random codes with block scales giving std 1/sqrt(cols) (embeddings 1)
    and zero mean once dequantized by llama.cpp's own codec."""
    import gguf
    from gguf import quants
    for arch in ("qwen3", "qwen3next"):
        r = gguf.GGUFReader(str(tiny(arch, typ)))
        for t in r.tensors:
            if t.tensor_type.name != typ.upper():
                continue
            w = quants.dequantize(t.data, t.tensor_type).astype(np.float64)
            cols = int(t.shape[0])
            want = 1.0 if t.name == "token_embd.weight" else cols ** -0.5
            assert abs(w.std() / want - 1) < 0.1, f"{arch} {t.name}: std {w.std():.4g}, want {want:.4g}"
            assert abs(w.mean()) < 0.1 * want, f"{arch} {t.name}: mean {w.mean():.3g}"


def test_seed_makes_writes_deterministic(tmp_path):
    a, b, c = tmp_path / "a.gguf", tmp_path / "b.gguf", tmp_path / "c.gguf"
    synth("--arch", "qwen3", "--preset", "tiny", "--layers", 1, "--type", "q4_k", "--seed", 7, "--out", a)
    synth("--arch", "qwen3", "--preset", "tiny", "--layers", 1, "--type", "q4_k", "--seed", 7, "--threads", 1, "--out", b)
    synth("--arch", "qwen3", "--preset", "tiny", "--layers", 1, "--type", "q4_k", "--seed", 8, "--out", c)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes() and a.stat().st_size == c.stat().st_size


@pytest.mark.parametrize("arch,preset", list(PUBLISHED))
def test_real_size_presets_match_published_configs(arch, preset):
    """The dry run's plan: every tensor of the real model with its published shape."""
    c = PUBLISHED[(arch, preset)]
    plan = json.loads(synth("--arch", arch, "--preset", preset, "--type", "q4_k", "--dry-run").stdout)
    assert plan["format"] == "gguf" and plan["arch"] == arch
    got = {t["name"]: tuple(t["shape"]) for t in plan["tensors"]}
    assert got == gguf_layout(arch, c, tied=c["tied"])
    cfg = plan["config"]
    assert cfg["rope_theta"] == c["theta"] and cfg["tied_embeddings"] == c["tied"]
    if "ctx" in c:
        assert cfg["max_ctx"] == c["ctx"] and cfg["rms_eps"] == pytest.approx(c["eps"])
    assert abs(plan["parameters"] / c["params"] - 1) < 0.03, plan["parameters"]
    types = {t["name"]: t["type"] for t in plan["tensors"]}
    assert types["blk.0.attn_norm.weight"] == "f32" and types["token_embd.weight"] == "q4_k"
    # --layers keeps every size but the depth.
    short = json.loads(synth("--arch", arch, "--preset", preset, "--layers", 4, "--dry-run").stdout)
    assert {t["name"]: tuple(t["shape"]) for t in short["tensors"]} == gguf_layout(arch, dict(c, L=4), tied=c["tied"])


def test_bad_arguments_give_clear_errors(tmp_path):
    p = run_tessera("synth", "--arch", "qwen3", "--preset", "qwen3-9b", "--dry-run", check=False)
    assert p.returncode != 0 and "qwen3-8b" in p.stderr  # lists the known presets
    p = run_tessera("synth", "--arch", "gpt2", "--dry-run", check=False)
    assert p.returncode != 0 and "qwen3next" in p.stderr
    p = run_tessera("synth", "--arch", "qwen3", "--type", "q5_1", "--out", tmp_path / "x.gguf", check=False)
    assert p.returncode != 0 and "--type" in p.stderr and not (tmp_path / "x.gguf").exists()


@pytest.mark.skipif(not QWEN3_TOKENIZER.exists(), reason="no Qwen3 tokenizer in ../shared/data/tokenizers")
def test_real_tokenizer_is_embedded_and_tokenizes_like_hf(tmp_path):
    import gguf
    from tokenizers import Tokenizer
    out = tmp_path / "tok.gguf"
    synth("--arch", "qwen3", "--preset", "tiny", "--layers", 1, "--type", "q8_0", "--tokenizer", QWEN3_TOKENIZER,
          "--out", out)
    hf = Tokenizer.from_file(str(QWEN3_TOKENIZER))
    n = hf.get_vocab_size(with_added_tokens=True)
    r = gguf.GGUFReader(str(out))
    f = lambda k: r.fields[k].contents()
    vocab = f("qwen3.vocab_size")
    assert vocab >= n and vocab % 64 == 0 and len(f("tokenizer.ggml.tokens")) == vocab  # padded to the model
    assert f("tokenizer.ggml.pre") == "qwen2" and "im_start" in f("tokenizer.chat_template")
    texts = ["Hello world! It's 1234 tokens.", "中文字符测试，标点。 café naïve", "  spaces\n\n\tand tabs  ",
             "def f(x):\n    return x**2  # 🤗"]
    batch = tmp_path / "texts.json"
    batch.write_text(json.dumps(texts))
    lines = run_tessera("tokenize", "--model", out, "--batch", batch).stdout.splitlines()
    assert len(lines) == len(texts)
    for text, line in zip(texts, lines):
        assert [int(x) for x in line.split()] == hf.encode(text, add_special_tokens=False).ids, text
    special = "<|im_start|>user\nhi<|im_end|>"
    got = run_tessera("tokenize", "--model", out, "--text", special, "--special").stdout.split()
    assert [int(x) for x in got] == hf.encode(special).ids
    assert len(run_ids(out)) == 8
    out.unlink()
    # A real-size preset keeps its published vocabulary: a bigger tokenizer is an error, not a resize.
    p = run_tessera("synth", "--arch", "llama", "--preset", "llama-3-8b", "--tokenizer", QWEN3_TOKENIZER, "--dry-run",
                    check=False)
    assert p.returncode != 0 and "128256" in p.stderr


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return header, raw[8 + n:]


def tensor(header, data, name):
    h = header[name]
    b, e = h["data_offsets"]
    if h["dtype"] == "U32":
        return np.frombuffer(data[b:e], "<u4").reshape(h["shape"])
    assert h["dtype"] == "BF16"
    bits = np.frombuffer(data[b:e], "<u2").astype(np.uint32) << 16
    return bits.view(np.float32).reshape(h["shape"])


@pytest.mark.parametrize("arch", ["qwen3", "qwen35moe", "qwen3next"])
def test_mlx4_checkpoint_has_mlx_lm_layout_and_runs(arch, tmp_path):
    out = tmp_path / "m"
    synth("--arch", arch, "--preset", "tiny", "--type", "mlx4", "--out", out)
    cfg = json.loads((out / "config.json").read_text())
    q = cfg["quantization"]
    assert q["group_size"] == 64 and q["bits"] == 4 and cfg["quantization_config"] == q
    assert (out / "tokenizer.json").exists() and (out / "tokenizer_config.json").exists()
    index = json.loads((out / "model.safetensors.index.json").read_text())
    header, data = read_safetensors(out / "model.safetensors")
    assert set(index["weight_map"]) == set(header)
    if arch != "qwen3":
        # The same names and dtypes as mlx-lm's own conversion of a model of this architecture
        # (tests/fixtures/*_tiny_mlx4: 4-bit, routers 8-bit), over the layers both have.
        fixture, _ = read_safetensors(FIXTURES / f"{arch}_tiny_mlx4" / "model.safetensors")
        first4 = lambda h: {k: v["dtype"] for k, v in h.items()
                            if not re.search(r"layers\.(\d+)\.", k) or int(re.search(r"layers\.(\d+)\.", k)[1]) < 4}
        assert first4(header) == first4(fixture)
        fq = json.loads((FIXTURES / f"{arch}_tiny_mlx4" / "config.json").read_text())["quantization"]
        assert {k for k in q if isinstance(q[k], dict)} == {k for k in fq if isinstance(fq[k], dict)
                                                          and int(re.search(r"layers\.(\d+)\.", k)[1]) < 4}
    else:
        assert cfg["model_type"] == "qwen3" and "model.layers.3.self_attn.q_norm.weight" in header
    # Dequantize a 4-bit matrix (w = scale·q + bias per group of 64): zero mean, std 1/sqrt(in).
    prefix = "language_model." if arch == "qwen35moe" else ""
    mod = prefix + "model.layers.3.self_attn.o_proj"
    codes = tensor(header, data, mod + ".weight")
    q4 = (codes[..., None] >> (4 * np.arange(8, dtype=np.uint32))) & 15
    q4 = q4.reshape(codes.shape[0], -1).astype(np.float64)
    scales = np.repeat(tensor(header, data, mod + ".scales"), 64, axis=1)
    biases = np.repeat(tensor(header, data, mod + ".biases"), 64, axis=1)
    w = scales * q4 + biases
    want = w.shape[1] ** -0.5
    assert abs(w.std() / want - 1) < 0.1 and abs(w.mean()) < 0.1 * want
    ids = run_ids(out)
    assert len(ids) == 8 and all(0 <= i < 512 for i in ids) and len(set(ids)) >= 2
    assert np.isfinite(logits(out, tmp_path)).all()
    run_tessera("run", out, "--prompt", "Hello there", "--max-tokens", 4, "--temperature", 0)  # via tokenizer.json
