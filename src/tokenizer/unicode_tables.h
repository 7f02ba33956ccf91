// Generated Unicode data (scripts/gen_unicode_tables.py -> unicode_tables.cpp), sorted by code point.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tessera::tok::tables {

struct CategoryRange { uint32_t lo, hi, value; };   // inclusive [lo, hi]
struct CodepointPair { uint32_t from, to; };
struct DecompEntry { uint32_t cp, offset, count; };  // full canonical decomposition in kDecompData
struct CompositionEntry { uint32_t first, second, composite; };  // sorted by (first, second)

extern const char* const kUnicodeVersion;
// value: GeneralCategory (unicode.h); code points in no range are Cn
extern const CategoryRange kCategoryRanges[];
extern const size_t kCategoryRangesCount;
extern const CodepointPair kCaseFold[];          // simple case folding
extern const size_t kCaseFoldCount;
extern const CategoryRange kCombiningClass[];    // value: canonical combining class (non-zero only)
extern const size_t kCombiningClassCount;
extern const DecompEntry kDecompIndex[];
extern const size_t kDecompIndexCount;
extern const uint32_t kDecompData[];
extern const size_t kDecompDataCount;
extern const CompositionEntry kCompositions[];
extern const size_t kCompositionsCount;

}  // namespace tessera::tok::tables
