#!/usr/bin/env bash
# The same bad input gets the same answer from every program (tupe(7), ERRORS AND OUTPUTS): a
# device or stream that never ends is refused at once, read no further than its header
# declares; compression and archives are known by their real signatures only; text that is not
# UTF-8 is refused, naming the file and byte, by every program that reads text; a non-finite
# value is never drawn; a missing input is 66 everywhere.
. "$(dirname "$0")/lib.sh"
rules_setup

small_world 6 200 1 tupe-r
$MT init --vocab-size 100 --position bert-a -o cka

# ---- devices and endless streams: refused at once, by what their header declares -------------
quick() { # quick CMD...: refused with 65 (or 66) within 20 s, whatever the input's size
    run timeout 20 "$@"
    local name; name=$(echo "$*" | sed "s|$T/||g; s|$TUPE_SRC/||g")
    { [ $rc = 65 ] || [ $rc = 66 ]; } && [ -s $T/err ]
    verdict "$name : refused at once ($rc)"
}
quick tupe-convert info /dev/zero
quick tupe-convert npy /dev/zero -o z1
quick tupe-convert cast --dtype bf16 /dev/zero -o z2
quick tupe-convert import --from fairseq /dev/zero -o z3
quick tupe-convert export --to hf /dev/zero --vocab $V -o z4
quick tupe-attnviz pos /dev/zero -o z5
quick tupe-glue eval --task RTE --data $G --checkpoint /dev/zero --vocab $V
quick tupe-glue score --task RTE --data $G /dev/zero
quick tupe-pretrain eval --checkpoint /dev/zero --data shards
quick tupe-pretrain train --data shards --model /dev/zero -o z6
quick tupe-tokenize encode --vocab /dev/zero text.txt
quick tupe-tokenize decode --vocab $V /dev/zero
quick tupe-shard -o z7 /dev/zero
quick tupe-shard info /dev/zero
quick sh -c "yes | tupe-convert info -"
quick sh -c "yes | tupe-shard -o z8 -"
run timeout 20 sh -c "cat /dev/zero | tupe-convert info -"
[ $rc = 65 ] && has $T/err "(stdin): byte 8: header does not start with '{'"
verdict "a safetensors stream of zeros: its header is refused before anything more is read"
{ cat ck/model.safetensors; echo trailing; } >extra.bin
run sh -c "tupe-convert info - <extra.bin"
[ $rc = 0 ]
run sh -c "cat extra.bin | tupe-convert info -"
[ $rc = 65 ] && has $T/err "more bytes after the"
verdict "a safetensors stream with more than its header declares: refused"
cat ck/model.safetensors | tupe-convert info - >piped.txt
tupe-convert info ck/model.safetensors >file.txt
diff <(grep -v '^path' piped.txt) <(grep -v '^path' file.txt) >/dev/null
verdict "a safetensors stream reads as the file does"

# ---- compression and archives by their real signatures ----------------------------------------
{ head -c 1000 /dev/zero; cat text.txt; } >nul.txt
tupe-tokenize encode -q --vocab $V --format text nul.txt >plain.ids
for z in gzip zstd xz bzip2; do
    $z -c nul.txt >nul.txt.z 2>/dev/null || continue
    run tupe-tokenize encode -q --vocab $V --format text nul.txt.z
    [ $rc = 0 ] && cmp -s $T/out plain.ids
    verdict "$z text that begins with 1000 NUL bytes: encoded as the text, not an empty tar"
done
mkdir -p tree && cp text.txt tree/a.txt && printf 'w5 w6\n' >tree/b.txt
tar -C tree -czf tree.tgz a.txt b.txt
tar -C tree -cf tree.tar a.txt b.txt
(cd tree && zip -q ../tree.zip a.txt b.txt)
for a in tree.tgz tree.tar tree.zip; do
    run tupe-tokenize encode -q --vocab $V --format text $a
    [ $rc = 0 ] && [ "$(tail -1 $T/out)" = "$(printf 'w5 w6\n' | tupe-tokenize encode -q --vocab $V --format text)" ]
    verdict "$a: still read as an archive, member by member"
done

# ---- text that is not UTF-8: the same answer everywhere ----------------------------------------
printf 'w5 w6\nw7 \xff w8\n' >bad.txt
for cmd in "tupe-tokenize encode --vocab $V" "tupe-tokenize train" "tupe-tokenize info --vocab $V"; do
    run $cmd bad.txt
    [ $rc = 65 ] && has $T/err "bad.txt: byte 9: invalid UTF-8"
    verdict "${cmd%% --*}: invalid UTF-8 is 65 naming file and byte"
