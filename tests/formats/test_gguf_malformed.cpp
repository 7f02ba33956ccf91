// Malformed and hostile GGUF files: each must fail with a clear tessera::Error naming the problem
// (and the key or tensor), never crash, over-read or allocate without bound. Files are built by
// hand, byte by byte, and parsed from exact-size heap buffers so AddressSanitizer sees over-reads.
#include <gtest/gtest.h>

#include <limits>

#include "core/status.h"
#include "formats/ggml_types.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_gguf_testutil.h"

using namespace tessera;
using gguf_test::Bytes;
using gguf_test::TempDir;

namespace {

constexpr uint32_t kMagic = 0x46554747;
constexpr uint32_t T_U32 = 4, T_BOOL = 7, T_STRING = 8, T_ARRAY = 9, T_U64 = 10;

// Parses a copy of `b` held in a buffer of exactly its size; returns the error, or "" if none.
std::string parse_error(const std::vector<uint8_t>& b, size_t len = size_t(-1)) {
    len = std::min(len, b.size());
    std::vector<uint8_t> copy(b.begin(), b.begin() + len);
    copy.shrink_to_fit();
    try {
        GgufFile::from_memory(copy.data(), copy.size(), "bad.gguf");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

#define EXPECT_PARSE_ERROR(bytes, want)                                                  \
    do {                                                                                 \
        const std::string err_ = parse_error((bytes).b);                                 \
        EXPECT_NE(err_, "") << "parsed without error; wanted: " << (want);               \
        EXPECT_NE(err_.find(want), std::string::npos) << "got: " << err_ << "\nwant: " << (want); \
        EXPECT_EQ(err_.rfind("bad.gguf: ", 0), 0u) << "error does not name the file: " << err_; \
    } while (0)

Bytes header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    Bytes b;
    b.u32(kMagic).u32(version).u64(n_tensors).u64(n_kv);
    return b;
}

struct TensorSpec {
    std::string name;
    std::vector<uint64_t> ne;  // ggml order, innermost first
    uint32_t type = ggml_type::F32;
    uint64_t offset = 0;
};

// A file with the given tensor infos and `data_bytes` zero bytes of data after 32-byte padding.
Bytes tensor_file(const std::vector<TensorSpec>& tensors, size_t data_bytes) {
    Bytes b = header(tensors.size(), 0);
    for (const auto& t : tensors) {
        b.str(t.name).u32(uint32_t(t.ne.size()));
        for (uint64_t d : t.ne) b.u64(d);
        b.u32(t.type).u64(t.offset);
    }
    b.pad_to(32);
    b.raw(std::vector<uint8_t>(data_bytes, 0));
    return b;
}

}  // namespace

TEST(GgufMalformed, EveryTruncationFailsCleanly) {
    TempDir dir;
    GgufWriter wr;
    wr.set("general.architecture", GgufValue::string("llama"));
    wr.set("n", GgufValue::u32(3));
    wr.set("f", GgufValue::f64(1.5));
    wr.set("ok", GgufValue::boolean(true));
    wr.set("toks", GgufValue::string_array({"a", "bb", ""}));
    wr.set("ids", GgufValue::array(std::vector<int32_t>{1, -2, 3}));
    wr.set("nest", GgufValue::array_of_arrays({GgufValue::array(std::vector<uint8_t>{1}), GgufValue::string_array({"z"})}));
    const std::vector<uint8_t> q(34 * 2, 7);
    const float w[6] = {1, 2, 3, 4, 5, 6};
    wr.add_tensor("w", DType::F32, {2, 3}, w);
    wr.add_tensor("q", DType::Q8_0, {2, 32}, q.data());
    wr.add_tensor("b", DType::F32, {1}, w);
    wr.write(dir.file("v.gguf"));
    const GgufFile full = GgufFile::open(dir.file("v.gguf"));
    const auto& last = full.tensors().back();
    const size_t needed = full.data_offset() + last.offset + last.nbytes;
    std::vector<uint8_t> bytes(full.file_size());
    std::memcpy(bytes.data(), full.tensor_info("w").data - full.data_offset(), bytes.size());

    for (size_t len = 0; len < needed; ++len) {
        const std::string err = parse_error(bytes, len);
        EXPECT_NE(err, "") << "prefix of " << len << " bytes parsed without error";
    }
    // The last tensor's padding is not needed to read it.
    for (size_t len = needed; len <= bytes.size(); ++len) EXPECT_EQ(parse_error(bytes, len), "") << len;
    EXPECT_NE(parse_error(bytes, 6).find("truncated: version needs 4 bytes at offset 4 but only 2 remain"),
              std::string::npos)
        << parse_error(bytes, 6);
}

TEST(GgufMalformed, BadMagicAndVersion) {
    Bytes b;
    b.u32(0x47554747).u32(3).u64(0).u64(0);
    EXPECT_PARSE_ERROR(b, "not a GGUF file");
    EXPECT_PARSE_ERROR(header(0, 0, 1), "GGUF version 1 is not supported");
    EXPECT_PARSE_ERROR(header(0, 0, 4), "unsupported GGUF version 4");
    EXPECT_PARSE_ERROR(header(0, 0, 0x03000000), "big-endian GGUF files are not supported");
    EXPECT_PARSE_ERROR(Bytes{}, "truncated: magic");
}

TEST(GgufMalformed, HugeCountsAndLengths) {
    EXPECT_PARSE_ERROR(header(1ull << 63, 0), "tensor count 9223372036854775808 cannot fit");
    EXPECT_PARSE_ERROR(header(0, ~0ull), "metadata count 18446744073709551615 cannot fit");
    Bytes key = header(0, 1);
    key.u64(1ull << 63).u32(T_U32).u32(1);
    EXPECT_PARSE_ERROR(key, "metadata entry 0: truncated: key needs 9223372036854775808 bytes");
    Bytes str = header(0, 1);
    str.str("general.name").u32(T_STRING).u64(~0ull - 3);
    EXPECT_PARSE_ERROR(str, "key general.name: truncated: string needs 18446744073709551612 bytes");
    Bytes arr = header(0, 1);
    arr.str("tokenizer.ggml.scores").u32(T_ARRAY).u32(T_U64).u64(1ull << 61).u64(0);
    EXPECT_PARSE_ERROR(arr, "key tokenizer.ggml.scores: array of 2305843009213693952 u64 elements");
    Bytes sarr = header(0, 1);
    sarr.str("tokenizer.ggml.tokens").u32(T_ARRAY).u32(T_STRING).u64(1ull << 40).str("a");
    EXPECT_PARSE_ERROR(sarr, "array of 1099511627776 string elements");
    Bytes elem = header(0, 1);
    elem.str("t").u32(T_ARRAY).u32(T_STRING).u64(2).str("a").u64(1ull << 62);
    EXPECT_PARSE_ERROR(elem, "key t: truncated: string array element needs 4611686018427387904 bytes");
}

TEST(GgufMalformed, BadValues) {
    Bytes type = header(0, 1);
    type.str("k").u32(13).u32(0);
    EXPECT_PARSE_ERROR(type, "key k: invalid value type 13");
    Bytes etype = header(0, 1);
    etype.str("k").u32(T_ARRAY).u32(99).u64(0);
    EXPECT_PARSE_ERROR(etype, "key k: invalid array element type 99");
    Bytes boolean = header(0, 1);
    boolean.str("k").u32(T_BOOL).put<uint8_t>(2);
    EXPECT_PARSE_ERROR(boolean, "key k: bool value 2");
    Bytes dup = header(0, 2);
    dup.str("k").u32(T_U32).u32(1).str("k").u32(T_U32).u32(2);
    EXPECT_PARSE_ERROR(dup, "key k: duplicate key");
    // Arrays of arrays nested 20 deep.
    Bytes deep = header(0, 1);
    deep.str("deep").u32(T_ARRAY);
    for (int i = 0; i < 20; ++i) deep.u32(T_ARRAY).u64(1);
    deep.u32(T_U32).u64(0);
    EXPECT_PARSE_ERROR(deep, "key deep: arrays nested deeper than 8");
}

TEST(GgufMalformed, BadAlignment) {
    for (uint32_t a : {0u, 48u, 3u}) {
        Bytes b = header(0, 1);
        b.str("general.alignment").u32(T_U32).u32(a);
        EXPECT_PARSE_ERROR(b, "is not a power of two");
    }
    Bytes s = header(0, 1);
    s.str("general.alignment").u32(T_STRING).str("32");
    EXPECT_PARSE_ERROR(s, "key general.alignment: expected u32, found string");
}

TEST(GgufMalformed, BadTensorShapes) {
    EXPECT_PARSE_ERROR(tensor_file({{"blk.0.w", {1, 1, 1, 1, 1}}}, 32), "tensor blk.0.w: 5 dimensions");
    EXPECT_PARSE_ERROR(tensor_file({{"blk.0.w", {4, 0}}}, 32), "tensor blk.0.w: dimension ne[1] = 0");
    EXPECT_PARSE_ERROR(tensor_file({{"blk.0.w", {1ull << 63}}}, 32), "tensor blk.0.w: dimension ne[0] = 9223372036854775808");
    EXPECT_PARSE_ERROR(tensor_file({{"blk.0.w", {1ull << 32, 1ull << 32, 1ull << 32}}}, 32),
                       "tensor blk.0.w: element count overflows int64 at ne[1]");
    EXPECT_PARSE_ERROR(tensor_file({{"big", {1ull << 62}, ggml_type::F64}}, 32), "tensor big: byte size of");
    EXPECT_PARSE_ERROR(tensor_file({{"blk.1.q", {31, 2}, ggml_type::Q4_0}}, 64),
                       "tensor blk.1.q: row length 31 is not a multiple of the Q4_0 block size 32");
    EXPECT_PARSE_ERROR(tensor_file({{"blk.2.x", {32}, 99}}, 64), "tensor blk.2.x: unknown ggml type id 99");
    EXPECT_PARSE_ERROR(tensor_file({{"blk.2.x", {32}, 4}}, 64), "tensor blk.2.x: unknown ggml type id 4");
    EXPECT_PARSE_ERROR(tensor_file({{"a", {4}}, {"a", {4}, 0, 32}}, 64), "tensor a: duplicate tensor name");
}

TEST(GgufMalformed, BadTensorOffsets) {
    EXPECT_PARSE_ERROR(tensor_file({{"w", {4}, 0, 4}}, 64), "tensor w: data offset 4 is not a multiple of the alignment 32");
    EXPECT_PARSE_ERROR(tensor_file({{"w", {4}, 0, 1ull << 62}}, 64), "tensor w: data [4611686018427387904, ");
    EXPECT_PARSE_ERROR(tensor_file({{"w", {16}, 0, 32}}, 64), "tensor w: data [32, 96) runs past the end of the 64-byte data section");
    EXPECT_PARSE_ERROR(tensor_file({{"w", {4}, 0, ~0ull - 31}}, 64), "runs past the end");
    EXPECT_PARSE_ERROR(tensor_file({{"a", {16}, 0, 0}, {"b", {4}, 0, 32}}, 128), "tensors a [0, 64) and b [32, ...) overlap");
    // Infos that end exactly at the file's end: the data section is missing.
    Bytes b = header(1, 0);
    b.str("w").u32(1).u64(4).u32(0).u64(0);
    EXPECT_PARSE_ERROR(b, "past the end of the");
}

TEST(GgufMalformed, UnsupportedTypeIsOnlyAnErrorWhenUsed) {
    // Q5_K (13): a valid ggml type tessera cannot compute with.
    const Bytes b = tensor_file({{"blk.0.ffn_down.weight", {256, 2}, 13}}, 2 * 176);
    const GgufFile f = GgufFile::from_memory(b.b.data(), b.size(), "q5k.gguf");
    const auto& t = f.tensors().at(0);
    EXPECT_EQ(t.nbytes, 352u);
    EXPECT_EQ(t.type_name(), "Q5_K");
    EXPECT_EQ(t.shape_str(), "[2, 256]");
    try {
        f.tensor("blk.0.ffn_down.weight");
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
        EXPECT_NE(std::string(e.what()).find("tensor blk.0.ffn_down.weight: ggml type Q5_K (13)"), std::string::npos)
            << e.what();
    }
}
