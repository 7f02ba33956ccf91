// Parsing and validation of OpenAI completion / chat-completion request bodies.
#include "server/request_parse.h"

#include <cmath>
#include <limits>

#include "core/status.h"

namespace tessera::server {
namespace {

// The value of key, or null when absent or JSON null (OpenAI treats both as "not given").
const ojson* field(const ojson& b, const char* key) {
    auto it = b.find(key);
    if (it == b.end() || it->is_null()) return nullptr;
    return &*it;
}

std::optional<double> opt_number(const ojson& b, const char* key) {
    const ojson* v = field(b, key);
    if (!v) return std::nullopt;
    TS_CHECK(v->is_number(), "'{}' must be a number, got {}", key, v->type_name());
    const double x = v->get<double>();
    TS_CHECK(std::isfinite(x), "'{}' must be finite", key);
    return x;
}

bool is_integral(const ojson& v) {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double x = v.get<double>();
    return std::isfinite(x) && std::floor(x) == x && std::fabs(x) < 9.0e15;
}

int64_t as_int(const ojson& v) { return v.is_number_float() ? int64_t(v.get<double>()) : v.get<int64_t>(); }

std::optional<int64_t> opt_int(const ojson& b, const char* key) {
    const ojson* v = field(b, key);
    if (!v) return std::nullopt;
    TS_CHECK(is_integral(*v), "'{}' must be an integer, got {}", key, v->is_number() ? v->dump() : v->type_name());
    return as_int(*v);
}

std::optional<bool> opt_bool(const ojson& b, const char* key) {
    const ojson* v = field(b, key);
    if (!v) return std::nullopt;
    TS_CHECK(v->is_boolean(), "'{}' must be a boolean, got {}", key, v->type_name());
    return v->get<bool>();
}

std::vector<int32_t> token_list(const ojson& v, const char* key) {
    TS_CHECK(v.is_array(), "'{}' must be an array of token ids", key);
    std::vector<int32_t> ids;
    ids.reserve(v.size());
    for (const auto& x : v) {
        TS_CHECK(is_integral(x), "'{}' must be an array of integer token ids", key);
        const int64_t id = as_int(x);
        TS_CHECK(id >= 0 && id <= std::numeric_limits<int32_t>::max(), "'{}': token id {} out of range", key, id);
        ids.push_back(int32_t(id));
    }
    return ids;
}

void refuse_unsupported(const ojson& b) {
    if (auto n = opt_int(b, "n")) TS_CHECK(*n == 1, "'n' = {} is not supported: only n = 1", *n);
    if (auto bo = opt_int(b, "best_of")) TS_CHECK(*bo == 1, "'best_of' = {} is not supported: only 1", *bo);
}

// The fields both endpoints share: sampling, penalties, stops, streaming.
GenerationRequest parse_common(const ojson& b) {
    GenerationRequest g;
    GenerationParams& p = g.params;
    if (const ojson* m = field(b, "model")) {
        TS_CHECK(m->is_string(), "'model' must be a string");
        g.model = m->get<std::string>();
    }
    refuse_unsupported(b);
    if (auto t = opt_number(b, "temperature")) {
        TS_CHECK(*t >= 0, "'temperature' must be >= 0, got {}", *t);
        p.sampling.temperature = float(*t);
    }
    if (auto t = opt_number(b, "top_p")) {
        TS_CHECK(*t > 0 && *t <= 1, "'top_p' must be in (0, 1], got {}", *t);
        p.sampling.top_p = float(*t);
    }
    if (auto k = opt_int(b, "top_k")) {
        TS_CHECK(*k >= -1 && *k <= std::numeric_limits<int32_t>::max(), "'top_k' must be -1, 0 (off) or >= 1, got {}", *k);
        p.sampling.top_k = *k <= 0 ? 0 : int(*k);
    }
    if (auto m = opt_number(b, "min_p")) {
        TS_CHECK(*m >= 0 && *m <= 1, "'min_p' must be in [0, 1], got {}", *m);
        p.sampling.min_p = float(*m);
    }
    if (const ojson* s = field(b, "seed")) {
        TS_CHECK(is_integral(*s), "'seed' must be an integer");
        p.sampling.seed = s->is_number_unsigned() ? s->get<uint64_t>() : uint64_t(as_int(*s));
        g.seed_given = true;
    }
    if (auto x = opt_number(b, "presence_penalty")) {
        TS_CHECK(*x >= -2 && *x <= 2, "'presence_penalty' must be in [-2, 2], got {}", *x);
        p.presence_penalty = float(*x);
    }
    if (auto x = opt_number(b, "frequency_penalty")) {
        TS_CHECK(*x >= -2 && *x <= 2, "'frequency_penalty' must be in [-2, 2], got {}", *x);
        p.frequency_penalty = float(*x);
    }
    if (auto x = opt_number(b, "repetition_penalty")) {
        TS_CHECK(*x > 0, "'repetition_penalty' must be > 0, got {}", *x);
        p.repetition_penalty = float(*x);
    }
    if (const ojson* lb = field(b, "logit_bias")) {
        TS_CHECK(lb->is_object(), "'logit_bias' must be an object of token id → bias");
        for (const auto& [k, v] : lb->items()) {
            size_t pos = 0;
            long long id = -1;
            try {
                id = std::stoll(k, &pos);
            } catch (const std::exception&) {
                pos = 0;
            }
            TS_CHECK(pos == k.size() && !k.empty() && id >= 0 && id <= std::numeric_limits<int32_t>::max(),
                     "'logit_bias': key '{}' is not a token id", k);
            TS_CHECK(v.is_number(), "'logit_bias': the bias of token {} must be a number", k);
            const double bias = v.get<double>();
            TS_CHECK(bias >= -100 && bias <= 100, "'logit_bias': the bias of token {} must be in [-100, 100]", k);
            p.logit_bias.emplace_back(int32_t(id), float(bias));
        }
    }
    if (const ojson* s = field(b, "stop")) {
        if (s->is_string()) {
            p.stop.push_back(s->get<std::string>());
        } else {
            TS_CHECK(s->is_array(), "'stop' must be a string or an array of strings");
            for (const auto& x : *s) {
                TS_CHECK(x.is_string(), "'stop' must be a string or an array of strings");
                p.stop.push_back(x.get<std::string>());
            }
        }
    }
    if (const ojson* s = field(b, "stop_token_ids")) p.stop_token_ids = token_list(*s, "stop_token_ids");
    if (auto x = opt_bool(b, "ignore_eos")) p.ignore_eos = *x;
    if (auto x = opt_bool(b, "skip_special_tokens")) p.skip_special_tokens = *x;
    if (auto x = opt_bool(b, "stream")) g.stream = *x;
    if (const ojson* so = field(b, "stream_options")) {
        TS_CHECK(so->is_object(), "'stream_options' must be an object");
        if (auto u = opt_bool(*so, "include_usage")) g.include_usage = *u;
    }
    return g;
}

void set_max_tokens(GenerationRequest& g, std::optional<int64_t> v, const char* name) {
    if (!v) return;
    TS_CHECK(*v >= 1, "'{}' must be >= 1, got {}", name, *v);
    g.params.max_tokens = *v;
}

std::string content_string(const ojson& content, size_t index) {
    if (content.is_string()) return content.get<std::string>();
    TS_CHECK(content.is_array(), "messages[{}].content must be a string, an array of content parts or null", index);
    std::string text;
    for (const auto& part : content) {
        TS_CHECK(part.is_object() && part.contains("type") && part["type"].is_string(),
                 "messages[{}].content: each content part must be an object with a 'type'", index);
        const std::string type = part["type"].get<std::string>();
        TS_CHECK(type == "text", "messages[{}].content: content parts of type '{}' are not supported (text only)",
                 index, type);
        TS_CHECK(part.contains("text") && part["text"].is_string(), "messages[{}].content: a text part needs 'text'",
                 index);
        if (!text.empty()) text += '\n';
        text += part["text"].get<std::string>();
    }
    return text;
}

// Tool calls of an assistant message: templates want the arguments as a mapping, OpenAI sends
// them as a JSON string (vLLM converts them the same way).
void normalize_tool_calls(ojson& calls, size_t index) {
    TS_CHECK(calls.is_array(), "messages[{}].tool_calls must be an array", index);
    for (auto& c : calls) {
        TS_CHECK(c.is_object(), "messages[{}].tool_calls: each call must be an object", index);
        auto f = c.find("function");
        if (f == c.end() || !f->is_object()) continue;
        auto a = f->find("arguments");
        if (a == f->end() || !a->is_string()) continue;
        ojson parsed = ojson::parse(a->get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (parsed.is_object()) *a = std::move(parsed);
    }
}

}  // namespace

ojson parse_body(const std::string& body) {
    ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
    TS_CHECK(!j.is_discarded(), "the request body is not valid JSON");
    TS_CHECK(j.is_object(), "the request body must be a JSON object");
    return j;
}

ojson normalize_messages(const ojson& messages) {
    TS_CHECK(messages.is_array(), "'messages' must be an array");
    TS_CHECK(!messages.empty(), "'messages' must not be empty");
    ojson out = ojson::array();
    for (size_t i = 0; i < messages.size(); ++i) {
        ojson m = messages[i];
        TS_CHECK(m.is_object(), "messages[{}] must be an object", i);
        TS_CHECK(m.contains("role") && m["role"].is_string(), "messages[{}].role must be a string", i);
        auto c = m.find("content");
        if (c != m.end() && !c->is_null()) *c = content_string(*c, i);
        auto tc = m.find("tool_calls");
        if (tc != m.end() && !tc->is_null()) normalize_tool_calls(*tc, i);
        out.push_back(std::move(m));
    }
    return out;
}

ojson parse_tools(const ojson& body) {
    const ojson* t = field(body, "tools");
    if (!t) return nullptr;
    TS_CHECK(t->is_array(), "'tools' must be an array");
    for (size_t i = 0; i < t->size(); ++i) {
        const ojson& tool = (*t)[i];
        TS_CHECK(tool.is_object(), "tools[{}] must be an object", i);
        TS_CHECK(tool.contains("function") && tool["function"].is_object(), "tools[{}].function must be an object", i);
        TS_CHECK(tool["function"].contains("name") && tool["function"]["name"].is_string(),
                 "tools[{}].function.name must be a string", i);
    }
    return t->empty() ? ojson(nullptr) : *t;
}

CompletionRequest parse_completion_request(const ojson& b) {
    CompletionRequest r;
    r.gen = parse_common(b);
    set_max_tokens(r.gen, opt_int(b, "max_tokens"), "max_tokens");
    if (auto lp = opt_int(b, "logprobs")) {
        TS_CHECK(*lp >= 0 && *lp <= 20, "'logprobs' must be in [0, 20], got {}", *lp);
        r.gen.params.logprobs = int(*lp);
    }
    if (auto e = opt_bool(b, "echo")) TS_CHECK(!*e, "'echo' is not supported");
    TS_CHECK(!field(b, "suffix"), "'suffix' is not supported");

    const ojson* p = field(b, "prompt");
    TS_CHECK(p, "'prompt' is required");
    ojson prompt = *p;
    // A batch of one is the same as its element.
    if (prompt.is_array() && prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) prompt = prompt[0];
    if (prompt.is_string()) {
        r.prompt_text = prompt.get<std::string>();
        TS_CHECK(!r.prompt_text.empty(), "'prompt' must not be empty");
    } else {
        TS_CHECK(prompt.is_array(), "'prompt' must be a string or an array of token ids");
        for (const auto& x : prompt)
            TS_CHECK(!x.is_string() && !x.is_array(), "'prompt': batched prompts are not supported (one prompt per request)");
        r.prompt_tokens = token_list(prompt, "prompt");
        TS_CHECK(!r.prompt_tokens.empty(), "'prompt' must not be empty");
        r.prompt_is_tokens = true;
    }
    return r;
}

ChatRequest parse_chat_request(const ojson& b) {
    ChatRequest r;
    r.gen = parse_common(b);
    set_max_tokens(r.gen, opt_int(b, "max_tokens"), "max_tokens");
    set_max_tokens(r.gen, opt_int(b, "max_completion_tokens"), "max_completion_tokens");
    const bool logprobs = opt_bool(b, "logprobs").value_or(false);
    if (auto top = opt_int(b, "top_logprobs")) {
        TS_CHECK(*top >= 0 && *top <= 20, "'top_logprobs' must be in [0, 20], got {}", *top);
        TS_CHECK(logprobs || *top == 0, "'top_logprobs' needs 'logprobs': true");
        r.gen.params.logprobs = int(*top);
    }
    if (logprobs && r.gen.params.logprobs < 0) r.gen.params.logprobs = 0;

    const ojson* m = field(b, "messages");
    TS_CHECK(m, "'messages' is required");
    r.messages = normalize_messages(*m);
    r.tools = parse_tools(b);
    bool tool_choice_none = false;
    if (const ojson* tc = field(b, "tool_choice")) {
        TS_CHECK(tc->is_string(), "'tool_choice': only \"auto\" and \"none\" are supported");
        const std::string s = tc->get<std::string>();
        TS_CHECK(s == "auto" || s == "none", "'tool_choice' = \"{}\" is not supported (\"auto\" or \"none\")", s);
        tool_choice_none = s == "none";
    }
    r.parse_tool_calls = !r.tools.is_null() && !tool_choice_none;
    if (const ojson* rf = field(b, "response_format")) {
        TS_CHECK(rf->is_object(), "'response_format' must be an object");
        const std::string type = rf->value("type", std::string("text"));
        TS_CHECK(type == "text", "'response_format' of type '{}' is not supported (text only)", type);
    }
    r.template_kwargs = ojson::object();
    if (const ojson* k = field(b, "chat_template_kwargs")) {
        TS_CHECK(k->is_object(), "'chat_template_kwargs' must be an object");
        r.template_kwargs = *k;
    }
    return r;
}

}  // namespace tessera::server
