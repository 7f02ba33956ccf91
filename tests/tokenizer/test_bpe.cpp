// Tokenizer built from small hand-written tokenizer.json files: BPE merge order, added tokens
// (special / lstrip / rstrip / single_word), BOS/EOS from config and template, decode, stream
// decoding, and clear errors on hostile input. Expected ids are derived by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

using tessera::Tokenizer;
using json = nlohmann::json;
using Ids = std::vector<int32_t>;

namespace {
// Byte-level vocabulary: ids 0..255 are the single bytes, then `extra` tokens (raw bytes).
json make_tokenizer(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                    const json& added = json::array(), const json& post = nullptr) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[tessera::tok::byte_level_encode(std::string(1, static_cast<char>(b)))] = b;
    for (size_t i = 0; i < extra.size(); ++i) vocab[tessera::tok::byte_level_encode(extra[i])] = 256 + static_cast<int>(i);
    json m = json::array();
    for (const auto& s : merges) {
        const size_t sp = s.find(' ');
        m.push_back(tessera::tok::byte_level_encode(s.substr(0, sp)) + " " + tessera::tok::byte_level_encode(s.substr(sp + 1)));
    }
    return {{"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"post_processor", post},
            {"added_tokens", added},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

std::unique_ptr<Tokenizer> load(const json& tj, const json& cfg = nullptr, const std::string& gen = "") {
    return Tokenizer::from_hf_json(tj.dump(), cfg.is_null() ? "" : cfg.dump(), gen);
}

json added_token(int id, const std::string& content, bool special, bool lstrip = false, bool rstrip = false,
                 bool single_word = false) {
    return {{"id", id}, {"content", content}, {"special", special}, {"normalized", false},
            {"lstrip", lstrip}, {"rstrip", rstrip}, {"single_word", single_word}};
}
}  // namespace

TEST(Bpe, MergesApplyByRankNotPosition) {
    // ids: ab 256, bc 257, abc 258. "b c" ranks first, so "abc" -> a + bc -> abc.
    auto t = load(make_tokenizer({"ab", "bc", "abc"}, {"b c", "a bc", "a b"}));
    EXPECT_EQ(t->encode("abc", false, false), (Ids{258}));
    // Without "a bc" the word stays a + bc even though "a b" exists.
    auto t2 = load(make_tokenizer({"ab", "bc", "abc"}, {"b c", "a b"}));
    EXPECT_EQ(t2->encode("abc", false, false), (Ids{'a', 257}));
}

TEST(Bpe, TiesGoLeftmost) {
    auto t = load(make_tokenizer({"aa"}, {"a a"}));
    EXPECT_EQ(t->encode("aaa", false, false), (Ids{256, 'a'}));
    EXPECT_EQ(t->encode("aaaa", false, false), (Ids{256, 256}));
}

TEST(Bpe, LongRunIsFast) {
    auto t = load(make_tokenizer({"aa", "aaaa"}, {"a a", "aa aa"}));
    const auto ids = t->encode(std::string(200001, 'a'), false, false);
    ASSERT_EQ(ids.size(), 50001u);
    EXPECT_EQ(ids.front(), 257);
    EXPECT_EQ(ids.back(), 'a');
}

TEST(Bpe, PreTokenizerBoundsMerges) {
    // GPT-2 regex splits "a b" into "a", " b": the merge "a Ġ" can never apply across pieces.
    auto t = load(make_tokenizer({"a "}, {"a  "}));
    EXPECT_EQ(t->encode("a b", false, false), (Ids{'a', ' ', 'b'}));
}

TEST(AddedTokens, SpecialOnlyWhenParsed) {
    json added = json::array({added_token(300, "<|s|>", true), added_token(301, "<x>", false)});
    auto t = load(make_tokenizer({}, {}, added));
    EXPECT_EQ(t->encode("a<|s|>b", false, true), (Ids{'a', 300, 'b'}));
    EXPECT_EQ(t->encode("a<|s|>b", false, false), (Ids{'a', '<', '|', 's', '|', '>', 'b'}));
    EXPECT_EQ(t->encode("a<x>b", false, false), (Ids{'a', 301, 'b'}));  // non-special always
    EXPECT_TRUE(t->is_special(300));
    EXPECT_FALSE(t->is_special(301));
    EXPECT_EQ(t->decode({'a', 300, 301}, true), "a<x>");
    EXPECT_EQ(t->decode({'a', 300, 301}, false), "a<|s|><x>");
    EXPECT_EQ(t->token_id("<|s|>"), 300);
    EXPECT_EQ(t->token_id("nope"), -1);
}

TEST(AddedTokens, LongestMatchAndStripFlags) {
    json added = json::array({added_token(300, "<a>", true), added_token(301, "<a><b>", true),
                              added_token(302, "[L]", true, true, false), added_token(303, "[R]", true, false, true),
                              added_token(304, "w", true, false, false, true)});
    auto t = load(make_tokenizer({}, {}, added));
    EXPECT_EQ(t->encode("<a><b>", false, true), (Ids{301}));
    EXPECT_EQ(t->encode("x  [L]  y", false, true), (Ids{'x', 302, ' ', ' ', 'y'}));  // lstrip eats the left spaces
    EXPECT_EQ(t->encode("x  [R]  y", false, true), (Ids{'x', ' ', ' ', 303, 'y'}));  // rstrip eats the right ones
    EXPECT_EQ(t->encode("a w b", false, true), (Ids{'a', ' ', 304, ' ', 'b'}));      // single word: matched
    EXPECT_EQ(t->encode("awb", false, true), (Ids{'a', 'w', 'b'}));                  // inside a word: not
}

TEST(SpecialIds, ConfigBosEosAndGenerationConfig) {
    json added = json::array({added_token(300, "<s>", true), added_token(301, "</s>", true), added_token(302, "<eot>", true)});
    json cfg = {{"add_bos_token", true}, {"add_eos_token", true}, {"bos_token", {{"content", "<s>"}}}, {"eos_token", "</s>"},
                {"chat_template", "{{ x }}"}};
    auto t = load(make_tokenizer({}, {}, added), cfg, R"({"eos_token_id": [301, 302]})");
    EXPECT_EQ(t->encode("a", true, false), (Ids{300, 'a', 301}));
    EXPECT_EQ(t->encode("a", false, false), (Ids{'a'}));
    EXPECT_EQ(t->bos_id(), 300);
    EXPECT_EQ(t->eos_id(), 301);
    EXPECT_EQ(t->eos_ids(), (Ids{301, 302}));
    EXPECT_EQ(t->chat_template(), "{{ x }}");
}

TEST(SpecialIds, TemplateProcessing) {
    json added = json::array({added_token(300, "<bos>", true)});
    json post = {{"type", "TemplateProcessing"},
                 {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                         {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                 {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {300}}, {"tokens", {"<bos>"}}}}}}};
    auto t = load(make_tokenizer({}, {}, added, post));
    EXPECT_EQ(t->encode("a", true, false), (Ids{300, 'a'}));
    EXPECT_FALSE(t->bos_id().has_value());
}

