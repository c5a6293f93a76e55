#!/usr/bin/env bash
# tupe-tokenize against its independent references: Hugging Face `tokenizers` (WordPiece ids,
# WordPieceTrainer) and fastBPE (codes applied to words). The fixtures come from
# tests/reference/make_tokenize_fixtures.py; 100% agreement is the bar for ids. The corpus and
# GLUE comparisons need the full test data (../shared/data) and are skipped without it.
. "$(dirname "$0")/lib.sh"
F=$TUPE_SRC/tests/fixtures/tokenize
V=$BERT_VOCAB
CORPUS=$TUPE_DATA/corpus/debian-104m.txt.zst
need_data corpus/debian-104m.txt.zst && corpus=1 || { corpus=0 no_corpus=$NO_DATA; }
enc() { tupe-tokenize encode -q --vocab "$V" --docs line --format text "$@"; }
md5() { md5sum | cut -d' ' -f1; }

# The lines of the corpus listed in a slice file ("first count" per line), in one pass.
slice_lines() {
    zstd -dc "$CORPUS" | awk -v spec="$(tr '\n' ' ' <"$1")" '
        BEGIN { n = split(spec, s, " "); for (i = 1; i < n; i += 2) { a[i] = s[i]; b[i] = s[i] + s[i+1] } }
        { for (i = 1; i < n; i += 2) if (NR >= a[i] && NR < b[i]) { print; next } }'
}

# (a) 2 MB of prose and documentation from the corpus: the whole output, then (on failure)
# the first block of 1000 lines that differs.
[ $corpus = 1 ] && slice_lines "$F/corpus.slices" >"$T/corpus.txt" && enc "$T/corpus.txt" >"$T/corpus.ids"
if [ $corpus = 0 ]; then
    skip "corpus slices: ids equal Hugging Face tokenizers" "$no_corpus"
elif [ "$(md5 <"$T/corpus.ids")" = "$(head -1 "$F/corpus.md5")" ]; then
    ok "corpus slices ($(wc -c <"$T/corpus.txt") bytes): ids equal Hugging Face tokenizers"
else
    (cd "$T" && split -l 1000 -d -a 4 corpus.ids blk.)
    k=0 where=""
    for b in "$T"/blk.*; do
        k=$((k + 1))
        if [ "$(md5 <"$b")" != "$(sed -n "$((k + 1))p" "$F/corpus.md5")" ]; then
            where="first difference in lines $(((k - 1) * 1000 + 1))-$((k * 1000)) of the slices"
            break
        fi
    done
    not_ok "corpus slices: ids equal Hugging Face tokenizers" "$where"
fi

# (b) every sentence column of GLUE
if need_data glue; then
    bad=0 n=0
    while read -r name col rows sum; do
        got=$(tail -n "$rows" "$TUPE_DATA/glue/$name" | cut -f "$col" | enc | md5)
        n=$((n + rows))
        [ "$got" = "$sum" ] || { bad=1; echo "#   differs: $name column $col"; }
    done <"$F/glue.md5"
    [ $bad = 0 ]
    verdict "GLUE ($n sentences, every column of every file): ids equal Hugging Face tokenizers"
else
    skip "GLUE (every column of every file): ids equal Hugging Face tokenizers" "$NO_DATA"
fi

