#!/usr/bin/env python3
"""Fixtures for tupe-tokenize, made by the independent references:

  Hugging Face `tokenizers` (PyPI; version in tests/fixtures/tokenize/VERSIONS):
    corpus.md5      ids of 4 slices of ../shared/data/corpus/debian-104m.txt.zst (lines listed
                    in corpus.slices), one line of ids per input line: the md5 of the whole
                    output and of every block of 1000 lines
    glue.md5        the same for every sentence column of every GLUE file in ../shared/data/glue
    edge.txt.zst    hand-picked and random hard cases, and every BMP character (input, UTF-8)
    edge.*.ids.zst  their ids, one line per input line, for: default (uncased, no special
                    matching), match (literal specials matched, BertWordPieceTokenizer as is),
                    cased (no lowercase, no accent stripping), lower-keep (lowercase, accents
                    kept), strip-cased (accents stripped, no lowercase)
    hf-train.vocab  WordPieceTrainer (via BertWordPieceTokenizer.train) on the first lines of
                    the corpus listed in train.slice: vocab_size 8000, min_frequency 2,
                    limit_alphabet 1000
  fastBPE (the PyPI source distribution's C++ program, compiled here with g++):
    bpe/codes       `fast learnbpe 2000` on the lowercased training slice of bpe.slice
    bpe/dict.txt    fairseq-style dictionary of the pieces in bpe.expected (count, then symbol)
    bpe.expected.zst  `fast applybpe` of the lowercased test slice of bpe.slice with bpe/codes

Lowercasing for the BPE fixtures is ASCII only (what `tr A-Z a-z` does), tabs and CRs become
spaces: fastBPE itself splits on spaces and newlines only.

Run from the repository root (needs network access for `pip download fastBPE`, g++, zstd):
    python3 -m pip install -r tests/reference/requirements.txt
    python3 tests/reference/make_tokenize_fixtures.py
"""
import hashlib
import os
import random
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter

import tokenizers
from tokenizers import BertWordPieceTokenizer, Tokenizer, models, normalizers, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("TUPE_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data"))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenize")
VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
CORPUS = os.path.join(DATA, "corpus", "debian-104m.txt.zst")
BLOCK = 1000

# (file, first data line is a header, 1-based sentence columns); the shell test uses the same
# table (tests/cli/tokenize-parity.sh).
GLUE = [
    ("CoLA/train.tsv", 0, [4]), ("CoLA/dev.tsv", 0, [4]), ("CoLA/test.tsv", 1, [2]),
    ("SST-2/train.tsv", 1, [1]), ("SST-2/dev.tsv", 1, [1]), ("SST-2/test.tsv", 1, [2]),
    ("MRPC/train.tsv", 1, [4, 5]), ("MRPC/dev.tsv", 1, [4, 5]), ("MRPC/test.tsv", 1, [4, 5]),
    ("STS-B/train.tsv", 1, [8, 9]), ("STS-B/dev.tsv", 1, [8, 9]), ("STS-B/test.tsv", 1, [8, 9]),
    ("RTE/train.tsv", 1, [2, 3]), ("RTE/dev.tsv", 1, [2, 3]), ("RTE/test.tsv", 1, [2, 3]),
    ("WNLI/train.tsv", 1, [2, 3]), ("WNLI/dev.tsv", 1, [2, 3]), ("WNLI/test.tsv", 1, [2, 3]),
    ("QNLI/dev.tsv", 1, [2, 3]), ("QNLI/test.tsv", 1, [2, 3]),
    ("diagnostic/diagnostic.tsv", 1, [2, 3]),
]


def bert(lowercase=True, strip=None, max_chars=100):
    """BERT uncased without added tokens: literal [SEP] in text is plain text."""
    t = Tokenizer(models.WordPiece.from_file(VOCAB, unk_token="[UNK]",
                                             max_input_chars_per_word=max_chars))
    t.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                              strip_accents=strip, lowercase=lowercase)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return t


