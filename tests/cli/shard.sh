#!/usr/bin/env bash
# tupe-shard end to end: packing gives back every id in order, the shuffle is a permutation
# that does not depend on threads or memory, validation and training share no document,
# rank partitions, corruption and truncation caught by verify and by readers, killed runs
# leave nothing that looks complete, the Megatron export matches an independent reader.
. "$(dirname "$0")/lib.sh"
S=tupe-shard
SP="--cls 101 --sep 102 --pad 0 --unk 100 --mask 103"
FIX=$TUPE_SRC/tests/fixtures/shard

# 600 documents of 0 to ~300 ids in [200, 30000), some empty; deterministic.
awk 'BEGIN { srand(17); for (d = 0; d < 600; d++) { r = rand(); n = r < 0.1 ? 0 : int(rand() * rand() * 300) + 1;
     s = ""; for (i = 0; i < n; i++) s = s (i ? " " : "") int(200 + rand() * 29800); print s } }' >$T/docs.txt
$TESTTOOL tok-write -o $T/in.tok $T/docs.txt
grep -v '^$' $T/docs.txt >$T/docs.nonempty

# Documents back from "cat --format text": drop [CLS] (first id) and cut at [SEP] (102).
undocs() { awk '{ for (i = 2; i <= NF; i++) { if ($i == 102) { print line; line = "" } else line = line (line == "" ? "" : " ") $i } }' "$@"; }

run $S --help
[ $rc = 0 ] && has $T/out "write" && has $T/out "verify" && has $T/out "man tupe-shard"
verdict "--help lists the commands"
run $S $T/in.tok
[ $rc = 2 ] && has $T/err "missing -o DIR"
verdict "no -o: usage error"
run sh -c "cd $T && $S -o - $SP $T/in.tok"
[ $rc = 2 ] && has $T/err "standard output" && [ ! -e $T/- ]
verdict "-o -: usage error (it made a directory named '-')"
run $S -o $T/x --seq-len 1 $T/in.tok
[ $rc = 2 ] && has $T/err "--seq-len: expected an integer from 2"
verdict "bad --seq-len: usage error"
run $S -o $T/x $T/in.tok
[ $rc = 65 ] && has $T/err "has no pad id; give one with --pad" && [ ! -e $T/x ]
verdict "no special ids in the stream: exit 65, names the option"
run $S -o $T/x $SP $T/missing.tok
[ $rc = 66 ] && has $T/err "$T/missing.tok: No such file or directory"
verdict "missing input: exit 66"
head -c 300 $T/in.tok >$T/cut.tok
run $S -o $T/x $SP $T/cut.tok
[ $rc = 65 ] && has $T/err "$T/cut.tok: byte " && [ ! -e $T/x ]
verdict "truncated input: exit 65 with the byte offset"
run $S -o $T/x $SP --export megatron --no-compress $T/in.tok
[ $rc = 2 ]
verdict "options that do not apply to an export are refused"
run $S -o $T/x $SP --seed 4 --no-shuffle $T/in.tok
[ $rc = 2 ] && has $T/err "--seed applies to the shuffle and the validation split" && [ ! -e $T/x ]
verdict "--seed with --no-shuffle and no validation split: usage error (it did nothing)"
run $S -o $T/x $SP --valid-shards 3 $T/in.tok
[ $rc = 2 ] && has $T/err "--valid-shards applies to a validation split" && [ ! -e $T/x ]
verdict "--valid-shards without a validation split: usage error (it did nothing)"
run $S -o $T/x $SP --valid-fraction 0.1 --valid-sequences 5 $T/in.tok
[ $rc = 2 ] && has $T/err "--valid-fraction and --valid-sequences exclude each other" && has $T/err "Try "
verdict "--valid-fraction with --valid-sequences: a usage error that names both"
run $S -o $T/x $SP --no-compress --level 5 $T/in.tok
[ $rc = 2 ] && has $T/err "--level does not apply to --no-compress"
verdict "--level with --no-compress is refused"
run $S -o $T/x $SP --memory 200000G $T/in.tok
[ $rc = 1 ] && has $T/err "cannot reserve the shuffle buffer of 200000.0 GiB (is --memory more" && [ ! -e $T/x ]
verdict "a --memory beyond the machine: says so in GiB, names the option"
run $S -o $T/x $SP --temp-dir $T/nowhere $T/in.tok
[ $rc = 73 ] && has $T/err "$T/nowhere: cannot write spill files there"
verdict "an unusable --temp-dir is named before any work"

