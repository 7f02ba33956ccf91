// The HTTP route handlers. Each throws tessera::Error for bad requests; the server turns those
// into OpenAI error responses (see server.cpp).
#pragma once
#include "server/http.h"
#include "server/request_parse.h"
#include "server/server_context.h"

namespace tessera::server {

// POST /v1/completions and /v1/chat/completions (generate_handler.cpp).
void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

// POST /tokenize and /detokenize (tokenize_handler.cpp).
void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

// Shared by the handlers: the "model" field must name the served model when given (404).
void check_model(const ServerContext& ctx, const std::string& model);
// The chat template applied to messages (Error(Invalid) when the model has none).
std::string render_messages(const ServerContext& ctx, const ojson& messages, const ojson& tools,
                            bool add_generation_prompt, const ojson& kwargs);
void send_json(httplib::Response& res, int status, const ojson& body);

}  // namespace tessera::server
