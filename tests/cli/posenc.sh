#!/usr/bin/env bash
# The later positional encodings end to end (rope in both layouts, alibi, nope): tupe-pretrain
# trains and evaluates them from --position or the configuration, the checkpoint's
# configuration keeps RoPE's fields, tupe-attnviz draws ALiBi's bias (its values are
# -m_h |i - j|) and says why RoPE and NoPE have no content-free term, and the Hugging Face
# export refuses what it cannot write. (Their numbers: tests/unit/test_parity.c.)
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

for v in rope alibi nope; do
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
for v in rope nope; do
    run $TUPE_BIN/tupe-attnviz pos $T/$v/checkpoints/step-00000006 -o $T/x-$v
    check "attnviz pos on $v: a usage error that points to attn" eval '[ $rc = 2 ] &&
        has $T/err "a $v model: it has no content-free positional term" && has $T/err "tupe-attnviz attn"'
done

seq 0 99 | awk '{ print "[unused" $1 "]" }' >$T/vocab.txt
for v in rope alibi nope; do
    run $TUPE_BIN/tupe-convert export --to hf $T/$v/checkpoints/step-00000006 -o $T/$v-hf --vocab $T/vocab.txt
    check "export --to hf of $v: refused, saying what it writes" eval '[ $rc = 2 ] &&
        has $T/err "a $v model has no Hugging Face form here" && [ ! -e $T/$v-hf ]'
done
exit $_failed
