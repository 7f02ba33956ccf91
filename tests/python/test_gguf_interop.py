"""GGUF interop: files written by llama.cpp's own `gguf` package must read identically in tessera
(compared through `tessera inspect --json`), and bad files must fail with one clear error line."""
import json
import os
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import GGUFValueType as V  # noqa: E402

TESSERA = os.environ.get("TESSERA_BIN", "tessera")


def inspect(path, *flags):
    r = subprocess.run([TESSERA, "inspect", str(path), *flags], capture_output=True, text=True, timeout=120)
    return r


def inspect_json(path, *flags):
    r = inspect(path, "--json", *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def f32(x):
    return float(np.float32(x))


# key -> (GGUFValueType, value, sub_type, expected tessera type name, expected JSON value)
SCALARS = {
    "t.u8": (V.UINT8, 200, "u8", 200),
    "t.i8": (V.INT8, -100, "i8", -100),
    "t.u16": (V.UINT16, 60000, "u16", 60000),
    "t.i16": (V.INT16, -30000, "i16", -30000),
    "t.u32": (V.UINT32, 4000000000, "u32", 4000000000),
    "t.i32": (V.INT32, -2000000000, "i32", -2000000000),
    "t.f32": (V.FLOAT32, 0.1, "f32", f32(0.1)),
    "t.bool_t": (V.BOOL, True, "bool", True),
    "t.bool_f": (V.BOOL, False, "bool", False),
    "t.str": (V.STRING, "héllo\n\"wörld\" 🙂", "string", "héllo\n\"wörld\" 🙂"),
    "t.u64": (V.UINT64, 18000000000000000000, "u64", 18000000000000000000),
    "t.i64": (V.INT64, -9000000000000000000, "i64", -9000000000000000000),
    "t.f64": (V.FLOAT64, -1.25e-300, "f64", -1.25e-300),
}
ARRAYS = {
    "a.u8": (V.UINT8, [0, 1, 255], "u8"),
    "a.i8": (V.INT8, [-128, 0, 127], "i8"),
    "a.u16": (V.UINT16, [1, 65535], "u16"),
    "a.i16": (V.INT16, [-32768, 5], "i16"),
    "a.u32": (V.UINT32, [7, 4294967295], "u32"),
    "a.i32": (V.INT32, list(range(-3, 4)), "i32"),
    "a.f32": (V.FLOAT32, [0.5, -0.1, 3e38], "f32"),
    "a.bool": (V.BOOL, [True, False, True], "bool"),
    "a.str": (V.STRING, ["a", "", "ccc", "ü"], "string"),
    "a.u64": (V.UINT64, [1 << 63], "u64"),
    "a.i64": (V.INT64, [-(1 << 62), 3], "i64"),
    "a.f64": (V.FLOAT64, [1e-300, 2.5], "f64"),
    "a.tokens": (V.STRING, [f"tok{i}" for i in range(200)], "string"),
    "a.scores": (V.FLOAT32, [i * 0.5 for i in range(100)], "f32"),
}


def expected_array_value(sub, vals):
    return [f32(v) for v in vals] if sub == V.FLOAT32 else vals


def tensors_to_write():
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    out = [
        ("token_embd.weight", Q.F32, x[:3, :5].copy(), (3, 5)),
        ("blk.0.attn_q.weight", Q.F16, x[:2, :8].astype(np.float16), (2, 8)),
        ("blk.0.bf16", Q.BF16, gguf.quants.quantize(x[:2, :64], Q.BF16), (2, 64)),
        ("blk.0.q8_0", Q.Q8_0, gguf.quants.quantize(x[:3, :64], Q.Q8_0), (3, 64)),
        ("blk.0.q4_0", Q.Q4_0, gguf.quants.quantize(x[:1, :32], Q.Q4_0), (1, 32)),
        ("blk.0.mxfp4", Q.MXFP4, gguf.quants.quantize(x[:2, :64], Q.MXFP4), (2, 64)),
        ("blk.0.i32_4d", Q.I32, np.arange(24, dtype=np.int32).reshape(2, 3, 2, 2), (2, 3, 2, 2)),
        ("blk.0.f64", Q.F64, np.array([1.5, 2.5], dtype=np.float64), (2,)),
    ]
    # Types gguf-py cannot quantize to: blocks of random bytes (the layout is what is read).
    for name, t, rows in [("blk.0.q4_k", Q.Q4_K, 2), ("blk.0.q6_k", Q.Q6_K, 1), ("blk.0.iq2_xxs", Q.IQ2_XXS, 2),
                          ("blk.0.q5_k", Q.Q5_K, 3)]:
        try:
            data = gguf.quants.quantize(x[:rows], t)
        except NotImplementedError:
            block = gguf.GGML_QUANT_SIZES[t][1]
            data = rng.integers(0, 256, size=(rows, block), dtype=np.uint8)
        out.append((name, t, data, (rows, 256)))
    return out


def write_reference_file(path, alignment=None):
    w = gguf.GGUFWriter(str(path), "qwen3")
    if alignment:
        w.add_custom_alignment(alignment)
    for key, (vt, val, _, _) in SCALARS.items():
        w.add_key_value(key, val, vt)
    for key, (sub, vals, _) in ARRAYS.items():
        w.add_key_value(key, vals, V.ARRAY, sub_type=sub)
    w.add_key_value("a.nested", [[1, 2], [3]], V.ARRAY, sub_type=V.ARRAY)
    w.add_key_value("a.nested_str", [["x"], ["y", "z"]], V.ARRAY, sub_type=V.ARRAY)
    tensors = tensors_to_write()
    for name, t, data, _ in tensors:
        w.add_tensor(name, data, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors


@pytest.mark.parametrize("alignment", [None, 64])
def test_files_written_by_gguf_py_read_identically(tmp_path, alignment):
    path = tmp_path / "ref.gguf"
    tensors = write_reference_file(path, alignment)
    j = inspect_json(path, "--full")
    ref = gguf.GGUFReader(str(path))

    assert j["format"] == "gguf" and j["version"] == 3
    assert j["architecture"] == "qwen3"
    assert j["alignment"] == (alignment or 32)
    assert j["data_offset"] == ref.data_offset
    assert j["file_size"] == os.path.getsize(path)

    meta = j["metadata"]
    # Same keys in the same order as gguf-py's reader (which lists the header fields first).
    assert list(meta) == [k for k in ref.fields if not k.startswith("GGUF.")]
    for key, (_, _, tname, value) in SCALARS.items():
        assert meta[key] == {"type": tname, "value": value}, key
    for key, (sub, vals, ename) in ARRAYS.items():
        assert meta[key] == {"type": "array", "elem_type": ename, "length": len(vals),
                             "value": expected_array_value(sub, vals)}, key
    assert meta["a.nested"] == {"type": "array", "elem_type": "array", "length": 2, "value": [[1, 2], [3]]}
    assert meta["a.nested_str"]["value"] == [["x"], ["y", "z"]]
    if alignment:
        assert meta["general.alignment"] == {"type": "u32", "value": alignment}

    assert j["tensor_count"] == len(tensors) == len(ref.tensors)
    by_name = {t.name: t for t in ref.tensors}
    for (name, qt, data, shape), jt in zip(tensors, j["tensors"]):
        rt = by_name[name]
        assert jt["name"] == name
        assert jt["type"] == qt.name and jt["ggml_type"] == int(qt)
        assert tuple(jt["shape"]) == shape                     # outermost first
        assert jt["shape"][::-1] == [int(d) for d in rt.shape]  # gguf-py lists ne[] innermost first
        assert jt["nbytes"] == rt.n_bytes == data.nbytes
        assert j["data_offset"] + jt["offset"] == rt.data_offset
        assert jt["offset"] % (alignment or 32) == 0
    assert j["total_bytes"] == sum(t[2].nbytes for t in tensors)
    assert j["types"]["Q8_0"] == {"count": 1, "bytes": tensors[3][2].nbytes}


def test_long_arrays_are_summarized_without_full(tmp_path):
    path = tmp_path / "ref.gguf"
    write_reference_file(path)
    meta = inspect_json(path)["metadata"]
    tokens = meta["a.tokens"]
    assert tokens["length"] == 200 and tokens["truncated"] is True
    assert tokens["preview"] == [f"tok{i}" for i in range(8)]
    assert "value" not in tokens
    assert meta["a.i32"]["value"] == list(range(-3, 4))  # short arrays stay whole


def test_text_summary(tmp_path):
    path = tmp_path / "ref.gguf"
    write_reference_file(path)
    r = inspect(path, "--tensors")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "architecture: qwen3" in out
    assert "200 strings" in out
    assert "tensors:      12," in out
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.startswith("  blk.0.") or ln.startswith("  token_embd")}
    assert lines["blk.0.iq2_xxs"][1] == "IQ2_XXS"
    assert lines["blk.0.q4_k"][1:3] == ["Q4_K", "[2,"]
    assert any(ln.split()[:2] == ["Q4_K", "1"] for ln in out.splitlines())


@pytest.mark.parametrize("content,message", [
    (b"", "truncated: magic"),
    (b"GGML" + b"\0" * 20, "not a GGUF file"),
    (b"GGUF\x03\0\0\0" + (1 << 62).to_bytes(8, "little") + b"\0" * 8, "tensor count 4611686018427387904 cannot fit"),
])
def test_bad_files_give_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    r = inspect(path)
    assert r.returncode == 1
    assert r.stderr.startswith("tessera inspect: error: ") and message in r.stderr, r.stderr
    assert str(path) in r.stderr


def test_missing_path(tmp_path):
    r = inspect(tmp_path / "nope.gguf")
    assert r.returncode == 1 and "no such file" in r.stderr
