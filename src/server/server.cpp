// Routing, authentication, error responses and lifecycle of the HTTP server.
#include "server/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstdio>

#include "core/memlog.h"
#include "server/api_error.h"
#include "server/handlers.h"
#include "server/http.h"
#include "server/response_json.h"

namespace tessera::server {
namespace {

using Handler = std::function<void(ServerContext&, const httplib::Request&, httplib::Response&)>;

bool needs_auth(const std::string& path) {
    return path.rfind("/v1/", 0) == 0 || path == "/v1" || path == "/tokenize" || path == "/detokenize" ||
           path == "/metrics";
}

// Compares in time independent of where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
    unsigned diff = unsigned(a.size() ^ b.size());
    for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(a[i]) ^ unsigned(i < b.size() ? b[i] : 0);
    return diff == 0;
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_json(e)); }

}  // namespace

void send_json(httplib::Response& res, int status, const ojson& body) {
    res.status = status;
    res.set_content(to_text(body) + "\n", "application/json");
}

void check_model(const ServerContext& ctx, const std::string& model) {
    if (!model.empty() && model != ctx.model_name)
        fail(ErrorKind::NotFound, "the model '{}' does not exist (this server serves '{}')", model, ctx.model_name);
}

std::string render_messages(const ServerContext& ctx, const ojson& messages, const ojson& tools,
                            bool add_generation_prompt, const ojson& kwargs) {
    if (!ctx.chat_template)
        fail(ErrorKind::Invalid, "this model has no chat template: use /v1/completions, or start the server "
                                 "with --chat-template FILE");
    try {
        return render_chat(*ctx.chat_template, messages, tools, add_generation_prompt, kwargs);
    } catch (const Error& e) {
        throw Error(ErrorKind::Invalid, std::string("chat template: ") + e.what());
    }
}

Server::Server(Engine& engine, ServerOptions opts) {
    const Tokenizer* tok = engine.tokenizer();
    if (!tok) fail(ErrorKind::Invalid, "the model {} has no tokenizer; the server needs one", engine.options().model_path);
    ctx_.reset(new ServerContext{engine, *tok, std::nullopt, opts, opts.served_model_name, {}, {}});
    if (ctx_->model_name.empty()) ctx_->model_name = engine.model_name();
    const std::string tpl_path = opts.chat_template.empty() ? engine.options().model_path : opts.chat_template;
    ChatTemplateSource src = load_chat_template(tpl_path, /*require_template=*/!opts.chat_template.empty());
    if (!src.template_text.empty()) ctx_->chat_template = std::move(src);

    http_ = std::make_unique<httplib::Server>();
    int threads = opts.threads;
    if (threads <= 0) threads = int(std::clamp<int64_t>(2 * engine.options().max_num_seqs + 16, 64, 1024));
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    http_->set_payload_max_length(size_t(opts.max_body_bytes));
    http_->set_keep_alive_max_count(1000);
    http_->set_keep_alive_timeout(10);  // longer than clients' pools keep idle connections (httpx: 5 s)
    // httplib's default options add SO_REUSEPORT (a second server on the port would bind silently);
    // keep SO_REUSEADDR only, and remember the socket to raise its listen backlog after bind.
    http_->set_socket_options([this](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
        listen_fd_ = int(sock);
    });
    http_->set_write_timeout(30, 0);
    setup_routes();
}

Server::~Server() = default;

