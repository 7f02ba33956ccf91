#!/usr/bin/env python3
"""Golden data for tessera's quant codecs (tests/fixtures/quants/<type>.bin).

The oracle is llama.cpp's own Python package `gguf` (gguf.quants): it quantizes F32/F16/BF16/
Q4_0/Q8_0/MXFP4 and dequantizes every type. gguf.quants has no Q4_K/Q6_K quantizer, so those
bytes come from `ggml_ref_quantize_q4_k/q6_k` below: a scalar float32 transcription of ggml's
quantize_row_q4_K_ref / quantize_row_q6_K_ref (ggml-quants.c), independent of tessera's C++.

File layout (little-endian):
    b"TSQF", u32 version (1), u32 n_cases, then per case:
    char label[16] (NUL padded), u32 kind (0: input floats given, 1: raw blocks only),
    u32 n (elements), u32 nbytes, [f32 input[n] if kind == 0], u8 blocks[nbytes], f32 dequant[n]
Kind 0: blocks = quantize(input); kind 1: blocks are random bit patterns (dequantize only).

Usage: scripts/make_quant_fixtures.py [OUT_DIR]   (default tests/fixtures/quants)
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T
import gguf.quants as gq

F = np.float32
TYPES = {"f32": T.F32, "f16": T.F16, "bf16": T.BF16, "q4_0": T.Q4_0, "q8_0": T.Q8_0,
         "q4_k": T.Q4_K, "q6_k": T.Q6_K, "mxfp4": T.MXFP4}
QK_K = 256

# ---- ggml reference quantizers for the K-quants (scalar float32, statement by statement) ----


def nearest_int(v: np.float32) -> int:
    val = np.array([F(v) + F(12582912.0)], dtype=np.float32).view(np.int32)[0]
    return int((int(val) & 0x007FFFFF) - 0x00400000)


def f16_round(v: np.float32) -> np.float32:
    return F(np.float16(F(v)))


def make_qkx2_quants(n, nmax, x, weights, rmin, rdelta, nstep):
    mn, mx = F(x[0]), F(x[0])
    sum_w = F(weights[0])
    sum_x = F(sum_w * x[0])
    for i in range(1, n):
        if x[i] < mn:
            mn = F(x[i])
        if x[i] > mx:
            mx = F(x[i])
        w = F(weights[i])
        sum_w = F(sum_w + w)
        sum_x = F(sum_x + F(w * x[i]))
    if mn > 0:
        mn = F(0)
    L = [0] * n
    if mx == mn:
        return F(0), F(-mn), L
    iscale = F(F(nmax) / F(mx - mn))
    scale = F(F(1) / iscale)
    best_error = F(0)
    for i in range(n):
        l = nearest_int(F(iscale * F(x[i] - mn)))
        L[i] = max(0, min(nmax, l))
        diff = F(F(F(scale * F(L[i])) + mn) - x[i])
        diff = F(diff * diff)
        best_error = F(best_error + F(weights[i] * diff))
    for step in range(nstep + 1):
        iscale = F(F(F(F(rmin) + F(F(rdelta) * F(step))) + F(nmax)) / F(mx - mn))
        sum_l = sum_l2 = sum_xl = F(0)
        laux = [0] * n
        for i in range(n):
            l = nearest_int(F(iscale * F(x[i] - mn)))
            l = max(0, min(nmax, l))
            laux[i] = l
            w = F(weights[i])
            sum_l = F(sum_l + F(w * F(l)))
            sum_l2 = F(sum_l2 + F(F(w * F(l)) * F(l)))
            sum_xl = F(sum_xl + F(F(w * F(l)) * x[i]))
        D = F(F(sum_w * sum_l2) - F(sum_l * sum_l))
        if D > 0:
            this_scale = F(F(F(sum_w * sum_xl) - F(sum_x * sum_l)) / D)
            this_min = F(F(F(sum_l2 * sum_x) - F(sum_l * sum_xl)) / D)
            if this_min > 0:
                this_min = F(0)
                this_scale = F(sum_xl / sum_l2)
            err = F(0)
            for i in range(n):
                diff = F(F(F(this_scale * F(laux[i])) + this_min) - x[i])
                diff = F(diff * diff)
                err = F(err + F(weights[i] * diff))
            if err < best_error:
                L = laux
                best_error = err
                scale = this_scale
                mn = this_min
    return scale, F(-mn), L


def ggml_ref_quantize_q4_k(x: np.ndarray) -> bytes:
    x = x.astype(np.float32)
    out = bytearray()
    for blk in x.reshape(-1, QK_K):
        L = [0] * QK_K
        scales, mins = [F(0)] * 8, [F(0)] * 8
        max_scale = max_min = F(0)
        for j in range(8):
            xs = blk[32 * j:32 * j + 32]
            sum_x2 = F(0)
            for l in range(32):
                sum_x2 = F(sum_x2 + F(xs[l] * xs[l]))
            av_x = F(np.sqrt(F(sum_x2 / F(32))))
            weights = [F(av_x + F(abs(xs[l]))) for l in range(32)]
            scales[j], mins[j], L[32 * j:32 * j + 32] = make_qkx2_quants(32, 15, xs, weights, -1.0, 0.1, 20)
            if scales[j] > max_scale:
                max_scale = scales[j]
            if mins[j] > max_min:
                max_min = mins[j]
        inv_scale = F(F(63) / max_scale) if max_scale > 0 else F(0)
        inv_min = F(F(63) / max_min) if max_min > 0 else F(0)
        sc = [0] * 12
        for j in range(8):
            ls = min(63, nearest_int(F(inv_scale * scales[j])) & 0xFF)
            lm = min(63, nearest_int(F(inv_min * mins[j])) & 0xFF)
            if j < 4:
                sc[j] = ls
                sc[j + 4] = lm
            else:
                sc[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4)
                sc[j - 4] |= (ls >> 4) << 6
                sc[j] |= (lm >> 4) << 6
        d16 = np.float16(F(max_scale / F(63)))
        dmin16 = np.float16(F(max_min / F(63)))
        for j in range(8):
            if j < 4:
                s, m = sc[j] & 63, sc[j + 4] & 63
            else:
                s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4)
                m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4)
            d = F(F(d16) * F(s))
            if d == 0:
                continue
            dm = F(F(dmin16) * F(m))
            for ii in range(32):
                l = nearest_int(F(F(blk[32 * j + ii] + dm) / d))
                L[32 * j + ii] = max(0, min(15, l))
        qs = [0] * 128
        for j in range(0, QK_K, 64):
            for l in range(32):
                qs[j // 2 + l] = L[j + l] | (L[j + l + 32] << 4)
        out += d16.tobytes() + dmin16.tobytes() + bytes(sc) + bytes(qs)
    return bytes(out)


def make_qx_quants(n, nmax, x):
    mx = amax = F(0)
    for i in range(n):
        ax = F(abs(x[i]))
        if ax > amax:
            amax, mx = ax, F(x[i])
    L = [0] * n
    if amax < F(1e-15):
        return F(0), L
    iscale = F(F(-nmax) / mx)
    sumlx = suml2 = F(0)
    for i in range(n):
        l = max(-nmax, min(nmax - 1, nearest_int(F(iscale * x[i]))))
        L[i] = l + nmax
        w = F(x[i] * x[i])
        sumlx = F(sumlx + F(F(w * x[i]) * F(l)))
        suml2 = F(suml2 + F(F(w * F(l)) * F(l)))
    scale = F(sumlx / suml2) if suml2 != 0 else F(0)
    best = F(scale * sumlx)
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = F(F(-F(F(nmax) + F(F(0.1) * F(step)))) / mx)
        sumlx = suml2 = F(0)
        for i in range(n):
            l = max(-nmax, min(nmax - 1, nearest_int(F(iscale * x[i]))))
            w = F(x[i] * x[i])
            sumlx = F(sumlx + F(F(w * x[i]) * F(l)))
            suml2 = F(suml2 + F(F(w * F(l)) * F(l)))
        if suml2 > 0 and F(sumlx * sumlx) > F(best * suml2):
            for i in range(n):
                L[i] = nmax + max(-nmax, min(nmax - 1, nearest_int(F(iscale * x[i]))))
            scale = F(sumlx / suml2)
            best = F(scale * sumlx)
    return scale, L


def ggml_ref_quantize_q6_k(x: np.ndarray) -> bytes:
    x = x.astype(np.float32)
    out = bytearray()
    for blk in x.reshape(-1, QK_K):
        L = [0] * QK_K
        scales = [F(0)] * 16
        max_scale = max_abs_scale = F(0)
        for ib in range(16):
            scales[ib], L[16 * ib:16 * ib + 16] = make_qx_quants(16, 32, blk[16 * ib:16 * ib + 16])
            if F(abs(scales[ib])) > max_abs_scale:
                max_abs_scale = F(abs(scales[ib]))
                max_scale = scales[ib]
        if max_abs_scale < F(1e-15):
            out += bytes(210)
            continue
        iscale = F(F(-128) / max_scale)
        d16 = np.float16(F(F(1) / iscale))
        sc = [min(127, nearest_int(F(iscale * scales[ib]))) for ib in range(16)]
        for j in range(16):
            d = F(F(d16) * F(sc[j]))
            if d == 0:
                continue
            for ii in range(16):
                l = nearest_int(F(blk[16 * j + ii] / d))
                L[16 * j + ii] = max(-32, min(31, l)) + 32
        ql, qh = [0] * 128, [0] * 64
        for j in range(0, QK_K, 128):
            o, h = j // 2, j // 4
            for l in range(32):
                q1, q2, q3, q4 = (L[j + l + k] & 0xF for k in (0, 32, 64, 96))
                ql[o + l] = q1 | (q3 << 4)
                ql[o + l + 32] = q2 | (q4 << 4)
                qh[h + l] = (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) | \
                    ((L[j + l + 96] >> 4) << 6)
        out += bytes(ql) + bytes(qh) + np.array(sc, dtype=np.int8).tobytes() + d16.tobytes()
    return bytes(out)


# ---- the oracle, per type ----------------------------------------------------------------------


def quantize(name: str, x: np.ndarray) -> bytes:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if name == "q4_k":
        return ggml_ref_quantize_q4_k(x)
    if name == "q6_k":
        return ggml_ref_quantize_q6_k(x)
    return np.asarray(gq.quantize(x.reshape(1, -1), TYPES[name])).tobytes()


def dequantize(name: str, blocks: bytes) -> np.ndarray:
    arr = np.frombuffer(blocks, dtype=np.uint8).reshape(1, -1)
    return np.asarray(gq.dequantize(arr, TYPES[name]), dtype=np.float32).reshape(-1)


def row_bytes(name: str, n: int) -> int:
    block, size = GGML_QUANT_SIZES[TYPES[name]]
    assert n % block == 0
    return n // block * size


# ---- inputs ------------------------------------------------------------------------------------


def float_inputs(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    def normal(scale=1.0):
        return (rng.standard_normal(n) * scale).astype(np.float32)
    varied = normal() * (10.0 ** rng.uniform(-4, 4, size=n // 32)).repeat(32)
    outlier = normal(0.01)
    outlier[rng.choice(n, size=max(1, n // 64), replace=False)] = rng.choice([-50.0, 50.0], size=max(1, n // 64))
    one_hot = np.zeros(n, np.float32)
    one_hot[::32] = 1.0
    return {
        "normal": normal(),
        "normal_small": normal(1e-3),
        "normal_large": normal(1e3),
        "varied_scale": varied.astype(np.float32),
        "uniform": rng.uniform(-1, 1, n).astype(np.float32),
        "zeros": np.zeros(n, np.float32),
        "constant": np.full(n, 0.75, np.float32),
        "negative": -np.abs(normal()),
        "positive": np.abs(normal()) + 0.25,
        "outlier": outlier.astype(np.float32),
        "f16_edge": normal(3e4),
        "tiny": normal(1e-30),
        "subnormal_d": normal(1e-6),
        "ties": (rng.integers(-16, 17, n) * 0.25).astype(np.float32),
        "alternating": np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32),
        "one_hot": one_hot,
        "ramp": np.linspace(-2, 3, n, dtype=np.float32),
    }


def special_floats() -> np.ndarray:
    vals = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e5, 6.1e-5, 6.0e-8, 2.9e-8,
            1e-40, -1e-45, 3.4e38, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8]
    vals += [0.0] * (32 - len(vals))
    return np.array(vals, dtype=np.float32)


def random_blocks(rng: np.random.Generator, name: str, n: int) -> bytes:
    """Random bit patterns with every f16 scale finite (NaN/inf scales are not interesting)."""
    nbytes = row_bytes(name, n)
    if name in ("f16", "bf16"):
        raw = rng.integers(0, 1 << 16, n, dtype=np.uint16)
        if name == "f16":
            raw = np.where((raw & 0x7C00) == 0x7C00, raw & 0x83FF, raw).astype(np.uint16)
        else:
            raw = np.where((raw & 0x7F80) == 0x7F80, raw & 0x807F, raw).astype(np.uint16)
        return raw.tobytes()
    if name == "f32":
        return rng.standard_normal(n).astype(np.float32).tobytes()
    block, size = GGML_QUANT_SIZES[TYPES[name]]
    raw = rng.integers(0, 256, nbytes, dtype=np.uint8).reshape(-1, size)
    if name == "mxfp4":
        raw[:, 0] = np.arange(raw.shape[0]) % 256  # every exponent, including 0, 1 and 255
        return raw.tobytes()
    f16_offsets = {"q4_0": [0], "q8_0": [0], "q4_k": [0, 2], "q6_k": [208]}[name]
    for off in f16_offsets:
        h = raw[:, off:off + 2].copy().view(np.uint16).reshape(-1)
        h = np.where((h & 0x7C00) == 0x7C00, h & 0x83FF, h).astype(np.uint16)
        raw[:, off:off + 2] = h.view(np.uint8).reshape(-1, 2)
    return raw.tobytes()


# ---- cases and files ---------------------------------------------------------------------------


def make_cases(name: str) -> list[tuple[str, int, np.ndarray | None, bytes, np.ndarray]]:
    """[(label, kind, input or None, blocks, dequantized)] for one type."""
    seed = sum(ord(c) for c in name) * 7919
    rng = np.random.default_rng(seed)
    n = 512 if name in ("q4_k", "q6_k") else 256
    cases = []
    for label, x in float_inputs(rng, n).items():
        blocks = quantize(name, x)
        cases.append((label, 0, x, blocks, dequantize(name, blocks)))
    if name in ("f32", "f16", "bf16"):
        x = special_floats()
        blocks = quantize(name, x)
        cases.append(("special", 0, x, blocks, dequantize(name, blocks)))
    n_random = 256 * 32 if name == "mxfp4" else (1024 if name in ("q4_k", "q6_k") else 512)
    blocks = random_blocks(rng, name, n_random)
    cases.append(("random_bits", 1, None, blocks, dequantize(name, blocks)))
    return cases


def encode(cases) -> bytes:
    out = bytearray(b"TSQF" + struct.pack("<II", 1, len(cases)))
    for label, kind, x, blocks, deq in cases:
        n = deq.size
        out += label.encode().ljust(16, b"\0")[:16] + struct.pack("<III", kind, n, len(blocks))
        if kind == 0:
            out += x.astype("<f4").tobytes()
        out += blocks + deq.astype("<f4").tobytes()
    return bytes(out)


def decode(data: bytes) -> list[tuple[str, int, np.ndarray | None, bytes, np.ndarray]]:
    assert data[:4] == b"TSQF", "bad magic"
    version, n_cases = struct.unpack_from("<II", data, 4)
    assert version == 1
    pos, cases = 12, []
    for _ in range(n_cases):
        label = data[pos:pos + 16].rstrip(b"\0").decode()
        kind, n, nbytes = struct.unpack_from("<III", data, pos + 16)
        pos += 28
        x = None
        if kind == 0:
            x = np.frombuffer(data, "<f4", n, pos).copy()
            pos += 4 * n
        blocks = data[pos:pos + nbytes]
        pos += nbytes
        deq = np.frombuffer(data, "<f4", n, pos).copy()
        pos += 4 * n
        cases.append((label, kind, x, blocks, deq))
    assert pos == len(data), "trailing bytes"
    return cases


def main() -> None:
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/fixtures/quants"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in TYPES:
        data = encode(make_cases(name))
        (out_dir / f"{name}.bin").write_bytes(data)
        print(f"{name}.bin: {len(data)} bytes")


if __name__ == "__main__":
    main()
