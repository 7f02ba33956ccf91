"""`tessera convert` carries the tokenizer and chat template into the GGUF, in llama.cpp's form:
the converted file must tokenize and render exactly as Hugging Face does from the original
files, and read back in llama.cpp's `gguf` package."""
import json
import shutil

import numpy as np
import pytest

from conftest import FIXTURES, SHARED, run_tessera

TEXTS = ["Hello world! It's 2024.", "def f(x):\n    return x ** 2  # square\n", "中文字符测试，标点。한국어 🤗",
         "  spaces   and\ttabs\n\n\nnewlines", "DON'T shout 1234567890 3.14159", "<|im_start|>user\nhi<|im_end|>"]


def make_checkpoint(tmp_path, tok_name):
    """qwen3_tiny's weights with an embedding as large as the real tokenizer's vocabulary."""
    from safetensors.numpy import load_file, save_file
    src = FIXTURES / "qwen3_tiny"
    tok_dir = SHARED / "data" / "tokenizers" / tok_name
    hf_vocab = len(json.loads((tok_dir / "tokenizer.json").read_text())["model"]["vocab"])
    vocab = (hf_vocab + 1024 + 127) // 128 * 128  # room for added tokens, padded like real checkpoints
    cfg = json.loads((src / "config.json").read_text())
    cfg["vocab_size"] = vocab
    w = load_file(src / "model.safetensors")
    H = w["model.embed_tokens.weight"].shape[1]
    w["model.embed_tokens.weight"] = (np.random.default_rng(0).standard_normal((vocab, H)) * 0.25).astype(np.float16)
    d = tmp_path / f"ckpt-{tok_name}"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    save_file(w, d / "model.safetensors")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tok_dir / f, d / f)
    return d, vocab


@pytest.mark.parametrize("tok_name,pre", [("qwen3", "qwen2"), ("deepseek_v3", "deepseek-v3")])
def test_converted_gguf_tokenizes_like_hf(tok_name, pre, tmp_path):
    import gguf
    from tokenizers import Tokenizer
    d, vocab = make_checkpoint(tmp_path, tok_name)
    out = tmp_path / "model.gguf"
    run_tessera("convert", d, out, "--type", "f16")

    r = gguf.GGUFReader(str(out))
    assert r.fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert r.fields["tokenizer.ggml.pre"].contents() == pre
    assert len(r.fields["tokenizer.ggml.tokens"].contents()) == vocab
    hf_json = json.loads((d / "tokenizer.json").read_text())
    assert len(r.fields["tokenizer.ggml.merges"].contents()) == len(hf_json["model"]["merges"])
    assert "tokenizer.chat_template" in r.fields

    hf = Tokenizer.from_file(str(d / "tokenizer.json"))
    for text in TEXTS:
        # --special (BOS/EOS and special tokens parsed): the GGUF must behave as the HF directory
        # it came from (whose parity with Hugging Face is test_tokenizer.py's subject).
        want = run_tessera("tokenize", "--model", d, "--text", text, "--special").stdout
        got = run_tessera("tokenize", "--model", out, "--text", text, "--special").stdout
        assert got == want, text
        if "<|" not in text:  # HF always parses special tokens; tessera does only with --special
            got = run_tessera("tokenize", "--model", out, "--text", text).stdout.split()
            assert [int(x) for x in got] == hf.encode(text, add_special_tokens=False).ids, text


def test_converted_gguf_renders_and_runs(tmp_path):
    from transformers import AutoTokenizer
    d, _ = make_checkpoint(tmp_path, "qwen3")
    out = tmp_path / "model.gguf"
    run_tessera("convert", d, out, "--type", "q8_0")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    mfile = tmp_path / "m.json"
    mfile.write_text(json.dumps(messages))
    want = AutoTokenizer.from_pretrained(str(d)).apply_chat_template(messages, tokenize=False,
                                                                     add_generation_prompt=True)
    got = run_tessera("tokenize", "--model", out, "--messages", mfile, "--add-generation-prompt", "--render").stdout
    assert got == want
    p = run_tessera("run", out, "--chat", "--prompt", "Hi there", "--max-tokens", 4, "--seed", 1)
    assert "tok/s" in p.stderr


def test_tokenizer_larger_than_model_is_refused(tmp_path):
    d, _ = make_checkpoint(tmp_path, "qwen3")
    cfg = json.loads((d / "config.json").read_text())
    cfg["vocab_size"] = 1000  # embedding rows no longer cover the tokenizer
    (d / "config.json").write_text(json.dumps(cfg))
    p = run_tessera("convert", d, tmp_path / "x.gguf", check=False)
    assert p.returncode != 0 and "tokenizer has" in p.stderr
