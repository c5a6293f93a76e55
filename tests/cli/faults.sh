#!/usr/bin/env bash
# Nothing is lost: runs killed with SIGKILL (TUPE_FAULT, lib/base/fault.h) while they write a
# checkpoint, a vocabulary or shards leave the previous complete outputs intact and loadable,
# and `tupe-pretrain --resume` continues to the same weights as a run never killed; a full disk
# is a clear error (exit 74) with no partial output in place; unreadable inputs give the exit
# code of the convention (66 cannot be opened, 74 read error).
#
# The full disk is a small tmpfs where mount works (root with CAP_SYS_ADMIN), otherwise a file
# size limit (ulimit -f, SIGXFSZ ignored, so that write fails with EFBIG), and /dev/full for
# standard output. A read error is /proc/self/mem, whose first page is never mapped.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-pretrain
TOK=$TUPE_BIN/tupe-tokenize
S=$TUPE_BIN/tupe-shard
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

full=$T/full
mounted=0
mkdir -p $full
trap '[ $mounted = 1 ] && umount "$full" 2>/dev/null; rm -rf "$T"' EXIT
# disk SIZE-IN-KB: an empty file system of that size at $full (tmpfs), or nothing (limit later).
disk() {
    [ $mounted = 1 ] && umount "$full" 2>/dev/null
    mounted=0
    rm -rf "$full" && mkdir -p "$full"
    if mount -t tmpfs -o size=$1k tmpfs "$full" 2>/dev/null; then mounted=1; fi
}
# on_disk SIZE-IN-KB CMD...: run CMD writing under $full, which holds SIZE KB at most.
on_disk() {
    local kb=$1; shift
    disk "$kb"
    if [ $mounted = 1 ]; then
        run "$@"
    else
        run bash -c 'trap "" XFSZ; ulimit -f '"$kb"'; exec "$@"' _ "$@"   # bash counts KiB
    fi
}
# killed CMD...: run CMD in a child shell, so that the "Killed" notice lands in $T/err.
killed() { run bash -c '"$@"; exit $?' _ "$@"; }
visible() { ls "$1" 2>/dev/null | tr '\n' ' '; }   # names not starting with '.'
data_bytes() { # the data section of a safetensors file (after its header)
    local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((n + 9)) "$1"
}

# ---- checkpoints: kill -9 while saving, then --resume ------------------------------------------
awk 'BEGIN { srand(11); for (d = 0; d < 200; d++) { n = 10 + int(rand() * 30); l = "";
     for (i = 0; i < n; i++) l = l (i ? " " : "") 5 + int(95 * rand() ^ 3); print l } }' >$T/ids.txt
$TESTTOOL tok-write --vocab-size 100 -o $T/ids.tok $T/ids.txt
$S write -q -o $T/shards --seq-len 32 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --shards 1 \
    --valid-fraction 0.05 $T/ids.tok
cat >$T/m.json <<'J'
{"position": "tupe-r", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 32}
J
tr=(train -q --data $T/shards --model $T/m.json --batch 4 --warmup 2 --lr 5e-3 --log-every 1
    --eval-every 0 --threads 1 --steps 6 --save-every 2)
ck() { echo "$1/checkpoints/step-$(printf %08d "$2")"; }
run $P "${tr[@]}" -o $T/ref
check "reference run: checkpoints of steps 2, 4, 6" eval '[ $rc = 0 ] && [ "$(visible $T/ref/checkpoints)" = "step-00000002 step-00000004 step-00000006 " ]'

# Saves are counted from 1: the second is step 4's. out.commit counts every file committed
# (config.json first, then each checkpoint's model and optimizer files).
for point in ckpt.model:2 ckpt.optimizer:2 dirtx.commit:2 out.commit:4 out.flush:5; do
    d=$T/k-${point%%:*}
    killed env TUPE_FAULT=$point $P "${tr[@]}" -o $d
    check "checkpoint killed at $point: only step 2 is there" eval '\
        [ $rc = 137 ] && [ "$(visible $d/checkpoints)" = "step-00000002 " ]'
    run $P eval --checkpoint $(ck $d 2) --data $T/shards --format json
    check "... complete and loadable" eval '[ $rc = 0 ] && has $T/out '\''"val_loss"'\'' && \
        [ -s $(ck $d 2)/optimizer.safetensors ]'
    run $P "${tr[@]}" -o $d --resume
    check "... --resume continues from step 2 to the weights of the run never killed" eval '\
        [ $rc = 0 ] && cmp -s <(data_bytes $(ck $T/ref 6)/model.safetensors) \
        <(data_bytes $(ck $d 6)/model.safetensors) && \
        cmp -s <(data_bytes $(ck $T/ref 6)/optimizer.safetensors) \
        <(data_bytes $(ck $d 6)/optimizer.safetensors)'
