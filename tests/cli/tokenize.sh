#!/usr/bin/env bash
# tupe-tokenize end to end: every input packaging, document framing, special tokens, the token
# stream it writes, decode and info, BPE vocabularies, training options, and every bad input
# the issue lists (each with a clear message and its exit code).
. "$(dirname "$0")/lib.sh"
V=$BERT_VOCAB
TT=$TESTTOOL
cd "$T" || exit 1
enc() { tupe-tokenize encode -q --vocab "$V" "$@"; }

printf 'Hello world.\nSecond line.\n\nNew doc here\n' >a.txt
printf 'Another file\n' >b.txt
printf '7592 2088 1012 2117 2240 1012\n2047 9986 2182\n' >a.want
{ cat a.want; echo "2178 5371"; } >ab.want

# ---- inputs -------------------------------------------------------------------------------
zstd -q -f a.txt && gzip -kf a.txt && xz -kf a.txt && bzip2 -kf a.txt
tar cf ab.tar a.txt b.txt && tar czf ab.tgz a.txt b.txt && tar cf - a.txt b.txt | zstd -q >ab.tar.zst
zip -q ab.zip a.txt b.txt
for f in a.txt a.txt.zst a.txt.gz a.txt.xz a.txt.bz2; do
    run enc --format text $f
    [ $rc = 0 ] && cmp -s out a.want
    verdict "input $f: same ids as the plain text"
done
for f in ab.tar ab.tgz ab.tar.zst ab.zip; do
    run enc --format text $f
    [ $rc = 0 ] && cmp -s out ab.want
    verdict "archive $f: every member in order, each ending a document"
done
run enc --format text a.txt b.txt
[ $rc = 0 ] && cmp -s out ab.want
verdict "several files: one after the other"
run sh -c "cat a.txt.zst | tupe-tokenize encode -q --vocab '$V' --format text -"
[ $rc = 0 ] && cmp -s out a.want
verdict "stdin ('-'), compressed"
printf '\xef\xbb\xbfHello world.\nSecond line.\n\nNew doc here\n' >bom.txt
run enc --format text bom.txt
[ $rc = 0 ] && cmp -s out a.want
verdict "a byte order mark at the start is dropped"

# ---- documents ----------------------------------------------------------------------------
run enc --format text --docs line a.txt
[ $rc = 0 ] && [ "$(cat out)" = $'7592 2088 1012\n2117 2240 1012\n\n2047 9986 2182' ]
verdict "--docs line: one document per line, empty lines included"
printf '<doc id="1" url="u" title="T">\nTitle One\n\nA &lt;b&gt; &amp; c.\n</doc>\njunk outside\n<doc id="2">\nT2\n</doc>\n<doc id="3">\nT3\n\nLast one.\n</doc>\n' >wiki.txt
run enc --format tokens --docs wiki wiki.txt
[ $rc = 0 ] && [ "$(cat out)" = $'a < b > & c .\nlast one .' ]
verdict "--docs wiki: <doc> blocks, titles dropped, entities unescaped, empty articles left out"
run enc --format tokens --docs wiki --keep-title wiki.txt
[ $rc = 0 ] && [ "$(head -1 out)" = "title one a < b > & c ." ]
verdict "--docs wiki --keep-title"
for sub in "encode --vocab $V -o w.tok" "info --vocab $V" "train -o w.vocab"; do
    run tupe-tokenize $sub -q --docs wiki a.txt
    [ $rc = 65 ] && has err "<doc> block" && [ ! -e w.tok ] && [ ! -e w.vocab ]
    verdict "--docs wiki on plain text (${sub%% *}): exit 65, says why (encode wrote an empty stream)"
done
run enc --format text --add-special a.txt
[ $rc = 0 ] && [ "$(head -1 out)" = "101 7592 2088 1012 2117 2240 1012 102" ]
verdict "--add-special: [CLS] ... [SEP] around each document"
run enc --format text --line-sep a.txt
[ $rc = 0 ] && [ "$(head -1 out)" = "7592 2088 1012 102 2117 2240 1012 102" ]
verdict "--line-sep: [SEP] after every line"
printf 'a\nb\n\n\001\n\nc\n' >sep.txt
run enc --line-sep --add-special -o sep.tok sep.txt
[ $rc = 0 ] && [ "$("$TT" tok-cat sep.tok | tr '\n' '/')" = "101 1037 102 1038 102 102/101 1039 102 102/" ]
verdict "--line-sep --add-special: a stream whose counts check out, token-less documents left out"
printf 'a [SEP] b [MASK]\n' >sp.txt
run enc --format text sp.txt
[ $rc = 0 ] && [ "$(cat out)" = "1037 1031 19802 1033 1038 1031 7308 1033" ]
verdict "literal special tokens are text by default"
run enc --format text --match-special sp.txt
[ $rc = 0 ] && [ "$(cat out)" = "1037 102 1038 103" ]
verdict "--match-special: literal special tokens become their ids"
printf 'short %s\n' "$(printf 'a%.0s' $(seq 150))" >long.txt
run enc --format text --max-chars-per-word 200 long.txt
[ $rc = 0 ] && [ "$(wc -w <out)" -gt 2 ] && [ "$(enc --format text long.txt)" = "2460 100" ]
verdict "--max-chars-per-word"

