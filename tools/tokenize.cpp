// `tessera tokenize`: text -> token ids, or (--render) a chat-template rendering.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "core/status.h"
#include "render.h"
#include "tokenizer/tokenizer.h"

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
    TS_CHECK(args.has("text") != args.has("file"), "tokenize: give exactly one of --text TEXT or --file FILE");
    const std::string text = args.has("text") ? args.get("text") : read_bytes(args.get("file"));
    const auto tok = load_tokenizer(args.model_path(false));
    const bool special = args.flag("special");
    const std::vector<int32_t> ids = tok->encode(text, special, special);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
    }
    std::cout << line << '\n';
    return 0;
}
}  // namespace

TESSERA_VERB("tokenize", "text to token ids, or render a chat template (--render)",
             {{"model", true, "model dir/.gguf, or a folder with tokenizer.json + tokenizer_config.json"},
              {"text", true, "text to tokenize"},
              {"file", true, "file whose bytes are tokenized"},
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
