// `tessera tokenize`: text -> token ids, or (--render) a chat-template rendering.
#include "cli.h"
#include "core/status.h"
#include "render.h"

namespace tessera::cli {
namespace {
int run_tokenize(const Args& args) {
    if (args.flag("render")) return run_render(args);
    fail(ErrorKind::Unsupported, "tokenization is not built yet");
}
}  // namespace

TESSERA_VERB("tokenize", "text to token ids, or render a chat template (--render)",
             {{"model", true, "model dir/.gguf, or a folder with tokenizer.json + tokenizer_config.json"},
              {"text", true, "text to tokenize"},
              {"file", true, "file whose bytes are tokenized"},
              {"special", false, "add BOS/special tokens as the model's tokenizer config says, and parse special tokens"},
              {"messages", true, "OpenAI-style messages JSON file (with --render)"},
              {"tools", true, "tools JSON file (with --render)"},
              {"add-generation-prompt", false, "end with the assistant prompt (with --render)"},
              {"template-kwargs", true, "extra template variables as a JSON object (with --render)"},
              {"chat-template", true, "a Jinja chat template file overriding the model's"},
              {"render", false, "print the chat-template rendering of --messages"}},
             run_tokenize);
}  // namespace tessera::cli
