// What every HTTP handler shares: the engine, its tokenizer, the chat template, the options,
// the metrics and the shutting-down flag.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "server/metrics.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;                 // 0: any free port (see Server::port())
    std::string api_key;             // "": no authentication
    std::string served_model_name;   // "": Engine::model_name()
    std::string chat_template;       // a template file; "": the model's own
    double request_timeout_s = 600;  // per request, from submit to the final event
    int64_t max_body_bytes = 16 << 20;
    int threads = 0;                 // HTTP workers; 0: max(64, 2 × max_num_seqs + 16)
};

struct ServerContext {
    Engine& engine;
    const Tokenizer& tokenizer;
    std::optional<ChatTemplateSource> chat_template;  // none: chat requests are refused
    ServerOptions opts;
    std::string model_name;  // the served name
    ServerMetrics metrics;
    std::atomic<bool> shutting_down{false};
};

}  // namespace tessera::server
