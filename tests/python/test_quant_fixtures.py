"""The committed quant golden data (tests/fixtures/quants/*.bin) must equal what the oracle,
llama.cpp's `gguf.quants`, computes today from the committed inputs, so it cannot drift.
For Q4_K/Q6_K quantization (which gguf.quants lacks) the bytes come from the ggml reference
transcription in scripts/make_quant_fixtures.py; their dequantization is still gguf.quants'."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/quants"


def _load_script():
    spec = importlib.util.spec_from_file_location("make_quant_fixtures", ROOT / "scripts/make_quant_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mqf = _load_script()


@pytest.mark.parametrize("name", list(mqf.TYPES))
def test_committed_fixture_matches_oracle(name):
    data = (FIXTURES / f"{name}.bin").read_bytes()
    cases = mqf.decode(data)
    assert mqf.encode(cases) == data
    labels = [c[0] for c in cases]
    assert "random_bits" in labels and "zeros" in labels
    for label, kind, x, blocks, deq in cases:
        assert len(blocks) == mqf.row_bytes(name, deq.size), label
        if kind == 0:
            with np.errstate(all="ignore"):
                assert mqf.quantize(name, x) == blocks, f"{name}/{label}: quantized bytes drifted"
        with np.errstate(all="ignore"):
            expected = mqf.dequantize(name, blocks)
        assert np.array_equal(expected.view(np.uint32), deq.view(np.uint32)), f"{name}/{label}: dequantized bits drifted"


@pytest.mark.parametrize("name,bound", [("q4_k", 0.11), ("q6_k", 0.03)])
def test_k_quant_reference_reconstructs_input(name, bound):
    """Sanity of the transcribed reference quantizer: gguf.quants decodes its bytes close to the input."""
    for label, kind, x, blocks, deq in mqf.decode((FIXTURES / f"{name}.bin").read_bytes()):
        if kind != 0 or label in ("zeros", "tiny", "subnormal_d"):  # f16 super-scales underflow there
            continue
        rel = np.sqrt(np.mean((deq.astype(np.float64) - x) ** 2) / np.mean(x.astype(np.float64) ** 2))
        assert rel < bound, f"{name}/{label}: relative rmse {rel}"


def test_k_quant_reference_zero_block_is_zero_bytes():
    zeros = np.zeros(256, np.float32)
    assert mqf.ggml_ref_quantize_q4_k(zeros) == bytes(144)
    assert mqf.ggml_ref_quantize_q6_k(zeros) == bytes(210)
