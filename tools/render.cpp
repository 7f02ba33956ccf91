// Placeholder until the chat-template interpreter lands (src/tokenizer/chat_template.*).
#include "render.h"

#include "core/status.h"

namespace tessera::cli {
int run_render(const Args&) { fail(ErrorKind::Unsupported, "chat-template rendering is not built yet"); }
}  // namespace tessera::cli
