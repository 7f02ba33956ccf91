// UTF-8 decoding (invalid bytes kept), categories, White_Space, case folding and NFC against
// hand-derived expectations from the Unicode standard.
#include <gtest/gtest.h>

#include "tokenizer/jinja_text.h"
#include "tokenizer/unicode.h"

using namespace tessera::tok;

TEST(Utf8, DecodesValidSequences) {
    EXPECT_EQ(utf8_to_cpts("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), (std::u32string{U'a', 0xE9, 0x20AC, 0x1F600}));
}

TEST(Utf8, InvalidBytesBecomeMarkersAndRoundTrip) {
    const std::string bad[] = {"\xFF", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\x80x",
                               "\xF0\x9F\x98", "a\xC3"};
    for (const auto& s : bad) {
        const auto cps = utf8_to_cpts(s);
        for (char32_t c : cps)
            if (c >= 0x80) {
                EXPECT_TRUE(is_invalid_byte(c)) << std::hex << static_cast<uint32_t>(c);
            }
        EXPECT_EQ(cpts_to_utf8(cps), s);
    }
    // Overlong '/' is two invalid bytes, not one character.
    EXPECT_EQ(utf8_to_cpts("\xC0\xAF"), (std::u32string{kInvalidByteBase + 0xC0, kInvalidByteBase + 0xAF}));
}

TEST(Utf8, DecodeOneRejectsTruncated) {
    char32_t cp;
    EXPECT_EQ(utf8_decode_one("\xE2\x82", 0, &cp), 0u);
    EXPECT_EQ(utf8_decode_one("\xE2\x82\xAC", 0, &cp), 3u);
    EXPECT_EQ(cp, 0x20ACu);
}

// The Jinja interpreter's lenient decoding (tokenizer/jinja_text.h, over utf8_decode_one): each
// byte that starts no valid sequence becomes U+FFFD, the rest decode as above; encoding is plain.
TEST(Utf8, JinjaTextReplacesEachInvalidByte) {
    namespace text = tessera::jinja::text;
    const std::string valid = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
    EXPECT_EQ(text::decode(valid), (std::u32string{U'a', 0xE9, 0x20AC, 0x1F600}));
    EXPECT_EQ(text::encode(text::decode(valid)), valid);
    const char32_t r = 0xFFFD;
    EXPECT_EQ(text::decode("\xC0\xAF"), (std::u32string{r, r}));          // overlong '/'
    EXPECT_EQ(text::decode("\xED\xA0\x80"), (std::u32string{r, r, r}));  // a surrogate
    EXPECT_EQ(text::decode("\xF4\x90\x80\x80"), (std::u32string{r, r, r, r}));  // past U+10FFFF
    EXPECT_EQ(text::decode("\xE2\x82"), (std::u32string{r, r}));          // truncated
    EXPECT_EQ(text::decode("a\xC3"), (std::u32string{U'a', r}));
    EXPECT_EQ(text::decode("\x80x"), (std::u32string{r, U'x'}));           // a stray continuation
    EXPECT_EQ(text::decode("\xFF\xC3\xA9"), (std::u32string{r, 0xE9}));
    EXPECT_EQ(text::encode(std::u32string{0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF}),
              "\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF");
}

TEST(Unicode, Categories) {
    EXPECT_EQ(general_category(U'a'), GeneralCategory::Ll);
    EXPECT_EQ(general_category(U'A'), GeneralCategory::Lu);
    EXPECT_EQ(general_category(U'5'), GeneralCategory::Nd);
    EXPECT_EQ(general_category(0x4E2D), GeneralCategory::Lo);   // 中
    EXPECT_EQ(general_category(0x0301), GeneralCategory::Mn);   // combining acute
    EXPECT_EQ(general_category(0x093E), GeneralCategory::Mc);   // Devanagari vowel sign AA
    EXPECT_EQ(general_category(0x00BD), GeneralCategory::No);   // ½
    EXPECT_EQ(general_category(U'!'), GeneralCategory::Po);
    EXPECT_EQ(general_category(U'$'), GeneralCategory::Sc);
    EXPECT_EQ(general_category(0x1F600), GeneralCategory::So);  // 😀
    EXPECT_EQ(general_category(0x3000), GeneralCategory::Zs);
    EXPECT_EQ(general_category(0x200D), GeneralCategory::Cf);   // ZWJ
    EXPECT_EQ(general_category(0xE000), GeneralCategory::Co);
    EXPECT_EQ(general_category(0x0378), GeneralCategory::Cn);   // unassigned
    EXPECT_EQ(major_category(kInvalidByteBase + 0xFF), 'C');
}

TEST(Unicode, WhiteSpaceProperty) {
    for (char32_t c : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029,
                       0x202F, 0x205F, 0x3000})
        EXPECT_TRUE(is_whitespace(c)) << std::hex << static_cast<uint32_t>(c);
    for (char32_t c : {0x1C, 0x1F, 0x200B, 0x180E, 0xFEFF, 0x61})
        EXPECT_FALSE(is_whitespace(c)) << std::hex << static_cast<uint32_t>(c);
}

TEST(Unicode, CaseFold) {
    EXPECT_EQ(simple_case_fold(U'S'), U's');
    EXPECT_EQ(simple_case_fold(0x017F), U's');   // ſ
    EXPECT_EQ(simple_case_fold(0x212A), U'k');   // Kelvin sign
    EXPECT_EQ(simple_case_fold(0x0130), 0x0130u);  // İ has only a full folding
    EXPECT_EQ(simple_case_fold(0x0410), 0x0430u);  // Cyrillic А
}

TEST(Nfc, ComposesDecomposesAndOrders) {
    EXPECT_EQ(nfc_utf8("e\xCC\x81"), "\xC3\xA9");                      // e + ◌́ -> é
    EXPECT_EQ(nfc_utf8("\xC3\xA9"), "\xC3\xA9");                       // already NFC
    EXPECT_EQ(nfc(U"A\u030A"), U"\u00C5");                             // Å
    EXPECT_EQ(nfc(U"\u212B"), U"\u00C5");                              // Angstrom sign is a singleton
    // Canonical ordering puts dot below (ccc 220) before acute (230); e + dot below composes
    // first (ẹ, U+1EB9) and the acute, now preceded by nothing blocking, has no composite with ẹ.
    EXPECT_EQ(nfc(U"e\u0301\u0323"), U"\u1EB9\u0301");
    EXPECT_EQ(nfc(U"\u1E0B\u0323"), U"\u1E0D\u0307");                  // ḋ + dot below -> ḍ + dot above
    EXPECT_EQ(nfc(U"\u0958"), U"\u0915\u093C");                        // composition exclusion
    EXPECT_EQ(nfc(U"\u0344"), U"\u0308\u0301");                        // non-starter decomposition
    EXPECT_EQ(nfc(U"\u1100\u1161\u11A8"), U"\uAC01");                  // Hangul L V T -> 각
    EXPECT_EQ(nfc(U"\uAC00\u11A8"), U"\uAC01");                        // LV + T
    EXPECT_EQ(nfc(U"a\u0301\u0301"), U"\u00E1\u0301");                 // second acute is blocked
    EXPECT_EQ(nfc(U"\u0B47\u0B3E"), U"\u0B4B");                        // two starters compose
    std::u32string with_bad = U"e\u0301";
    with_bad.push_back(kInvalidByteBase + 0xFF);
    EXPECT_EQ(nfc(with_bad), (std::u32string{0xE9, kInvalidByteBase + 0xFF}));
}