# ---- the token stream -----------------------------------------------------------------------
run enc -o ab.tok a.txt b.txt
[ $rc = 0 ] && [ "$(head -c 8 ab.tok)" = TUPETOKS ]
verdict "-o writes a token stream"
cmp -s <("$TT" tok-cat ab.tok) ab.want
verdict "the stream holds what --format text shows"
[ "$(od -An -t u4 -j 12 -N 8 ab.tok | tr -s ' ')" = " 2 30522" ] &&
verdict "header: vocabulary size, 2-byte ids, hash of vocab.txt, special ids [PAD] [UNK] [CLS] [SEP] [MASK]"
    [ "$(od -An -t d4 -j 32 -N 20 ab.tok | tr -s ' ')" = " 0 100 101 102 103" ]
python_free_hash=$(tupe-tokenize info --vocab "$V" | awk '$1 == "hash" {print $2}')
[ "$python_free_hash" = "xxh3:$(od -An -t x8 -j 24 -N 8 ab.tok | tr -d ' ')" ]
verdict "info: the vocabulary hash is the one in the stream header"
zstd -dc "$TUPE_SRC/share/tupe/sample/corpus.txt.zst" >big.txt
enc --threads 1 big.txt -o t1.tok
enc --threads 4 big.txt -o t4.tok
cmp -s t1.tok t4.tok
verdict "output is in input order whatever --threads"
run tupe-tokenize decode -q --vocab "$V" ab.tok
[ $rc = 0 ] && [ "$(cat out)" = $'hello world. second line.\nnew doc here\nanother file' ]
verdict "decode: token stream to text"
run sh -c "tupe-tokenize decode -q --vocab '$V' <ab.tok"
[ $rc = 0 ] && [ "$(head -1 out)" = "hello world. second line." ]
verdict "decode: a token stream on stdin"
printf '101 2652 4895 3270 9397 6588 1012 102\n' >ids.txt
run tupe-tokenize decode -q --vocab "$V" --skip-special ids.txt
[ $rc = 0 ] && [ "$(cat out)" = "playing unhappily." ]
verdict "decode: text ids, ## joined, --skip-special"
run tupe-tokenize info --vocab "$V" a.txt
[ $rc = 0 ] && has out "size           30522" && has out "cls            101 [CLS]" && has out "tokens         9"
verdict "info: size, specials, coverage"
run tupe-tokenize info --vocab "$V" --format json
[ $rc = 0 ] && has out '"size": 30522' && has out '"mask_id": 103'
verdict "info --format json"

cp "$V" 'my "v".txt'
run tupe-tokenize info --vocab 'my "v".txt' --format json
[ $rc = 0 ] && has out '{"vocab": "my \"v\".txt", "kind"'
verdict "info --format json: the path is a JSON string (a quote in it gave invalid JSON)"

run sh -c "tupe-tokenize info --vocab '$V' >/dev/full"
[ $rc = 74 ] && has err "(stdout): write failed: No space left on device"
verdict "info to a full disk: exit 74, naming stdout and the cause"

run script -qec "tupe-tokenize encode -q --vocab '$V' a.txt" /dev/null
[ $rc = 2 ] && has out "not written to a terminal" && lacks out TUPETOKS
verdict "encode: a binary token stream is not written to a terminal"

