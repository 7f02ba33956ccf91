// GGUF writer -> reader round trips, the exact byte layout of a hand-derived file, and the
// typed metadata getters.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "core/status.h"
#include "formats/ggml_types.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_gguf_testutil.h"

using namespace tessera;
using gguf_test::Bytes;
using gguf_test::TempDir;

namespace {

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& x : v) x = uint8_t(rng());
    return v;
}

template <typename Fn> std::string error_of(Fn&& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

}  // namespace

TEST(GgufTypes, TableMatchesGgml) {
    // Sizes from ggml.c type_traits (and gguf-py GGML_QUANT_SIZES).
    EXPECT_EQ(ggml_type_info(ggml_type::Q4_K)->block_bytes, 144u);
    EXPECT_EQ(ggml_type_info(ggml_type::Q6_K)->block_bytes, 210u);
    EXPECT_EQ(ggml_type_info(13)->block_bytes, 176u);  // Q5_K
    EXPECT_EQ(ggml_type_info(ggml_type::IQ2_XXS)->block_bytes, 66u);
    EXPECT_EQ(ggml_type_info(ggml_type::MXFP4)->block_elems, 32u);
    EXPECT_EQ(ggml_type_info(4), nullptr);   // removed Q4_2
    EXPECT_EQ(ggml_type_info(31), nullptr);  // removed Q4_0_4_4
    EXPECT_EQ(ggml_type_info(1000), nullptr);
    EXPECT_EQ(ggml_type_name(99), "unknown(99)");
    // Every tessera DType that GGUF stores maps back to itself with a matching block size.
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::I16, DType::I32, DType::I64,
                    DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::MXFP4}) {
        const uint32_t id = dtype_to_ggml_type(d);
        EXPECT_EQ(ggml_type_to_dtype(id), d);
        EXPECT_EQ(int(ggml_type_info(id)->block_bytes), dtype_info(d).block_bytes) << dtype_name(d);
        EXPECT_EQ(int(ggml_type_info(id)->block_elems), dtype_info(d).block_elems) << dtype_name(d);
    }
    EXPECT_THROW(dtype_to_ggml_type(DType::U8), Error);
    EXPECT_FALSE(ggml_type_to_dtype(13).has_value());
}

// The exact bytes of a tiny file, derived by hand from the GGUF v3 spec.
TEST(GgufWriter, ByteLayoutMatchesSpec) {
    TempDir dir;
    const float w[3] = {1.0f, -2.0f, 0.5f};
    GgufWriter wr;
    wr.set("general.architecture", GgufValue::string("llama"));
    wr.set("n", GgufValue::u32(7));
    wr.add_tensor("w", DType::F32, {1, 3}, w);
    wr.add_tensor("b", DType::F32, {1}, w);
    wr.write(dir.file("a.gguf"));

    Bytes e;
    e.u32(0x46554747).u32(3).u64(2).u64(2);
    e.str("general.architecture").u32(8).str("llama");
    e.str("n").u32(4).u32(7);
    e.str("w").u32(2).u64(3).u64(1).u32(0).u64(0);  // ne = {3, 1}: innermost first
    e.str("b").u32(1).u64(1).u32(0).u64(32);        // 12 bytes padded to 32
    e.pad_to(32);
    e.put(1.0f).put(-2.0f).put(0.5f).pad_to(32);
    e.put(1.0f).pad_to(32);
    EXPECT_EQ(read_all(dir.file("a.gguf")), e.b);
    EXPECT_FALSE(std::filesystem::exists(dir.file("a.gguf.partial")));
}

