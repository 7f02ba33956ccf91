// BPE merging over a linked list of symbols with a min-heap of candidate merges: O(n log n)
// per piece, so a long run of one character stays fast.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "tokenizer/byte_level.h"

namespace tessera::tok {

void BpeModel::build(const std::vector<std::pair<std::string, int32_t>>& vocab,
                     const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges) {
    ignore_merges_ = ignore_merges;
    std::fill(std::begin(byte_id_), std::end(byte_id_), -1);
    vocab_.clear();
    vocab_.reserve(vocab.size());
    std::string bytes;
    for (const auto& [text, id] : vocab) {
        if (!byte_level_decode(text, &bytes) || bytes.empty()) continue;
        vocab_[bytes] = id;
        if (bytes.size() == 1) byte_id_[static_cast<uint8_t>(bytes[0])] = id;
    }
    merges_.clear();
    merges_.reserve(merges.size());
    std::string a, b;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [left, right] = merges[rank];
        if (!byte_level_decode(left, &a) || !byte_level_decode(right, &b)) {
            ++skipped_merges_;
            continue;
        }
        auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
        if (ia == vocab_.end() || ib == vocab_.end() || ic == vocab_.end()) {
            ++skipped_merges_;
            continue;
        }
        merges_[key(ia->second, ib->second)] = {static_cast<int32_t>(rank), ic->second};
    }
}

void BpeModel::encode(std::string_view bytes, std::vector<int32_t>& out) const {
    if (bytes.empty()) return;
    if (ignore_merges_) {
        auto it = vocab_.find(std::string(bytes));
        if (it != vocab_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    struct Symbol { int32_t id; int32_t prev, next; bool alive; };
    std::vector<Symbol> sym;
    sym.reserve(bytes.size());
    for (unsigned char c : bytes) {
        const int32_t id = byte_id_[c];
        if (id < 0) continue;
        const auto n = static_cast<int32_t>(sym.size());
        sym.push_back({id, n - 1, n + 1, true});
    }
    if (sym.empty()) return;
    sym.back().next = -1;
    if (sym.size() == 1) {
        out.push_back(sym[0].id);
        return;
    }
    struct Cand { int32_t rank, pos, new_id; };
    auto worse = [](const Cand& x, const Cand& y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
    auto consider = [&](int32_t pos) {
        if (pos < 0 || sym[pos].next < 0) return;
        auto it = merges_.find(key(sym[pos].id, sym[sym[pos].next].id));
        if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.new_id});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
    while (!heap.empty()) {
        const Cand c = heap.top();
        heap.pop();
        Symbol& s = sym[c.pos];
        if (!s.alive || s.next < 0) continue;
        // Stale entry: the pair at this position changed since it was queued.
        auto it = merges_.find(key(s.id, sym[s.next].id));
        if (it == merges_.end() || it->second.new_id != c.new_id) continue;
        Symbol& right = sym[s.next];
        s.id = c.new_id;
        right.alive = false;
        s.next = right.next;
        if (s.next >= 0) sym[s.next].prev = c.pos;
        consider(s.prev);
        consider(c.pos);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace tessera::tok
