#!/usr/bin/env bash
# The later positional encodings end to end (rope in both layouts, alibi, nope, deberta): tupe-pretrain
# trains and evaluates them from --position or the configuration, the checkpoint's
# configuration keeps RoPE's fields, eval --seq-len/--bucket/--rope-scaling measure length
# extrapolation (refused past a learned table's rows), tupe-attnviz draws ALiBi's bias (its
# values are -m_h |i - j|) and says why RoPE and NoPE have no content-free term, the Hugging
# Face export refuses what it cannot write, and compare-positions.sh tabulates a comparison.
# (Their numbers: tests/unit/test_parity.c.)
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-pretrain

awk 'BEGIN { srand(11); for (d = 0; d < 300; d++) { n = 20 + int(rand() * 30); line = "";
     for (i = 0; i < n; i++) { if (i % 3 == 0) t = 5 + int(95 * rand() ^ 4); line = line (i ? " " : "") t } print line } }' >$T/ids.txt
$TESTTOOL tok-write --vocab-size 100 -o $T/ids.tok $T/ids.txt
tupe-shard write -q -o $T/shards --seq-len 32 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.1 --shards 1 $T/ids.tok
cat >$T/m.json <<'J'
{"position": "tupe-r", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64}
J
common=(--data $T/shards --batch 8 --warmup 2 --lr 5e-3 --log-every 1 --eval-every 0 --save-every 0 --threads 2)

for v in rope alibi nope deberta; do
    run $P train "${common[@]}" --model $T/m.json --position $v -o $T/$v --steps 6
    check "--position $v: trains, validates, saves" eval '[ $rc = 0 ] && grep -q "\"val_loss\"" $T/$v/metrics.jsonl &&
        has $T/$v/config.json "\"position\": \"$v\"" && [ -s $T/$v/checkpoints/step-00000006/model.safetensors ]'
    run $P eval -c $T/$v/checkpoints/step-00000006 --data $T/shards --threads 2
    check "eval of a $v checkpoint" eval '[ $rc = 0 ] && has $T/out "loss"'
done
check "rope's configuration says its base and layout" eval 'has $T/rope/config.json "\"rope_base\": 10000.0" &&
    has $T/rope/config.json "\"rope_layout\": \"interleaved\"" && lacks $T/alibi/config.json rope'

sed 's/"tupe-r"/"rope", "rope_layout": "half", "rope_base": 500/' $T/m.json >$T/half.json
run $P train "${common[@]}" --model $T/half.json -o $T/half --steps 2
check "rope_layout half and rope_base from the configuration" eval '[ $rc = 0 ] &&
    has $T/half/config.json "\"rope_layout\": \"half\"" && has $T/half/config.json "\"rope_base\": 500.0"'
sed 's/"tupe-r"/"bert-a", "rope_base": 500/' $T/m.json >$T/bad.json
run $P train "${common[@]}" --model $T/bad.json -o $T/bad --steps 2
check "rope_base with another position: refused, naming the field" eval '[ $rc != 0 ] &&
    has $T/err "\"rope_base\" applies to \"position\": \"rope\" only" && [ ! -e $T/bad/checkpoints ]'

# ALiBi's bias from tupe-attnviz: 2 heads, slopes 2^-4 and 2^-8.
run $TUPE_BIN/tupe-attnviz pos $T/alibi/checkpoints/step-00000006 -n 16 --npy $T/an -o $T/af
npyval() { # FILE H I J N: element [h, i, j] of an [H, N, N] float32 .npy
    local hdr; hdr=$(( $(od -An -tu2 -j8 -N2 "$1" | tr -d ' ') + 10 ))
    od -An -tf4 -j $(( hdr + 4 * ($2 * $5 * $5 + $3 * $5 + $4) )) -N4 "$1" | tr -d ' '
}
check "attnviz pos: ALiBi's bias is -m_h |i - j| (rel and softmax views)" eval '[ $rc = 0 ] &&
    [ -s $T/an/pos_rel.npy ] && [ -s $T/an/pos_softmax.npy ] && [ ! -e $T/an/pos_abs.npy ] &&
    [ "$(npyval $T/an/pos_rel.npy 0 0 5 16)" = -0.3125 ] && [ "$(npyval $T/an/pos_rel.npy 1 9 1 16)" = -0.03125 ] &&
    [ "$(npyval $T/an/pos_rel.npy 1 4 4 16)" = 0 ]'
for v in rope nope deberta; do
    run $TUPE_BIN/tupe-attnviz pos $T/$v/checkpoints/step-00000006 -o $T/x-$v
    check "attnviz pos on $v: a usage error that points to attn" eval '[ $rc = 2 ] &&
        has $T/err "a $v model: it has no content-free positional term" && has $T/err "tupe-attnviz attn"'
