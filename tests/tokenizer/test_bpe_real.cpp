// The real Qwen3 / DeepSeek-V3 tokenizers (../shared/data/tokenizers, skipped when absent):
// random bytes round-trip through encode/decode, the stream decoder always emits valid UTF-8
// that equals a lossy decoding of the whole.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {
std::string data_dir(const char* name) {
    return std::string(TESSERA_SOURCE_DIR) + "/../shared/data/tokenizers/" + name;
}

bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        char32_t cp;
        const size_t n = tessera::tok::utf8_decode_one(s, i, &cp);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

class RealTokenizer : public ::testing::TestWithParam<const char*> {};
}  // namespace

TEST_P(RealTokenizer, RandomBytesRoundTrip) {
    const std::string dir = data_dir(GetParam());
    if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "no " << dir;
    // No bound on the load time here: timing belongs to benchmarks (a 10 s bound failed under ASan on
    // a busy machine, at 10.2 s).
    const auto tok = tessera::load_tokenizer(dir);

    std::mt19937 rng(42);
    const std::string pieces[] = {"a", " ", "\n", "\xC3\xA9", "\xF0\x9F\x98\x80", "\xE4\xBD\xA0", "1", "'s",
                                  "<|im_start|>", "\xFF", "\xC3", "\xE2\x82", "\xED\xA0\x80", "\x80"};
    for (int iter = 0; iter < 300; ++iter) {
        std::string s;
        const int n = rng() % 40;
        for (int k = 0; k < n; ++k) {
            if (rng() % 3 == 0) s.push_back(static_cast<char>(rng() % 256));
            else s += pieces[rng() % std::size(pieces)];
        }
        for (bool special : {false, true}) {
            const auto ids = tok->encode(s, false, special);
            ASSERT_EQ(tok->decode(ids), s) << "iteration " << iter;
            tessera::StreamDecoder sd(*tok);
            std::string streamed;
            for (int32_t id : ids) {
                const std::string part = sd.push(id);
                ASSERT_TRUE(valid_utf8(part));
                streamed += part;
            }
            streamed += sd.flush();
            ASSERT_TRUE(valid_utf8(streamed));
            if (valid_utf8(s)) {
                EXPECT_EQ(streamed, s);
            }
        }
    }
}

TEST_P(RealTokenizer, SpecialTokenIds) {
    const std::string dir = data_dir(GetParam());
    if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "no " << dir;
    const auto tok = tessera::load_tokenizer(dir);
    ASSERT_TRUE(tok->eos_id().has_value());
    EXPECT_TRUE(tok->is_special(*tok->eos_id()));
    EXPECT_FALSE(tok->chat_template().empty());
    if (std::string(GetParam()) == "qwen3") {
        EXPECT_FALSE(tok->bos_id().has_value());
        EXPECT_EQ(tok->token_text(*tok->eos_id()), "<|im_end|>");
        EXPECT_EQ(tok->vocab_size(), 151669);
    } else {
        EXPECT_EQ(tok->bos_id(), 0);
        EXPECT_EQ(tok->encode("x", true, true).front(), 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Shared, RealTokenizer, ::testing::Values("qwen3", "deepseek_v3"));
