// `tessera run`: one-shot generation in the terminal — prefill the prompt (in chunks), then
// sample and stream tokens until EOS, a stop token or --max-tokens.
#include <chrono>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "core/memlog.h"
#include "core/status.h"
#include "engine/sampler.h"
#include "runtime/model_loader.h"
#include "runtime/session.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string chat_prompt(const std::string& path, const Args& args) {
    ChatTemplateSource tpl = load_chat_template(args.has("chat-template") ? args.get("chat-template") : path);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (args.has("system")) messages.push_back({{"role", "system"}, {"content", args.get("system")}});
    messages.push_back({{"role", "user"}, {"content", args.require("prompt")}});
    return render_chat(tpl, messages, nullptr, /*add_generation_prompt=*/true, nlohmann::ordered_json::object());
}

int run_run(const Args& args) {
    const std::string path = args.model_path(true);
    TS_CHECK(args.has("prompt") != args.has("tokens"), "give exactly one of --prompt TEXT or --tokens IDS");
    const int64_t max_tokens = args.get_int("max-tokens", 256);
    TS_CHECK(max_tokens >= 0, "--max-tokens must be >= 0");
    SamplingParams sp;
    sp.temperature = float(args.get_float("temperature", 0.8));
    sp.top_p = float(args.get_float("top-p", 0.95));
    sp.top_k = int(args.get_int("top-k", 40));
    sp.min_p = float(args.get_float("min-p", 0.05));
    sp.seed = args.has("seed") ? uint64_t(args.get_int("seed", 0)) : std::random_device{}();
    TS_CHECK(sp.top_p > 0 && sp.top_p <= 1, "--top-p must be in (0, 1]");
    const bool ids_only = args.flag("ids");

    LoadOptions lo;
    lo.device = args.get("device", "auto");
    lo.max_batch_tokens = args.get_int("prefill-chunk", 512);
    TS_CHECK(lo.max_batch_tokens >= 1, "--prefill-chunk must be >= 1");
    if (args.flag("memlog")) MemLog::global().set_enabled(true);

    // The tokenizer is needed for text in or out; with --tokens --ids the model alone will do.
    std::unique_ptr<Tokenizer> tok;
    if (args.has("prompt") || !ids_only) tok = load_tokenizer(path);
    std::vector<int32_t> prompt;
    if (args.has("tokens")) {
        prompt = parse_id_list(args.get("tokens"));
    } else {
        const std::string text = args.flag("chat") ? chat_prompt(path, args) : args.get("prompt");
        prompt = tok->encode(text, /*add_special=*/!args.flag("chat"), /*parse_special=*/args.flag("chat"));
    }
    TS_CHECK(!prompt.empty(), "the prompt is empty");

    const auto t_load = Clock::now();
    LoadedModel m = load_model(path, lo);
    const double load_s = seconds_since(t_load);
    const int64_t ctx = m.config.max_ctx > 0 ? std::min<int64_t>(m.config.max_ctx, int64_t(prompt.size()) + max_tokens)
                                             : int64_t(prompt.size()) + max_tokens;
    TS_CHECK(int64_t(prompt.size()) <= ctx, "prompt of {} tokens exceeds the model's context {}", prompt.size(), ctx);
    const int64_t bs = 16;
    Session session(*m.model, blocks_for(ctx, bs), bs);
    MemLog::global().snapshot("after cache allocation");
    const int seq = session.add_sequence();

    std::vector<int32_t> stop = tok ? tok->eos_ids() : checkpoint_eos_ids(path);
    if (args.flag("ignore-eos")) stop.clear();
    Sampler sampler(sp);
    std::unique_ptr<StreamDecoder> dec = tok ? std::make_unique<StreamDecoder>(*tok, /*skip_special=*/true) : nullptr;

    const auto t_prefill = Clock::now();
    std::vector<float> logits = session.feed(seq, prompt);
    const double prefill_s = seconds_since(t_prefill);
    const auto t_decode = Clock::now();
    std::vector<int32_t> out;
    for (int64_t i = 0; i < max_tokens && session.n_tokens(seq) < ctx; ++i) {
        const int32_t next = sampler.sample(logits.data(), int(m.config.vocab_size));
        if (std::find(stop.begin(), stop.end(), next) != stop.end()) break;
        out.push_back(next);
        if (!ids_only) {
            std::fputs(dec->push(next).c_str(), stdout);
            std::fflush(stdout);
        }
        if (i + 1 < max_tokens && session.n_tokens(seq) + 1 <= ctx) logits = session.decode({seq}, {next});
    }
    const double decode_s = seconds_since(t_decode);
    if (ids_only) {
        for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? " " : "", out[i]);
        std::printf("\n");
    } else {
        std::fputs(dec->flush().c_str(), stdout);
        std::printf("\n");
    }
    std::fprintf(stderr, "[tessera] load %.2fs | prompt %zu tokens, %.1f tok/s | generated %zu tokens, %.1f tok/s\n",
                 load_s, prompt.size(), double(prompt.size()) / prefill_s, out.size(),
                 out.size() > 1 ? double(out.size() - 1) / decode_s : 0.0);
    MemLog::global().snapshot("destroy");
    return 0;
}

std::vector<Option> run_options() {
    auto o = common_model_options();
    for (const Option& x : std::vector<Option>{
             {"prompt", true, "prompt text"},
             {"tokens", true, "prompt as comma-separated token ids"},
             {"chat", false, "wrap --prompt in the model's chat template (as one user turn)"},
             {"system", true, "system prompt (with --chat)"},
             {"chat-template", true, "a Jinja chat template file overriding the model's"},
             {"max-tokens", true, "tokens to generate at most (default 256)"},
             {"temperature", true, "sampling temperature; 0 is greedy (default 0.8)"},
             {"top-p", true, "nucleus sampling mass (default 0.95)"},
             {"top-k", true, "keep the k most likely tokens; 0 is off (default 40)"},
             {"min-p", true, "drop tokens below min-p x the top probability (default 0.05)"},
             {"seed", true, "random seed (default: random)"},
             {"ids", false, "print only the generated token ids, space-separated, on one line"},
             {"ignore-eos", false, "do not stop at end-of-sequence tokens"},
             {"prefill-chunk", true, "prompt tokens per forward step (default 512)"}})
        o.push_back(x);
    return o;
}

}  // namespace

TESSERA_VERB("run", "generate text from a prompt, streamed", run_options(), run_run);

}  // namespace tessera::cli