TEST(GgufWriter, RoundTripsEveryMetadataType) {
    TempDir dir;
    GgufWriter wr;
    wr.set("u8", GgufValue::u8(250));
    wr.set("i8", GgufValue::i8(-120));
    wr.set("u16", GgufValue::u16(65000));
    wr.set("i16", GgufValue::i16(-32000));
    wr.set("u32", GgufValue::u32(4000000000u));
    wr.set("i32", GgufValue::i32(-2000000000));
    wr.set("f32", GgufValue::f32(3.25f));
    wr.set("bool_t", GgufValue::boolean(true));
    wr.set("bool_f", GgufValue::boolean(false));
    wr.set("str", GgufValue::string("héllo\nworld"));
    wr.set("empty_str", GgufValue::string(""));
    wr.set("u64", GgufValue::u64(18000000000000000000ull));
    wr.set("i64", GgufValue::i64(-9000000000000000000ll));
    wr.set("f64", GgufValue::f64(-1e300));
    wr.set("a_u8", GgufValue::array(std::vector<uint8_t>{1, 2, 255}));
    wr.set("a_i8", GgufValue::array(std::vector<int8_t>{-1, 2}));
    wr.set("a_u16", GgufValue::array(std::vector<uint16_t>{7}));
    wr.set("a_i16", GgufValue::array(std::vector<int16_t>{-7, 8}));
    wr.set("a_u32", GgufValue::array(std::vector<uint32_t>{1, 4000000000u}));
    wr.set("a_i32", GgufValue::array(std::vector<int32_t>{-5, 0, 5}));
    wr.set("a_f32", GgufValue::array(std::vector<float>{0.5f, -1.5f}));
    wr.set("a_u64", GgufValue::array(std::vector<uint64_t>{1ull << 40}));
    wr.set("a_i64", GgufValue::array(std::vector<int64_t>{-(1ll << 40)}));
    wr.set("a_f64", GgufValue::array(std::vector<double>{1e-300, 2.0}));
    wr.set("a_bool", GgufValue::bool_array({true, false, true}));
    wr.set("a_str", GgufValue::string_array({"a", "", "ccc"}));
    wr.set("a_empty", GgufValue::array(std::vector<int32_t>{}));
    wr.set("a_nested", GgufValue::array_of_arrays({GgufValue::array(std::vector<int32_t>{1, 2}),
                                                   GgufValue::string_array({"x"}),
                                                   GgufValue::array_of_arrays({GgufValue::array(std::vector<float>{9.f})})}));
    wr.write(dir.file("m.gguf"));

    const GgufFile f = GgufFile::open(dir.file("m.gguf"));
    EXPECT_EQ(f.version(), 3u);
    ASSERT_EQ(f.metadata().size(), 28u);
    EXPECT_EQ(f.metadata()[0].key, "u8");  // file order kept
    EXPECT_EQ(f.metadata()[27].key, "a_nested");
    EXPECT_EQ(f.get("u8").type(), GgufType::U8);
    EXPECT_EQ(f.get_u32("u8"), 250u);
    EXPECT_EQ(f.get_i32("i8"), -120);
    EXPECT_EQ(f.get_u32("u16"), 65000u);
    EXPECT_EQ(f.get_i64("i16"), -32000);
    EXPECT_EQ(f.get_u32("u32"), 4000000000u);
    EXPECT_EQ(f.get_i32("i32"), -2000000000);
    EXPECT_EQ(f.get_f32("f32"), 3.25f);
    EXPECT_TRUE(f.get_bool("bool_t"));
    EXPECT_FALSE(f.get_bool("bool_f"));
    EXPECT_EQ(f.get_string("str"), "héllo\nworld");
    EXPECT_EQ(f.get_string("empty_str"), "");
    EXPECT_EQ(f.get_u64("u64"), 18000000000000000000ull);
    EXPECT_EQ(f.get_i64("i64"), -9000000000000000000ll);
    EXPECT_EQ(f.get_f64("f64"), -1e300);
    EXPECT_EQ(f.get_i64_array("a_u8"), (std::vector<int64_t>{1, 2, 255}));
    EXPECT_EQ(f.get_i64_array("a_i8"), (std::vector<int64_t>{-1, 2}));
    EXPECT_EQ(f.get_i64_array("a_u16"), (std::vector<int64_t>{7}));
    EXPECT_EQ(f.get_i64_array("a_i16"), (std::vector<int64_t>{-7, 8}));
    EXPECT_EQ(f.get_i64_array("a_u32"), (std::vector<int64_t>{1, 4000000000ll}));
    EXPECT_EQ(f.get_i64_array("a_i32"), (std::vector<int64_t>{-5, 0, 5}));
    EXPECT_EQ(f.get_f32_array("a_f32"), (std::vector<float>{0.5f, -1.5f}));
    EXPECT_EQ(f.get_i64_array("a_u64"), (std::vector<int64_t>{1ll << 40}));
    EXPECT_EQ(f.get_i64_array("a_i64"), (std::vector<int64_t>{-(1ll << 40)}));
    EXPECT_EQ(f.get("a_f64").as_f64_array(), (std::vector<double>{1e-300, 2.0}));
    EXPECT_EQ(f.get("a_bool").elem_type(), GgufType::BOOL);
    EXPECT_TRUE(f.get("a_bool").at(2).as_bool());
    EXPECT_FALSE(f.get("a_bool").at(1).as_bool());
    EXPECT_EQ(f.get_string_array("a_str"), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(f.get("a_empty").size(), 0u);
    EXPECT_EQ(f.get("a_empty").elem_type(), GgufType::I32);
    const auto& nested = f.get("a_nested").as_array_array();
    ASSERT_EQ(nested.size(), 3u);
    EXPECT_EQ(nested[0].as_i64_array(), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(nested[1].as_string_array(), (std::vector<std::string>{"x"}));
    EXPECT_EQ(nested[2].as_array_array()[0].as_f64_array(), (std::vector<double>{9.0}));
    // The whole value survives unchanged.
    EXPECT_EQ(f.get("a_nested"), GgufValue::array_of_arrays({GgufValue::array(std::vector<int32_t>{1, 2}),
                                                             GgufValue::string_array({"x"}),
                                                             GgufValue::array_of_arrays(
                                                                 {GgufValue::array(std::vector<float>{9.f})})}));
}

TEST(GgufWriter, RoundTripsTensorsOfManyTypesAndShapes) {
    struct Case {
        std::string name;
        DType dtype;
        std::vector<int64_t> shape;
    };
    const std::vector<Case> cases = {
        {"f32_2d", DType::F32, {3, 5}},          {"f16_2d", DType::F16, {2, 4}},
        {"bf16_1d", DType::BF16, {7}},           {"q8_0", DType::Q8_0, {2, 64}},
        {"q4_0", DType::Q4_0, {32}},             {"q4_k", DType::Q4_K, {3, 256}},
        {"q6_k", DType::Q6_K, {1, 512}},         {"mxfp4_4d", DType::MXFP4, {2, 1, 3, 32}},
        {"i32_4d", DType::I32, {4, 3, 2, 1}},    {"f64", DType::F64, {2}},
    };
    for (uint32_t alignment : {32u, 64u, 1u}) {
        TempDir dir;
        GgufWriter wr(alignment);
        std::vector<std::vector<uint8_t>> data;
        for (size_t i = 0; i < cases.size(); ++i) {
            int64_t numel = 1;
            for (int64_t d : cases[i].shape) numel *= d;
            data.push_back(random_bytes(dtype_row_bytes(cases[i].dtype, numel), uint32_t(i)));
        }
        for (size_t i = 0; i < cases.size(); ++i) {
            if (i % 2 == 0) {
                wr.add_tensor(cases[i].name, cases[i].dtype, cases[i].shape, data[i].data());
            } else {  // streamed in pieces of 5 bytes
                const auto* bytes = &data[i];
                wr.add_tensor(cases[i].name, cases[i].dtype, cases[i].shape, [bytes](const GgufWriter::Sink& sink) {
                    for (size_t o = 0; o < bytes->size(); o += 5) sink(bytes->data() + o, std::min<size_t>(5, bytes->size() - o));
                });
            }
        }
        const std::vector<uint8_t> iq = random_bytes(66 * 2, 99);
        wr.add_tensor_ggml("iq2_xxs", ggml_type::IQ2_XXS, {2, 256}, [&](const GgufWriter::Sink& s) { s(iq.data(), iq.size()); });
        wr.write(dir.file("t.gguf"));

        const GgufFile f = GgufFile::open(dir.file("t.gguf"));
        EXPECT_EQ(f.alignment(), alignment);
        EXPECT_EQ(f.data_offset() % alignment, 0u);
        ASSERT_EQ(f.tensors().size(), cases.size() + 1);
        for (size_t i = 0; i < cases.size(); ++i) {
            SCOPED_TRACE(cases[i].name);
            const GgufTensorInfo& t = f.tensors()[i];
            EXPECT_EQ(t.name, cases[i].name);
            EXPECT_EQ(t.dtype(), cases[i].dtype);
            EXPECT_EQ(t.offset % alignment, 0u);
            ASSERT_EQ(t.ndim, int(cases[i].shape.size()));
            for (int d = 0; d < t.ndim; ++d) EXPECT_EQ(t.shape[d], cases[i].shape[d]);
            ASSERT_EQ(t.nbytes, data[i].size());
            EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), data[i]);
            const Tensor view = f.tensor(t.name);
            EXPECT_EQ(view.dtype, cases[i].dtype);
            EXPECT_EQ(view.nbytes(), data[i].size());
            EXPECT_EQ(view.data, static_cast<const void*>(t.data));
        }
        const GgufTensorInfo& iqt = f.tensor_info("iq2_xxs");
        EXPECT_EQ(iqt.type_name(), "IQ2_XXS");
        EXPECT_FALSE(iqt.has_dtype());
        EXPECT_EQ(std::vector<uint8_t>(iqt.data, iqt.data + iqt.nbytes), iq);
        const std::string err = error_of([&] { f.tensor("iq2_xxs"); });
        EXPECT_NE(err.find("tensor iq2_xxs: ggml type IQ2_XXS (16) is not supported"), std::string::npos) << err;
        EXPECT_EQ(f.find_tensor("nope"), nullptr);
        EXPECT_NE(error_of([&] { f.tensor_info("nope"); }).find("tensor nope not found"), std::string::npos);
    }
}