TEST(Decode, RawBytesRoundTripInvalidUtf8) {
    auto t = load(make_tokenizer({"ab"}, {"a b"}));
    const std::string bad = "ab\xFF\xC3(\xE2\x82 \xF0\x9F\x98";
    EXPECT_EQ(t->decode(t->encode(bad, false, false)), bad);
    EXPECT_EQ(t->token_to_piece(' '), " ");
    EXPECT_EQ(t->token_text(' '), "\xC4\xA0");  // Ġ
    EXPECT_EQ(t->decode({'a', 5000, 'b'}), "ab");  // past the vocabulary (model padding rows): nothing
    EXPECT_THROW(t->decode({-1}), tessera::Error);
    EXPECT_THROW(t->token_to_piece(-1), tessera::Error);
    EXPECT_THROW(t->token_text(5000), tessera::Error);
}

TEST(StreamDecoder, HoldsSplitCharacters) {
    auto t = load(make_tokenizer({}, {}));
    tessera::StreamDecoder sd(*t);
    // 😀 = F0 9F 98 80, one byte token each.
    EXPECT_EQ(sd.push(0xF0), "");
    EXPECT_EQ(sd.push(0x9F), "");
    EXPECT_EQ(sd.push(0x98), "");
    EXPECT_EQ(sd.push(0x80), "\xF0\x9F\x98\x80");
    EXPECT_EQ(sd.push('a'), "a");
    EXPECT_EQ(sd.flush(), "");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
    auto t = load(make_tokenizer({}, {}));
    tessera::StreamDecoder sd(*t);
    const std::string fffd = "\xEF\xBF\xBD";
    EXPECT_EQ(sd.push(0xFF), fffd);
    EXPECT_EQ(sd.push(0xE2), "");
    EXPECT_EQ(sd.push(0x82), "");
    EXPECT_EQ(sd.push('A'), fffd + "A");  // E2 82 is one maximal invalid subpart
    EXPECT_EQ(sd.push(0xED), "");
    EXPECT_EQ(sd.push(0xA0), fffd + fffd);  // ED A0 starts a surrogate: two separate errors
    EXPECT_EQ(sd.push(0xF0), "");
    EXPECT_EQ(sd.push(0x9F), "");
    EXPECT_EQ(sd.flush(), fffd);  // an unfinished character at the end
    EXPECT_EQ(sd.flush(), "");
}

TEST(Errors, HostileJsonIsAClearError) {
    auto expect_error = [](const std::string& tj, const std::string& needle) {
        try {
            Tokenizer::from_hf_json(tj, "");
            ADD_FAILURE() << "accepted " << tj;
        } catch (const tessera::Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0})", "invalid JSON");
    expect_error(R"({"decoder": {"type": "ByteLevel"}, "model": {"type": "Unigram"}})", "Unigram");
    expect_error(R"({"decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": -3}}})", "out of range");
    expect_error(R"({"decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})",
                 "merges[0]");
    expect_error(R"({"pre_tokenizer": {"type": "Metaspace"}, "model": {"type": "BPE", "vocab": {}}})", "Metaspace");
    expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}}})", "not a byte-level");
    expect_error(R"J({"decoder": {"type": "ByteLevel"}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?<=x)"}},
                      "model": {"type": "BPE", "vocab": {"a": 0}}})J", "(?<=x)");
    expect_error(R"({"decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 99999999}}})", "outside");
}
