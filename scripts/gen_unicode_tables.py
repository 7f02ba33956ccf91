#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_tables.cpp and unicode_tables_nfc.cpp from Unicode data.

Tables: general-category ranges (L M N P S Z, the rest is "other"), simple case folding (for
`(?i:...)` in pre-tokenizer patterns) and what NFC needs (canonical combining classes, full
canonical decompositions, primary composites). Run: python3 scripts/gen_unicode_tables.py
"""
import os
import sys
import unicodedata

# General categories follow the regex engine of Hugging Face tokenizers (Oniguruma, Unicode 16.0):
# `pip install unicodedata2==16.0.0`. NFC data and case folding come from Python's own unicodedata.
try:
    import unicodedata2 as ucd_categories
except ImportError:
    sys.exit("gen_unicode_tables.py needs unicodedata2==16.0.0 (pip install unicodedata2==16.0.0)")
if ucd_categories.unidata_version != "16.0.0":
    sys.exit(f"need unicodedata2 16.0.0 (Oniguruma's Unicode version), found {ucd_categories.unidata_version}")

MAX_CP = 0x110000

# Hugging Face tokenizers' NFC (the unicode-normalization-alignments crate) carries Unicode 9-era
# data: these marks, given a combining class later, are starters to it, and it never decomposes
# U+11938. Found by comparing tokenizers.normalizers.NFC with unicodedata over every code point
# (tests/python/test_tokenizer.py checks the match); NFC here follows the reference tokenizer.
HF_NFC_STARTERS = {
    0x7FD, 0x898, 0x899, 0x89A, 0x89B, 0x89C, 0x89D, 0x89E, 0x89F, 0x8CA, 0x8CB, 0x8CC, 0x8CD, 0x8CE,
    0x8CF, 0x8D0, 0x8D1, 0x8D2, 0x8D3, 0x9FE, 0xC3C, 0xD3B, 0xD3C, 0xEBA, 0x1715, 0x1ABF, 0x1AC0,
    0x1AC1, 0x1AC2, 0x1AC3, 0x1AC4, 0x1AC5, 0x1AC6, 0x1AC7, 0x1AC8, 0x1AC9, 0x1ACA, 0x1ACB, 0x1ACC,
    0x1ACD, 0x1ACE, 0x1DF6, 0x1DF7, 0x1DF8, 0x1DF9, 0x1DFA, 0xA82C, 0x10D24, 0x10D25, 0x10D26,
    0x10D27, 0x10EAB, 0x10EAC, 0x10F46, 0x10F47, 0x10F48, 0x10F49, 0x10F4A, 0x10F4B, 0x10F4C,
    0x10F4D, 0x10F4E, 0x10F4F, 0x10F50, 0x10F82, 0x10F83, 0x10F84, 0x10F85, 0x11070, 0x1133B,
    0x1145E, 0x11839, 0x1183A, 0x1193D, 0x1193E, 0x11943, 0x119E0, 0x11A34, 0x11A47, 0x11A99,
    0x11D42, 0x11D44, 0x11D45, 0x11D97, 0x16FF0, 0x16FF1, 0x1E130, 0x1E131, 0x1E132, 0x1E133,
    0x1E134, 0x1E135, 0x1E136, 0x1E2AE, 0x1E2EC, 0x1E2ED, 0x1E2EE, 0x1E2EF,
}
HF_NFC_NO_DECOMPOSITION = {0x11938}
SRC = os.path.join(os.path.dirname(__file__), "..", "src", "tokenizer")
# General categories, numbered as tessera::tok::GeneralCategory (0: Cn, unassigned).
GC = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
      "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]
CATS = {g: i for i, g in enumerate(GC)}


def is_surrogate(cp):
    return 0xD800 <= cp <= 0xDFFF


def category_ranges():
    ranges, cur = [], None
    for cp in range(MAX_CP):
        c = CATS[ucd_categories.category(chr(cp))]
        if cur and cur[2] == c and cur[1] == cp - 1:
            cur[1] = cp
        else:
            if cur and cur[2] != 0:
                ranges.append(tuple(cur))
            cur = [cp, cp, c]
    if cur and cur[2] != 0:
        ranges.append(tuple(cur))
    return ranges


def case_fold():
    pairs = []
    for cp in range(MAX_CP):
        if is_surrogate(cp):
            continue
        f = chr(cp).casefold()
        if len(f) == 1 and ord(f) != cp:
            pairs.append((cp, ord(f)))
    return pairs


def ccc_ranges():
    ranges, cur = [], None
    for cp in range(MAX_CP):
        c = 0 if cp in HF_NFC_STARTERS else unicodedata.combining(chr(cp))
        if cur and cur[2] == c and cur[1] == cp - 1:
            cur[1] = cp
        else:
            if cur and cur[2] != 0:
                ranges.append(tuple(cur))
            cur = [cp, cp, c]
    if cur and cur[2] != 0:
        ranges.append(tuple(cur))
    return ranges


def raw_canonical(cp):
    if cp in HF_NFC_NO_DECOMPOSITION:
        return None
    d = unicodedata.decomposition(chr(cp))
    if not d or d.startswith("<"):
        return None
    return [int(x, 16) for x in d.split()]


def full_decomp(cp):
    d = raw_canonical(cp)
    if d is None:
        return [cp]
    out = []
    for x in d:
        out.extend(full_decomp(x))
    return out


def decompositions():
    table = []
    for cp in range(MAX_CP):
        if is_surrogate(cp) or 0xAC00 <= cp <= 0xD7A3:  # Hangul syllables are algorithmic
            continue
        if raw_canonical(cp) is not None:
            full = full_decomp(cp)
            table.append((cp, full))
    return table


def compositions():
    pairs = []
    for cp in range(MAX_CP):
        if is_surrogate(cp) or 0xAC00 <= cp <= 0xD7A3:
            continue
        d = raw_canonical(cp)
        if d is None or len(d) != 2:
            continue
        # Primary composite: not excluded, i.e. NFC keeps it composed.
        if unicodedata.normalize("NFC", chr(cp)) == chr(cp) and unicodedata.combining(chr(d[0])) == 0 \
                and d[0] not in HF_NFC_STARTERS:
            pairs.append((d[0], d[1], cp))
    pairs.sort()
    return pairs


def main():
    cats = category_ranges()
    folds = case_fold()
    cccs = ccc_ranges()
    decs = decompositions()
    comps = compositions()
    flat, index = [], []
    for cp, full in decs:
        index.append((cp, len(flat), len(full)))
        flat.extend(full)
    header = ("// Generated by scripts/gen_unicode_tables.py: categories from unicodedata2 "
              f"(Unicode {ucd_categories.unidata_version}), the rest from Python's unicodedata "
              f"(Unicode {unicodedata.unidata_version}). Do not edit.")

    def emit(L, name, typ, rows, per_line):
        L.append(f"const {typ} {name}[] = {{")
        for i in range(0, len(rows), per_line):
            L.append("    " + " ".join(r + "," for r in rows[i:i + per_line]))
        L.append("};")
        L.append(f"const size_t {name}Count = sizeof({name}) / sizeof({name}[0]);")

    def write(fname, body):
        L = [header, '#include "tokenizer/unicode_tables.h"', "", "namespace tessera::tok::tables {"]
        body(L)
        L.append("}  // namespace tessera::tok::tables")
        with open(os.path.join(SRC, fname), "w") as f:
            f.write("\n".join(L) + "\n")

    def classes(L):
        L.append(f'const char* const kUnicodeVersion = "{ucd_categories.unidata_version}";')
        emit(L, "kCategoryRanges", "CategoryRange", [f"{{0x{a:X}, 0x{b:X}, {c}}}" for a, b, c in cats], 8)
        emit(L, "kCaseFold", "CodepointPair", [f"{{0x{a:X}, 0x{b:X}}}" for a, b in folds], 10)

    def nfc(L):
        emit(L, "kCombiningClass", "CategoryRange", [f"{{0x{a:X}, 0x{b:X}, {c}}}" for a, b, c in cccs], 8)
        emit(L, "kDecompIndex", "DecompEntry", [f"{{0x{a:X}, {o}, {n}}}" for a, o, n in index], 8)
        emit(L, "kDecompData", "uint32_t", [f"0x{x:X}" for x in flat], 16)
        emit(L, "kCompositions", "CompositionEntry", [f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}}" for a, b, c in comps], 6)

    write("unicode_tables.cpp", classes)
    write("unicode_tables_nfc.cpp", nfc)
    print(f"{len(cats)} category ranges, {len(folds)} folds, {len(cccs)} ccc ranges, "
          f"{len(decs)} decompositions, {len(comps)} compositions", file=sys.stderr)


if __name__ == "__main__":
    main()
