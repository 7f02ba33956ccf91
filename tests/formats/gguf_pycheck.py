"""Checks a tessera-written GGUF file with llama.cpp's own reader (gguf-py) against the values the
writing test meant to store: python3 gguf_pycheck.py FILE.gguf EXPECTED.json. Exit 0 if identical.
Every metadata entry is also re-encoded here from the GGUF spec and compared byte for byte."""
import json
import struct
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType as V

FMT = {V.UINT8: "<B", V.INT8: "<b", V.UINT16: "<H", V.INT16: "<h", V.UINT32: "<I", V.INT32: "<i",
       V.FLOAT32: "<f", V.BOOL: "<?", V.UINT64: "<Q", V.INT64: "<q", V.FLOAT64: "<d"}


def enc_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def enc_value(t, v):
    """Encoding of a value (no type tag). Arrays are {"elem_type": int, "items": [...]}."""
    if t == V.STRING:
        return enc_str(v)
    if t == V.ARRAY:
        et = V(v["elem_type"])
        return struct.pack("<IQ", et, len(v["items"])) + b"".join(enc_value(et, x) for x in v["items"])
    return struct.pack(FMT[t], v)


def plain(t, v):
    """The value as gguf-py's ReaderField.contents() returns it (non-nested only)."""
    if t == V.ARRAY:
        return [plain(V(v["elem_type"]), x) for x in v["items"]]
    if t == V.FLOAT32:
        return float(np.float32(v))
    return v


def main(path, expected_path):
    exp = json.load(open(expected_path))
    raw = open(path, "rb").read()
    r = GGUFReader(path)
    errors = []

    def check(cond, msg):
        if not cond:
            errors.append(msg)

    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    check(keys == [kv["key"] for kv in exp["metadata"]], f"keys {keys}")
    check(r.alignment == exp["alignment"], f"alignment {r.alignment}")
    for kv in exp["metadata"]:
        key, t = kv["key"], V(kv["type"])
        f = r.fields.get(key)
        if f is None:
            errors.append(f"missing key {key}")
            continue
        check(f.types[0] == t, f"{key}: type {f.types}")
        want = enc_str(key) + struct.pack("<I", t) + enc_value(t, kv["value"])
        n = sum(p.nbytes for p in f.parts)
        check(raw[f.offset:f.offset + n] == want, f"{key}: bytes differ")
        nested = t == V.ARRAY and V(kv["value"]["elem_type"]) == V.ARRAY
        if not nested:
            check(f.contents() == plain(t, kv["value"]), f"{key}: contents {f.contents()!r}")

    check(len(r.tensors) == len(exp["tensors"]), f"{len(r.tensors)} tensors")
    end = r.data_offset
    for rt, et in zip(r.tensors, exp["tensors"]):
        name = et["name"]
        check(rt.name == name, f"tensor order: {rt.name} != {name}")
        check(int(rt.tensor_type) == et["ggml_type"], f"{name}: type {rt.tensor_type}")
        check([int(d) for d in rt.shape][::-1] == et["shape"], f"{name}: ne {rt.shape}")
        data = bytes.fromhex(et["hex"])
        check(rt.n_bytes == len(data), f"{name}: {rt.n_bytes} bytes")
        check(np.asarray(rt.data).tobytes() == data, f"{name}: data differs")
        check(rt.data_offset == end, f"{name}: at {rt.data_offset}, expected {end}")
        check(rt.data_offset % exp["alignment"] == 0, f"{name}: misaligned")
        pad = -rt.n_bytes % exp["alignment"]
        check(raw[rt.data_offset + rt.n_bytes:rt.data_offset + rt.n_bytes + pad] == b"\0" * pad, f"{name}: padding")
        end = rt.data_offset + rt.n_bytes + pad
    check(len(raw) == end, f"file is {len(raw)} bytes, expected {end}")

    for e in errors:
        print("gguf_pycheck:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