# (c) hard cases (the strings of docs/data.md 1.5, random lines, every BMP character), with
# each combination of the normalization options
zstd -dcq "$F/edge.txt.zst" >"$T/edge.txt"
for m in "default:" "match:--match-special" "cased:--cased --keep-accents" \
    "lower-keep:--lowercase --keep-accents" "strip-cased:--cased --strip-accents"; do
    name=${m%%:*} opts=${m#*:}
    # shellcheck disable=SC2086
    enc $opts "$T/edge.txt" >"$T/edge.$name"
    zstd -dcq "$F/edge.$name.ids.zst" >"$T/edge.$name.want"
    if cmp -s "$T/edge.$name" "$T/edge.$name.want"; then
        ok "hard cases, ${opts:-default options}: ids equal Hugging Face tokenizers"
    else
        not_ok "hard cases, ${opts:-default options}: ids equal Hugging Face tokenizers" \
            "$(diff "$T/edge.$name" "$T/edge.$name.want" | head -4)"
    fi
done

# The rest learns from and encodes slices of the corpus.
if [ $corpus = 1 ]; then
    # WordPiece training against WordPieceTrainer (same input and options)
    slice_lines "$F/train.slice" >"$T/train.txt"
    run tupe-tokenize train -q --vocab-size 8000 --min-frequency 2 --limit-alphabet 1000 \
        -o "$T/ours.vocab" "$T/train.txt"
    [ $rc = 0 ]
    verdict "train: runs"
    common=$(sort "$T/ours.vocab" | comm -12 - <(sort "$F/hf-train.vocab") | wc -l)
    total=$(wc -l <"$F/hf-train.vocab")
    echo "# train: $common of $total tokens in common with Hugging Face WordPieceTrainer"
    [ "$(wc -l <"$T/ours.vocab")" = "$total" ] && [ "$(head -5 "$T/ours.vocab")" = "$(head -5 "$F/hf-train.vocab")" ]
    verdict "train: same size and special tokens as WordPieceTrainer"
    [ $((common * 100)) -ge $((total * 95)) ]
    verdict "train: at least 95% of tokens in common with WordPieceTrainer ($common/$total)"
    tupe-tokenize encode -q --vocab "$T/ours.vocab" "$T/train.txt" -o "$T/train.tok"
    tupe-tokenize decode -q --vocab "$T/ours.vocab" "$T/train.tok" -o "$T/train.dec"
    tupe-tokenize encode -q --vocab "$T/ours.vocab" --match-special --format text "$T/train.dec" >"$T/again.ids"
    tupe-tokenize encode -q --vocab "$T/ours.vocab" --format text "$T/train.txt" >"$T/first.ids"
    cmp -s <(tr '\n' ' ' <"$T/first.ids" | tr -s ' ') <(tr '\n' ' ' <"$T/again.ids" | tr -s ' ')
    verdict "train: text encoded with the trained vocabulary survives decode and re-encode"

    # BPE: the same codes applied to the same words as fastBPE's applybpe
    lower() { tr 'A-Z\t\r' 'a-z  '; }
    sed -n 2p "$F/bpe.slice" >"$T/bpe-test.slice"
    slice_lines "$T/bpe-test.slice" | lower >"$T/bpe-test.txt"
    squeeze() { tr -s ' ' | sed 's/^ //; s/ $//'; }
    tupe-tokenize encode -q --vocab "$F/bpe" --cased --docs line --format tokens "$T/bpe-test.txt" |
        squeeze >"$T/bpe.ours"
    zstd -dcq "$F/bpe.expected.zst" | squeeze >"$T/bpe.want"
    n=$(wc -l <"$T/bpe.want"); cmp -s "$T/bpe.ours" "$T/bpe.want"
    verdict "bpe: pieces equal fastBPE applybpe ($n lines)"

    # BPE learning against fastBPE learnbpe (ties between equal counts may order differently)
    sed -n 1p "$F/bpe.slice" >"$T/bpe-train.slice"
    slice_lines "$T/bpe-train.slice" | lower >"$T/bpe-train.txt"
    run tupe-tokenize train -q --model bpe --merges 2000 --cased -o "$T/bpe" "$T/bpe-train.txt"
    [ $rc = 0 ] && [ -s "$T/bpe/codes" ] && [ -s "$T/bpe/dict.txt" ]
    verdict "train --model bpe: writes codes and dict.txt"
    pairs() { cut -d' ' -f1,2 "$1" | sort; }
    same=$(comm -12 <(pairs "$T/bpe/codes") <(pairs "$F/bpe/codes") | wc -l)
    echo "# train --model bpe: $same of 2000 merges in common with fastBPE learnbpe"
    [ "$same" -ge 1980 ]
    verdict "train --model bpe: at least 99% of the merges of fastBPE ($same/2000)"
else
    for name in "train: runs" \
        "train: same size and special tokens as WordPieceTrainer" \
        "train: at least 95% of tokens in common with WordPieceTrainer" \
        "train: text encoded with the trained vocabulary survives decode and re-encode" \
        "bpe: pieces equal fastBPE applybpe" \
        "train --model bpe: writes codes and dict.txt" \
        "train --model bpe: at least 99% of the merges of fastBPE"; do
        skip "$name" "$no_corpus"
    done
fi
exit $_failed