# ---- training and BPE -----------------------------------------------------------------------
run tupe-tokenize train -q --vocab-size 2000 --threads 1 -o wp1.txt big.txt
run tupe-tokenize train -q --vocab-size 2000 --threads 3 -o wp3.txt big.txt
[ $rc = 0 ] && cmp -s wp1.txt wp3.txt && [ "$(wc -l <wp1.txt)" = 2000 ]
verdict "train: the same vocabulary whatever --threads"
[ "$(head -6 wp1.txt | tr '\n' ' ')" = "[PAD] [UNK] [CLS] [SEP] [MASK] ! " ]
verdict "train: specials first, then the alphabet"
run tupe-tokenize train --vocab-size 2000 --memory 1M -o wpm.txt big.txt
[ $rc = 0 ] && has err "pruned" && [ "$(wc -l <wpm.txt)" = 2000 ]
verdict "train --memory: rare words pruned, reported, still a vocabulary"
# one word of 3M letters (a DNA line, a base64 blob): each merge costs the word's length, not
# length times occurrences (it took about 15 minutes)
head -c 3000000 /dev/zero | tr '\0' a >oneword.txt
run timeout 120 tupe-tokenize train -q --vocab-size 200 -o ow.txt oneword.txt
[ $rc = 0 ] && [ "$(sed -n 8p ow.txt)" = "##aa" ]
verdict "train: a huge word with a pair repeated everywhere takes linear time per merge"
run tupe-tokenize train -q --model bpe --merges 500 --vocab-size 800 -o bpe big.txt
[ $rc = 0 ] && [ "$(wc -l <bpe/codes)" = 500 ] && [ $(( ($(wc -l <bpe/dict.txt) + 4) % 8 )) = 0 ] &&
verdict "train --model bpe: codes (500 merges) and a dict.txt padded to a multiple of 8"
    [ "$(head -1 bpe/codes)" = "t h $(head -1 bpe/codes | cut -d' ' -f3)" ]
run tupe-tokenize encode -q --vocab bpe --format tokens a.txt
[ $rc = 0 ] && has out "@@"
verdict "bpe encode: @@ pieces"
run tupe-tokenize encode -q --vocab bpe --add-special a.txt -o bpe.tok
[ $rc = 0 ] && [ "$("$TT" tok-cat bpe.tok | head -1 | awk '{print $1, $NF}')" = "0 2" ] &&
verdict "bpe: <s>=0 ... </s>=2, specials in the header (pad 1, unk 3, mask last)"
    [ "$(od -An -t d4 -j 32 -N 20 bpe.tok | tr -s ' ')" = " 1 3 0 2 $(($(wc -l <bpe/dict.txt) + 4))" ]
run tupe-tokenize decode -q --vocab bpe --skip-special bpe.tok
[ $rc = 0 ] && [ "$(head -1 out)" = "hello world. second line." ]
verdict "bpe decode joins @@ pieces"

