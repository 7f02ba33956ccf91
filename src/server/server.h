// The OpenAI-compatible HTTP server over an Engine: routes, API-key check, error responses,
// the worker pool, and a graceful shutdown. Routes: GET /v1/models, POST /v1/completions,
// POST /v1/chat/completions, POST /tokenize, POST /detokenize, GET /health, GET /metrics.
#pragma once
#include <memory>

#include "server/server_context.h"

namespace httplib {
class Server;
}

namespace tessera::server {

class Server {
public:
    // Loads the chat template (opts.chat_template, else the model's; none is allowed: chat
    // requests are then refused) and sets up the routes. The engine must outlive the server.
    Server(Engine& engine, ServerOptions opts);
    ~Server();

    void bind();      // binds opts.host:opts.port; throws Error(Io) when it cannot
    int port() const;  // the bound port
    void run();       // serves until shutdown(); call after bind()
    // Thread-safe, idempotent: /health turns 503, new requests get 503, the engine cancels what
    // is in flight (streams end with an error event), then the listener stops and run() returns.
    void shutdown();

    ServerContext& context() { return *ctx_; }

private:
    void setup_routes();
    std::unique_ptr<ServerContext> ctx_;
    std::unique_ptr<httplib::Server> http_;
    int port_ = 0;
    int listen_fd_ = -1;  // the listening socket, seen in httplib's socket-options hook
};

}  // namespace tessera::server