awk '{ print "101 " $0 " 102" }' $T/docs.nonempty >$T/framed.txt
$TESTTOOL tok-write -o $T/framed.tok $T/framed.txt
run $S -o $T/fr $SP --seq-len 48 $T/framed.tok
[ $rc = 0 ] && has $T/err "every document already begins with cls (101) and ends with sep (102)"
verdict "documents already framed by [CLS] ... [SEP] (encode --add-special): a note says they are doubled"
run $S -o $T/fr $SP --seq-len 48 $T/in.tok
[ $rc = 0 ] && lacks $T/err "already begins"
verdict "no such note for plain documents"

# a name of 250 bytes fits, its temporary sibling (.NAME.tmp.PID.RANDOM) does not: mkdir fails
long=$(printf 'n%.0s' $(seq 250))
run $S -q -o $T/$long $SP $T/in.tok
[ $rc = 73 ] && has $T/err "$T/$long: cannot create: File name too long"
verdict "an output directory that cannot be made: exit 73 naming it (not its temporary name)"

# ---- packing ------------------------------------------------------------------------------
for brk in full doc; do
    run $S -q -o $T/p-$brk $SP --seq-len 48 --break $brk --no-shuffle --frame-size 4K $T/in.tok
    [ $rc = 0 ] && [ -s $T/p-$brk/manifest.json ] && is_empty $T/err
    verdict "[$brk] write"
    $S cat --format text $T/p-$brk >$T/p-$brk.txt
    undocs $T/p-$brk.txt >$T/p-$brk.docs
    cmp -s $T/p-$brk.docs $T/docs.nonempty
    verdict "[$brk] every id comes back in order"
    awk '$1 != 101 || NF > 48 { exit 1 }' $T/p-$brk.txt
    verdict "[$brk] every sequence starts with [CLS] and fits"
done
awk '{ n = 0; for (i = 2; i <= NF; i++) if ($i == 102) n++; if (n > 1 || (n == 1 && $NF != 102)) exit 1 }' $T/p-doc.txt
verdict "doc mode never puts two documents in a sequence"
run $S cat $T/p-full
$TESTTOOL tok-cat $T/out >$T/p-full.bin.txt
cmp -s $T/p-full.bin.txt $T/p-full.txt
verdict "cat writes a token stream by default"

# ---- shuffle: a permutation, the same for any thread count and memory budget -------------------
run $S -q -o $T/s1 $SP --seq-len 48 --frame-size 4K --threads 1 --memory 40M $T/in.tok
run $S -q -o $T/s2 $SP --seq-len 48 --frame-size 4K --threads 2 --memory 1G $T/in.tok
diff -r $T/s1 $T/s2
verdict "shuffled output is byte-identical across --threads and --memory"
$S cat --format text $T/s1 >$T/s1.txt
bash -c "cmp -s <(sort $T/s1.txt) <(sort $T/p-full.txt) && ! cmp -s $T/s1.txt $T/p-full.txt"
verdict "the shuffle is a permutation of the packed sequences"
run $S -q -o $T/s3 $SP --seq-len 48 --frame-size 4K --seed 2 $T/in.tok
bash -c "! cmp -s <($S cat --format text $T/s3) $T/s1.txt"
verdict "another seed gives another order"

# ---- validation -------------------------------------------------------------------------
run $S -q -o $T/v $SP --seq-len 48 --valid-fraction 0.2 --shards 3 --no-shuffle $T/in.tok
$S cat --format text $T/v | undocs | sort >$T/v.train
$S cat --format text --split valid $T/v | undocs | sort >$T/v.valid
[ -s $T/v.valid ] && [ -z "$(comm -12 $T/v.train $T/v.valid)" ]
verdict "validation and training share no document"
bash -c "cmp -s <(sort $T/v.train $T/v.valid) <(sort $T/docs.nonempty)"
verdict "together they hold every document"
head -3 $T/docs.nonempty >$T/three.txt
$TESTTOOL tok-write -o $T/three.tok $T/three.txt
run $S -o $T/v0 $SP --seq-len 48 --valid-fraction 0.005 $T/three.tok
[ $rc = 0 ] && has $T/err "--valid-fraction 0.005 held out none of the 3 documents"
verdict "a --valid-fraction that holds out no document says so"
run $S -q -o $T/vn $SP --seq-len 48 --valid-sequences 25 $T/in.tok
run $S info $T/vn
[ $rc = 0 ] && [ "$(awk '/^valid:/ { print $2 }' $T/out)" -ge 25 ]
verdict "--valid-sequences holds out at least that many sequences"

