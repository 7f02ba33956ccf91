// safetensors: files written by the PyPI `safetensors` package (tests/fixtures/safetensors, made by
// scripts/make_safetensors_fixtures.py, whose value formula is restated here) read back exactly;
// malformed files and checkpoint directories give clear Errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "formats/safetensors.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/safetensors";

template <typename T>
T load(const uint8_t* p, int64_t i) {
    T v;
    std::memcpy(&v, p + i * int64_t(sizeof(T)), sizeof(T));
    return v;
}

// Element i of a fixture tensor as double (the formula of make_safetensors_fixtures.py).
double expected(const std::string& dt, int64_t i) {
    if (dt == "F64") return double(i) * 0.25 - 1;
    if (dt == "F32") return double(i) * 0.5 - 3;
    if (dt == "F16") return double(i) * 0.125 - 0.5;
    if (dt == "I8") return double(i - 5);
    if (dt == "I16") return double(i * 300 - 1000);
    if (dt == "I32") return double(i * 100000 - 7);
    if (dt == "I64") return double(i * (int64_t(1) << 40) - 3);
    if (dt == "U8") return double((i * 7) % 256);
    if (dt == "U16") return double(i * 1000);
    if (dt == "U32") return double(uint32_t(i * 0x01010101));
    if (dt == "U64") return double(uint64_t(i) << 40);
    if (dt == "BOOL") return i % 3 == 0 ? 1 : 0;
    throw std::runtime_error("no formula for " + dt);
}

double element(const SafetensorsTensorInfo& t, int64_t i) {
    const uint8_t* p = t.data;
    const std::string& dt = t.dtype_name;
    if (dt == "F64") return load<double>(p, i);
    if (dt == "F32") return load<float>(p, i);
    if (dt == "F16") return f16_to_f32(load<uint16_t>(p, i));
    if (dt == "BF16") return bf16_to_f32(load<uint16_t>(p, i));
    if (dt == "I8") return load<int8_t>(p, i);
    if (dt == "I16") return load<int16_t>(p, i);
    if (dt == "I32") return load<int32_t>(p, i);
    if (dt == "I64") return double(load<int64_t>(p, i));
    if (dt == "U8" || dt == "BOOL") return load<uint8_t>(p, i);
    if (dt == "U16") return load<uint16_t>(p, i);
    if (dt == "U32") return load<uint32_t>(p, i);
    if (dt == "U64") return double(load<uint64_t>(p, i));
    throw std::runtime_error("no reader for " + dt);
}

