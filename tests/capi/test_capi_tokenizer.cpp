// C ABI tokenizer helpers: text -> ids -> the same text, size queries when the buffer is too
// small, and UNSUPPORTED for a model without a tokenizer.
#include <string>

#include "capi_test_util.h"

using namespace capi_test;

TEST(CapiTokenizer, RoundTripAndSizeQueries) {
    const std::string model = model_with_eos(511, /*with_tokenizer=*/true);
    if (model.empty()) GTEST_SKIP() << "no ../shared/data/tokenizers/qwen3";
    EnginePtr e = open_engine(model);
    ASSERT_TRUE(e);
    const std::string text = "Hello, world! Ünïcödé and <|im_end|>";
    int32_t n = -1;
    EXPECT_EQ(tessera_tokenize(e.get(), text.c_str(), 0, nullptr, 0, &n), TESSERA_STATUS_TOO_LARGE);
    ASSERT_GT(n, 2);
    std::vector<int32_t> ids(size_t(n) - 1);
    int32_t n2 = -1;
    EXPECT_EQ(tessera_tokenize(e.get(), text.c_str(), 0, ids.data(), int32_t(ids.size()), &n2), TESSERA_STATUS_TOO_LARGE);
    EXPECT_EQ(n2, n);
    ids.resize(size_t(n));
    ASSERT_EQ(tessera_tokenize(e.get(), text.c_str(), 0, ids.data(), n, &n2), TESSERA_STATUS_OK) << tessera_last_error();
    EXPECT_EQ(n2, n);
    EXPECT_EQ(ids.back(), 151645);  // <|im_end|> written in the text is the special token

    size_t len = 0;
    EXPECT_EQ(tessera_detokenize(e.get(), ids.data(), n, nullptr, 0, &len), TESSERA_STATUS_TOO_LARGE);
    EXPECT_EQ(len, text.size());
    std::string out(text.size(), '\0');
    EXPECT_EQ(tessera_detokenize(e.get(), ids.data(), n, out.data(), out.size(), &len), TESSERA_STATUS_TOO_LARGE);
    out.resize(text.size() + 1);  // room for the NUL
    ASSERT_EQ(tessera_detokenize(e.get(), ids.data(), n, out.data(), out.size(), &len), TESSERA_STATUS_OK)
        << tessera_last_error();
    EXPECT_EQ(std::string(out.c_str()), text);

    // Empty inputs are fine; negative ids are not.
    EXPECT_EQ(tessera_tokenize(e.get(), "", 0, nullptr, 0, &n), TESSERA_STATUS_OK);
    EXPECT_EQ(n, 0);
    char c = 'x';
    EXPECT_EQ(tessera_detokenize(e.get(), nullptr, 0, &c, 1, &len), TESSERA_STATUS_OK);
    EXPECT_EQ(len, 0u);
    EXPECT_EQ(c, '\0');
    const int32_t bad[] = {-3};
    EXPECT_EQ(tessera_detokenize(e.get(), bad, 1, &c, 1, &len), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_tokenize(e.get(), nullptr, 0, nullptr, 0, &n), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_tokenize(e.get(), "abc", 0, nullptr, 5, &n), TESSERA_STATUS_INVALID_ARGUMENT);
}

TEST(CapiTokenizer, ModelWithoutTokenizerIsUnsupported) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    int32_t n = 0, ids[4];
    EXPECT_EQ(tessera_tokenize(e.get(), "hi", 0, ids, 4, &n), TESSERA_STATUS_UNSUPPORTED);
    EXPECT_NE(std::string(tessera_last_error()).find("no tokenizer"), std::string::npos) << tessera_last_error();
    char buf[4];
    size_t len = 0;
    EXPECT_EQ(tessera_detokenize(e.get(), ids, 0, buf, 4, &len), TESSERA_STATUS_UNSUPPORTED);
}