done

# The training state is metadata, outside the tensor checks: an edited one is refused.
cp -r $T/ref $T/tamper
rm -rf $(ck $T/tamper 4) $(ck $T/tamper 6)
sed -i 's/\\"step\\":2,/\\"step\\":3,/' $(ck $T/tamper 2)/model.safetensors
run $P "${tr[@]}" -o $T/tamper --resume
check "a checkpoint whose training state disagrees with its step is refused" eval '\
    [ $rc = 65 ] && has $T/err "training state is at step 3"'

# ---- vocabularies: kill -9 while writing vocab.txt, codes and dict.txt -------------------------
awk 'BEGIN { srand(2); for (d = 0; d < 400; d++) { l = ""; for (i = 0; i < 12; i++) {
     w = ""; n = 1 + int(rand() * 6); for (k = 0; k < n; k++) w = w sprintf("%c", 97 + int(26 * rand() ^ 2));
     l = l (i ? " " : "") w } print l; if (d % 5 == 4) print "" } }' >$T/text.txt
run $TOK train -q --vocab-size 200 -o $T/vocab.txt $T/text.txt
check "a vocabulary is trained" eval '[ $rc = 0 ] && [ "$(wc -l <$T/vocab.txt)" -gt 100 ]'
cp $T/vocab.txt $T/vocab.good
for point in vocab.save out.flush out.commit; do
    killed env TUPE_FAULT=$point $TOK train -q --vocab-size 300 -o $T/vocab.txt $T/text.txt
    krc=$rc
    run $TOK info -q --vocab $T/vocab.txt $T/text.txt
    check "vocab.txt killed at $point: the old one is intact and loadable" eval '\
        [ $krc = 137 ] && cmp -s $T/vocab.txt $T/vocab.good && [ $rc = 0 ]'
done
run $TOK train -q --model bpe --merges 60 -o $T/bpe $T/text.txt
check "a BPE vocabulary is trained" eval '[ $rc = 0 ] && [ -s $T/bpe/codes ] && [ -s $T/bpe/dict.txt ]'
cp -r $T/bpe $T/bpe.good
for point in out.commit:1 vocab.save out.commit:2 dirtx.commit; do
    killed env TUPE_FAULT=$point $TOK train -q --model bpe --merges 90 -o $T/bpe $T/text.txt
    krc=$rc
    run $TOK info -q --vocab $T/bpe $T/text.txt
    check "BPE directory killed at $point: the old one is intact and loadable" eval '\
        [ $krc = 137 ] && [ $rc = 0 ] && diff -r $T/bpe.good $T/bpe >/dev/null'
done

# ---- shards: kill -9 while replacing a shard directory (tests/cli/shard.sh has the rest) -------
cp -r $T/shards $T/shards.good
for point in shard.frame:2 shard.manifest dirtx.commit; do
    killed env TUPE_FAULT=$point $S write -q -o $T/shards --seq-len 32 --pad 0 --unk 1 --cls 2 \
        --sep 3 --mask 4 --shards 1 --valid-fraction 0.1 --seed 4 $T/ids.tok
    krc=$rc
    run $S verify -q $T/shards
    check "shards killed at $point: the old directory is intact and verifies" eval '\
        [ $krc = 137 ] && [ $rc = 0 ] && diff -r $T/shards.good $T/shards >/dev/null'
done
# Killed just after the swap: the new directory is the one in place, and it is complete.
killed env TUPE_FAULT=dirtx.exchanged $S write -q -o $T/shards --seq-len 32 --pad 0 --unk 1 --cls 2 \
    --sep 3 --mask 4 --shards 1 --valid-fraction 0.1 --seed 4 $T/ids.tok
krc=$rc
run $S verify -q $T/shards
check "shards killed just after the swap: the new directory is in place and verifies" eval '\
    [ $krc = 137 ] && [ $rc = 0 ] && has $T/shards/manifest.json "\"seed\": 4"'
rm -rf $T/shards && mv $T/shards.good $T/shards
run $P "${tr[@]}" --steps 2 -o $T/after
check "... and trains" eval '[ $rc = 0 ] && [ -d $(ck $T/after 2) ]'

