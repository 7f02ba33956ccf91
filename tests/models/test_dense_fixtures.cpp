// Dense models on the transformers fixtures, through the engine-facing path: several sequences
// in one batch, chunked prefill, and prefill followed by decode must all give the logits that
// transformers recorded for the whole sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "runtime/model_loader.h"
#include "runtime/session.h"

#include "../fixture_ref.h"

using namespace tessera;
using tessera::fixtures::FixtureRef;
using tessera::fixtures::load_fixture;
using tessera::fixtures::rel_err;

namespace {


class DenseFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(DenseFixture, TwoSequencesInOneBatchMatchTransformers) {
    const FixtureRef ref = load_fixture(GetParam());
    LoadOptions lo;
    lo.max_batch_tokens = 256;
    LoadedModel m = load_model(ref.dir, lo);
    const auto a = ref.ids("a"), b = ref.ids("b");
    const auto la = ref.logits("a"), lb = ref.logits("b");
    const int64_t V = m.config.vocab_size, bs = 8;  // small blocks: tables of several blocks
    Session s(*m.model, blocks_for(int64_t(a.size()), bs) + blocks_for(int64_t(b.size()), bs), bs, /*max_seqs=*/2);
    const int ia = s.add_sequence(), ib = s.add_sequence();
    SeqBlocks &sa = s.sequence(ia), &sb = s.sequence(ib);
    sa.reserve(s.cache(), int64_t(a.size()));
    sb.reserve(s.cache(), int64_t(b.size()));
    BatchBuilder bb{int(bs)};
    bb.add(sb, b.data(), int64_t(b.size()), 2);  // b first: batch order must not matter
    bb.add(sa, a.data(), int64_t(a.size()), 2);
    std::vector<float> out((a.size() + b.size()) * size_t(V));
    m.model->forward(bb.finish(), s.caches(), out.data());
    EXPECT_LE(rel_err(out.data(), lb.data(), lb.size()), 1e-3);
    EXPECT_LE(rel_err(out.data() + lb.size(), la.data(), la.size()), 1e-3);
}

TEST_P(DenseFixture, ChunkedPrefillThenDecodeMatchesOneForward) {
    const FixtureRef ref = load_fixture(GetParam());
    LoadOptions lo;
    lo.max_batch_tokens = 7;  // prompt a (40 tokens) takes several chunks, one ending mid-block
    LoadedModel m = load_model(ref.dir, lo);
    const auto a = ref.ids("a");
    const auto la = ref.logits("a");
    const int64_t V = m.config.vocab_size;
    Session s(*m.model, blocks_for(int64_t(a.size()), 16), 16);
    const int seq = s.add_sequence();
    const size_t n_prefill = 25;
    const auto pre = s.feed(seq, std::vector<int32_t>(a.begin(), a.begin() + long(n_prefill)), true);
    EXPECT_LE(rel_err(pre.data(), la.data(), pre.size()), 1e-3);
    for (size_t t = n_prefill; t < a.size(); ++t) {
        const auto row = s.decode({seq}, {a[t]});
        EXPECT_LE(rel_err(row.data(), la.data() + t * size_t(V), size_t(V)), 1e-3) << "decode position " << t;
    }
    // Reset and run again: the sequence starts over at position 0 with fresh blocks.
    s.reset(seq);
    const auto again = s.feed(seq, a, true);
    EXPECT_LE(rel_err(again.data(), la.data(), la.size()), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DenseFixture,
                         ::testing::Values("qwen3_tiny", "llama_tiny", "qwen2_tiny", "qwen35moe_tiny", "qwen35_tiny",
                                           "qwen3next_tiny"));

TEST(Loader, UnknownArchitectureIsAClearError) {
    const std::string dir = ::testing::TempDir() + "/tessera_unknown_arch";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << R"({"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"]})";
    std::ofstream(dir + "/model.safetensors", std::ios::binary).write("\x02\x00\x00\x00\x00\x00\x00\x00{}", 10);
    try {
        load_model(dir);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("gpt_neox"), std::string::npos) << e.what();
    }
}

}  // namespace