done

# Length extrapolation: trained at 32, evaluated on the first 32 and 128 tokens of longer
# sequences, with the loss per bucket of 32 positions; a learned table is refused past its rows.
tupe-shard write -q -o $T/long --seq-len 128 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.3 --shards 1 $T/ids.tok
for n in 32 128; do
    run $P eval -c $T/rope/checkpoints/step-00000006 --data $T/long --seq-len $n --bucket 32 --format json --threads 2
    cp $T/out $T/rope-$n.json
done
check "eval --seq-len --bucket: the loss of every 32 positions, up to 4x the trained length" eval '[ $rc = 0 ] &&
    has $T/rope-32.json "\"seq_len\":32" && has $T/rope-32.json "\"buckets\":[{\"from\":0,\"to\":32," &&
    lacks $T/rope-32.json "\"from\":32" && has $T/rope-128.json "{\"from\":96,\"to\":128,\"loss\":"'
run $P eval -c $T/rope/checkpoints/step-00000006 --data $T/long --seq-len 128 --rope-scaling pi:4 --bucket 64 --threads 2
check "--rope-scaling pi:4 (text: the buckets below the total)" eval '[ $rc = 0 ] && has $T/out "of their first 128 tokens" &&
    has $T/out "  positions 64-127: loss "'
run $P eval -c $T/rope/checkpoints/step-00000006 --data $T/long --seq-len 128 --rope-scaling ntk:4 --format json --threads 2
check "--rope-scaling ntk:4 changes the loss" eval '[ $rc = 0 ] && ! cmp -s $T/out $T/rope-128.json'
run $P eval -c $T/alibi/checkpoints/step-00000006 --data $T/long --seq-len 128 --threads 2
check "alibi and nope evaluate past the trained length" eval '[ $rc = 0 ] && { $P eval -c $T/nope/checkpoints/step-00000006 --data $T/long --seq-len 128 --threads 2 >/dev/null 2>&1; }'
run $P eval -c $T/deberta/checkpoints/step-00000006 --data $T/long --seq-len 128 --bucket 32 --format json --threads 2
check "deberta evaluates past the trained length (its log buckets clamp)" eval '[ $rc = 0 ] &&
    has $T/out "{\"from\":96,\"to\":128,\"loss\":"'
run $P train "${common[@]}" --model $T/m.json --position deberta --tie-cls -o $T/dtie --steps 1
check "deberta --tie-cls: a usage error (the [CLS] untie is TUPE's)" eval '[ $rc = 2 ] && has $T/err "tie-cls" && [ ! -e $T/dtie/checkpoints ]'
run $P eval -c $T/alibi/checkpoints/step-00000006 --data $T/long --seq-len 128 --rope-scaling pi:2 --threads 2
check "--rope-scaling on another variant: a usage error" eval '[ $rc = 2 ] && has $T/err "not rope"'
run $P eval -c $T/rope/checkpoints/step-00000006 --data $T/long --seq-len 256 --threads 2
check "--seq-len past the shards' length: refused" eval '[ $rc = 2 ] && has $T/err "have 128 tokens"'
run $P train "${common[@]}" --model $T/m.json --position bert-r -o $T/bertr --steps 1
run $P eval -c $T/bertr/checkpoints/step-00000001 --data $T/long --seq-len 128 --threads 2
check "a learned position table past its rows: refused, saying so" eval '[ $rc = 65 ] &&
    has $T/err "a bert-r model'"'"'s learned position table has no rows past it"'
run $P eval -c $T/bertr/checkpoints/step-00000001 --data $T/long --seq-len 64 --threads 2
check "... and past the length it was trained on (32 of its 64 rows): refused, naming both" eval '[ $rc = 65 ] &&
    has $T/err "was trained on sequences of at most 32 tokens" && has $T/err "cannot be evaluated on 64"'
run $P eval -c $T/bertr/checkpoints/step-00000001 --data $T/long --seq-len 32 --threads 2
check "... and evaluated up to it" [ $rc = 0 ]
state() { head -c 65536 "$1/model.safetensors" | tr -d '\\'; } # the header, unescaped
check "the training state records the length trained on" eval 'state $T/bertr/checkpoints/step-00000001 | grep -q "\"trained_seq_len\":32"'
# continued pre-training on longer sequences (BERT's second phase) trains the rows up to 64
tupe-shard write -q -o $T/s64 --seq-len 64 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.1 --shards 1 $T/ids.tok
run $P train "${common[@]/shards/s64}" --model $T/m.json --position bert-r --checkpoint $T/bertr/checkpoints/step-00000001 -o $T/bertr64 --steps 1
run $P eval -c $T/bertr64/checkpoints/step-00000001 --data $T/long --seq-len 64 --threads 2
check "... which --checkpoint then 64-token shards extend to 64" eval '[ $rc = 0 ] && state $T/bertr64/checkpoints/step-00000001 | grep -q "\"trained_seq_len\":64"'

