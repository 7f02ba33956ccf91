// The regex engine and llama.cpp's named split rules on hand-derived expected splits
// (alternation order, greediness, \s+(?!\S), \p{N}{1,3}, (?i:) contractions, \p{M}).
#include <gtest/gtest.h>

#include "core/status.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

using namespace tessera::tok;

namespace {
std::vector<std::string> split(const std::string& pre, const std::string& text) {
    const PreTokenizer p = PreTokenizer::from_gguf_pre(pre);
    std::vector<std::string> out;
    for (const auto& piece : p.split(utf8_to_cpts(text))) out.push_back(cpts_to_utf8(piece));
    return out;
}
using V = std::vector<std::string>;
}  // namespace

TEST(Regex, AlternationOrderAndGreed) {
    Regex re("a|ab|abc");
    EXPECT_EQ(re.match_at(U"abc", 0), 1);  // first alternative wins, not the longest
    Regex greedy("a+"), lazy("a+?");
    EXPECT_EQ(greedy.match_at(U"aaa", 0), 3);
    EXPECT_EQ(lazy.match_at(U"aaa", 0), 1);
    Regex counted(R"(\p{N}{1,3})");
    EXPECT_EQ(counted.match_at(U"12345", 0), 3);
    EXPECT_EQ(counted.match_at(U"x", 0), -1);
}

TEST(Regex, NegativeLookaheadBacktracks) {
    Regex re(R"(\s+(?!\S))");
    EXPECT_EQ(re.match_at(U"   x", 0), 2);  // gives one space back to the word
    EXPECT_EQ(re.match_at(U"   ", 0), 3);
    EXPECT_EQ(re.match_at(U" x", 0), -1);
    Regex nl(R"(\s*[\r\n]+)");
    EXPECT_EQ(nl.match_at(U"  \n\n  x", 0), 4);  // up to the last newline of the run
}

TEST(Regex, CaseInsensitiveGroupAndClasses) {
    Regex re("(?i:'s|'ll)x");
    EXPECT_EQ(re.match_at(U"'Sx", 0), 3);
    EXPECT_EQ(re.match_at(U"'LLx", 0), 4);
    EXPECT_EQ(re.match_at(U"'\u017Fx", 0), 3);  // ſ folds to s (as Oniguruma does)
    EXPECT_EQ(re.match_at(U"'sX", 0), -1);       // the flag ends with the group
    Regex cls(R"([^\r\n\p{L}\p{N}]?\p{L}+)");
    EXPECT_EQ(cls.match_at(U" hello!", 0), 6);
    EXPECT_EQ(cls.match_at(U"\nhello", 0), -1);
    Regex esc(R"([!"#\-\[\\\]]+)");
    EXPECT_EQ(esc.match_at(U"!-[\\]x", 0), 5);
    Regex search(R"(\d+)");
    auto m = search.search(U"ab12c", 0);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->first, 2u);
    EXPECT_EQ(m->second, 4u);
}

TEST(Regex, UnsupportedSyntaxIsAClearError) {
    for (const char* bad : {"(?<=a)b", "(a", "a)", R"(\p{Han})", "(a*)*", "[a", R"(\1)", "a++"}) {
        try {
            Regex re(bad);
            ADD_FAILURE() << "accepted " << bad;
        } catch (const tessera::Error& e) {
            EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
        }
    }
}

TEST(Regex, LongRunsAreLinear) {
    std::u32string s(200000, U' ');
    s.push_back(U'x');
    Regex re(R"(\s*[\r\n]+|\s+(?!\S)|\s+)");
    EXPECT_EQ(re.match_at(s, 0), 199999);
}

TEST(PreTokenizer, Gpt2) {
    EXPECT_EQ(split("gpt2", "Hello world's 123  x"), (V{"Hello", " world", "'s", " 123", " ", " x"}));
    EXPECT_EQ(split("gpt2", "DON'T"), (V{"DON", "'", "T"}));  // gpt2's contractions are case-sensitive
    EXPECT_EQ(split("gpt2", "a\n\nb"), (V{"a", "\n", "\n", "b"}));
}

