// C ABI: bad arguments, unknown request ids, status codes and the last-error message — every
// misuse is a status with a message naming the call, never a crash.
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

#include "capi_test_util.h"

using namespace capi_test;

namespace {

bool mentions(const std::string& needle) {
    return std::string(tessera_last_error()).find(needle) != std::string::npos;
}

}  // namespace

TEST(CapiArgs, StatusAndFinishReasonNames) {
    EXPECT_STREQ(tessera_status_name(TESSERA_STATUS_OK), "OK");
    EXPECT_STREQ(tessera_status_name(TESSERA_STATUS_INVALID_ARGUMENT), "INVALID_ARGUMENT");
    EXPECT_STREQ(tessera_status_name(TESSERA_STATUS_FINISHED), "FINISHED");
    EXPECT_STREQ(tessera_status_name(TESSERA_STATUS_TOO_LARGE), "TOO_LARGE");
    EXPECT_STREQ(tessera_status_name(static_cast<tessera_status>(1234)), "UNKNOWN_STATUS");
    EXPECT_STREQ(tessera_finish_reason_name(TESSERA_FINISH_REASON_LENGTH), "length");
    EXPECT_STREQ(tessera_finish_reason_name(TESSERA_FINISH_REASON_NONE), "");
}

TEST(CapiArgs, CreateFailuresReturnNullWithAReason) {
    EXPECT_EQ(tessera_engine_create(nullptr, nullptr), nullptr);
    EXPECT_TRUE(mentions("path is NULL")) << tessera_last_error();

    const std::string missing = (fs::path(testing::TempDir()) / "no_such_model_dir").string();
    EXPECT_EQ(tessera_engine_create(missing.c_str(), nullptr), nullptr);
    EXPECT_TRUE(mentions("no_such_model_dir")) << tessera_last_error();
    EXPECT_NE(tessera_last_status(), TESSERA_STATUS_OK);
    EXPECT_NE(tessera_last_status(), TESSERA_STATUS_INTERNAL) << tessera_last_error();

    tessera_options o;
    tessera_options_default(&o);
    o.struct_size = 0;
    EXPECT_EQ(tessera_engine_create(fixture_dir().c_str(), &o), nullptr);
    EXPECT_TRUE(mentions("struct_size")) << tessera_last_error();
    EXPECT_EQ(tessera_last_status(), TESSERA_STATUS_INVALID_ARGUMENT);
}

TEST(CapiArgs, OptionsStructSizeGrowsAndShrinks) {
    // A newer caller's larger struct: accepted while the fields this library lacks are zero.
    struct Bigger {
        tessera_options o;
        int64_t future_field;
    } big{};
    tessera_options_default(&big.o);
    big.o.struct_size = sizeof(Bigger);
    big.o.memory_budget = int64_t(64) << 20;
    big.future_field = 7;
    EXPECT_EQ(tessera_engine_create(fixture_dir().c_str(), &big.o), nullptr);
    EXPECT_TRUE(mentions("newer")) << tessera_last_error();
    big.future_field = 0;
    EnginePtr e(tessera_engine_create(fixture_dir().c_str(), &big.o));
    EXPECT_NE(e, nullptr) << tessera_last_error();

    // An older caller's smaller struct (up to memory_budget): the rest are defaults.
    tessera_options small;
    tessera_options_default(&small);
    small.memory_budget = int64_t(64) << 20;
    small.struct_size = offsetof(tessera_options, memory_budget) + sizeof(int64_t);
    small.kv_dtype = "no-such-dtype";  // past struct_size: must not be read
    EnginePtr e2(tessera_engine_create(fixture_dir().c_str(), &small));
    EXPECT_NE(e2, nullptr) << tessera_last_error();
}

