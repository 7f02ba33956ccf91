"""Regenerates the fuzz seed corpora: GGUF (small valid files, written by llama.cpp's gguf-py),
safetensors (small valid files by hand), requests (OpenAI bodies and tool-call block bodies),
tokenizer (texts and a small tokenizer.json, a mode byte first), chat_template (templates and
conversations, a mode byte first) and model_config (the fixtures' config.json files and GGUF model
metadata, a mode byte first): python3 tests/fuzz/make_corpus.py"""
import json
import os
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q, GGUFValueType as V

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_gguf")


def write(name, fill, alignment=None):
    w = gguf.GGUFWriter(os.path.join(OUT, name), "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def metadata(w):
    w.add_uint8("u8", 1); w.add_int8("i8", -1); w.add_uint16("u16", 2); w.add_int16("i16", -2)
    w.add_uint32("llama.block_count", 2); w.add_int32("i32", -3); w.add_float32("f32", 0.5)
    w.add_bool("b", True); w.add_string("s", "hi"); w.add_uint64("u64", 1 << 40)
    w.add_int64("i64", -(1 << 40)); w.add_float64("f64", 0.25)
    w.add_key_value("tokenizer.ggml.tokens", ["a", "b", "<s>"], V.ARRAY, sub_type=V.STRING)
    w.add_key_value("tokenizer.ggml.scores", [0.0, -1.0, 2.0], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("bools", [True, False], V.ARRAY, sub_type=V.BOOL)
    w.add_key_value("nested", [[1, 2], [3]], V.ARRAY, sub_type=V.ARRAY)


def tensors(w):
    x = np.linspace(-1, 1, 256, dtype=np.float32).reshape(2, 128)
    w.add_uint32("llama.context_length", 8)
    w.add_tensor("token_embd.weight", x[:, :4].copy())
    w.add_tensor("f16", x[:1, :8].astype(np.float16))
    w.add_tensor("q8", gguf.quants.quantize(x[:, :32], Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("q4", gguf.quants.quantize(x[:1, :32], Q.Q4_0), raw_dtype=Q.Q4_0)
    w.add_tensor("mx", gguf.quants.quantize(x[:1, :32], Q.MXFP4), raw_dtype=Q.MXFP4)
    w.add_tensor("q4k", np.zeros((1, 144), dtype=np.uint8), raw_dtype=Q.Q4_K)
    w.add_tensor("i32_4d", np.arange(16, dtype=np.int32).reshape(2, 2, 2, 2))


def tokenizer_metadata(w):
    """A byte-level BPE tokenizer in llama.cpp's keys (tokenizer.ggml.*), with a chat template."""
    bc = bytes_to_unicode()
    tokens = [bc[b] for b in range(256)] + ["\u0120t", "he", "\u0120the", "<|endoftext|>", "<|im_start|>",
                                            "<|im_end|>"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([1] * 259 + [3, 3, 3])  # normal, then control
    w.add_token_merges(["\u0120 t", "h e", "\u0120t he"])
    w.add_bos_token_id(259)
    w.add_eos_token_id(261)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")


def main():
    os.makedirs(OUT, exist_ok=True)
    write("empty.gguf", lambda w: None)
    write("metadata.gguf", metadata)
    write("tensors.gguf", tensors)
    write("aligned64.gguf", tensors, alignment=64)
    write("both.gguf", lambda w: (metadata(w), tensors(w)))
    write("tokenizer.gguf", tokenizer_metadata)
    # A v2 header with one string key and no tensors, by hand.
    key, val = b"general.name", b"v2"
    blob = struct.pack("<IIQQ", 0x46554747, 2, 0, 1) + struct.pack("<Q", len(key)) + key
    blob += struct.pack("<I", 8) + struct.pack("<Q", len(val)) + val
    open(os.path.join(OUT, "v2.gguf"), "wb").write(blob)


def safetensors_corpus():
    out = os.path.join(HERE, "corpus_safetensors")
    os.makedirs(out, exist_ok=True)

    def write_st(name, header, data):
        h = json.dumps(header).encode()
        open(os.path.join(out, name), "wb").write(struct.pack("<Q", len(h)) + h + data)

    write_st("two.safetensors", {"__metadata__": {"format": "pt"},
                                 "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                                 "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}}, bytes(range(22)))
    write_st("scalar_u8.safetensors", {"s": {"dtype": "U8", "shape": [], "data_offsets": [0, 1]},
                                       "e": {"dtype": "I64", "shape": [0], "data_offsets": [1, 1]}}, b"\x07")
    write_st("f8.safetensors", {"w": {"dtype": "F8_E4M3", "shape": [4, 2], "data_offsets": [0, 8]}}, bytes(8))
    write_st("empty.safetensors", {}, b"")


def requests_corpus():
    out = os.path.join(HERE, "corpus_requests")
    os.makedirs(out, exist_ok=True)
    bodies = {
        "chat.json": {"model": "m", "messages": [{"role": "system", "content": "s"},
                                                 {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                      "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "stop": ["\n"], "stream": True,
                      "stream_options": {"include_usage": True}, "logit_bias": {"5": -100}, "seed": 3},
        "tools.json": {"messages": [{"role": "user", "content": "x"},
                                    {"role": "assistant", "content": None, "tool_calls": [
                                        {"id": "c", "type": "function",
                                         "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                                    {"role": "tool", "tool_call_id": "c", "content": "r"}],
                       "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                       "tool_choice": "auto", "chat_template_kwargs": {"enable_thinking": False}},
        "completion.json": {"prompt": "once upon", "max_tokens": 4, "presence_penalty": 0.5,
                            "frequency_penalty": 0.1, "n": 1},
        "completion_tokens.json": {"prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0},
    }
    for name, body in bodies.items():
        open(os.path.join(out, name), "w").write(json.dumps(body))
    blocks = {  # tool-call block bodies as models write them (tool_call_parse.h)
        "hermes.txt": '\n{"name": "get_weather", "arguments": {"city": "Paris", "n": [1, 2]}}\n',
        "xml.txt": "\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=n>\n3\n"
                   "</parameter>\n</function>\n",
        "deepseek.txt": "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n```<｜tool▁call▁end｜>"
                        "<｜tool▁call▁begin｜>g<｜tool▁sep｜>{\"b\": 2}<｜tool▁call▁end｜>",
    }
    for name, text in blocks.items():
        open(os.path.join(out, name), "w").write(text)


def bytes_to_unicode():
    """GPT-2's byte-level alphabet: byte -> the character the vocabulary spells it with."""
    printed = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, n = {}, 0
    for b in range(256):
        if b in printed:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def tiny_tokenizer_json():
    """A small byte-level BPE tokenizer.json in Qwen's shape (fuzz_tokenizer.cpp builds its own)."""
    bc = bytes_to_unicode()
    vocab = {bc[b]: b for b in range(256)}
    sp, nl = bc[32], bc[10]
    merges = [(sp, "t"), ("h", "e"), (sp + "t", "he"), ("i", "n"), ("e", "r"), (nl, nl), (sp, sp)]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    added = [{"id": len(vocab) + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": not special, "special": special}
             for i, (c, special) in enumerate([("<|endoftext|>", True), ("<|im_start|>", True),
                                               ("<|im_end|>", True), ("<think>", False)])]
    split = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")
    return {
        "version": "1.0", "added_tokens": added, "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [], "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [len(vocab)],
                                                             "tokens": ["<|endoftext|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }


def tokenizer_corpus():
    """Texts (mode byte 0) and a tokenizer.json (mode byte 1) for fuzz_tokenizer."""
    out = os.path.join(HERE, "corpus_tokenizer")
    os.makedirs(out, exist_ok=True)
    texts = {
        "english.txt": "Hello, world! It's the weather: 21°C.\nWe'll see you at 10:30.\n",
        "code.txt": "def f(x):\n    return x ** 2  # square\n\n\tif a != b: pass\r\n",
        "cjk_emoji.txt": "日本語のテキスト。中文，한국어 😀👍🏽 café naïve e\u0301",
        "special.txt": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "spaces.txt": "   \n\n\n    x  \t\t y" + " " * 40 + "z\n",
        "numbers.txt": "1234567890 3.14159 -42 1e10 0x1F ٣٤٥ ²³",
    }
    for name, text in texts.items():
        open(os.path.join(out, name), "wb").write(b"\x00" + text.encode("utf-8"))
    open(os.path.join(out, "invalid_utf8.txt"), "wb").write(b"\x00ok \xff\xfe \xc3( \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 end")
    open(os.path.join(out, "tokenizer.json"), "wb").write(b"\x01" + json.dumps(tiny_tokenizer_json()).encode())


def chat_template_corpus():
    """Templates (mode byte 0) and conversations (mode byte 1) for fuzz_chat_template."""
    out = os.path.join(HERE, "corpus_chat_template")
    os.makedirs(out, exist_ok=True)
    templates = {
        "chatml.jinja": "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] | string"
                        " + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
                        "{{ '<|im_start|>assistant\\n' }}{% endif %}",
        "constructs.jinja": "{%- set ns = namespace(n=0) -%}{%- macro show(x, sep=', ') -%}{{ x | join(sep) }}"
                            "{%- endmacro -%}{%- for t in tools if t.function is defined -%}{%- set ns.n = ns.n + 1 -%}"
                            "{{ loop.index }}/{{ loop.length }}:{{ t.function.name | upper }}{{ t | tojson(indent=2) }}"
                            "{%- endfor -%}{{ show(range(3) | list) }}{{ messages[-1].content is string }}"
                            "{{ (messages | selectattr('role', 'equalto', 'user') | list | length) * 2 }}"
                            "{{ 'a,b'.split(',') | reverse | list }}{{ '  x '.strip() ~ bos_token }}"
                            "{{ {'k': [1, 2.5, none, true]} | items | list }}{{ messages[1:3] | map(attribute='role')"
                            " | join('|') }}{% if ns.n > 1 %}{{ raise_exception('many') if false else 'ok' }}{% endif %}",
        "recursive.jinja": "{%- for m in messages recursive -%}{{ m.role }}{%- if m.tool_calls -%}"
                           "{{ loop(m.tool_calls) }}{%- endif -%}{%- endfor -%}{% filter upper %}{{ eos_token }}"
                           "{% endfilter %}{% set x %}{{ 7 // 2 }}{{ 7 % 3 }}{{ 2 ** 8 }}{% endset %}{{ x | trim }}",
    }
    for name, text in templates.items():
        open(os.path.join(out, name), "wb").write(b"\x00" + text.encode())
    conversations = {
        "tools.json": {"messages": [
            {"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": {"a": [1, {"b": None}]}}}]},
            {"role": "tool", "content": "t"}, {"role": "tool", "content": "u"},
            {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image_url"}]}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "kwargs": {"enable_thinking": False}, "add_generation_prompt": True},
        "plain.json": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello",
                                                            "reasoning_content": "greet"}],
    }
    for name, body in conversations.items():
        open(os.path.join(out, name), "wb").write(b"\x01" + json.dumps(body).encode())


def model_config_corpus():
    """config.json files (mode byte 0: the fixtures') and GGUF model metadata (mode byte 1)."""
    out = os.path.join(HERE, "corpus_model_config")
    os.makedirs(out, exist_ok=True)
    fixtures = os.path.join(HERE, "..", "fixtures")
    for name in sorted(os.listdir(fixtures)):
        cfg = os.path.join(fixtures, name, "config.json")
        if os.path.exists(cfg):
            open(os.path.join(out, name + ".json"), "wb").write(b"\x00" + open(cfg, "rb").read())

    def gguf_seed(name, arch, keys):
        path = os.path.join(out, name + ".tmp")
        w = gguf.GGUFWriter(path, arch)
        for k, v in keys.items():
            key = arch + "." + k
            if isinstance(v, bool):
                w.add_bool(key, v)
            elif isinstance(v, float):
                w.add_float32(key, v)
            else:
                w.add_uint32(key, v)
        w.add_tensor("token_embd.weight", np.zeros((16, 8), dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        blob = open(path, "rb").read()
        os.remove(path)
        open(os.path.join(out, name + ".gguf"), "wb").write(b"\x01" + blob)

    gguf_seed("llama", "llama", {"block_count": 2, "embedding_length": 8, "attention.head_count": 2,
                                 "attention.head_count_kv": 1, "feed_forward_length": 16, "context_length": 64,
                                 "rope.dimension_count": 4, "rope.freq_base": 10000.0,
                                 "attention.layer_norm_rms_epsilon": 1e-6})
    gguf_seed("qwen35moe", "qwen35moe", {"block_count": 4, "embedding_length": 8, "attention.head_count": 2,
                                         "attention.head_count_kv": 1, "attention.key_length": 8,
                                         "context_length": 64, "rope.dimension_count": 4,
                                         "rope.freq_base": 10000000.0, "attention.layer_norm_rms_epsilon": 1e-6,
                                         "full_attention_interval": 4, "ssm.conv_kernel": 4, "ssm.state_size": 8,
                                         "ssm.group_count": 2, "ssm.time_step_rank": 4, "ssm.inner_size": 32,
                                         "expert_count": 4, "expert_used_count": 2,
                                         "expert_feed_forward_length": 8,
                                         "expert_shared_feed_forward_length": 8, "expert_weights_norm": True})


if __name__ == "__main__":
    main()
    safetensors_corpus()
    requests_corpus()
    tokenizer_corpus()
    chat_template_corpus()
    model_config_corpus()
