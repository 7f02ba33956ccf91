// Jinja parser: tokens -> syntax tree, following jinja2's grammar and operator precedence.
#pragma once
#include <string_view>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lexer.h"

namespace tessera::jinja {

// Throws Error "chat template: line L col C: ..." on a syntax error.
Template parse(std::string_view source, const LexOptions& opt = {});

}  // namespace tessera::jinja
