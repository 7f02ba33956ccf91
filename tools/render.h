// `tessera tokenize --render`: chat-template rendering of an OpenAI-style message list.
#pragma once
#include "cli.h"

namespace tessera::cli {
int run_render(const Args& args);
}
