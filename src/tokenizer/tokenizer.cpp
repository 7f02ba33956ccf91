// Tokenizer: indexing the parts, encode / decode, and the streaming detokenizer.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/status.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_parts.h"
#include "tokenizer/unicode.h"

namespace tessera {

namespace {
constexpr int64_t kMaxVocab = int64_t{1} << 24;
}

Tokenizer::Tokenizer(std::unique_ptr<Parts> p) : p_(std::move(p)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_parts(Parts parts) {
    auto p = std::make_unique<Parts>(std::move(parts));
    const std::string& src = p->source;
    int64_t n = 0;
    for (const auto& [text, id] : p->vocab) {
        TS_CHECK(id >= 0 && id < kMaxVocab, "{}: token '{}' has id {} outside [0, {})", src, text, id, kMaxVocab);
        n = std::max<int64_t>(n, id + 1);
    }
    for (const auto& [text, id] : p->inert) {
        TS_CHECK(id >= 0 && id < kMaxVocab, "{}: token '{}' has id {} outside [0, {})", src, text, id, kMaxVocab);
        n = std::max<int64_t>(n, id + 1);
    }
    for (const auto& t : p->added) {
        TS_CHECK(t.id >= 0 && t.id < kMaxVocab, "{}: added token '{}' has id {} outside [0, {})", src, t.content,
                 t.id, kMaxVocab);
        n = std::max<int64_t>(n, t.id + 1);
    }
    TS_CHECK(n > 0, "{}: the vocabulary is empty", src);
    // Real vocabularies are dense; a hostile file must not make us allocate for ids it lacks.
    const int64_t count = static_cast<int64_t>(p->vocab.size() + p->inert.size() + p->added.size());
    TS_CHECK(n <= 2 * count + 1024, "{}: token ids run up to {} for only {} tokens", src, n - 1, count);
    p->texts.assign(n, std::string());
    p->pieces.assign(n, std::string());
    p->special.assign(n, 0);
    p->ids.reserve(p->vocab.size() + p->added.size());
    for (const auto& [text, id] : p->inert) {
        p->texts[id] = text;
        if (!tok::byte_level_decode(text, &p->pieces[id])) p->pieces[id] = text;
    }
    for (const auto& [text, id] : p->vocab) {
        p->texts[id] = text;
        if (!tok::byte_level_decode(text, &p->pieces[id])) p->pieces[id] = text;  // as HF's decoder does
        p->ids[text] = id;
    }
    std::vector<tok::AddedToken> raw, normalized;
    for (auto t : p->added) {
        p->texts[t.id] = t.content;
        p->pieces[t.id] = t.content;
        p->special[t.id] = t.special;
        p->ids[t.content] = t.id;
        if (t.normalized) {
            if (p->nfc) t.content = tok::nfc_utf8(t.content);
            normalized.push_back(std::move(t));
        } else {
            raw.push_back(std::move(t));
        }
    }
    p->raw_matcher.build(raw);
    p->normalized_matcher.build(normalized);
    p->bpe.build(p->vocab, p->merges, p->ignore_merges);
    // vocab and inert live on in texts/pieces; merges stay for exporters (tokenizer_export.cpp).
    p->vocab.clear(), p->vocab.shrink_to_fit();
    p->inert.clear(), p->inert.shrink_to_fit();
    auto check = [&](std::optional<int32_t> id, const char* what) {
        TS_CHECK(!id || (*id >= 0 && *id < n), "{}: {} id {} outside the vocabulary [0, {})", src, what, *id, n);
    };
    check(p->bos, "BOS"), check(p->eos, "EOS"), check(p->pad, "padding");
    for (int32_t id : p->prefix_ids) check(id, "template");
    for (int32_t id : p->suffix_ids) check(id, "template");
    for (int32_t id : p->extra_eos) check(id, "EOS");
    return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(p)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    if (add_special) out = p_->prefix_ids;
    auto encode_plain = [&](std::string_view s) {
        for (const auto& piece : p_->pre.split(tok::utf8_to_cpts(s))) p_->bpe.encode(tok::cpts_to_utf8(piece), out);
    };
    for (const auto& seg : p_->raw_matcher.split(text, parse_special)) {
        if (seg.id >= 0) {
            out.push_back(seg.id);
            continue;
        }
        const std::string_view raw = text.substr(seg.begin, seg.end - seg.begin);
        const std::string norm = p_->nfc ? tok::nfc_utf8(raw) : std::string(raw);
        if (p_->normalized_matcher.empty()) {
            encode_plain(norm);
            continue;
        }
        for (const auto& seg2 : p_->normalized_matcher.split(norm, parse_special)) {
            if (seg2.id >= 0) out.push_back(seg2.id);
            else encode_plain(std::string_view(norm).substr(seg2.begin, seg2.end - seg2.begin));
        }
    }
    if (add_special) out.insert(out.end(), p_->suffix_ids.begin(), p_->suffix_ids.end());
    return out;
}

void Tokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= vocab_size())
        fail(ErrorKind::Invalid, "token id {} outside the vocabulary [0, {})", id, vocab_size());
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    std::string out;
    for (int32_t id : ids) {
        if (skip_special && is_special(id)) continue;
        out += token_to_piece(id);
    }
    return out;
}