TEST(CapiArgs, NullEngineIsInvalidArgument) {
    int32_t tok = 0, n = 0;
    const int32_t prompt[] = {1, 2, 3};
    EXPECT_EQ(tessera_prefill(nullptr, prompt, 3, nullptr, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tessera_prefill: engine is NULL")) << tessera_last_error();
    EXPECT_EQ(tessera_decode_step(nullptr, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_reset(nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_get_logits(nullptr, &n), nullptr);
    EXPECT_EQ(tessera_prefill_req(nullptr, "r", prompt, 3, nullptr, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_decode_step_req(nullptr, "r", &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_finish_req(nullptr, "r"), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_add_request(nullptr, "r", prompt, 3, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
    tessera_token_event ev[2];
    EXPECT_EQ(tessera_step(nullptr, ev, 2, &n), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_tokenize(nullptr, "x", 0, &tok, 1, &n), TESSERA_STATUS_INVALID_ARGUMENT);
    char buf[8];
    size_t len = 0;
    EXPECT_EQ(tessera_detokenize(nullptr, prompt, 3, buf, sizeof(buf), &len), TESSERA_STATUS_INVALID_ARGUMENT);
    tessera_memory m{};
    m.struct_size = sizeof(m);
    EXPECT_EQ(tessera_memory_snapshot(nullptr, &m), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_vocab_size(nullptr), -1);
    EXPECT_EQ(tessera_num_layers(nullptr), -1);
    tessera_engine_destroy(nullptr);  // a no-op
}

TEST(CapiArgs, BadPromptsAndOutputPointers) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const int32_t prompt[] = {1, 2, 3};
    int32_t tok = 0;
    EXPECT_EQ(tessera_prefill(e.get(), nullptr, 3, nullptr, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tokens is NULL")) << tessera_last_error();
    EXPECT_EQ(tessera_prefill(e.get(), prompt, 0, nullptr, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_prefill(e.get(), prompt, -2, nullptr, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_prefill(e.get(), prompt, 3, nullptr, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("first_token is NULL")) << tessera_last_error();
    const int32_t past_vocab[] = {1, 1000};  // the fixture's vocabulary is 1000
    EXPECT_EQ(tessera_prefill(e.get(), past_vocab, 2, nullptr, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    const int32_t negative[] = {-1};
    EXPECT_EQ(tessera_prefill_req(e.get(), "neg", negative, 1, nullptr, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    // A failed prefill leaves nothing behind: the id is free.
    EXPECT_EQ(tessera_finish_req(e.get(), "neg"), TESSERA_STATUS_NOT_FOUND);

    tessera_sampling s;
    tessera_sampling_default(&s);
    s.n_stop_token_ids = 2;  // with a NULL array
    EXPECT_EQ(tessera_prefill(e.get(), prompt, 3, &s, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("stop_token_ids")) << tessera_last_error();
    tessera_sampling_default(&s);
    s.struct_size = 3;
    EXPECT_EQ(tessera_prefill(e.get(), prompt, 3, &s, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("struct_size")) << tessera_last_error();
    tessera_sampling_default(&s);
    s.max_tokens = -5;
    EXPECT_EQ(tessera_prefill(e.get(), prompt, 3, &s, &tok), TESSERA_STATUS_INVALID_ARGUMENT);

    int32_t n = 0;
    tessera_token_event ev[1];
    EXPECT_EQ(tessera_step(e.get(), ev, 0, &n), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_step(e.get(), nullptr, 1, &n), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_step(e.get(), ev, 1, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
}

TEST(CapiArgs, RequestIds) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const int32_t prompt[] = {5, 6, 7};
    const tessera_sampling s = greedy(4);
    int32_t tok = 0;
    EXPECT_EQ(tessera_prefill_req(e.get(), nullptr, prompt, 3, &s, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_prefill_req(e.get(), "", prompt, 3, &s, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    const std::string too_long(TESSERA_REQUEST_ID_MAX, 'x');
    EXPECT_EQ(tessera_add_request(e.get(), too_long.c_str(), prompt, 3, &s), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("longer than 63")) << tessera_last_error();
    const std::string longest(TESSERA_REQUEST_ID_MAX - 1, 'y');
    EXPECT_EQ(tessera_add_request(e.get(), longest.c_str(), prompt, 3, &s), TESSERA_STATUS_OK) << tessera_last_error();
    EXPECT_EQ(tessera_finish_req(e.get(), longest.c_str()), TESSERA_STATUS_OK);

    // Unknown ids.
    EXPECT_EQ(tessera_decode_step_req(e.get(), "ghost", &tok), TESSERA_STATUS_NOT_FOUND);
    EXPECT_TRUE(mentions("'ghost'")) << tessera_last_error();
    EXPECT_EQ(tessera_finish_req(e.get(), "ghost"), TESSERA_STATUS_NOT_FOUND);

    // A live id cannot be taken twice, by either kind of call; finishing frees it.
    ASSERT_EQ(tessera_prefill_req(e.get(), "r1", prompt, 3, &s, &tok), TESSERA_STATUS_OK) << tessera_last_error();
    EXPECT_EQ(tessera_prefill_req(e.get(), "r1", prompt, 3, &s, &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("already in use")) << tessera_last_error();
    EXPECT_EQ(tessera_add_request(e.get(), "r1", prompt, 3, &s), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_finish_req(e.get(), "r1"), TESSERA_STATUS_OK);
    EXPECT_EQ(tessera_finish_req(e.get(), "r1"), TESSERA_STATUS_NOT_FOUND);
    EXPECT_EQ(tessera_prefill_req(e.get(), "r1", prompt, 3, &s, &tok), TESSERA_STATUS_OK) << tessera_last_error();

    // A batched request's tokens come from tessera_step, not decode_step_req.
    ASSERT_EQ(tessera_add_request(e.get(), "b1", prompt, 3, &s), TESSERA_STATUS_OK);
    EXPECT_EQ(tessera_decode_step_req(e.get(), "b1", &tok), TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions("tessera_step")) << tessera_last_error();
}

TEST(CapiArgs, NoStreamNoLogits) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    int32_t tok = 0, n = 123;
    EXPECT_EQ(tessera_decode_step(e.get(), &tok), TESSERA_STATUS_NOT_FOUND);
    EXPECT_TRUE(mentions("tessera_prefill first")) << tessera_last_error();
    EXPECT_EQ(tessera_get_logits(e.get(), &n), nullptr);
    EXPECT_EQ(n, 0);
    EXPECT_TRUE(mentions("no logits")) << tessera_last_error();
    EXPECT_EQ(tessera_last_status(), TESSERA_STATUS_NOT_FOUND);
    EXPECT_EQ(tessera_get_logits(e.get(), nullptr), nullptr);
    EXPECT_TRUE(mentions("n_vocab is NULL")) << tessera_last_error();
}

TEST(CapiArgs, LastErrorIsClearedBySuccessAndPerThread) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    EXPECT_EQ(tessera_finish_req(e.get(), "ghost"), TESSERA_STATUS_NOT_FOUND);
    EXPECT_STRNE(tessera_last_error(), "");
    std::string other_thread = "unset";
    std::thread([&] { other_thread = tessera_last_error(); }).join();
    EXPECT_EQ(other_thread, "");
    EXPECT_TRUE(mentions("ghost"));  // this thread's message is untouched
    EXPECT_EQ(tessera_reset(e.get()), TESSERA_STATUS_OK);
    EXPECT_STREQ(tessera_last_error(), "");
    EXPECT_EQ(tessera_last_status(), TESSERA_STATUS_OK);
}

TEST(CapiArgs, ModelFacts) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    std::ifstream f(fixture_dir() / "config.json");
    const auto cfg = nlohmann::json::parse(f);
    EXPECT_EQ(tessera_vocab_size(e.get()), cfg["vocab_size"].get<int32_t>());
    EXPECT_EQ(tessera_num_layers(e.get()), cfg["num_hidden_layers"].get<int32_t>());
}

TEST(CapiArgs, MemorySnapshot) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    tessera_memory m{};
    EXPECT_EQ(tessera_memory_snapshot(e.get(), &m), TESSERA_STATUS_INVALID_ARGUMENT);  // struct_size 0
    EXPECT_EQ(tessera_memory_snapshot(e.get(), nullptr), TESSERA_STATUS_INVALID_ARGUMENT);

    m.struct_size = sizeof(m);
    ASSERT_EQ(tessera_memory_snapshot(e.get(), &m), TESSERA_STATUS_OK) << tessera_last_error();
    // The fixture's weights are f32 safetensors: the file holds them plus a small header.
    const auto file_bytes = int64_t(fs::file_size(fixture_dir() / "model.safetensors"));
    EXPECT_GT(m.weights_bytes, file_bytes / 2);
    EXPECT_LE(m.weights_bytes, 2 * file_bytes);  // repacking may keep a second copy (e.g. a tied head)
    EXPECT_GT(m.kv_pool_bytes, 0);
    EXPECT_LE(m.kv_pool_bytes, int64_t(64) << 20);  // the budget open_engine gave
    EXPECT_GT(m.kv_blocks_total, 0);
    EXPECT_EQ(m.kv_blocks_used, 0);
    EXPECT_GT(m.host_rss_bytes, 0);

    // Blocks are in use while a request holds its prompt.
    std::vector<int32_t> prompt(40, 7);
    int32_t tok = 0;
    const tessera_sampling s = greedy(-1);
    ASSERT_EQ(tessera_prefill_req(e.get(), "m", prompt.data(), 40, &s, &tok), TESSERA_STATUS_OK) << tessera_last_error();
    ASSERT_EQ(tessera_memory_snapshot(e.get(), &m), TESSERA_STATUS_OK);
    EXPECT_GT(m.kv_blocks_used, 0);
    EXPECT_LE(m.kv_blocks_used, m.kv_blocks_total);
    EXPECT_GT(m.activations_peak_bytes, 0);

    // An older, smaller struct: nothing past its struct_size is written.
    struct {
        tessera_memory m;
        unsigned char guard[sizeof(tessera_memory)];
    } small;
    std::memset(&small, 0xAB, sizeof(small));
    small.m.struct_size = offsetof(tessera_memory, kv_pool_bytes);
    ASSERT_EQ(tessera_memory_snapshot(e.get(), &small.m), TESSERA_STATUS_OK);
    EXPECT_GT(small.m.weights_bytes, 0);
    const auto* bytes = reinterpret_cast<const unsigned char*>(&small);
    for (size_t i = offsetof(tessera_memory, kv_pool_bytes); i < sizeof(small); ++i)
        ASSERT_EQ(bytes[i], 0xAB) << "byte " << i << " past struct_size was written";
}
