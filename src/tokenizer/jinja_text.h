// UTF-8 string helpers with Python str semantics (code-point indexing, Unicode whitespace,
// case mapping) for the Jinja interpreter.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::jinja::text {

// Decodes UTF-8 leniently: an invalid byte becomes U+FFFD, never an error.
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t cp);
bool is_ascii(std::string_view s);
size_t length(std::string_view s);  // in code points

bool is_space(char32_t c);  // Python str.isspace
bool is_printable(char32_t c);  // approximates Python str.isprintable (used by repr)
char32_t to_lower(char32_t c);
char32_t to_upper(char32_t c);
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
bool is_cased_upper(char32_t c);
bool is_cased_lower(char32_t c);

std::string lower(std::string_view s);
std::string upper(std::string_view s);
std::string title(std::string_view s);       // Python str.title
std::string capitalize(std::string_view s);  // Python str.capitalize
std::string swapcase(std::string_view s);

// Python strip family; chars == nullptr strips whitespace, else any code point in *chars.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);

// Python str.split(sep, maxsplit): sep == nullptr splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
int64_t count(std::string_view s, std::string_view sub);

// Code-point index of sub in s at or after code-point start, or -1 (rfind: last occurrence).
int64_t find(std::string_view s, std::string_view sub, bool reverse);

}  // namespace tessera::jinja::text
