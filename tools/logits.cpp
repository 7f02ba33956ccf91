// `tessera logits`: float32 logits of every position of a token sequence, row-major
// [n_tokens, vocab], little-endian — the form the reference fixtures are compared in.
#include <cstdio>

#include "cli.h"
#include "core/status.h"
#include "runtime/model_loader.h"
#include "runtime/session.h"

namespace tessera::cli {
namespace {

int run_logits(const Args& args) {
    const std::string path = args.model_path(true);
    const auto tokens = parse_id_list(args.require("tokens"));
    TS_CHECK(!tokens.empty(), "--tokens: empty list");
    const std::string out_path = args.require("out");
    LoadOptions lo;
    lo.device = args.get("device", "auto");
    lo.max_batch_tokens = args.get_int("prefill-chunk", 512);
    TS_CHECK(lo.max_batch_tokens >= 1, "--prefill-chunk must be >= 1");
    LoadedModel m = load_model(path, lo);
    const int64_t bs = 16;
    Session session(*m.model, blocks_for(int64_t(tokens.size()), bs), bs);
    const int seq = session.add_sequence();
    const std::vector<float> logits = session.feed(seq, tokens, /*all_logits=*/true);
    FILE* f = std::fopen(out_path.c_str(), "wb");
    if (!f) fail(ErrorKind::Io, "{}: cannot open for writing", out_path);
    const size_t n = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    const bool ok = n == logits.size() && std::fclose(f) == 0;
    if (!ok) fail(ErrorKind::Io, "{}: write failed", out_path);
    std::fprintf(stderr, "wrote %zu x %lld logits to %s\n", tokens.size(), (long long)m.config.vocab_size,
                 out_path.c_str());
    return 0;
}

std::vector<Option> logits_options() {
    auto o = common_model_options();
    o.push_back({"tokens", true, "comma-separated token ids"});
    o.push_back({"out", true, "output file: f32 little-endian [n_tokens, vocab]"});
    o.push_back({"prefill-chunk", true, "tokens per forward step (default 512)"});
    return o;
}

}  // namespace

TESSERA_VERB("logits", "write the logits of every position of --tokens to --out", logits_options(), run_logits);

}  // namespace tessera::cli
