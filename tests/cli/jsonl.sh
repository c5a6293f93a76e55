#!/usr/bin/env bash
# tupe-tokenize --docs jsonl: JSON Lines give the ids their text gives as plain documents,
# compressed, in archives and on stdin; train and info read them too; bad lines are named by
# file:line; memory does not grow with the input.
. "$(dirname "$0")/lib.sh"
V=$BERT_VOCAB
TT="tupe-tokenize"

# The same documents as JSON Lines (escapes, Unicode, an empty document, blank input lines,
# other fields first, CRLF) and as plain text (blank-line framing).
cat >$T/a.jsonl <<'J'
{"id": 1, "text": "Hello world.\nSecond line of the first document.", "meta": {"url": "x"}}
{"text": "Caf\u00e9 \"quoted\" \u2014 text\twith tab\n\n  \nafter a blank line"}

{"text": ""}
{"text": "\ud83d\ude00 emoji and [SEP] literal"}
{"text": "crlf line"}
J
printf '\r\n' >>$T/a.jsonl
cat >$T/a.txt <<'P'
Hello world.
Second line of the first document.

Café "quoted" — text	with tab
after a blank line

😀 emoji and [SEP] literal

crlf line
P
run $TT encode -q --vocab $V --docs jsonl --add-special --line-sep --format text $T/a.jsonl -o $T/j.ids
run $TT encode -q --vocab $V --add-special --line-sep --format text $T/a.txt -o $T/p.ids
[ $rc = 0 ] && [ -s $T/j.ids ] && cmp -s $T/j.ids $T/p.ids && [ $(wc -l <$T/j.ids) = 4 ]
verdict "--docs jsonl: the same ids as the same text as plain documents"
run $TT encode -q --vocab $V --docs jsonl $T/a.jsonl -o $T/j.bin
$TT encode -q --vocab $V $T/a.txt -o $T/p.bin
[ $rc = 0 ] && cmp -s $T/j.bin $T/p.bin
verdict "the same token stream"
zstd -q $T/a.jsonl -o $T/a.jsonl.zst && gzip -c $T/a.jsonl >$T/a.json.gz &&
    (cd $T && tar cf a.tar a.jsonl && zip -q a.zip a.jsonl)
for f in a.jsonl.zst a.json.gz a.tar a.zip; do
    run $TT encode -q --vocab $V --docs jsonl --add-special --line-sep --format text $T/$f -o $T/x.ids
    [ $rc = 0 ] && cmp -s $T/x.ids $T/p.ids
    verdict "--docs jsonl reads $f"
done
run sh -c "cat $T/a.jsonl | $TT encode -q --vocab $V --docs jsonl --add-special --line-sep --format text"
[ $rc = 0 ] && cmp -s $T/out $T/p.ids
verdict "--docs jsonl from stdin"
sed 's/"text"/"body"/' $T/a.jsonl >$T/b.jsonl
run $TT encode -q --vocab $V --docs jsonl --field body --add-special --line-sep --format text $T/b.jsonl -o $T/b.ids
[ $rc = 0 ] && cmp -s $T/b.ids $T/p.ids
verdict "--field names another field"
run $TT encode -q --vocab $V --docs jsonl --threads 2 --add-special --line-sep --format text $T/a.jsonl $T/a.jsonl.zst -o $T/two.ids
[ $rc = 0 ] && cat $T/p.ids $T/p.ids | cmp -s - $T/two.ids
verdict "several files, two threads: in order"

# train and info read JSON Lines the same way.
for i in 1 2 3 4 5 6 7 8; do cat $T/a.txt; echo; done >$T/many.txt
for i in 1 2 3 4 5 6 7 8; do cat $T/a.jsonl; done >$T/many.jsonl
$TT train -q --vocab-size 120 $T/many.txt -o $T/vp.txt
run $TT train -q --vocab-size 120 --docs jsonl $T/many.jsonl -o $T/vj.txt
[ $rc = 0 ] && cmp -s $T/vp.txt $T/vj.txt
verdict "train --docs jsonl: the vocabulary the plain text gives"
run $TT info --vocab $V --docs jsonl --format json $T/many.jsonl
[ $rc = 0 ] && has $T/out '"documents": 32'
verdict "info --docs jsonl counts the documents"

