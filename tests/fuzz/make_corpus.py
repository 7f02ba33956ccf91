"""Regenerates the GGUF fuzz seed corpus (small valid files, written by llama.cpp's gguf-py):
python3 tests/fuzz/make_corpus.py"""
import os
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q, GGUFValueType as V

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_gguf")


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


if __name__ == "__main__":
    main()
