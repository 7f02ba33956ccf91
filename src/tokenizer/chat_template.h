// Chat templates: load a model's Jinja chat template (tokenizer_config.json, chat_template.jinja
// or GGUF metadata) and render an OpenAI-style message list exactly as transformers'
// apply_chat_template(..., tokenize=False) does.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

struct ChatTemplateSource {
    std::string template_text;       // the default template
    std::string bos_token, eos_token;  // "" when the model has none
    // Named special tokens handed to the template as variables (bos_token, eos_token, unk_token,
    // sep_token, pad_token, cls_token, mask_token), only those the model defines.
    std::vector<std::pair<std::string, std::string>> special_tokens;
    // Named templates (tokenizer_config.json lists, GGUF tokenizer.chat_template.NAME); "tool_use"
    // replaces the default when tools are given, as in transformers.
    std::vector<std::pair<std::string, std::string>> named_templates;
};

// PATH: a folder (tokenizer_config.json and/or chat_template.jinja), a tokenizer_config.json, a
// .jinja file, a .gguf file, or another file of a checkpoint folder (then that folder is used). Throws Error(NotFound) when no chat template is found, unless
// require_template is false (the caller supplies its own template and wants the special tokens).
ChatTemplateSource load_chat_template(const std::string& path, bool require_template = true);

// Renders `messages` (a JSON array of message objects). tools: null when none. extra_kwargs: a JSON
// object of further template variables (e.g. {"enable_thinking": false}) or null.
// Use ordered_json so object keys keep their order (tool schemas are printed with tojson).
std::string render_chat(const ChatTemplateSource& src, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra_kwargs);
// Same with nlohmann::json (object keys sorted alphabetically by nlohmann::json itself).
std::string render_chat(const ChatTemplateSource& src, const nlohmann::json& messages, const nlohmann::json& tools,
                        bool add_generation_prompt, const nlohmann::json& extra_kwargs);

// Renders any Jinja template with the chat-template environment (tests, --chat-template files).
std::string render_jinja(const std::string& template_text, const nlohmann::ordered_json& context);

}  // namespace tessera