# Bad lines: file:line and what is wrong, exit 65.
bad() { # NAME TEXT-OF-FILE EXPECTED [options]
    local name=$1 text=$2 want=$3; shift 3
    printf '%b' "$text" >$T/bad.jsonl
    run $TT encode -q --vocab $V --docs jsonl "$@" --format text $T/bad.jsonl -o $T/bad.out
    [ $rc = 65 ] && has $T/err "$want"
    verdict "refused: $name (exit 65)"
}
bad "not JSON" '{"text": "a"}\n\n{"text": "b"\n' "bad.jsonl:3:12: not JSON: "
bad "no such field" '{"text": "a"}\n{"title": "b"}\n' 'bad.jsonl:2: no "text" field (choose the field with --field)'
bad "a number" '{"text": "a"}\n{"text": 42}\n' 'bad.jsonl:2: "text" is a number, not a string'
bad "null" '{"text": null}\n' 'bad.jsonl:1: "text" is null, not a string'
bad "not an object" '["text"]\n' "bad.jsonl:1: expected a JSON object, found an array"
bad "invalid UTF-8" '{"text": "a\xff"}\n' "bad.jsonl: byte 11: invalid UTF-8 (see --invalid)"
bad "another field missing" '{"text": "a"}\n' 'bad.jsonl:1: no "body" field' --field body
# What JSON allows in the fields a corpus ignores: an id above 2^63, 1e400, nested ones, \u0000.
printf '{"id": 18446744073709551615, "score": 1e400, "text": "a b"}\n' >$T/big.jsonl
printf '{"m": {"x": [-1e400, 123456789012345678901234567890]}, "note": "a \\u0000 b", "text": "a b"}\n' >>$T/big.jsonl
printf 'a b\n\na b\n' >$T/big.txt
run $TT encode -q --vocab $V --docs jsonl --format text $T/big.jsonl -o $T/big.ids
[ $rc = 0 ] && $TT encode -q --vocab $V --format text $T/big.txt -o $T/big-txt.ids && cmp -s $T/big.ids $T/big-txt.ids
verdict "numbers jansson cannot hold and \\u0000, in ignored fields: accepted"
# --invalid applies to JSON Lines as to plain text.
printf '{"text": "a\xff b"}\n' >$T/inv.jsonl
printf 'a\xff b\n' >$T/inv.txt
for how in replace skip; do
    run $TT encode -q --vocab $V --docs jsonl --invalid $how --format text $T/inv.jsonl -o $T/inv-j.ids
    [ $rc = 0 ] && $TT encode -q --vocab $V --invalid $how --format text $T/inv.txt -o $T/inv-t.ids &&
        cmp -s $T/inv-j.ids $T/inv-t.ids
    verdict "--docs jsonl --invalid $how: the ids of the same plain text"
done
{ for i in $(seq 1 3000); do echo '{"text": "line number '$i' of a long file"}'; done; echo '{"text": 1}'; } | zstd -q >$T/long.jsonl.zst
run $TT encode -q --vocab $V --docs jsonl --format text $T/long.jsonl.zst -o $T/long.out
[ $rc = 65 ] && has $T/err 'long.jsonl.zst:3001: "text" is a number'
verdict "line numbers count across chunks of a compressed file"
run $TT encode -q --vocab $V --field text --format text $T/a.txt
[ $rc = 2 ] && has $T/err "--field is for --docs jsonl only"
verdict "--field without --docs jsonl: usage error"

# Streaming: the peak memory of 8 times the input stays the same (within 8 MB). Under
# AddressSanitizer, freed memory waits in its quarantine, which would count as ours: none here.
gen() { awk -v n=$1 'BEGIN { for (i = 0; i < n; i++) printf "{\"id\": %d, \"text\": \"document %d: the quick brown fox jumps over the lazy dog.\\nand a second line, %d.\"}\n", i, i, i * 7 }'; }
peak() { gen $1 | ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=0" /usr/bin/time -f %M $TT encode -q --vocab $V --docs jsonl --threads 2 -o /dev/null 2>&1 >/dev/null | tail -1; }
small=$(peak 100000)
large=$(peak 800000)
[ -n "$small" ] && [ -n "$large" ] && [ $((large - small)) -lt 8192 ]
check "bounded memory: peak ${small} KiB for 100k lines (12 MB), ${large} KiB for 800k (100 MB)" [ $? = 0 ]
exit $_failed