TEST(GgufWriter, RejectsBadInput) {
    GgufWriter wr;
    const float x[32] = {};
    wr.set("k", GgufValue::u32(1));
    EXPECT_THROW(wr.set("k", GgufValue::u32(2)), Error);
    EXPECT_THROW(wr.set("general.alignment", GgufValue::u32(48)), Error);
    EXPECT_THROW(wr.set("general.alignment", GgufValue::u64(64)), Error);
    EXPECT_THROW(GgufWriter(0), Error);
    EXPECT_THROW(GgufWriter(24), Error);
    wr.add_tensor("t", DType::F32, {32}, x);
    EXPECT_THROW(wr.add_tensor("t", DType::F32, {32}, x), Error);
    EXPECT_THROW(wr.add_tensor("z", DType::F32, {0, 32}, x), Error);
    EXPECT_THROW(wr.add_tensor("five", DType::F32, {1, 1, 1, 1, 32}, x), Error);
    EXPECT_THROW(wr.add_tensor("q", DType::Q4_0, {31}, x), Error);
    EXPECT_THROW(wr.add_tensor("u8", DType::U8, {32}, x), Error);
    EXPECT_THROW(wr.add_tensor(std::string(64, 'n'), DType::F32, {32}, x), Error);
    EXPECT_THROW(wr.add_tensor_ggml("bad", 4, {32}, [](const GgufWriter::Sink&) {}), Error);

    TempDir dir;
    GgufWriter short_writer;
    short_writer.add_tensor("s", DType::F32, {4}, [&](const GgufWriter::Sink& sink) { sink(x, 8); });
    const std::string err = error_of([&] { short_writer.write(dir.file("s.gguf")); });
    EXPECT_NE(err.find("tensor s: producer wrote 8 bytes, expected 16"), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("s.gguf")));
    EXPECT_FALSE(std::filesystem::exists(dir.file("s.gguf.partial")));
}