def ids_text(tok, lines):
    out = []
    for i in range(0, len(lines), 10000):
        for enc in tok.encode_batch(lines[i:i + 10000], add_special_tokens=False):
            out.append(" ".join(map(str, enc.ids)) + "\n")
    return "".join(out)


def md5s(text):
    """md5 of the whole text, then of each block of BLOCK lines."""
    lines = text.splitlines(keepends=True)
    blocks = ["".join(lines[i:i + BLOCK]) for i in range(0, len(lines), BLOCK)]
    return [hashlib.md5(text.encode()).hexdigest()] + [hashlib.md5(b.encode()).hexdigest()
                                                        for b in blocks]


def lines_of(text):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def corpus_lines():
    raw = subprocess.run(["zstd", "-dc", CORPUS], check=True, capture_output=True).stdout
    return lines_of(raw.decode("utf-8"))


def slices(lines, starts, size):
    """Line ranges (1-based first line, count) of about `size` bytes from byte offsets."""
    out, off, i = [], 0, 0
    offsets = []
    for ln in lines:
        offsets.append(off)
        off += len(ln.encode()) + 1
    for s in starts:
        while i < len(lines) and offsets[i] < s:
            i += 1
        first, n, b = i, 0, 0
        while first + n < len(lines) and b < size:
            b += len(lines[first + n].encode()) + 1
            n += 1
        out.append((first + 1, n))
    return out


