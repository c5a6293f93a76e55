#!/usr/bin/env python3
"""Unicode tables of the `hf` normalization profile, probed from Hugging Face `tokenizers`.

Writes lib/text/unicode_tables.inc (C data included by lib/text/unicode.c only; layout in
lib/text/unicode.h).

Hugging Face's BertNormalizer and BertPreTokenizer classify characters with tables of
several Unicode versions at once (Unicode 9.0 for punctuation, control, Mn and NFD; the
Rust standard library of the wheel's build for lowercase and whitespace; a typo in one CJK
range). Rather than rebuild that mix from UnicodeData files, this script asks the installed
`tokenizers` package about every code point, one at a time:

  BertNormalizer(clean_text, handle_chinese_chars, strip_accents=S, lowercase=L)
      for the four (L, S) combinations: what one character becomes
  Sequence([BertNormalizer(no strip, no lowercase), NFD()])
      the full canonical decomposition (for the reordering slow path)
  BertPreTokenizer on "a" + c + "a"
      whether c is whitespace, punctuation, or part of a word
  NFD() on c + U+0334 (or U+0301 + c)
      whether Unicode 9.0 NFD reorders c, i.e. whether its combining class is non-zero

Everything a single character does is then exact. The only effect that spans characters is
canonical reordering inside NFD; lib/text/unicode.c reproduces it with the combining classes
written here (the values themselves come from Python's unicodedata, which agrees with any
later Unicode version because combining classes never change once assigned).

Run from the repository root with the pinned package (see tests/fixtures/tokenize/VERSIONS):
    python3 tests/reference/make_unicode_tables.py
"""
import os
import sys
import unicodedata

import tokenizers
from tokenizers import normalizers, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "lib", "text", "unicode_tables.inc")

F_WS, F_PUNCT, F_ISOLATE, F_DELETE, F_HANGUL, F_KEEPCCC, F_MN = 1, 2, 4, 8, 16, 32, 64
BLOCK = 128
SBASE, LBASE, VBASE, TBASE, NV, NT = 0xAC00, 0x1100, 0x1161, 0x11A7, 21, 28