TEST(GgufReader, TypedGettersConvertAndExplain) {
    TempDir dir;
    GgufWriter wr;
    wr.set("general.architecture", GgufValue::string("qwen3"));
    wr.set("qwen3.block_count", GgufValue::string("28"));
    wr.set("small", GgufValue::u8(5));
    wr.set("neg", GgufValue::i32(-1));
    wr.set("big", GgufValue::u64(1ull << 40));
    wr.set("huge", GgufValue::u64(1ull << 63));
    wr.set("f", GgufValue::f64(0.25));
    wr.write(dir.file("g.gguf"));
    const GgufFile f = GgufFile::open(dir.file("g.gguf"));

    EXPECT_EQ(f.architecture(), "qwen3");
    EXPECT_EQ(f.get_u32("small"), 5u);
    EXPECT_EQ(f.get_i32("small"), 5);
    EXPECT_EQ(f.get_u64("small"), 5u);
    EXPECT_EQ(f.get_i32("neg"), -1);
    EXPECT_EQ(f.get_i64("big"), 1ll << 40);
    EXPECT_EQ(f.get_u64("huge"), 1ull << 63);
    EXPECT_EQ(f.get_f32("f"), 0.25f);
    EXPECT_EQ(f.find_u32("absent"), std::nullopt);
    EXPECT_EQ(f.find_u32("small"), 5u);
    EXPECT_EQ(f.find_string("absent"), std::nullopt);

    auto expect_error = [&](auto fn, const std::string& want) {
        const std::string err = error_of(fn);
        EXPECT_NE(err.find(want), std::string::npos) << "got: " << err << "\nwant: " << want;
        EXPECT_NE(err.find(dir.file("g.gguf")), std::string::npos) << err;  // names the file
    };
    expect_error([&] { f.get_u32("qwen3.block_count"); }, "key qwen3.block_count: expected u32, found string");
    expect_error([&] { f.find_u32("qwen3.block_count"); }, "key qwen3.block_count: expected u32, found string");
    expect_error([&] { f.get_u32("neg"); }, "key neg: value -1 (i32) is negative");
    expect_error([&] { f.get_u32("big"); }, "key big: value 1099511627776 (u64) does not fit u32");
    expect_error([&] { f.get_i32("big"); }, "does not fit i32");
    expect_error([&] { f.get_i64("huge"); }, "does not fit i64");
    expect_error([&] { f.get_string("small"); }, "key small: expected string, found u8");
    expect_error([&] { f.get_f32("small"); }, "key small: expected f32 or f64, found u8");
    expect_error([&] { f.get_bool("f"); }, "expected bool, found f64");
    expect_error([&] { f.get_array("f"); }, "expected array, found f64");
    expect_error([&] { f.get_string_array("small"); }, "expected array[string], found u8");
    expect_error([&] { f.get_u32("absent"); }, "key absent not found");
    try {
        f.get("absent");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::NotFound);
    }
}