done
printf '\nw7 \xff w8\n' >bad1.txt
run tupe-attnviz attn ck --vocab $V --input bad1.txt --layers 0 -o f1
[ $rc = 65 ] && has $T/err "bad1.txt: byte 4: invalid UTF-8" && [ -z "$(ls f1 2>/dev/null)" ]
verdict "attnviz --input: invalid UTF-8 is 65 naming file and byte"
run tupe-attnviz decomp cka --vocab $V --input bad.txt -o f2
[ $rc = 65 ] && has $T/err "bad.txt: byte 9: invalid UTF-8"
verdict "attnviz decomp --input: the same"
run tupe-attnviz attn ck --vocab $V --text $'w5 \xfe w6' --layers 0 -o f3
[ $rc = 65 ] && has $T/err "byte 3: invalid UTF-8"
verdict "attnviz --text: the same"
mkdir -p gbad && cp -r $G/RTE gbad/ && chmod -R u+w gbad
awk 'NR == 3 { sub(/ /, " \377 ") } { print }' $G/RTE/dev.tsv >gbad/RTE/dev.tsv
run tupe-glue info --task RTE --data gbad
[ $rc = 65 ] && has $T/err "gbad/RTE/dev.tsv: byte " && has $T/err "invalid UTF-8"
verdict "glue info: invalid UTF-8 in a task file is 65 naming file and byte"
run tupe-glue train --task RTE --data gbad --checkpoint ck --vocab $V -o gft --max-train 8 --max-len 32 --epochs 1
[ $rc = 65 ] && has $T/err "gbad/RTE/dev.tsv: byte " && has $T/err "invalid UTF-8"
verdict "glue train: the same, not dropped"

# ---- nothing non-finite is drawn ---------------------------------------------------------------
$MT init --vocab-size 100 --position tupe-a --nan position.embeddings.weight -o nanpos
$MT init --vocab-size 100 --position bert-a --nan encoder.layer.0.attention.self.query.weight -o nanq
run tupe-attnviz pos nanpos -o fn1
[ $rc = 65 ] && has $T/err "nanpos: tensor 'position.embeddings.weight': element 0 is NaN" && [ -z "$(ls fn1 2>/dev/null)" ]
verdict "attnviz pos: NaN in the position table is an error naming the tensor, nothing drawn"
run tupe-attnviz attn nanq --vocab $V --text "w5 w6" -o fn2
[ $rc = 65 ] && has $T/err "tensor 'encoder.layer.0.attention.self.query.weight'" && [ -z "$(ls fn2 2>/dev/null)" ]
verdict "attnviz attn: NaN in a projection is an error naming the tensor"
run tupe-attnviz decomp nanq --vocab $V --text "w5 w6" -o fn3
[ $rc = 65 ] && has $T/err "is NaN"
verdict "attnviz decomp: the same"

# ---- a missing input is 66 in every program ----------------------------------------------------
miss() {
    local name; name=$(echo "$*" | sed "s|$T/||g; s|$TUPE_SRC/||g; s|$TUPE_DATA/||g")
    run "$@"; [ $rc = 66 ]; verdict "$name: 66"
}
miss tupe-glue submit --predictions nope -o s.zip
miss tupe-glue info --task RTE --data nope
miss tupe-glue score --task RTE --data $G nope.tsv
miss tupe-glue eval --task RTE --data $G --checkpoint nope --vocab $V
miss tupe-convert info nope
miss tupe-attnviz pos nope
miss tupe-pretrain eval --checkpoint nope --data shards
miss tupe-pretrain train --data nope --model tiny -o r
miss tupe-tokenize encode --vocab nope text.txt
miss tupe-tokenize encode --vocab $V nope.txt
miss tupe-shard info nope
miss tupe-shard -o s nope.tok

# ---- more shards than sequences: said, not silent ----------------------------------------------
run tupe-shard -o many --seq-len 32 --shards 200 ids.tok
[ $rc = 0 ] && has $T/err "--shards 200: only 121 training sequences, so 79 of the files are empty"
verdict "--shards larger than the training sequences: written, with a note that some are empty"
exit $_failed
