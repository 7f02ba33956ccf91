// Jinja lexer: template source -> tokens, with transformers' whitespace settings
// (trim_blocks, lstrip_blocks, keep_trailing_newline=False) and {%- -%} / {%+ control.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::jinja {

enum class Tok : uint8_t { Data, BlockBegin, BlockEnd, VarBegin, VarEnd, Name, String, Int, Float, Op, Eof };

struct Token {
    Tok type;
    std::string value;  // data text, name, unescaped string, number text, operator
    int line = 1, col = 1;
};

struct LexOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
};

// Throws Error "chat template: line L col C: ..." on malformed input.
std::vector<Token> tokenize(std::string_view source, const LexOptions& opt = {});

// "chat template: line L col C: msg"
[[noreturn]] void fail_at(int line, int col, const std::string& msg);

}  // namespace tessera::jinja
