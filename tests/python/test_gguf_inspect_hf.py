"""`tessera inspect` on Hugging Face checkpoints (a directory with config.json + *.safetensors, or
one .safetensors file), checked against what the `safetensors` package wrote."""
import json
import os
import subprocess

import numpy as np
import pytest

st = pytest.importorskip("safetensors.numpy")

TESSERA = os.environ.get("TESSERA_BIN", "tessera")


def inspect(path, *flags):
    return subprocess.run([TESSERA, "inspect", str(path), *flags], capture_output=True, text=True, timeout=120)


def make_checkpoint(d):
    d.mkdir(exist_ok=True)
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 8,
              "num_hidden_layers": 1, "rope_scaling": {"type": "linear", "factor": 2.0}}
    (d / "config.json").write_text(json.dumps(config))
    tensors = {
        "model.embed_tokens.weight": np.zeros((16, 8), dtype=np.float32),
        "model.layers.0.mlp.up_proj.weight": np.ones((12, 8), dtype=np.float16),
        "model.norm.weight": np.ones((8,), dtype=np.float32),
        "lm_head.weight": np.arange(128, dtype=np.int32).reshape(16, 8),
    }
    st.save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    return config, tensors


def test_hf_directory_json(tmp_path):
    config, tensors = make_checkpoint(tmp_path / "ck")
    r = inspect(tmp_path / "ck", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["format"] == "safetensors"
    assert j["architecture"] == "Qwen3ForCausalLM" and j["model_type"] == "qwen3"
    assert j["config"] == config
    assert j["metadata"] == {"format": "pt"}
    assert j["tensor_count"] == len(tensors)
    want_types = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int32"): "I32"}
    got = {t["name"]: t for t in j["tensors"]}
    assert set(got) == set(tensors)
    for name, arr in tensors.items():
        assert got[name]["type"] == want_types[arr.dtype]
        assert got[name]["shape"] == list(arr.shape)
        assert got[name]["nbytes"] == arr.nbytes
    assert j["total_bytes"] == sum(a.nbytes for a in tensors.values())
    assert j["types"]["F32"] == {"count": 2, "bytes": 16 * 8 * 4 + 8 * 4}


def test_hf_text_and_single_file(tmp_path):
    make_checkpoint(tmp_path / "ck")
    r = inspect(tmp_path / "ck", "--tensors")
    assert r.returncode == 0, r.stderr
    assert "architecture: Qwen3ForCausalLM (model_type qwen3)" in r.stdout
    assert "model.layers.0.mlp.up_proj.weight" in r.stdout and "[12, 8]" in r.stdout
    r = inspect(tmp_path / "ck" / "model.safetensors", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensor_count"] == 4


def test_directory_without_weights_is_a_clear_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    r = inspect(tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("tessera inspect: error: "), r.stderr
