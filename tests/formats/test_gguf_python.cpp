// Files written by tessera's GgufWriter must read back in llama.cpp's own gguf-py with identical
// metadata and tensor bytes: the test writes a file plus the values it meant to store (JSON),
// then runs tests/formats/gguf_pycheck.py (python3 + gguf, installed by scripts/setup.sh --test).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "formats/ggml_types.h"
#include "formats/gguf_writer.h"
#include "test_gguf_testutil.h"

using namespace tessera;
using gguf_test::TempDir;
using json = nlohmann::json;

namespace {

std::string hex(const std::vector<uint8_t>& b) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (uint8_t x : b) {
        s.push_back(d[x >> 4]);
        s.push_back(d[x & 15]);
    }
    return s;
}

// Writes a file with every metadata type and several tensor types; returns what it stored.
json write_file(const std::string& path, uint32_t alignment) {
    json exp;
    exp["alignment"] = alignment;
    exp["metadata"] = json::array();
    GgufWriter w(alignment);
    if (alignment != 32) exp["metadata"].push_back({{"key", "general.alignment"}, {"type", 4}, {"value", alignment}});
    auto add = [&](const std::string& key, GgufValue v, int type, json value) {
        w.set(key, std::move(v));
        exp["metadata"].push_back({{"key", key}, {"type", type}, {"value", value}});
    };
    auto arr = [](int elem, json items) { return json{{"elem_type", elem}, {"items", items}}; };
    add("general.architecture", GgufValue::string("qwen3"), 8, "qwen3");
    add("u8", GgufValue::u8(200), 0, 200);
    add("i8", GgufValue::i8(-100), 1, -100);
    add("u16", GgufValue::u16(60000), 2, 60000);
    add("i16", GgufValue::i16(-30000), 3, -30000);
    add("u32", GgufValue::u32(4000000000u), 4, 4000000000u);
    add("i32", GgufValue::i32(-2000000000), 5, -2000000000);
    add("f32", GgufValue::f32(0.1f), 6, 0.1f);
    add("bool", GgufValue::boolean(true), 7, true);
    add("str", GgufValue::string("h\xc3\xa9llo\n\"x\""), 8, "h\xc3\xa9llo\n\"x\"");
    add("u64", GgufValue::u64(18000000000000000000ull), 10, 18000000000000000000ull);
    add("i64", GgufValue::i64(-9000000000000000000ll), 11, -9000000000000000000ll);
    add("f64", GgufValue::f64(-1.25e-300), 12, -1.25e-300);
    add("a.u8", GgufValue::array(std::vector<uint8_t>{0, 255}), 9, arr(0, {0, 255}));
    add("a.i8", GgufValue::array(std::vector<int8_t>{-128, 127}), 9, arr(1, {-128, 127}));
    add("a.u16", GgufValue::array(std::vector<uint16_t>{65535}), 9, arr(2, {65535}));
    add("a.i16", GgufValue::array(std::vector<int16_t>{-1, 2}), 9, arr(3, {-1, 2}));
    add("a.u32", GgufValue::array(std::vector<uint32_t>{1, 2, 3}), 9, arr(4, {1, 2, 3}));
    add("a.i32", GgufValue::array(std::vector<int32_t>{-7, 7}), 9, arr(5, {-7, 7}));
    add("a.f32", GgufValue::array(std::vector<float>{0.5f, -2.25f}), 9, arr(6, {0.5f, -2.25f}));
    add("a.bool", GgufValue::bool_array({true, false}), 9, arr(7, {true, false}));
    std::vector<std::string> toks;
    for (int i = 0; i < 300; ++i) toks.push_back(fmt::format("t{}", i));
    add("a.str", GgufValue::string_array(toks), 9, arr(8, toks));
    add("a.u64", GgufValue::array(std::vector<uint64_t>{1ull << 63}), 9, arr(10, {1ull << 63}));
    add("a.i64", GgufValue::array(std::vector<int64_t>{-(1ll << 62)}), 9, arr(11, {-(1ll << 62)}));
    add("a.f64", GgufValue::array(std::vector<double>{1e-300}), 9, arr(12, {1e-300}));
    add("a.nested",
        GgufValue::array_of_arrays({GgufValue::array(std::vector<int32_t>{1, 2}), GgufValue::string_array({"x"})}), 9,
        arr(9, {arr(5, {1, 2}), arr(8, {"x"})}));

    struct T {
        std::string name;
        uint32_t type;
        std::vector<int64_t> shape;
    };
    const std::vector<T> ts = {
        {"token_embd.weight", ggml_type::F32, {3, 5}}, {"blk.0.f16", ggml_type::F16, {2, 8}},
        {"blk.0.bf16", ggml_type::BF16, {7}},          {"blk.0.q8_0", ggml_type::Q8_0, {2, 64}},
        {"blk.0.q4_0", ggml_type::Q4_0, {32}},         {"blk.0.q4_k", ggml_type::Q4_K, {2, 256}},
        {"blk.0.q6_k", ggml_type::Q6_K, {1, 256}},     {"blk.0.mxfp4", ggml_type::MXFP4, {2, 1, 2, 32}},
        {"blk.0.iq2_xxs", ggml_type::IQ2_XXS, {256}},  {"blk.0.i32", ggml_type::I32, {2, 3, 1, 2}},
    };
    static std::vector<std::vector<uint8_t>> keep;  // tensor bytes outlive write()
    keep.clear();
    keep.reserve(ts.size());  // producers below hold pointers into it
    std::mt19937 rng(7);
    exp["tensors"] = json::array();
    for (const auto& t : ts) {
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        const auto* info = ggml_type_info(t.type);
        std::vector<uint8_t> bytes(size_t(n / info->block_elems * info->block_bytes));
        for (auto& b : bytes) b = uint8_t(rng());
        keep.push_back(bytes);
        const auto* p = &keep.back();
        if (auto d = ggml_type_to_dtype(t.type))
            w.add_tensor(t.name, *d, t.shape, p->data());
        else
            w.add_tensor_ggml(t.name, t.type, t.shape, [p](const GgufWriter::Sink& s) { s(p->data(), p->size()); });
        exp["tensors"].push_back({{"name", t.name}, {"ggml_type", t.type}, {"shape", t.shape}, {"hex", hex(bytes)}});
    }
    w.write(path);
    return exp;
}

}  // namespace

TEST(GgufPython, TesseraFilesReadBackInGgufPy) {
    const std::string script = std::string(TESSERA_SOURCE_DIR) + "/tests/formats/gguf_pycheck.py";
    ASSERT_EQ(std::system("python3 -c 'import gguf, numpy' >/dev/null 2>&1"), 0)
        << "python3 with the gguf package is needed (scripts/setup.sh --test)";
    for (uint32_t alignment : {32u, 64u, 16u}) {
        SCOPED_TRACE(alignment);
        TempDir dir;
        const std::string file = dir.file("t.gguf"), expected = dir.file("expected.json");
        const json exp = write_file(file, alignment);
        std::ofstream(expected) << exp.dump();
        const std::string cmd = "python3 '" + script + "' '" + file + "' '" + expected + "'";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
}