# ---- info --------------------------------------------------------------------------------
run $S info $T/v
[ $rc = 0 ] && has $T/out "train:" && \
    has $T/out "in 3 files" && has $T/out "padding" && has $T/out "compression ratio" && has $T/out "cls 101, sep 102"
verdict "info: counts, tokens, padding, compression ratio"

run sh -c "$S info $T/v >/dev/full"
[ $rc = 74 ] && has $T/err "(stdout): write failed: No space left on device"
verdict "info to a full disk: exit 74 with a message (it was silent)"
run sh -c "$S verify $T/v >/dev/full"
[ $rc = 74 ] && has $T/err "(stdout): write failed"
verdict "verify to a full disk: exit 74 with a message"

# ---- ranks -------------------------------------------------------------------------------
$S cat --format text --epoch 1 $T/s1 >$T/e1.txt
for r in 0 1 2; do $S cat --format text --epoch 1 --rank $r --world 3 $T/s1 >$T/r$r.txt; done
bash -c "cmp -s <(sort $T/r0.txt $T/r1.txt $T/r2.txt) <(sort $T/e1.txt)"
verdict "ranks are disjoint and cover the epoch"
bash -c "cmp -s <(awk 'NR % 3 == 2' $T/e1.txt) $T/r1.txt"
verdict "rank r reads positions r, r+W, ... of the epoch"
bash -c "! cmp -s <($S cat --format text --epoch 2 $T/s1) $T/e1.txt"
verdict "each epoch has its own order"
run script -qec "$S cat $T/s1" /dev/null
[ $rc = 2 ] && has $T/out "not written to a terminal" && lacks $T/out TUPETOKS
verdict "cat: a binary token stream is not written to a terminal"
run $S cat --seed 5 $T/s1
[ $rc = 2 ] && has $T/err "--seed applies to --epoch"
verdict "cat --seed without --epoch: usage error (it did nothing)"
run $S cat --epoch 1 --split valid $T/v
[ $rc = 2 ] && has $T/err "--epoch applies to the training split"
verdict "cat --epoch --split valid: usage error (no reader shuffles validation)"

# ---- corruption and truncation --------------------------------------------------------------
run $S verify $T/s1
[ $rc = 0 ] && has $T/out "OK (16 files"
verdict "verify: OK on a sound directory"
cp -r $T/s1 $T/bad
f=$T/bad/train-00003.shard
printf '\x5a' | dd of=$f bs=1 seek=4150 conv=notrunc status=none
run $S verify $T/bad
[ $rc = 65 ] && has $T/err "tupe-shard: $f: byte 4096: frame 0: checksum mismatch (shard corrupt)"
verdict "verify: a flipped byte in a frame, named by file and frame"
run $S cat $T/bad
[ $rc = 65 ] && has $T/err "frame 0: checksum mismatch"
verdict "cat refuses the corrupt frame too"
cp $T/s1/train-00003.shard $f
truncate -s -7 $T/bad/train-00011.shard
run $S verify $T/bad
[ $rc = 65 ] && has $T/err "train-00011.shard: truncated"
verdict "verify: a truncated shard"
run $S cat --format text $T/bad
[ $rc = 65 ] && has $T/err "truncated"
verdict "readers refuse the truncated shard"

# ---- killed runs: nothing that looks complete -------------------------------------------------
# killed CMD...: run CMD in a child shell, so that the "Killed" notice lands in $T/err.
killed() { run bash -c '"$@"; exit $?' _ "$@"; }
mkdir -p $T/tmp
for point in shard.frame:3 shard.close:2 shard.manifest dirtx.commit; do
    rm -rf $T/k
    killed env TUPE_FAULT=$point TMPDIR=$T/tmp $S -q -o $T/k $SP --seq-len 48 --frame-size 4K $T/in.tok
    [ $rc = 137 ] && [ ! -e $T/k ] && [ -z "$(ls -A $T/tmp)" ]
    verdict "killed at $point: no output directory"