void expect_formula(const SafetensorsCheckpoint& ck, const std::string& name, const std::string& dt,
                    std::vector<int64_t> shape) {
    SCOPED_TRACE(name);
    const auto& t = ck.info(name);
    EXPECT_EQ(t.dtype_name, dt);
    EXPECT_EQ(t.shape, shape);
    int64_t n = 1;
    for (auto d : shape) n *= d;
    ASSERT_EQ(t.numel(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(element(t, i), expected(dt, i)) << "element " << i;
}

// A unique scratch directory, removed at the end of the test.
struct TempDir {
    fs::path path;
    TempDir() {
        static int counter = 0;
        path = fs::temp_directory_path() /
               ("tessera_st_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string write(const std::string& name, const std::vector<uint8_t>& bytes) const {
        const fs::path p = path / name;
        std::ofstream f(p, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        return p.string();
    }
};

std::vector<uint8_t> st_bytes(const std::string& header, size_t data_bytes, uint64_t header_len_override = 0) {
    const uint64_t n = header_len_override ? header_len_override : header.size();
    std::vector<uint8_t> out(8 + header.size() + data_bytes, 0x5A);
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, header.data(), header.size());
    return out;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// parse_safetensors on an exact-size heap copy, so ASan sees any read past the end.
void parse_copy(const std::vector<uint8_t>& bytes) {
    std::vector<uint8_t> copy(bytes);
    parse_safetensors(copy.data(), copy.size(), "mem.safetensors");
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

}  // namespace

TEST(Safetensors, ReadsEveryDtypeWrittenByTheSafetensorsPackage) {
    const auto ck = SafetensorsCheckpoint::open(kFixtures + "/single");
    EXPECT_EQ(ck.size(), 15u);
    expect_formula(ck, "f64", "F64", {3});
    expect_formula(ck, "f32", "F32", {2, 3});
    expect_formula(ck, "f16", "F16", {4, 2});
    expect_formula(ck, "i8", "I8", {5});
    expect_formula(ck, "i16", "I16", {3});
    expect_formula(ck, "i32", "I32", {2, 2});
    expect_formula(ck, "i64", "I64", {3});
    expect_formula(ck, "u8", "U8", {6});
    expect_formula(ck, "u16", "U16", {2});
    expect_formula(ck, "u32", "U32", {3, 2});
    expect_formula(ck, "u64", "U64", {2});
    expect_formula(ck, "bool", "BOOL", {4});
    expect_formula(ck, "scalar", "F32", {});
    expect_formula(ck, "empty", "F32", {0, 4});
    expect_formula(ck, "rank4", "F32", {1, 2, 1, 3});
    EXPECT_EQ(ck.metadata().at("format"), "pt");
    EXPECT_EQ(ck.metadata().at("note"), "tessera");
    ASSERT_EQ(ck.files().size(), 1u);

    const Tensor t = ck.tensor("f32");
    EXPECT_EQ(t.dtype, DType::F32);
    EXPECT_EQ(t.shape_str(), "[2, 3]");
    EXPECT_EQ(t.data, ck.info("f32").data);
    EXPECT_EQ(t.nbytes(), 24u);
    EXPECT_EQ(ck.tensor("u32").dtype, DType::U32);
    EXPECT_EQ(ck.tensor("bool").dtype, DType::BOOL);
    EXPECT_EQ(ck.tensor("scalar").ndim, 0);
    EXPECT_EQ(ck.tensor("empty").numel(), 0);
    EXPECT_EQ(ck.tensor("rank4").ndim, 4);

    // The file itself opens the same way.
    const auto one = SafetensorsCheckpoint::open(kFixtures + "/single/model.safetensors");
    EXPECT_EQ(one.names(), ck.names());
    EXPECT_FALSE(one.has("nope"));
    try {
        one.info("nope");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::NotFound);
        EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
    }
}

TEST(Safetensors, Bf16AndUnsupportedF8) {
    const auto ck = SafetensorsCheckpoint::open(kFixtures + "/bf16");
    const auto& w = ck.info("w");
    ASSERT_EQ(w.shape, (std::vector<int64_t>{3, 2}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(element(w, i), i * 0.5 - 1);
    EXPECT_EQ(ck.tensor("w").dtype, DType::BF16);
    const auto& f8 = ck.info("scale_fp8");
    EXPECT_EQ(f8.dtype_name, "F8_E4M3");
    EXPECT_FALSE(f8.dtype.has_value());
    EXPECT_EQ(f8.nbytes, 8u);
    try {
        ck.tensor("scale_fp8");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
        EXPECT_NE(std::string(e.what()).find("F8_E4M3"), std::string::npos) << e.what();
    }
}

TEST(Safetensors, ShardedViaIndexAndGlob) {
    const auto ck = SafetensorsCheckpoint::open(kFixtures + "/sharded");
    EXPECT_EQ(ck.names(), (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight", "model.layers.0.q",
                                                    "model.layers.0.w"}));
    EXPECT_EQ(ck.files().size(), 2u);
    expect_formula(ck, "model.embed_tokens.weight", "F32", {4, 3});
    expect_formula(ck, "model.layers.0.w", "F16", {2, 2});
    expect_formula(ck, "model.layers.0.q", "U32", {4, 2});
    EXPECT_NE(ck.info("lm_head.weight").file, ck.info("model.embed_tokens.weight").file);
    const auto by_index = SafetensorsCheckpoint::open(kFixtures + "/sharded/model.safetensors.index.json");
    EXPECT_EQ(by_index.names(), ck.names());

    const auto g = SafetensorsCheckpoint::open(kFixtures + "/glob");
    EXPECT_EQ(g.names(), (std::vector<std::string>{"x", "y"}));
    expect_formula(g, "y", "I32", {3});
}

TEST(Safetensors, EveryTruncationIsAnError) {
    const auto bytes = read_bytes(kFixtures + "/single/model.safetensors");
    ASSERT_GT(bytes.size(), 100u);
    parse_copy(bytes);  // the whole file parses
    for (size_t k = 0; k < bytes.size(); ++k) {
        std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + std::ptrdiff_t(k));
        EXPECT_THROW(parse_copy(prefix), Error) << "prefix of " << k << " bytes";
    }
    TempDir dir;
    for (size_t k : {size_t(0), size_t(7), size_t(9), bytes.size() - 1}) {
        const auto p = dir.write("t.safetensors", std::vector<uint8_t>(bytes.begin(), bytes.begin() + std::ptrdiff_t(k)));
        EXPECT_THROW(SafetensorsCheckpoint::open(p), Error) << k;
    }
}

TEST(Safetensors, MalformedHeadersAreClearErrors) {
    const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    EXPECT_NO_THROW(parse_copy(st_bytes(ok, 8)));
    struct Case {
        std::vector<uint8_t> bytes;
        const char* needle;
    };
    const Case cases[] = {
        {st_bytes(ok, 8, uint64_t(1) << 63), "100 MB"},
        {st_bytes(ok, 8, (100ull << 20) + 1), "100 MB"},
        {st_bytes(ok, 8, ok.size() + 9), "exceeds"},
        {st_bytes("{not json", 0), "bad JSON"},
        {st_bytes("[1,2]", 0), "JSON object"},
        {st_bytes(R"({"a":5})", 0), "expected an object"},
        {st_bytes(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8), "dtype"},
        {st_bytes(R"({"a":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype 'F7'"},
        {st_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "non-negative"},
        {st_bytes(R"({"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8), "non-negative"},
        {st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8), "data_offsets"},
        {st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "end before begin"},
        {st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8), "beyond"},
        {st_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12 bytes"},
        {st_bytes(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8), "too large"},
        {st_bytes(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2), "whole number of bytes"},
        {st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  12), "overlap"},
        {st_bytes(R"({"__metadata__":[1],"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), "__metadata__"},
    };
    for (const auto& c : cases) {
        const std::string msg = error_of([&] { parse_copy(c.bytes); });
        EXPECT_NE(msg.find(c.needle), std::string::npos) << "expected '" << c.needle << "' in: " << msg;
        EXPECT_NE(msg.find("mem.safetensors"), std::string::npos) << msg;  // errors name the file
    }
    // Too short for the length field.
    EXPECT_NE(error_of([] { parse_copy({1, 2, 3}); }).find("too short"), std::string::npos);
    // F4 with an even element count is a known-but-unsupported dtype: parses, fails on access.
    TempDir dir;
    const auto p = dir.write("f4.safetensors", st_bytes(R"({"a":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}})", 2));
    const auto ck = SafetensorsCheckpoint::open(p);
    EXPECT_EQ(ck.info("a").nbytes, 2u);
    EXPECT_THROW(ck.tensor("a"), Error);
}

TEST(Safetensors, CheckpointDirectoryErrors) {
    const std::string a = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    {
        TempDir dir;  // duplicate tensor across files
        dir.write("a.safetensors", st_bytes(a, 8));
        dir.write("b.safetensors", st_bytes(a, 8));
        EXPECT_NE(error_of([&] { SafetensorsCheckpoint::open(dir.path.string()); }).find("in both"), std::string::npos);
    }
    {
        TempDir dir;  // index names a missing shard
        dir.write("model-1.safetensors", st_bytes(a, 8));
        const std::string idx = R"({"weight_map":{"x":"model-1.safetensors","y":"model-2.safetensors"}})";
        dir.write("model.safetensors.index.json", std::vector<uint8_t>(idx.begin(), idx.end()));
        try {
            SafetensorsCheckpoint::open(dir.path.string());
            FAIL();
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::NotFound);
            EXPECT_NE(std::string(e.what()).find("model-2.safetensors"), std::string::npos) << e.what();
        }
    }
    {
        TempDir dir;  // index puts a tensor in a shard that lacks it
        dir.write("model-1.safetensors", st_bytes(a, 8));
        const std::string idx = R"({"weight_map":{"x":"model-1.safetensors","z":"model-1.safetensors"}})";
        dir.write("model.safetensors.index.json", std::vector<uint8_t>(idx.begin(), idx.end()));
        EXPECT_NE(error_of([&] { SafetensorsCheckpoint::open(dir.path.string()); }).find("'z'"), std::string::npos);
    }
    {
        TempDir dir;  // index escaping the directory, and a bad index
        const std::string idx = R"({"weight_map":{"x":"../model-1.safetensors"}})";
        dir.write("model.safetensors.index.json", std::vector<uint8_t>(idx.begin(), idx.end()));
        EXPECT_NE(error_of([&] { SafetensorsCheckpoint::open(dir.path.string()); }).find("relative path"),
                  std::string::npos);
        const std::string bad = R"({"weight_map":[1]})";
        dir.write("model.safetensors.index.json", std::vector<uint8_t>(bad.begin(), bad.end()));
        EXPECT_NE(error_of([&] { SafetensorsCheckpoint::open(dir.path.string()); }).find("weight_map"), std::string::npos);
    }
    {
        TempDir dir;  // model.safetensors wins over other files (e.g. a consolidated copy)
        dir.write("model.safetensors", st_bytes(a, 8));
        dir.write("consolidated.safetensors", st_bytes(a, 8));
        EXPECT_EQ(SafetensorsCheckpoint::open(dir.path.string()).files().size(), 1u);
    }
    {
        TempDir dir;  // empty directory, missing path
        EXPECT_NE(error_of([&] { SafetensorsCheckpoint::open(dir.path.string()); }).find("no *.safetensors"),
                  std::string::npos);
        try {
            SafetensorsCheckpoint::open((dir.path / "missing").string());
            FAIL();
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::NotFound);
        }
    }
}