void Server::setup_routes() {
    ServerContext& ctx = *ctx_;
    httplib::Server& s = *http_;
    auto wrap = [&ctx](Handler h) {
        return [&ctx, h](const httplib::Request& req, httplib::Response& res) {
            try {
                h(ctx, req, res);
            } catch (const Error& e) {
                send_error(res, ctx.shutting_down && e.kind() == ErrorKind::Busy
                                    ? api_error(503, "the server is shutting down")
                                    : api_error_from(e));
            } catch (const nlohmann::json::exception& e) {
                send_error(res, api_error(400, std::string("invalid request: ") + e.what()));
            } catch (const std::exception& e) {
                send_error(res, api_error(500, e.what()));
            }
        };
    };

    s.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
        if (!ctx.opts.api_key.empty() && needs_auth(req.path)) {
            const std::string auth = req.get_header_value("Authorization");
            const std::string prefix = "Bearer ";
            if (auth.rfind(prefix, 0) != 0 || !same_secret(auth.substr(prefix.size()), ctx.opts.api_key)) {
                send_error(res, api_error(401, "invalid or missing API key (Authorization: Bearer KEY)", "invalid_api_key"));
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        if (ctx.shutting_down && req.path != "/health" && req.path != "/metrics") {
            send_error(res, api_error(503, "the server is shutting down"));
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    // Errors httplib answers itself (unknown route, body over the limit, bad HTTP) get a JSON body.
    s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg = "error";
        if (res.status == 404) msg = "no route " + req.method + " " + req.path;
        else if (res.status == 413) msg = "the request body is larger than the limit (--max-body-bytes)";
        else if (res.status == 400) msg = "malformed HTTP request";
        else if (res.status == 405) msg = "method not allowed";
        send_error(res, api_error(res.status, msg, res.status == 404 ? "not_found" : ""));
        return httplib::Server::HandlerResponse::Handled;
    }));
    s.set_logger([&ctx](const httplib::Request&, const httplib::Response& res) { ctx.metrics.count_http(res.status); });

    s.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
        if (ctx.shutting_down) send_error(res, api_error(503, "the server is shutting down"));
        else send_json(res, 200, ojson{{"status", "ok"}});
    });
    s.Get("/metrics", wrap([](ServerContext& c, const httplib::Request&, httplib::Response& res) {
        res.set_content(c.metrics.render(c.engine.stats(), MemLog::global().values()),
                        "text/plain; version=0.0.4; charset=utf-8");
    }));
    auto model_card = [](const ServerContext& c) {
        ojson m;
        m["id"] = c.model_name;
        m["object"] = "model";
        m["created"] = unix_now();
        m["owned_by"] = "tessera";
        m["root"] = c.engine.options().model_path;
        m["max_model_len"] = c.engine.options().max_model_len;
        return m;
    };
    s.Get("/v1/models", wrap([model_card](ServerContext& c, const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, ojson{{"object", "list"}, {"data", ojson::array({model_card(c)})}});
    }));
    s.Get(R"(/v1/models/(.+))", wrap([model_card](ServerContext& c, const httplib::Request& req, httplib::Response& res) {
        check_model(c, req.matches[1]);
        send_json(res, 200, model_card(c));
    }));
    s.Post("/v1/completions", wrap(handle_completions));
    s.Post("/v1/chat/completions", wrap(handle_chat_completions));
    s.Post("/tokenize", wrap(handle_tokenize));
    s.Post("/detokenize", wrap(handle_detokenize));
}

void Server::bind() {
    const ServerOptions& o = ctx_->opts;
    if (o.port == 0) {
        port_ = http_->bind_to_any_port(o.host);
        if (port_ < 0) fail(ErrorKind::Io, "cannot bind {} (any port)", o.host);
    } else {
        if (!http_->bind_to_port(o.host, o.port))
            fail(ErrorKind::Io, "cannot bind {}:{} (in use, or not an address of this machine)", o.host, o.port);
        port_ = o.port;
    }
    // httplib listens with a backlog of 5: a burst of new connections would wait for SYN retries.
    if (listen_fd_ >= 0) ::listen(listen_fd_, 1024);
}

int Server::port() const { return port_; }

void Server::run() {
    std::fprintf(stderr, "tessera: serving %s on http://%s:%d\n", ctx_->model_name.c_str(), ctx_->opts.host.c_str(),
                 port_);
    std::fflush(stderr);
    if (ctx_->shutting_down) return;
    http_->listen_after_bind();
}

void Server::shutdown() {
    if (ctx_->shutting_down.exchange(true)) return;
    ctx_->engine.shutdown();  // cancels every request: waiting handlers and streams finish now
    http_->stop();
}

}  // namespace tessera::server
