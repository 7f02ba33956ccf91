// GPT-2's reversible byte <-> printable-code-point map: byte-level vocabularies store token
// bytes as these code points (space is 'Ġ', newline 'Ċ').
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::tok {

char32_t byte_to_unicode(uint8_t b);
// The byte a byte-level code point stands for, or -1.
int unicode_to_byte(char32_t cp);
std::string byte_level_encode(std::string_view bytes);  // raw bytes -> UTF-8 of mapped code points
// Byte-level token text -> raw bytes; false (out untouched) if it holds a code point outside
// the map or invalid UTF-8.
bool byte_level_decode(std::string_view token, std::string* out);

}  // namespace tessera::tok