done
cp -r $T/s1 $T/k
for point in shard.frame:5 dirtx.commit; do
    killed env TUPE_FAULT=$point $S -q -o $T/k $SP --seq-len 48 --frame-size 4K --seed 9 $T/in.tok
    [ $rc = 137 ] && diff -r $T/s1 $T/k >/dev/null
    verdict "killed at $point while replacing: the old directory is intact"
done
killed env TUPE_FAULT=out.flush:2 $S -q -o $T/km $SP --seq-len 48 --export megatron $T/in.tok
[ $rc = 137 ] && [ ! -e $T/km ]
verdict "killed export: no output directory"
for d in $T/.k.tmp.*; do
    run $S info "$d"
    [ $rc = 66 ] || has $T/err "not a shard directory"
    verdict "a left-over temporary directory is not a shard directory"
    break
done
run $S -q -o $T/k $SP --seq-len 48 --frame-size 4K $T/in.tok
[ $rc = 0 ] && $S verify -q $T/k
verdict "a later run replaces the old directory"

# ---- vocabulary text ------------------------------------------------------------------------
awk 'BEGIN { for (i = 0; i < 30522; i++) print "w" i }' >$T/vocab.txt
run $S cat --format text --vocab $T/vocab.txt $T/p-full
[ $rc = 65 ] && has $T/err "is not the one the shards were made with"
verdict "a vocabulary that does not match is refused"
h=$(sed -n 's/.*(30522 tokens, xxh3:\([0-9a-f]*\)) is not.*/\1/p' $T/err)
$TESTTOOL tok-write --vocab-hash $h -o $T/inv.tok $T/docs.txt
$S -q -o $T/pv $SP --seq-len 48 --no-shuffle $T/inv.tok
run $S cat --format text --vocab $T/vocab.txt $T/pv
[ $rc = 0 ] && [ "$(head -1 $T/out | cut -d' ' -f1-2)" = "w101 w$(head -1 $T/docs.nonempty | cut -d' ' -f1)" ]
verdict "--vocab prints tokens"

# ---- Megatron export ----------------------------------------------------------------------
$TESTTOOL tok-write -o $T/small.tok $FIX/small-docs.txt
run $S -q -o $T/m $SP --seq-len 32 --shards 2 --valid-fraction 0.2 --export megatron $T/small.tok
[ $rc = 0 ] && [ -s $T/m/train-00000.idx ] && [ -s $T/m/train-00001.bin ] && [ -s $T/m/valid-00000.idx ]
verdict "export: one .bin/.idx pair per shard"
for f in train-00000 train-00001 valid-00000; do
    cmp -s $T/m/$f.bin $FIX/megatron/$f.bin
    verdict "export $f is byte-identical to the committed fixture"
    cmp -s $T/m/$f.idx $FIX/megatron/$f.idx
    verdict "export $f.idx is byte-identical to the committed fixture"
done
run $S cat --format text $T/m
[ $rc = 0 ] && cmp -s $T/out $FIX/megatron-train.txt
verdict "export read back by tupe-shard equals the independent reader's tokens"
run $S cat --format text --split valid $T/m
[ $rc = 0 ] && cmp -s $T/out $FIX/megatron-valid.txt
verdict "validation export too"
$S -q -o $T/mn $SP --seq-len 32 --shards 2 --valid-fraction 0.2 $T/small.tok
bash -c "cmp -s <($S cat --format text $T/mn) $FIX/megatron-train.txt"
verdict "export holds the native shards' sequences without padding"
run $S info $T/m
[ $rc = 0 ] && has $T/out "Megatron .bin/.idx, uint16 ids (dtype code 8)"
verdict "info on an export names the id type (it gave a bare dtype code)"
run $S verify $T/m
[ $rc = 0 ] && has $T/out "OK (3 files"
verdict "verify an export"
printf '\x01' | dd of=$T/m/train-00001.bin bs=1 seek=3 conv=notrunc status=none
run $S verify $T/m
[ $rc = 65 ] && has $T/err "train-00001.bin/.idx: checksum mismatch"
verdict "verify: a changed byte in an export"
exit $_failed