def edge_cases():
    e = [
        "ΟΔΟΣ οδος Σίσυφος ΣΊΣΥΦΟΣ",
        "private \ue000 use \U000f0000 \U0010fffd end",
        "cjk ext e \U0002b820\U0002b821 typo \U0002b920 \U0002b81f",
        "naïve café İstanbul \u212a kelvin Ångström",
        "soft\u00adhyphen zero\u200bwidth line\u2028separator para\u2029graph",
        "a" * 101, "b" * 100, "c" * 201, "é" * 101,
        "literal [SEP] and [CLS] and [MASK] and [PAD] and [UNK] [unused0]",
        "[SEP][SEP] x[CLS]y [SE P] [sep]",
        "dollar $5 caret ^ backtick ` pipe | tilde ~ plus + less < eq = gt >",
        "fullwidth （ ） ！ ＡＢＣ １２３",
        "new punct \u2e45 \u2e4f \u2e52 ok",
        "varia \u1fef ano teleia \u0387 question \u037e",
        "compat \uf900\uf901 \U0002f800 ideographs",
        "hangul 한국어 조선말 \u1100\u1161 jamo",
        "reorder a\u0316\u0301 a\u0301\u0316 q\u0323\u0307",
        "kept \U0001d16d\U0001d165 \U0001d165\U0001d16d x\U0001d165\u0301\U0001d16d",
        "adlam \U0001e900\U0001e944\U0001e94a \U0001e922",
        "glagolitic \U0001e000\U0001e001 newa \U00011442\U00011446",
        "tibetan \u0f73 \u0f75 \u0f81",
        "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flags 🇫🇷",
        "tab\there\tand  double  spaces",
        "controls \x01\x02\x7f\x1b[0m bell\x07",
        "nel\u0085next bom\ufeffmark nbsp\u00a0space ideographic\u3000space",
        "mongolian\u180evowel ogham\u1680space narrow\u202fnbsp math\u205fspace",
        "arabic العربية ـ tatweel فارسی",
        "devanagari हिन्दी क्षत्रिय thai ภาษาไทย",
        "decomposed e\u0301 o\u0308 n\u0303 vs composed é ö ñ",
        "ligature ﬁ ﬂ roman Ⅻ circled ① superscript ² fraction ½",
        "greek final ς and capital Σ at end ΑΣ",
        "turkish ı I İ i dotless",
        "german straße STRASSE ẞ",
        "armenian և cherokee Ꭰꭰ",
        "numbers 3.14159 1,000,000 -42 +7e10 0x1F",
        "urls https://example.com/a?b=c&d=e#f user@example.com",
        "code int main(void) { return 0; } // comment /* block */",
        "quotes “curly” ‘single’ «guillemets» „low“",
        "dashes – — ‐ ‒ ― hyphen-ated",
        "ellipsis … middot · bullet • dagger †",
        "math ∑∫∂√∞≠≤≥ ±×÷",
        "currency € £ ¥ ₹ ₿ ¢",
        "surrogate-like \U00010000 \U0001f600 \U000e0001 tags \U000e0041",
        "variation \ufe0f selector \u20e3 keycap 1\ufe0f\u20e3",
        "zwj\u200dzwnj\u200c lrm\u200e rlm\u200f",
        "",
        "   ",
        "x",
        "..." + "!" * 5 + "?",
        "unused chars \U00050000 \U0003134a \U0002ebe0",
        "korean compat ㄱㄴ halfwidth ﾊﾟ katakana カタカナ ひらがな",
        "vietnamese Tiếng Việt có dấu",
        "polish zażółć gęślą jaźń",
        "mixed ÀÉÎÕÜ àéîõü ÇçÑñ",
        "combining only \u0301\u0302 start",
        "long " + "antidisestablishmentarianism" * 4,
        "digits ٠١٢ ०१२ ๐๑๒ １２",
    ]
    # Random lines over a wide range of blocks, seeded: every script and symbol range in the
    # BMP and the supplementary planes gets exercised.
    rng = random.Random(20261129)
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x250, 0x52F), (0x530, 0x10FF), (0x1100, 0x11FF),
              (0x1200, 0x1FFF), (0x2000, 0x2BFF), (0x2C00, 0x2E7F), (0x2E80, 0x33FF),
              (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xABFF), (0xAC00, 0xD7FF),
              (0xE000, 0xF8FF), (0xF900, 0xFFFD), (0x10000, 0x1FFFF), (0x20000, 0x2FFFF),
              (0x30000, 0x3134F), (0xE0000, 0xE01EF), (0xF0000, 0xF00FF)]
    for _ in range(1500):
        n = rng.randint(1, 40)
        chars = []
        for _ in range(n):
            r = rng.random()
            if r < 0.35:
                chars.append(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ      .,;'-"))
            else:
                lo, hi = rng.choice(ranges)
                cp = rng.randint(lo, hi)
                if 0xD800 <= cp < 0xE000:
                    cp = 0x41
                chars.append(chr(cp))
        e.append("".join(chars).replace("\n", " ").replace("\r", " "))
    # Every character of the BMP once, 64 to a line (outside the surrogates and line breaks).
    bmp = [chr(c) for c in range(0x20, 0x10000) if not (0xD800 <= c < 0xE000)
           and c not in (0x0A, 0x0D, 0x85, 0x2028, 0x2029)]
    for i in range(0, len(bmp), 64):
        e.append("x" + "".join(bmp[i:i + 64]))
    return e


def build_fastbpe(tmp):
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    "fastBPE==0.1.0", "-d", tmp], check=True, capture_output=True)
    with tarfile.open(os.path.join(tmp, "fastBPE-0.1.0.tar.gz")) as t:
        t.extractall(tmp)
    src = os.path.join(tmp, "fastBPE-0.1.0")
    exe = os.path.join(tmp, "fast")
    subprocess.run(["g++", "-std=c++11", "-pthread", "-O2", os.path.join(src, "fastBPE", "main.cc"),
                    "-I" + os.path.join(src, "fastBPE"), "-o", exe], check=True)
    return exe


def bpe_text(lines):
    t = "\n".join(lines) + "\n"
    return t.encode().translate(bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ\t\r",
                                                b"abcdefghijklmnopqrstuvwxyz  ")).decode()


def zst(path):
    subprocess.run(["zstd", "-19", "-q", "-f", "--rm", path], check=True)


