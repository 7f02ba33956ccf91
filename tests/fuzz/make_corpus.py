"""Regenerates the fuzz seed corpora: GGUF (small valid files, written by llama.cpp's gguf-py),
safetensors (small valid files by hand) and requests (OpenAI bodies and tool-call block bodies):
python3 tests/fuzz/make_corpus.py"""
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


def main():
    os.makedirs(OUT, exist_ok=True)
    write("empty.gguf", lambda w: None)
    write("metadata.gguf", metadata)
    write("tensors.gguf", tensors)
    write("aligned64.gguf", tensors, alignment=64)
    write("both.gguf", lambda w: (metadata(w), tensors(w)))
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


if __name__ == "__main__":
    main()
    safetensors_corpus()
    requests_corpus()
