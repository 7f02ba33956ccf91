// `tessera tokenize`: text -> token ids, or (--render) a chat-template rendering.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "core/status.h"
#include "render.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

namespace tessera::cli {
namespace {
std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail(ErrorKind::Io, "{}: cannot open", path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

int run_tokenize(const Args& args) {
    if (args.flag("render")) return run_render(args);
    const int inputs = args.has("text") + args.has("file") + args.has("batch");
    TS_CHECK(inputs == 1, "tokenize: give exactly one of --text TEXT, --file FILE or --batch FILE");
    std::vector<std::string> texts;
    if (args.has("batch")) {
        const std::string path = args.get("batch");
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(read_bytes(path));
        } catch (const nlohmann::json::exception& e) {
            fail(ErrorKind::Invalid, "{}: invalid JSON: {}", path, e.what());
        }
        TS_CHECK(j.is_array(), "{}: expected a JSON list of strings", path);
        for (const auto& s : j) {
            TS_CHECK(s.is_string(), "{}: expected a JSON list of strings", path);
            texts.push_back(s.get<std::string>());
        }
    } else {
        texts.push_back(args.has("text") ? args.get("text") : read_bytes(args.get("file")));
    }
    const auto tok = load_tokenizer(args.model_path(false));
    const bool special = args.flag("special");
    std::string out;
    for (const std::string& text : texts) {
        const std::vector<int32_t> ids = tok->encode(text, special, special);
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i) out += ' ';
            out += std::to_string(ids[i]);
        }
        out += '\n';
    }
    std::cout << out;
    return 0;
}
}  // namespace

TESSERA_VERB("tokenize", "text to token ids, or render a chat template (--render)",
             {{"model", true, "model dir/.gguf, or a folder with tokenizer.json + tokenizer_config.json"},
              {"text", true, "text to tokenize"},
              {"file", true, "file whose bytes are tokenized"},
              {"batch", true, "JSON file with a list of strings: one line of ids per string"},
              {"special", false, "add BOS/EOS as the tokenizer config says, and turn special-token text "
                                 "(e.g. <|im_start|>) into its id; without it special tokens are plain text"},
              {"messages", true, "OpenAI-style messages JSON file (with --render)"},
              {"tools", true, "tools JSON file (with --render)"},
              {"add-generation-prompt", false, "end with the assistant prompt (with --render)"},
              {"template-kwargs", true, "extra template variables as a JSON object (with --render)"},
              {"chat-template", true, "a Jinja chat template file overriding the model's"},
              {"render", false, "print the chat-template rendering of --messages"}},
             run_tokenize);
}  // namespace tessera::cli