# ---- bad input ------------------------------------------------------------------------------
run enc a.txt --vocab missing.txt
[ $rc = 66 ] && has err "missing.txt: No such file or directory"
verdict "missing vocabulary: exit 66, named"
{ head -3 "$V"; sed -n 2p "$V"; } >dup.txt
run enc --vocab dup.txt a.txt
[ $rc = 65 ] && has err "dup.txt:4: duplicate token '[unused0]' (first on line 2)"
verdict "vocabulary with a duplicate line: exit 65, file:line"
: >empty.txt
run enc -o e.tok empty.txt
[ $rc = 65 ] && has err "empty.txt: empty input" && [ ! -e e.tok ]
verdict "empty input: exit 65, nothing written"
run tupe-tokenize train -q -o e.vocab empty.txt
[ $rc = 65 ] && has err "empty input"
verdict "train on empty input: exit 65"
printf 'good line\nbad \xff\xfe byte\n' >bad.txt
run enc -o bad.tok bad.txt
[ $rc = 65 ] && has err "bad.txt: byte 14: invalid UTF-8" && [ ! -e bad.tok ] && [ -z "$(ls -A | grep '\.tmp\.')" ]
verdict "invalid UTF-8: exit 65, file and byte offset, nothing written"
mkdir -p tree/b tree/a && printf 'one\n' >tree/b/x.txt && printf 'two\n' >tree/a/y.txt && printf 'skip\n' >tree/.z
run tupe-tokenize encode -q --vocab "$V" --format tokens --docs line tree
[ $rc = 0 ] && [ "$(cat out)" = $'two\none' ]
verdict "a directory is its files, recursively, in path order (hidden ones skipped)"
ln -s .. tree/a/up
run tupe-tokenize encode -q --vocab "$V" --format tokens --docs line tree
[ $rc = 65 ] && has err "tree/a/up: a symbolic link loop (it is tree again)" && is_empty out
verdict "a symbolic link loop in a directory input: exit 65, named (it read the files ~40 times)"
rm tree/a/up
run enc --format text --invalid replace bad.txt
[ $rc = 0 ] && [ "$(cat out)" = "2204 2240 2919 24880" ]
verdict "--invalid replace (U+FFFD, which BERT cleaning drops)"
run enc --format text --invalid skip --docs line bad.txt
[ $rc = 0 ] && [ "$(sed -n 2p out)" = "2919 24880" ]
verdict "--invalid skip"
run tupe-tokenize train -q -o x.vocab bad.txt
[ $rc = 65 ] && has err "bad.txt: byte 14: invalid UTF-8"
verdict "train: invalid UTF-8 named with its byte offset"
head -c 20 a.txt.zst >trunc.zst
run enc trunc.zst
[ $rc = 65 ] && has err "trunc.zst: " && has err "runcated"
verdict "truncated .zst: exit 65, named"
cp ab.zip corrupt.zip
# the first member's data starts after its 30-byte header, name and extra field
data=$((30 + $(od -An -t u2 -j 26 -N 2 ab.zip) + $(od -An -t u2 -j 28 -N 2 ab.zip)))
printf '\xff\xff\xff\xff' | dd of=corrupt.zip bs=1 seek=$((data + 2)) conv=notrunc 2>/dev/null
run enc corrupt.zip
[ $rc = 65 ] && has err "corrupt.zip:a.txt: "
verdict "corrupt archive member: exit 65, the member named"
head -c 100 ab.tgz >trunc.tgz
run enc trunc.tgz
[ $rc = 65 ] && has err "trunc.tgz"
verdict "truncated .tar.gz: exit 65"
run enc nosuch.txt
[ $rc = 66 ] && has err "nosuch.txt: No such file or directory"
verdict "missing input: exit 66"
run tupe-tokenize encode a.txt
[ $rc = 2 ] && has err "--vocab is required"
verdict "encode without --vocab: usage error"
run tupe-tokenize train --model bpe big.txt
[ $rc = 2 ]
verdict "train --model bpe without -o: usage error"
run tupe-tokenize train -q --model bpe --merges 0 -o b0 a.txt
[ $rc = 2 ] && has err "--merges" && [ ! -e b0 ]
verdict "train --merges 0: usage error (it used to learn the default 32640)"
ok_combo=1
for args in "train --model bpe --limit-alphabet 50 -o bx" "train --model bpe --keep-accents -o bx" \
    "train --merges 50" "train --keep-title" "encode --vocab $V --keep-title" \
    "encode --vocab bpe --strip-accents" "info --vocab bpe --max-chars-per-word 9"; do
    run tupe-tokenize $args -q a.txt
    [ $rc = 2 ] && has err " only" || { ok_combo=0; echo "# $args: rc=$rc"; }
done
[ $ok_combo = 1 ] && [ ! -e bx ]
verdict "options that would do nothing in the combination given: usage errors"
mkdir -p keep && echo data >keep/notes.txt
run tupe-tokenize train -q --model bpe --merges 5 -o keep a.txt
[ $rc = 73 ] && has err "keep: exists and is not a BPE vocabulary (it has no .tupe-kind" &&
    [ "$(cat keep/notes.txt)" = data ]
verdict "train --model bpe -o DIR: a directory that is not a BPE vocabulary is not replaced (it was deleted)"
run tupe-tokenize train -q --model bpe --merges 5 -o bpe a.txt
[ $rc = 0 ] && [ "$(wc -l <bpe/codes)" = 5 ]
verdict "train --model bpe -o DIR: an older BPE vocabulary is replaced"
run tupe-tokenize train -q --model bpe --vocab-size 4 -o b4 a.txt
[ $rc = 2 ] && has err "--vocab-size 4 leaves no room" && [ ! -e b4 ]
verdict "train --model bpe --vocab-size 4: usage error (it wrote a dict.txt of padding only)"
run tupe-tokenize train --vocab-size 10 -o v10.txt a.txt
[ $rc = 0 ] && has err "alone are $(wc -l <v10.txt) entries, more than --vocab-size 10"
verdict "train: a vocabulary larger than --vocab-size (the alphabet alone) says so"
run tupe-tokenize train -q --memory 1 -o m.txt a.txt
[ $rc = 2 ] && has err "--memory) is too small" && [ ! -e m.txt ]
verdict "train --memory too small to keep a word: says so (it said 'no words in the input')"
run tupe-tokenize train -q --memory 0 -o m.txt a.txt
[ $rc = 2 ] && has err "--memory: expected a size above 0"
verdict "train --memory 0: usage error (it meant the default 2G)"
run tupe-tokenize decode --vocab "$V" --format text a.txt
[ $rc = 65 ] && has err "a.txt:1: expected ids"
verdict "decode: text that is not ids: exit 65, file:line"
run tupe-tokenize decode --vocab bpe ab.tok
[ $rc = 65 ] && has err "another vocabulary"
verdict "decode: a stream of another vocabulary is refused"
exit $_failed
