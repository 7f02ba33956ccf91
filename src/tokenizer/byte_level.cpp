// The GPT-2 bytes_to_unicode table: printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100 onwards in byte order.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace tessera::tok {
namespace {
struct Tables {
    std::array<char32_t, 256> to_cp{};
    std::array<int16_t, 324> to_byte{};  // code points < 0x144
    Tables() {
        to_byte.fill(-1);
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
            to_byte[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};
const Tables kTables;
}  // namespace

char32_t byte_to_unicode(uint8_t b) { return kTables.to_cp[b]; }

int unicode_to_byte(char32_t cp) { return cp < kTables.to_byte.size() ? kTables.to_byte[cp] : -1; }

std::string byte_level_encode(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) append_utf8(out, byte_to_unicode(b));
    return out;
}

bool byte_level_decode(std::string_view token, std::string* out) {
    std::string bytes;
    bytes.reserve(token.size());
    for (size_t i = 0; i < token.size();) {
        char32_t cp;
        const size_t len = utf8_decode_one(token, i, &cp);
        if (len == 0) return false;
        const int b = unicode_to_byte(cp);
        if (b < 0) return false;
        bytes.push_back(static_cast<char>(b));
        i += len;
    }
    *out = std::move(bytes);
    return true;
}

}  // namespace tessera::tok