const std::string& Tokenizer::token_to_piece(int32_t id) const {
    static const std::string kNone;
    if (id < 0) fail(ErrorKind::Invalid, "negative token id {}", id);
    return id < vocab_size() ? p_->pieces[id] : kNone;
}

const std::string& Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return p_->texts[id];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(p_->texts.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return p_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return p_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return p_->pad; }
const std::string& Tokenizer::chat_template() const { return p_->chat_template; }

std::vector<int32_t> Tokenizer::eos_ids() const {
    std::vector<int32_t> ids;
    if (p_->eos) ids.push_back(*p_->eos);
    for (int32_t id : p_->extra_eos)
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    return ids;
}

int32_t Tokenizer::token_id(std::string_view text) const {
    auto it = p_->ids.find(std::string(text));
    return it == p_->ids.end() ? -1 : it->second;
}

bool Tokenizer::is_special(int32_t id) const {
    return id >= 0 && id < vocab_size() && p_->special[id];
}

// ---- streaming detokenization ------------------------------------------------------------

namespace {
// How a UTF-8 sequence at s[i] ends: its length when complete and valid; 0 when the bytes are a
// valid but unfinished prefix reaching the end of s; -n for an invalid maximal subpart of n bytes.
int classify_utf8(std::string_view s, size_t i) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) need = 1;
    else if (b0 >= 0xE0 && b0 <= 0xEF) need = 2, lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    else if (b0 >= 0xF0 && b0 <= 0xF4) need = 3, lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    else return -1;
    for (int k = 1; k <= need; ++k) {
        if (i + k >= s.size()) return 0;
        const auto b = static_cast<uint8_t>(s[i + k]);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) return -k;
    }
    return need + 1;
}
}  // namespace

std::string StreamDecoder::drain(bool final) {
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        const int r = classify_utf8(pending_, i);
        if (r > 0) {
            out.append(pending_, i, r);
            i += r;
        } else if (r == 0 && !final) {
            break;  // wait for the rest of the character
        } else {
            out += "\xEF\xBF\xBD";  // U+FFFD
            i += r == 0 ? pending_.size() - i : static_cast<size_t>(-r);
        }
    }
    pending_.erase(0, i);
    return out;
}

std::string StreamDecoder::push(int32_t id) {
    if (skip_special_ && tok_.is_special(id)) return {};
    pending_ += tok_.token_to_piece(id);
    return drain(false);
}

std::string StreamDecoder::flush() { return drain(true); }

}  // namespace tessera