def hangul(cp):
    s = cp - SBASE
    out = chr(LBASE + s // (NV * NT)) + chr(VBASE + s % (NV * NT) // NT)
    if s % NT:
        out += chr(TBASE + s % NT)
    return out


def main():
    bert = {}
    for lower in (False, True):
        for strip in (False, True):
            bert[(lower, strip)] = normalizers.BertNormalizer(
                clean_text=True, handle_chinese_chars=True, strip_accents=strip, lowercase=lower)
    nfd_seq = normalizers.Sequence([bert[(False, False)], normalizers.NFD()])
    nfd = normalizers.NFD()
    pre = pre_tokenizers.BertPreTokenizer()
    modes = [(True, False), (False, True), (True, True)]  # map[0..2]; map[3] is full NFD

    pool = bytearray(b"\0")  # offset 0 means "the character itself"
    pool_index = {}

    def intern(s):
        b = s.encode("utf-8")
        if s in pool_index:
            return pool_index[s]
        assert len(b) < 256
        off = len(pool)
        pool.append(len(b))
        pool.extend(b)
        pool_index[s] = off
        return off

    entries, entry_index = [], {}
    ccc = []
    cps = [0] * 0x110000
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            cps[cp] = 0
            continue
        c = chr(cp)
        base = bert[(False, False)].normalize_str(c)
        flags = 0
        if base == "":
            flags |= F_DELETE
        elif base == " ":
            flags |= F_WS
        elif base == " " + c + " ":
            flags |= F_ISOLATE
        else:
            assert base == c, hex(cp)
        split = pre.pre_tokenize_str("a" + c + "a")
        if [s for s, _ in split] == ["a", "a"]:
            assert flags & (F_WS | F_DELETE), hex(cp)
        elif [s for s, _ in split] == ["a", c, "a"]:
            flags |= F_PUNCT
        maps = []
        is_hangul = SBASE <= cp < SBASE + 11172
        for m in modes:
            if is_hangul:
                out = bert[m].normalize_str(c)
                assert out == (c if m == (True, False) else hangul(cp)), hex(cp)
                maps.append(0)
                continue
            out = bert[m].normalize_str(c)
            if flags & (F_DELETE | F_WS):
                assert out == base, hex(cp)
                maps.append(0)
                continue
            if flags & F_ISOLATE:
                assert out.startswith(" ") and out.endswith(" ") and len(out) == 3, hex(cp)
                out = out[1:-1]
            maps.append(0 if out == c else intern(out))
        full = nfd_seq.normalize_str(c)
        if flags & F_ISOLATE:
            full = full[1:-1]
        if is_hangul:
            assert full == hangul(cp), hex(cp)
            flags |= F_HANGUL
            full = c
        maps.append(0 if (flags & (F_DELETE | F_WS)) or full == c else intern(full))
        if not flags & (F_DELETE | F_WS | F_ISOLATE) and full == c and \
                bert[(False, True)].normalize_str(c) == "":
            flags |= F_MN
        # Non-zero combining class as Unicode 9.0 NFD sees it.
        k = unicodedata.combining(c)
        if k and not flags & F_DELETE and nfd.normalize_str(c) == c:
            if k > 1:
                reordered = nfd.normalize_str(c + "\u0334") == "\u0334" + c
            else:
                reordered = nfd.normalize_str("\u0301" + c) == c + "\u0301"
            if reordered:
                ccc.append((cp, k))
        key = (flags, *maps)
        if key not in entry_index:
            entry_index[key] = len(entries)
            entries.append(key)
        cps[cp] = entry_index[key]

    # Characters whose decomposition keeps a character with a non-zero class after the Mn
    # filter: only these can be moved by canonical reordering in the strip modes.
    kept = {cp for cp, k in ccc if not entries[cps[cp]][0] & F_MN}
    for cp in range(0x110000):
        e = entries[cps[cp]]
        if e[0] & (F_DELETE | F_WS):
            continue
        full = chr(cp) if e[4] == 0 else pool[e[4] + 1:e[4] + 1 + pool[e[4]]].decode()
        if any(ord(d) in kept for d in full):
            key = (e[0] | F_KEEPCCC, *e[1:])
            if key not in entry_index:
                entry_index[key] = len(entries)
                entries.append(key)
            cps[cp] = entry_index[key]
    assert len(entries) < 65536 and len(pool) < 65536

    blocks, block_index, stage1 = [], {}, []
    for b in range(0, 0x110000, BLOCK):
        blk = tuple(cps[b:b + BLOCK])
        if blk not in block_index:
            block_index[blk] = len(blocks)
            blocks.append(blk)
        stage1.append(block_index[blk])
    assert len(blocks) < 65536

    with open(OUT, "w") as f:
        f.write("/* Generated by tests/reference/make_unicode_tables.py from Hugging Face tokenizers "
                f"{tokenizers.__version__}\n * (probed per code point; see the script). Do not edit. */\n")
        f.write(f"/* UNI_BLOCK {BLOCK}, {len(entries)} entries, {len(ccc)} combining classes */\n")
        f.write(f"const size_t tupe_uni_nccc = {len(ccc)};\n\n")
        f.write(f"const uint16_t tupe_uni_stage1[{len(stage1)}] = {{\n")
        for i in range(0, len(stage1), 16):
            f.write(",".join(str(x) for x in stage1[i:i + 16]) + ",\n")
        f.write("};\n\n")
        flat = [x for blk in blocks for x in blk]
        f.write(f"const uint16_t tupe_uni_stage2[{len(flat)}] = {{\n")
        for i in range(0, len(flat), 24):
            f.write(",".join(str(x) for x in flat[i:i + 24]) + ",\n")
        f.write("};\n\n")
        f.write("/* flags, then pool offsets of: lowercase, strip, lowercase+strip, full NFD */\n")
        f.write(f"const tupe_uni_entry tupe_uni_entries[{len(entries)}] = {{\n")
        for i in range(0, len(entries), 4):
            f.write(" ".join("{%d,{%d,%d,%d,%d}}," % e for e in entries[i:i + 4]) + "\n")
        f.write("};\n\n")
        f.write(f"const uint8_t tupe_uni_pool[{len(pool)}] = {{\n")
        for i in range(0, len(pool), 24):
            f.write(",".join(str(x) for x in pool[i:i + 24]) + ",\n")
        f.write("};\n\n")
        f.write(f"const uint32_t tupe_uni_ccc_table[{len(ccc)}][2] = {{\n")
        for i in range(0, len(ccc), 8):
            f.write(" ".join("{0x%x,%d}," % x for x in ccc[i:i + 8]) + "\n")
        f.write("};\n")
    print(f"{OUT}: {len(entries)} entries, {len(blocks)} blocks, pool {len(pool)} bytes, "
          f"{len(ccc)} combining classes, {len(kept)} kept marks", file=sys.stderr)


if __name__ == "__main__":
    main()
