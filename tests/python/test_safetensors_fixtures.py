"""The committed safetensors fixtures (tests/fixtures/safetensors) read back, with the PyPI
`safetensors` package, as the formula in scripts/make_safetensors_fixtures.py says; the C++
test (tests/formats/test_safetensors.cpp) checks tessera's reader against the same formula."""
import importlib.util
import json
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests/fixtures/safetensors"

_spec = importlib.util.spec_from_file_location("mstf", ROOT / "scripts/make_safetensors_fixtures.py")
mstf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mstf)


def _check(path: Path, spec: dict):
    got = load_file(str(path))
    assert set(got) == set(spec)
    for name, (dtype, shape) in spec.items():
        want = mstf.tensors({name: (dtype, shape)})[name]
        assert got[name].dtype == want.dtype, name
        assert list(got[name].shape) == shape, name
        assert np.array_equal(got[name], want), name


def test_single_file_matches_formula():
    _check(FIX / "single/model.safetensors", mstf.SINGLE)
    with safe_open(str(FIX / "single/model.safetensors"), framework="np") as f:
        assert f.metadata() == {"format": "pt", "note": "tessera"}


def test_shards_and_index_match_formula():
    index = json.loads((FIX / "sharded/model.safetensors.index.json").read_text())
    for fname, spec in mstf.SHARDS.items():
        _check(FIX / "sharded" / fname, spec)
        for name in spec:
            assert index["weight_map"][name] == fname
    for fname, spec in mstf.GLOB.items():
        _check(FIX / "glob" / fname, spec)


def test_hand_written_bf16_file_is_valid_safetensors():
    path = FIX / "bf16/model.safetensors"
    with safe_open(str(path), framework="np") as f:  # the reference parser validates the header
        assert sorted(f.keys()) == ["scale_fp8", "w"]
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    begin, end = header["w"]["data_offsets"]
    bits = np.frombuffer(raw[8 + n + begin:8 + n + end], "<u2").astype(np.uint32) << 16
    assert np.array_equal(bits.view(np.float32), np.arange(6) * 0.5 - 1)


def test_regenerated_fixtures_are_equivalent(tmp_path):
    mstf.write_all(tmp_path)
    for rel in ["single/model.safetensors", "glob/a.safetensors", "glob/b.safetensors",
                "sharded/model-00001-of-00002.safetensors", "sharded/model-00002-of-00002.safetensors"]:
        a, b = load_file(str(FIX / rel)), load_file(str(tmp_path / rel))
        assert set(a) == set(b)
        for k in a:
            assert np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype, (rel, k)
    assert (tmp_path / "bf16/model.safetensors").read_bytes() == (FIX / "bf16/model.safetensors").read_bytes()