def main():
    os.makedirs(os.path.join(FIX, "bpe"), exist_ok=True)
    lines = corpus_lines()

    # (a) corpus slices
    sl = slices(lines, [0, 30_000_000, 60_000_000, 90_000_000], 540_000)
    with open(os.path.join(FIX, "corpus.slices"), "w") as f:
        for first, n in sl:
            f.write(f"{first} {n}\n")
    text = [ln for first, n in sl for ln in lines[first - 1:first - 1 + n]]
    print(f"corpus: {len(text)} lines, {sum(len(t.encode()) + 1 for t in text)} bytes")
    tok = bert()
    with open(os.path.join(FIX, "corpus.md5"), "w") as f:
        f.write("\n".join(md5s(ids_text(tok, text))) + "\n")

    # (b) GLUE
    with open(os.path.join(FIX, "glue.md5"), "w") as f:
        for name, header, cols in GLUE:
            rows = lines_of(open(os.path.join(DATA, "glue", name), encoding="utf-8").read())[header:]
            for c in cols:
                col = [r.split("\t")[c - 1] for r in rows]
                h = md5s(ids_text(tok, col))
                f.write(f"{name} {c} {len(col)} {h[0]}\n")

    # (c) edge cases, under several option sets
    edge = edge_cases()
    with open(os.path.join(FIX, "edge.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(edge) + "\n")
    match = BertWordPieceTokenizer(VOCAB, lowercase=True)
    for name, t in [("default", tok), ("match", match), ("cased", bert(False, False)),
                    ("lower-keep", bert(True, False)), ("strip-cased", bert(False, True))]:
        with open(os.path.join(FIX, f"edge.{name}.ids"), "w") as f:
            f.write(ids_text(t, edge))
        zst(os.path.join(FIX, f"edge.{name}.ids"))
    zst(os.path.join(FIX, "edge.txt"))

    # WordPieceTrainer on a slice
    n_train = 0
    size = 0
    while size < 3_000_000:
        size += len(lines[n_train].encode()) + 1
        n_train += 1
    with open(os.path.join(FIX, "train.slice"), "w") as f:
        f.write(f"1 {n_train}\n")
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "train.txt")
        with open(p, "w", encoding="utf-8") as f:
            f.write("\n".join(lines[:n_train]) + "\n")
        w = BertWordPieceTokenizer(lowercase=True)
        w.train([p], vocab_size=8000, min_frequency=2, limit_alphabet=1000, show_progress=False,
                special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        w.save_model(tmp)
        os.replace(os.path.join(tmp, "vocab.txt"), os.path.join(FIX, "hf-train.vocab"))

        # fastBPE
        exe = build_fastbpe(tmp)
        bsl = slices(lines, [40_000_000, 80_000_000], 1_000_000)
        bsl[1] = (bsl[1][0], 1200)  # the test slice: about 100 kB
        with open(os.path.join(FIX, "bpe.slice"), "w") as f:
            for first, n in bsl:
                f.write(f"{first} {n}\n")
        train = os.path.join(tmp, "bpe-train.txt")
        test = os.path.join(tmp, "bpe-test.txt")
        with open(train, "w", encoding="utf-8") as f:
            f.write(bpe_text(lines[bsl[0][0] - 1:bsl[0][0] - 1 + bsl[0][1]]))
        with open(test, "w", encoding="utf-8") as f:
            f.write(bpe_text(lines[bsl[1][0] - 1:bsl[1][0] - 1 + bsl[1][1]]))
        codes = subprocess.run([exe, "learnbpe", "2000", train], check=True,
                               capture_output=True).stdout
        with open(os.path.join(FIX, "bpe", "codes"), "wb") as f:
            f.write(codes)
        out = os.path.join(FIX, "bpe.expected")
        subprocess.run([exe, "applybpe", out, test, os.path.join(FIX, "bpe", "codes")],
                       check=True, capture_output=True)
        cnt = Counter(w for ln in open(out, encoding="utf-8", newline="\n")
                      for w in ln.rstrip("\n").split(" ") if w)
        with open(os.path.join(FIX, "bpe", "dict.txt"), "w", encoding="utf-8") as f:
            for k, v in sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0])):
                f.write(f"{k} {v}\n")
        zst(out)

    with open(os.path.join(FIX, "VERSIONS"), "w") as f:
        f.write(f"python {sys.version.split()[0]}\ntokenizers {tokenizers.__version__}\n"
                "fastBPE 0.1.0 (PyPI sdist, main.cc built with g++)\n")


if __name__ == "__main__":
    main()
