#!/usr/bin/env python3
"""Small safetensors checkpoints for tessera's reader tests (tests/fixtures/safetensors/).

Written with the PyPI `safetensors` package (safetensors.numpy.save_file); the bf16 file is
written by hand (header JSON + raw bytes) since numpy has no bfloat16. Every value follows
`expected(dtype, n)` below, which tests/formats/test_safetensors.cpp restates in C++.

Usage: scripts/make_safetensors_fixtures.py [OUT_DIR]   (default tests/fixtures/safetensors)
"""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file


def expected(dtype: str, n: int) -> np.ndarray:
    """Element i of a tensor of `dtype` with n elements (flattened, row-major)."""
    i = np.arange(n, dtype=np.int64)
    return {
        "F64": lambda: i * 0.25 - 1,
        "F32": lambda: i * 0.5 - 3,
        "F16": lambda: i * 0.125 - 0.5,
        "I8": lambda: i - 5,
        "I16": lambda: i * 300 - 1000,
        "I32": lambda: i * 100000 - 7,
        "I64": lambda: i * (1 << 40) - 3,
        "U8": lambda: (i * 7) % 256,
        "U16": lambda: i * 1000,
        "U32": lambda: i * 0x01010101,
        "U64": lambda: i << 40,
        "BOOL": lambda: i % 3 == 0,
    }[dtype]().astype(NP[dtype])


NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I8": np.int8, "I16": np.int16, "I32": np.int32,
      "I64": np.int64, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_}

# name -> (dtype, shape) of the single-file checkpoint
SINGLE = {
    "f64": ("F64", [3]), "f32": ("F32", [2, 3]), "f16": ("F16", [4, 2]), "i8": ("I8", [5]), "i16": ("I16", [3]),
    "i32": ("I32", [2, 2]), "i64": ("I64", [3]), "u8": ("U8", [6]), "u16": ("U16", [2]), "u32": ("U32", [3, 2]),
    "u64": ("U64", [2]), "bool": ("BOOL", [4]), "scalar": ("F32", []), "empty": ("F32", [0, 4]),
    "rank4": ("F32", [1, 2, 1, 3]),
}
SHARDS = {
    "model-00001-of-00002.safetensors": {"model.embed_tokens.weight": ("F32", [4, 3]), "model.layers.0.w": ("F16", [2, 2])},
    "model-00002-of-00002.safetensors": {"lm_head.weight": ("F32", [4, 3]), "model.layers.0.q": ("U32", [4, 2])},
}
GLOB = {"a.safetensors": {"x": ("F32", [2])}, "b.safetensors": {"y": ("I32", [3])}}


def tensors(spec: dict) -> dict[str, np.ndarray]:
    out = {}
    for name, (dtype, shape) in spec.items():
        n = int(np.prod(shape)) if shape else 1
        out[name] = expected(dtype, n).reshape(shape)
    return out


def write_bf16_file(path: Path) -> None:
    """bf16 [3, 2] (value i*0.5 - 1, exact in bf16) plus an F8_E4M3 [8] tensor (bytes 0..7)."""
    vals = (np.arange(6) * 0.5 - 1).astype(np.float32)
    bf16 = (vals.view(np.uint32) >> 16).astype("<u2").tobytes()
    f8 = bytes(range(8))
    header = {"__metadata__": {"format": "pt"},
              "w": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, len(bf16)]},
              "scale_fp8": {"dtype": "F8_E4M3", "shape": [8], "data_offsets": [len(bf16), len(bf16) + len(f8)]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + bf16 + f8)


def write_all(out: Path) -> None:
    for sub in ("single", "bf16", "sharded", "glob"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    save_file(tensors(SINGLE), str(out / "single/model.safetensors"), metadata={"format": "pt", "note": "tessera"})
    write_bf16_file(out / "bf16/model.safetensors")
    weight_map = {}
    for fname, spec in SHARDS.items():
        save_file(tensors(spec), str(out / "sharded" / fname), metadata={"format": "pt"})
        weight_map.update({name: fname for name in spec})
    index = {"metadata": {"total_size": 0}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "sharded/model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    for fname, spec in GLOB.items():
        save_file(tensors(spec), str(out / "glob" / fname))


if __name__ == "__main__":
    write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/fixtures/safetensors")
