// Helpers for the C ABI tests: the fixture model (tests/fixtures/qwen3_tiny) and its reference
// data, a variant with a real tokenizer and an EOS id, and small wrappers over the C calls.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/tessera.h"

namespace capi_test {

namespace fs = std::filesystem;

inline fs::path fixture_dir() { return fs::path(TESSERA_SOURCE_DIR) / "tests/fixtures/qwen3_tiny"; }
inline fs::path qwen3_tokenizer_dir() { return fs::path(TESSERA_SOURCE_DIR) / "../shared/data/tokenizers/qwen3"; }

inline nlohmann::json reference() {
    std::ifstream f(fixture_dir() / "reference.json");
    return nlohmann::json::parse(f);
}

inline std::vector<int32_t> ids(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

// Row `row` of logits_<tag>.bin ([n_tokens, vocab] f32).
inline std::vector<float> reference_logits(const std::string& tag, int64_t row) {
    const auto ref = reference()["prompts"][tag]["logits"];
    const int64_t vocab = ref["shape"][1].get<int64_t>();
    std::ifstream f(fixture_dir() / ref["file"].get<std::string>(), std::ios::binary);
    f.seekg(std::streamoff(row * vocab * int64_t(sizeof(float))));
    std::vector<float> out(static_cast<size_t>(vocab));
    f.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size() * sizeof(float)));
    return f ? out : std::vector<float>{};
}

// qwen3_tiny with generation_config.json's eos_token_id = `eos` (a token the greedy continuation
// reaches), and with the real Qwen3 tokenizer if `with_tokenizer`: a model that stops at EOS and
// can tokenize. Empty when the tokenizer is asked for and the shared files are absent.
inline std::string model_with_eos(int32_t eos, bool with_tokenizer) {
    if (with_tokenizer && !fs::exists(qwen3_tokenizer_dir() / "tokenizer.json")) return {};
    const fs::path dir = fs::path(testing::TempDir()) /
        ("capi_qwen3_eos" + std::to_string(eos) + (with_tokenizer ? "_tok" : ""));
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors"}) fs::create_symlink(fs::absolute(fixture_dir() / f), dir / f);
    if (with_tokenizer)
        for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
            fs::create_symlink(fs::absolute(qwen3_tokenizer_dir() / f), dir / f);
    std::ofstream(dir / "generation_config.json") << "{\"eos_token_id\": " << eos << "}\n";
    return dir.string();
}

struct EngineDeleter {
    void operator()(tessera_engine* e) const { tessera_engine_destroy(e); }
};
using EnginePtr = std::unique_ptr<tessera_engine, EngineDeleter>;

// An engine with a small, fixed cache budget (tests must not size pools from free memory).
inline EnginePtr open_engine(const std::string& path) {
    tessera_options o;
    tessera_options_default(&o);
    o.device = "cpu";
    o.memory_budget = int64_t(64) << 20;
    tessera_engine* e = tessera_engine_create(path.c_str(), &o);
    EXPECT_NE(e, nullptr) << "tessera_engine_create(" << path << "): " << tessera_last_error();
    return EnginePtr(e);
}
inline EnginePtr open_fixture() { return open_engine(fixture_dir().string()); }

inline tessera_sampling greedy(int64_t max_tokens) {
    tessera_sampling s;
    tessera_sampling_default(&s);
    s.temperature = 0.f;
    s.max_tokens = max_tokens;
    return s;
}

// Generation through the single stream (stream == nullptr) or a per-request stream: the first
// token and then decode steps until FINISHED (or `limit` tokens). Fails the test on any other
// status.
inline std::vector<int32_t> run_stream(tessera_engine* e, const char* request_id, const std::vector<int32_t>& prompt,
                                       const tessera_sampling& s, int limit = 1000) {
    std::vector<int32_t> out;
    int32_t tok = -1;
    tessera_status st = request_id
        ? tessera_prefill_req(e, request_id, prompt.data(), int32_t(prompt.size()), &s, &tok)
        : tessera_prefill(e, prompt.data(), int32_t(prompt.size()), &s, &tok);
    while (st == TESSERA_STATUS_OK && int(out.size()) < limit) {
        out.push_back(tok);
        st = request_id ? tessera_decode_step_req(e, request_id, &tok) : tessera_decode_step(e, &tok);
    }
    EXPECT_TRUE(st == TESSERA_STATUS_OK || st == TESSERA_STATUS_FINISHED)
        << tessera_status_name(st) << ": " << tessera_last_error();
    return out;
}

}  // namespace capi_test
