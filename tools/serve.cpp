// `tessera serve`: the OpenAI-compatible HTTP server. Loads the engine, binds, serves until
// SIGINT / SIGTERM, then shuts down gracefully (stop accepting, cancel in-flight requests, stop
// the listener) and exits 0.
#include <pthread.h>

#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli.h"
#include "core/memlog.h"
#include "core/status.h"
#include "engine/engine.h"
#include "server/server.h"

namespace tessera::cli {
namespace {

// "512M", "2G", "1.5GiB", "1048576" → bytes.
int64_t parse_bytes(const std::string& name, const std::string& s) {
    size_t pos = 0;
    double v = 0;
    try {
        v = std::stod(s, &pos);
    } catch (const std::exception&) {
        fail(ErrorKind::Invalid, "--{}: '{}' is not a size (e.g. 512M, 2G)", name, s);
    }
    std::string unit = s.substr(pos);
    for (auto& c : unit) c = char(std::toupper((unsigned char)c));
    double mul = 1;
    if (unit.empty() || unit == "B") mul = 1;
    else if (unit == "K" || unit == "KB" || unit == "KIB") mul = 1024.0;
    else if (unit == "M" || unit == "MB" || unit == "MIB") mul = 1024.0 * 1024;
    else if (unit == "G" || unit == "GB" || unit == "GIB") mul = 1024.0 * 1024 * 1024;
    else if (unit == "T" || unit == "TB" || unit == "TIB") mul = 1024.0 * 1024 * 1024 * 1024;
    else fail(ErrorKind::Invalid, "--{}: unknown unit in '{}' (use K, M, G or T)", name, s);
    TS_CHECK(v >= 0 && v * mul < 9.0e18, "--{}: '{}' is out of range", name, s);
    return int64_t(v * mul);
}

EngineOptions engine_options(const Args& args) {
    EngineOptions o;
    o.model_path = args.model_path(true);
    o.device = args.get("device", o.device);
    if (args.has("memory-budget")) o.memory_budget = parse_bytes("memory-budget", args.get("memory-budget"));
    o.gpu_memory_fraction = args.get_float("gpu-memory-fraction", o.gpu_memory_fraction);
    TS_CHECK(o.gpu_memory_fraction > 0 && o.gpu_memory_fraction <= 1, "--gpu-memory-fraction must be in (0, 1]");
    o.max_model_len = args.get_int("max-model-len", o.max_model_len);
    o.max_num_seqs = args.get_int("max-num-seqs", o.max_num_seqs);
    o.max_num_batched_tokens = args.get_int("max-num-batched-tokens", o.max_num_batched_tokens);
    o.max_queue = args.get_int("max-queue", o.max_queue);
    o.block_size = args.get_int("block-size", o.block_size);
    o.kv_dtype = args.get("kv-dtype", o.kv_dtype);
    o.prefix_caching = !args.flag("no-prefix-caching");
    o.snapshot_interval = args.get_int("snapshot-interval", o.snapshot_interval);
    o.memlog_every = args.get_int("memlog-every", o.memlog_every);
    o.sampling = args.get("sampling", o.sampling);
    o.pipeline = args.get("pipeline", o.pipeline);
    TS_CHECK(o.max_model_len >= 0 && o.max_num_seqs >= 0, "--max-model-len and --max-num-seqs must be >= 0");
    TS_CHECK(o.max_num_batched_tokens >= 1 && o.max_queue >= 1 && o.block_size >= 1,
             "--max-num-batched-tokens, --max-queue and --block-size must be >= 1");
    return o;
}

server::ServerOptions server_options(const Args& args) {
    server::ServerOptions o;
    o.host = args.get("host", o.host);
    o.port = int(args.get_int("port", o.port));
    TS_CHECK(o.port >= 0 && o.port <= 65535, "--port {} out of range [0, 65535]", o.port);
    o.api_key = args.get("api-key", "");
    o.served_model_name = args.get("served-model-name", "");
    o.chat_template = args.get("chat-template", "");
    o.request_timeout_s = args.get_float("request-timeout", o.request_timeout_s);
    TS_CHECK(o.request_timeout_s > 0, "--request-timeout must be > 0 seconds");
    if (args.has("max-body-bytes")) o.max_body_bytes = parse_bytes("max-body-bytes", args.get("max-body-bytes"));
    TS_CHECK(o.max_body_bytes >= 1024, "--max-body-bytes must be at least 1K");
    o.threads = int(args.get_int("http-threads", 0));
    return o;
}

int run_serve(const Args& args) {
    // SIGINT / SIGTERM are taken by one thread with sigwait; every other thread (the engine's,
    // httplib's workers) inherits the blocked mask. A signal during loading waits until then.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a closed client socket is a failed write, not a death

    if (args.flag("memlog")) MemLog::global().set_enabled(true);
    const EngineOptions eo = engine_options(args);
    const server::ServerOptions so = server_options(args);
    Engine engine(eo);
    server::Server srv(engine, so);
    srv.bind();

    std::atomic<bool> serving_done{false};
    std::thread signals([&] {
        int sig = 0;
        sigwait(&sigs, &sig);
        if (serving_done) return;
        std::fprintf(stderr, "tessera: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        srv.shutdown();
    });
    srv.run();
    serving_done = true;
    pthread_kill(signals.native_handle(), SIGTERM);  // wakes the waiter if no signal came
    signals.join();
    srv.shutdown();
    MemLog::global().snapshot("destroy");
    return 0;
}

std::vector<Option> serve_options() {
    auto o = common_model_options();
    for (const Option& x : std::vector<Option>{
             {"host", true, "address to bind (default 127.0.0.1)"},
             {"port", true, "port to listen on (default 8000; 0 picks a free one)"},
             {"api-key", true, "require Authorization: Bearer KEY on /v1/*, /tokenize, /detokenize, /metrics"},
             {"served-model-name", true, "the model name clients use (default: the model file or folder name)"},
             {"chat-template", true, "a Jinja chat template file overriding the model's"},
             {"memory-budget", true, "CPU: bytes for the KV + state caches, e.g. 512M, 2G (default: derived)"},
             {"gpu-memory-fraction", true, "GPU: fraction of device memory to use (default 0.90)"},
             {"max-model-len", true, "context length per request (default: the model's, clamped to the pool)"},
             {"max-num-seqs", true, "sequences running at once (default: what the budget allows, <= 256)"},
             {"max-num-batched-tokens", true, "tokens per engine step (default 512)"},
             {"max-queue", true, "waiting requests beyond which requests get 429 (default 1024)"},
             {"block-size", true, "tokens per KV block (default 16)"},
             {"kv-dtype", true, "f16 | f32 (default f16)"},
             {"no-prefix-caching", false, "disable prefix caching"},
             {"sampling", true, "auto | host | device: where sampled requests draw (default auto: device on a GPU)"},
             {"pipeline", true, "auto | on | off: launch the next greedy decode step before this one's tokens reach the host (default auto: on a GPU)"},
             {"snapshot-interval", true, "tokens between recurrent-state snapshots in a prompt (default 512)"},
             {"memlog-every", true, "memory-log snapshot every N decode steps (default 0: off)"},
             {"request-timeout", true, "seconds a request may take before it is cancelled (default 600)"},
             {"max-body-bytes", true, "largest request body, e.g. 16M (default 16 MiB)"},
             {"http-threads", true, "HTTP worker threads (default: max(64, 2 x max-num-seqs + 16))"}})
        o.push_back(x);
    return o;
}

}  // namespace

TESSERA_VERB("serve", "OpenAI-compatible HTTP server", serve_options(), run_serve);

}  // namespace tessera::cli
