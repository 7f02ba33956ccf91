// Batch invariance of whole models on the CPU backend: a sequence's logits are bit for bit the
// same whether its prompt runs alone in one pass and it then decodes alone, or its prompt is split
// at 64 and 128 and every step is batched with another sequence that prefills or decodes at other
// positions (before or after it in the batch). And greedy steps' argmax-only output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "runtime/model_loader.h"
#include "runtime/session.h"

using namespace tessera;

namespace {

std::vector<int32_t> random_ids(size_t n, int vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> d(0, vocab - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// One piece of a step: n tokens of a sequence from `tokens` at its next positions.
struct Piece {
    int seq;
    const std::vector<int32_t>* tokens;
    size_t from, n;
    int want_logits;  // as BatchBuilder::add
};

// Runs the steps; returns the logit rows of sequence `keep` in order ([rows, V] row-major).
std::vector<float> run_steps(Session& s, const std::vector<std::vector<Piece>>& steps, int keep, int64_t V) {
    std::vector<float> kept;
    for (const auto& step : steps) {
        BatchBuilder bb{int(s.cache().shape().block_size)};
        size_t rows = 0, keep_row0 = 0, keep_rows = 0;
        for (const Piece& p : step) {
            SeqBlocks& sb = s.sequence(p.seq);
            sb.reserve(s.cache(), int64_t(p.n));
            bb.add(sb, p.tokens->data() + p.from, int64_t(p.n), p.want_logits);
            const size_t r = p.want_logits == 2 ? p.n : (p.want_logits == 1 ? 1 : 0);
            if (p.seq == keep) {
                keep_row0 = rows;
                keep_rows = r;
            }
            rows += r;
        }
        std::vector<float> out(rows * size_t(V));
        s.model().forward(bb.finish(), s.caches(), out.data());
        kept.insert(kept.end(), out.begin() + long(keep_row0 * size_t(V)),
                    out.begin() + long((keep_row0 + keep_rows) * size_t(V)));
    }
    return kept;
}

class BatchInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchInvariance, LogitsAloneEqualSplitAndBatched) {
    LoadOptions lo;
    lo.device = "cpu";
    lo.max_batch_tokens = 256;
    LoadedModel m = load_model(std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/" + GetParam(), lo);
    const int64_t V = m.config.vocab_size, bs = 16;
    const size_t n_prompt = 150, n_decode = 5;
    const auto a = random_ids(n_prompt + n_decode, int(V), 1);  // prompt, then the tokens it decodes
    const auto b = random_ids(300, int(V), 2);
    const int64_t n_blocks = blocks_for(int64_t(a.size()), bs) + blocks_for(int64_t(b.size()), bs);

    // A alone: the prompt in one pass (every row's logits), then one token per step.
    Session alone(*m.model, n_blocks, bs, /*max_seqs=*/2);
    const int sa = alone.add_sequence();
    std::vector<std::vector<Piece>> steps = {{{sa, &a, 0, n_prompt, 2}}};
    for (size_t t = n_prompt; t < a.size(); ++t) steps.push_back({{sa, &a, t, 1, 1}});
    const auto want = run_steps(alone, steps, sa, V);
    ASSERT_EQ(want.size(), (n_prompt + n_decode) * size_t(V));

    // A split at 64 and 128, every step shared with B (added first, so B holds other blocks and
    // slots), which prefills chunks and decodes at its own positions, before or after A.
    Session batched(*m.model, n_blocks, bs, 2);
    const int sb = batched.add_sequence(), sa2 = batched.add_sequence();
    steps = {
        {{sb, &b, 0, 40, 1}, {sa2, &a, 0, 64, 2}},
        {{sa2, &a, 64, 64, 2}, {sb, &b, 40, 1, 1}},
        {{sb, &b, 41, 1, 1}, {sa2, &a, 128, n_prompt - 128, 2}},
        {{sa2, &a, 150, 1, 1}, {sb, &b, 42, 64, 1}},
        {{sb, &b, 106, 1, 1}, {sa2, &a, 151, 1, 1}},
        {{sb, &b, 107, 100, 2}, {sa2, &a, 152, 1, 1}},
        {{sa2, &a, 153, 1, 1}, {sb, &b, 207, 1, 1}},
        {{sa2, &a, 154, 1, 1}},
    };
    const auto got = run_steps(batched, steps, sa2, V);
    ASSERT_EQ(got.size(), want.size());
    for (size_t r = 0; r < n_prompt + n_decode; ++r)
        ASSERT_EQ(0, std::memcmp(got.data() + r * size_t(V), want.data() + r * size_t(V), size_t(V) * sizeof(float)))
            << GetParam() << ": logits of A's token " << r << " differ"
            << (r < n_prompt ? " (prompt)" : " (decode)");
}

// The first index of the largest non-NaN value (Sampler::argmax's rule).
int32_t first_argmax(const float* row, int64_t V) {
    int32_t best = -1;
    for (int64_t i = 0; i < V; ++i)
        if (!std::isnan(row[i]) && (best < 0 || row[i] > row[best])) best = int32_t(i);
    return best < 0 ? 0 : best;
}

// Greedy steps ask Model::forward for argmaxes only (the logits stay where they were computed):
// each id is the argmax of the row a logits step gives — for a prompt of 40 rows (more than
// the lm_head's 16-row scratch) and for decode steps of two sequences.
TEST_P(BatchInvariance, ArgmaxOnlyStepsGiveTheArgmaxOfTheLogits) {
    LoadOptions lo;
    lo.device = "cpu";
    lo.max_batch_tokens = 256;
    LoadedModel m = load_model(std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/" + GetParam(), lo);
    const int64_t V = m.config.vocab_size, bs = 16;
    const auto a = random_ids(48, int(V), 3), b = random_ids(48, int(V), 4);
    auto run = [&](bool ids_only) {
        Session s(*m.model, 2 * blocks_for(48, bs), bs, 2);
        const int sa = s.add_sequence(), sb = s.add_sequence();
        std::vector<int32_t> got;
        auto step = [&](std::vector<Piece> pieces) {
            BatchBuilder bb{int(bs)};
            size_t rows = 0;
            for (const Piece& p : pieces) {
                SeqBlocks& q = s.sequence(p.seq);
                q.reserve(s.cache(), int64_t(p.n));
                bb.add(q, p.tokens->data() + p.from, int64_t(p.n), p.want_logits);
                rows += p.want_logits == 2 ? p.n : size_t(p.want_logits);
            }
            if (ids_only) {
                std::vector<int32_t> ids(rows, -1);
                s.model().forward(bb.finish(), s.caches(), nullptr, ids.data());
                got.insert(got.end(), ids.begin(), ids.end());
            } else {
                std::vector<float> out(rows * size_t(V));
                s.model().forward(bb.finish(), s.caches(), out.data());
                for (size_t r = 0; r < rows; ++r) got.push_back(first_argmax(out.data() + r * size_t(V), V));
            }
        };
        step({{sa, &a, 0, 40, 2}, {sb, &b, 0, 20, 1}});
        for (size_t t = 40; t < 44; ++t) step({{sb, &b, t - 20, 1, 1}, {sa, &a, t, 1, 1}});
        return got;
    };
    const auto want = run(false), got = run(true);
    ASSERT_EQ(want.size(), size_t(41 + 8));
    EXPECT_EQ(got, want) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchInvariance,
                         ::testing::Values("qwen3_tiny", "qwen35moe_tiny", "qwen3next_tiny", "qwen35_tiny",
                                           "llama_tiny", "qwen2_tiny"));

}  // namespace