TEST(GgufReader, OpenMissingFileIsNotFound) {
    try {
        GgufFile::open("/nonexistent/model.gguf");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::NotFound);
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
    }
}

TEST(GgufReader, AcceptsVersion2AndEmptyFiles) {
    Bytes b;
    b.u32(0x46554747).u32(2).u64(0).u64(1).str("general.name").u32(8).str("v2");
    const GgufFile f = GgufFile::from_memory(b.b.data(), b.size(), "v2.gguf");
    EXPECT_EQ(f.version(), 2u);
    EXPECT_EQ(f.get_string("general.name"), "v2");
    EXPECT_TRUE(f.tensors().empty());
}

// Files written by llama.cpp's gguf-py (the fuzz seeds, made by tests/fuzz/make_corpus.py),
// read and written again by tessera, must come out byte for byte the same: same header,
// metadata order and encoding, tensor infos, offsets and zero padding.
TEST(GgufWriter, RewritesGgufPyFilesByteIdentically) {
    const std::filesystem::path corpus = std::filesystem::path(TESSERA_SOURCE_DIR) / "tests/fuzz/corpus_gguf";
    int checked = 0;
    for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
        SCOPED_TRACE(entry.path().string());
        const GgufFile f = GgufFile::open(entry.path().string());
        if (f.version() != 3) continue;
        TempDir dir;
        GgufWriter w(f.alignment());
        for (const auto& kv : f.metadata()) w.set(kv.key, kv.value);
        for (const auto& t : f.tensors()) {
            const GgufTensorInfo* ti = &t;
            w.add_tensor_ggml(t.name, t.ggml_type, std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.ndim),
                              [ti](const GgufWriter::Sink& sink) { sink(ti->data, ti->nbytes); });
        }
        w.write(dir.file("copy.gguf"));
        EXPECT_EQ(read_all(dir.file("copy.gguf")), read_all(entry.path().string()));
        ++checked;
    }
    EXPECT_GE(checked, 4);
}