# ---- a full disk -------------------------------------------------------------------------------
zstdcat "$TUPE_DATA/corpus/debian-104m.txt.zst" 2>/dev/null | head -c 400000 >$T/big.txt
[ -s $T/big.txt ] || for i in $(seq 40); do cat $T/text.txt; done >$T/big.txt
$TOK encode -q --vocab $T/vocab.txt -o $T/big.tok $T/big.txt
on_disk 64 $TOK encode -q --vocab $T/vocab.txt -o $full/out.tok $T/big.txt
check "full disk: tupe-tokenize encode exits 74 naming the file, and leaves nothing" eval '\
    [ $rc = 74 ] && has $T/err "$full/out.tok: write failed" && [ -z "$(ls -A $full)" ]'
on_disk 64 $S write -q -o $full/shards --seq-len 64 --pad 0 --cls 2 --sep 3 --shards 2 --no-compress $T/big.tok
check "full disk: tupe-shard exits 74, and leaves no shard directory" eval '\
    [ $rc = 74 ] && has $T/err "write failed" && [ -z "$(ls -A $full)" ]'
on_disk 8 $TOK train -q --vocab-size 4000 -o $full/vocab.txt $T/big.txt
check "full disk: tupe-tokenize train exits 74, and leaves no vocab.txt" eval '\
    [ $rc = 74 ] && [ -z "$(ls -A $full)" ]'
# A run directory with room for its first checkpoint only. A file size limit is per file, so
# without a tmpfs the limit is half the model file: the first checkpoint cannot be written.
ckb=$(du -sk $(ck $T/ref 2) | cut -f1)
disk 1
if [ $mounted = 1 ]; then
    on_disk $((ckb + ckb / 2 + 16)) $P "${tr[@]}" --keep 5 -o $full/run
    check "full disk: tupe-pretrain exits 74 at the checkpoint that does not fit" eval '\
        [ $rc = 74 ] && has $T/err "No space left on device" && \
        [ "$(visible $full/run/checkpoints)" = "step-00000002 " ]'
    run $P eval --checkpoint $(ck $full/run 2) --data $T/shards
    check "... and the checkpoint before it is complete and loadable" [ $rc = 0 ]
else
    on_disk $(($(stat -c %s $(ck $T/ref 2)/model.safetensors) / 2048)) $P "${tr[@]}" --keep 5 -o $full/run
    check "file too large: tupe-pretrain exits 74 and leaves no checkpoint" eval '\
        [ $rc = 74 ] && has $T/err "File too large" && [ -z "$(visible $full/run/checkpoints)" ]'
fi
run bash -c "$TOK encode -q --vocab $T/vocab.txt $T/big.txt >/dev/full"
check "standard output on a full device: exit 74" eval '[ $rc = 74 ] && has $T/err "(stdout): write failed"'
run bash -c "$S cat -q --format text $T/shards >/dev/full"
check "tupe-shard cat to a full device: exit 74" eval '[ $rc = 74 ] && has $T/err "write failed"'

# ---- inputs that cannot be opened or read ------------------------------------------------------
mkdir -p $T/adir
run $TOK encode --vocab $T/vocab.txt $T/adir
check "an empty directory as the corpus: exit 66" eval '[ $rc = 66 ] && has $T/err "a directory without files"'
run $S write -o $T/x $T/adir
check "a directory as the token stream: exit 66" eval '[ $rc = 66 ] && has $T/err "is a directory"'
run $TOK encode --vocab $T/adir $T/text.txt
check "a directory without dict.txt as the vocabulary: exit 66" eval '[ $rc = 66 ] && has $T/err "dict.txt"'
run $P "${tr[@]}" --data $T/ids.tok -o $T/x
check "a file as the shard directory: exit 66" eval '[ $rc = 66 ] && has $T/err "not a shard directory"'
run $P "${tr[@]}" --checkpoint $T/adir -o $T/x
check "a directory without model.safetensors as the checkpoint: exit 66" eval '[ $rc = 66 ] && has $T/err "model.safetensors"'
run $TOK encode --vocab $T/vocab.txt /proc/self/mem
check "a corpus that fails to read: exit 74" eval '[ $rc = 74 ] && has $T/err "/proc/self/mem: read failed"'
run $S write -o $T/x /proc/self/mem
check "a token stream that fails to read: exit 74" eval '[ $rc = 74 ] && has $T/err "read failed"'
run $TOK encode --vocab /proc/self/mem $T/text.txt
check "a vocabulary that fails to read: exit 74" eval '[ $rc = 74 ] && has $T/err "read failed"'
exit $_failed