seq 0 99 | awk '{ print "[unused" $1 "]" }' >$T/vocab.txt
for v in alibi nope; do
    run $TUPE_BIN/tupe-convert export --to hf $T/$v/checkpoints/step-00000006 -o $T/$v-hf --vocab $T/vocab.txt
    check "export --to hf of $v: refused, saying what it writes" eval '[ $rc = 2 ] &&
        has $T/err "a $v model has no Hugging Face form here" && [ ! -e $T/$v-hf ]'
done
# share/tupe/examples/compare-positions.sh at a miniature budget: two encodings, two seeds,
# the table with n/a where BERT-A's table has no rows (2x and 4x of 16 > its 16), the runs
# kept as JSON and read, not redone, by a second call.
cat >$T/cmp.json <<'J'
{"position": "tupe-r", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 16}
J
cmp_env=(MODEL=$T/cmp.json STEPS=3 BATCH=4 SEQ=16 SEEDS="1 2" ENCODINGS="bert-a rope" TASKS= VOCAB_SIZE=300 THREADS=2)
run env "${cmp_env[@]}" bash $TUPE_SRC/share/tupe/examples/compare-positions.sh $TUPE_SRC/share/tupe/sample/corpus.txt.zst $T/cmp
check "compare-positions.sh: a row per encoding, mean ± spread, n/a past a learned table" eval '[ $rc = 0 ] &&
    grep -qE "^\| bert-a \| [0-9.]+ ± [0-9.]+ \| n/a \| n/a \|$" $T/cmp/table.md &&
    grep -qE "^\| rope \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ ± [0-9.]+ \|$" $T/cmp/table.md &&
    has $T/cmp/bert-a/seed-2/results.json "\"encoding\":\"bert-a\",\"seed\":2" &&
    has $T/cmp/bert-a/seed-1/results.json "\"n/a\":"'
run env "${cmp_env[@]}" bash $TUPE_SRC/share/tupe/examples/compare-positions.sh $TUPE_SRC/share/tupe/sample/corpus.txt.zst $T/cmp
check "compare-positions.sh again: the finished runs are read, not redone" eval '[ $rc = 0 ] && has $T/err "rope seed 2: done before"'
# The runs' JSON alone (as results/compare-positions keeps them): the same table, no corpus read.
mkdir -p $T/cmp-json && (cd $T/cmp && find . -path './*/seed-*' \( -name results.json -o -name 'eval-*.json' \) -exec cp --parents {} $T/cmp-json/ \;)
run env "${cmp_env[@]}" bash $TUPE_SRC/share/tupe/examples/compare-positions.sh $T/no-corpus $T/cmp-json
check "compare-positions.sh on the runs' JSON alone: the same table, nothing trained" eval '[ $rc = 0 ] &&
    cmp $T/cmp/table.md $T/cmp-json/table.md && [ ! -e $T/cmp-json/vocab.txt ] && [ ! -e $T/cmp-json/shards ]'
# tupe-glue fine-tunes a deberta model (the classifier over its encoder, per-sequence terms in
# every step)
sample_glue $T/glue
S=$TUPE_SRC/share/tupe/sample/corpus.txt.zst
tupe-tokenize train -q --vocab-size 500 -o $T/gvocab.txt $S
tupe-tokenize encode -q --docs line --vocab $T/gvocab.txt $S | tupe-shard write -q -o $T/gshards --seq-len 32 --valid-fraction 0.02 --shards 1
run $P train --data $T/gshards --model $T/m.json --position deberta --batch 8 --steps 2 --warmup 1 --lr 5e-3 --save-every 0 --eval-every 0 --threads 2 -o $T/dpre
run $TUPE_BIN/tupe-glue train --task RTE --data $T/glue --checkpoint $T/dpre/checkpoints/step-00000002 --vocab $T/gvocab.txt -o $T/dft --max-len 32 --max-train 32 --max-dev 8 --epochs 1 --threads 2
check "tupe-glue fine-tunes a deberta model" eval '[ $rc = 0 ] && [ -s $T/dft/results.json ] && has $T/dft/best/model.safetensors rel_embeddings'
run $TUPE_BIN/tupe-attnviz attn -c $T/dpre/checkpoints/step-00000002 --vocab $T/gvocab.txt -t "the time of the year" \
    --measures $T/dm.json -o $T/dfig
check "attnviz attn of deberta: maps and their locality and symmetry" eval '[ $rc = 0 ] && [ -s $T/dm.json ] && has $T/dm.json "symmetry"'
exit $_failed
