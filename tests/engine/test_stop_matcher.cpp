// StopMatcher: stop strings split across pushes at every position, several stop strings,
// overlapping prefixes, hold-back of possible starts, UTF-8 text. The expected text is stated
// by hand for each case; the splits must not change it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/stop_matcher.h"

using namespace tessera;

namespace {

struct Result {
    std::string text;  // everything released, flush included
    bool stopped;
    std::string matched;
};

Result run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
    StopMatcher m(stops);
    Result r;
    for (const auto& p : pieces) r.text += m.push(p);
    r.text += m.flush();
    r.stopped = m.stopped();
    r.matched = m.matched();
    return r;
}

// Every way to cut `text` into 1, 2 or 3 pushes, and byte by byte, gives `want`.
void expect_all_splits(const std::vector<std::string>& stops, const std::string& text, const std::string& want,
                       bool stopped, const std::string& matched = "") {
    SCOPED_TRACE("text \"" + text + "\"");
    std::vector<std::vector<std::string>> splits = {{text}};
    for (size_t i = 0; i <= text.size(); ++i) {
        splits.push_back({text.substr(0, i), text.substr(i)});
        for (size_t j = i; j <= text.size(); ++j)
            splits.push_back({text.substr(0, i), text.substr(i, j - i), text.substr(j)});
    }
    std::vector<std::string> bytes;
    for (char c : text) bytes.push_back(std::string(1, c));
    splits.push_back(bytes);
    for (const auto& s : splits) {
        const Result r = run(stops, s);
        std::string cuts;
        for (const auto& p : s) cuts += "[" + p + "]";
        ASSERT_EQ(r.text, want) << "pushes " << cuts;
        ASSERT_EQ(r.stopped, stopped) << "pushes " << cuts;
        if (stopped) {
            ASSERT_EQ(r.matched, matched) << "pushes " << cuts;
        }
    }
}

TEST(StopMatcher, NoStopsReleasesEverythingAtOnce) {
    StopMatcher m({});
    EXPECT_EQ(m.push("hello "), "hello ");
    EXPECT_EQ(m.push("world"), "world");
    EXPECT_EQ(m.flush(), "");
    EXPECT_FALSE(m.stopped());
    StopMatcher empty({"", ""});  // empty stop strings are ignored
    EXPECT_EQ(empty.push("abc"), "abc");
    EXPECT_FALSE(empty.stopped());
}

TEST(StopMatcher, OneStopAtEverySplit) {
    expect_all_splits({"STOP"}, "hello STOP world", "hello ", true, "STOP");
    expect_all_splits({"STOP"}, "STOP", "", true, "STOP");
    expect_all_splits({"STOP"}, "no stop here, ST", "no stop here, ST", false);  // flush releases "ST"
    expect_all_splits({"STOP"}, "STO STOP", "STO ", true, "STOP");
}

TEST(StopMatcher, HoldsBackTheLongestPossibleStart) {
    StopMatcher m({"abcd", "bce"});
    EXPECT_EQ(m.push("zab"), "z");   // "ab" could start "abcd"
    EXPECT_EQ(m.push("c"), "");      // "abc" (start of abcd) held; "bc" (start of bce) inside it
    EXPECT_EQ(m.push("x"), "abcx");  // neither can complete now
    EXPECT_EQ(m.push("b"), "");      // "b" could start "bce"
    EXPECT_EQ(m.push("cd"), "bcd");  // "bcd" is the start of neither
    EXPECT_FALSE(m.stopped());
    EXPECT_EQ(m.push("ab"), "");
    EXPECT_EQ(m.flush(), "ab");  // end of generation: the held text goes out
}

TEST(StopMatcher, AfterAStopNothingMoreIsReleased) {
    StopMatcher m({"</s>"});
    EXPECT_EQ(m.push("ok</"), "ok");
    EXPECT_EQ(m.push("s>tail"), "");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.matched(), "</s>");
    EXPECT_EQ(m.push("more"), "");
    EXPECT_EQ(m.flush(), "");
}

// Several stop strings: the one that completes first wins — as if streamed byte by byte.
TEST(StopMatcher, SeveralStopStrings) {
    expect_all_splits({"abcd", "bc"}, "xabcd", "xa", true, "bc");     // bc completes before abcd
    expect_all_splits({"bc", "abcd"}, "xabcd", "xa", true, "bc");     // whatever the list order
    expect_all_splits({"ab", "abc"}, "zabc", "z", true, "ab");
    expect_all_splits({"abc", "bc"}, "xabc", "x", true, "abc");       // same end: the longer one
    expect_all_splits({"END", "\n\n"}, "one\ntwo\n\nEND", "one\ntwo", true, "\n\n");
    expect_all_splits({"END", "\n\n"}, "one\nEND\n\n", "one\n", true, "END");
}

// Stop strings that overlap themselves: the match may start inside a held-back false start.
TEST(StopMatcher, OverlappingPrefixes) {
    expect_all_splits({"aab"}, "aaab", "a", true, "aab");
    expect_all_splits({"abab"}, "xabababy", "x", true, "abab");
    expect_all_splits({"aaa"}, "aa aaaa", "aa ", true, "aaa");
    expect_all_splits({"aab"}, "aaaa", "aaaa", false);
}

TEST(StopMatcher, Utf8Text) {
    // "。" is E3 80 82; the text around it is multi-byte too.
    expect_all_splits({"。"}, "你好。再见", "你好", true, "。");
    expect_all_splits({"é!"}, "café! ok", "caf", true, "é!");
    // "€" (E2 82 AC) and "₂" (E2 82 82) share two bytes: a false start is released whole.
    expect_all_splits({"€"}, "a₂b", "a₂b", false);
    expect_all_splits({"€"}, "a₂€b", "a₂", true, "€");
    // Pushed a character at a time, every released piece is whole characters.
    StopMatcher m({"€uro", "😀!"});
    std::string all;
    for (const char* ch : {"x", "€", "u", "r", "€", "😀", "é", "😀", "!"}) {
        const std::string out = m.push(ch);
        for (size_t i = 0; i < out.size();) {  // walk the UTF-8 sequences
            const unsigned char c = static_cast<unsigned char>(out[i]);
            const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            ASSERT_LE(i + len, out.size()) << "a character cut in \"" << out << "\"";
            for (size_t j = 1; j < len; ++j) ASSERT_EQ(static_cast<unsigned char>(out[i + j]) & 0xC0, 0x80);
            i += len;
        }
        all += out;
    }
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.matched(), "😀!");
    EXPECT_EQ(all, "x€ur€😀é");
}

}  // namespace