TEST(PreTokenizer, Llama3) {
    EXPECT_EQ(split("llama3", "DON'T 1234567"), (V{"DON", "'T", " ", "123", "456", "7"}));
    EXPECT_EQ(split("llama3", "a  \n\n  b"), (V{"a", "  \n\n", " ", " b"}));
    EXPECT_EQ(split("llama3", "x = (y)\n"), (V{"x", " =", " (", "y", ")\n"}));
    EXPECT_EQ(split("llama3", "   "), (V{"   "}));
}

TEST(PreTokenizer, Qwen2SingleDigits) {
    EXPECT_EQ(split("qwen2", "abc 123"), (V{"abc", " ", "1", "2", "3"}));
    EXPECT_EQ(split("qwen2", "He'll"), (V{"He", "'ll"}));
}

TEST(PreTokenizer, Qwen35KeepsMarksWithLetters) {
    // न म स ् त े: ् (U+094D) and े (U+0947) are Mn. qwen2 cuts the word at each mark;
    // qwen35 keeps the whole word together.
    const std::string w = "\u0928\u092E\u0938\u094D\u0924\u0947";
    EXPECT_EQ(split("qwen35", w + " x"), (V{w, " x"}));
    EXPECT_EQ(split("qwen2", w), (V{"\u0928\u092E\u0938", "\u094D\u0924", "\u0947"}));
    EXPECT_EQ(split("qwen35", "e\u0301!"), (V{"e\u0301", "!"}));
}

TEST(PreTokenizer, DeepseekV3) {
    // Digits in threes, CJK/kana runs isolated, then the word rule.
    EXPECT_EQ(split("deepseek-v3", "abc12345def"), (V{"abc", "123", "45", "def"}));
    EXPECT_EQ(split("deepseek-v3", "我爱ab"), (V{"我爱", "ab"}));
    EXPECT_EQ(split("deepseek-v3", "x.foo 'bar"), (V{"x", ".foo", " '", "bar"}));
}

TEST(PreTokenizer, UnknownNameIsAClearError) {
    EXPECT_TRUE(PreTokenizer::has_gguf_pre("qwen35"));
    EXPECT_FALSE(PreTokenizer::has_gguf_pre("nope"));
    try {
        PreTokenizer::from_gguf_pre("nope");
        FAIL();
    } catch (const tessera::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos);
    }
}

TEST(PreTokenizer, InvalidBytesSurviveSplitting) {
    const std::string s = "ab\xFF\xFE cd";
    std::string joined;
    for (const auto& p : split("qwen2", s)) joined += p;
    EXPECT_EQ(joined, s);
}

TEST(PreTokenizer, EveryPresetCompiles) {
    for (const char* name : {"gpt2", "starcoder", "falcon", "deepseek-coder", "bloom", "viking", "gpt-4o", "tekken",
                             "llama3", "qwen2", "qwen35", "deepseek-v3", "default", "chatglm-bpe"}) {
        EXPECT_TRUE(PreTokenizer::has_gguf_pre(name)) << name;
        EXPECT_NO_THROW(PreTokenizer::from_gguf_pre(name)) << name;
    }
    // GPT-4o keeps a contraction with its word and splits camel case.
    EXPECT_EQ(split("gpt-4o", "HelloWorld's 12345"), (V{"Hello", "World's", " ", "123", "45"}));
}

TEST(Regex, HostilePatternsFailCleanly) {
    EXPECT_THROW(Regex(std::string(1000, '(') + std::string(1000, ')')), tessera::Error);
    Regex exp("(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)"
              "(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)b");
    EXPECT_THROW(exp.match_at(std::u32string(30, U'a'), 0), tessera::Error);
}
