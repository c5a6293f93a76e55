#!/usr/bin/env bash
# tupe-pretrain --objective electra end to end on a small synthetic corpus: both networks'
# metrics, the discriminator beating a coin after a few steps, an exact resume, micro-batches and
# two ranks giving one process's weights (the sampling noise is named by the sequence, not the
# rank), the objective kept by a resume, and tupe-pretrain eval's discriminator figures.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-pretrain

awk 'BEGIN { srand(11); for (d = 0; d < 400; d++) { n = 20 + int(rand() * 40); line = "";
     for (i = 0; i < n; i++) { if (i % 3 == 0) t = 5 + int(95 * rand() ^ 4); line = line (i ? " " : "") t } print line } }' >$T/ids.txt
$TESTTOOL tok-write --vocab-size 100 -o $T/ids.tok $T/ids.txt
tupe-shard write -q -o $T/shards --seq-len 32 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.05 --shards 2 $T/ids.tok
cat >$T/m.json <<'J'
{"position": "tupe-r", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64, "embedding_size": 24}
J
common=(--data $T/shards --model $T/m.json --batch 8 --warmup 4 --lr 5e-3 --log-every 1 --eval-every 0 --save-every 0 --threads 1 --objective electra --generator-size 0.5)
data_bytes() { local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((n + 9)) "$1"; }

run $P train "${common[@]}" -o $T/a --steps 16
[ $rc = 0 ] && [ "$(grep -c '"gen_loss"' $T/a/metrics.jsonl)" = 16 ] && grep -q '"val_disc_acc"' $T/a/metrics.jsonl &&
    grep -q '"generator_hidden_size": 0.5' $T/a/config.json && has $T/err "generator loss" &&
    has $T/err "validation discriminator loss"
verdict "an ELECTRA run logs the generator's and the discriminator's loss and accuracy"
acc=$(grep '"disc_acc"' $T/a/metrics.jsonl | tail -1 | sed 's/.*"disc_acc":\([0-9.e-]*\).*/\1/')
awk -v a="$acc" 'BEGIN { exit !(a > 0.6) }'
verdict "the discriminator is right on most tokens after 16 steps (accuracy $acc)"
$TESTTOOL tfevents-cat $T/a/tensorboard/events.out.tfevents.* >$T/tb.txt && has $T/tb.txt "16 disc_loss " &&
    has $T/tb.txt "16 val_replaced "
verdict "the ELECTRA metrics as TensorBoard scalars"

run $P train "${common[@]}" -o $T/b --steps 16 --stop-after 8
run $P train "${common[@]}" -o $T/b --steps 16 --resume
[ $rc = 0 ] && cmp -s <(data_bytes $T/a/checkpoints/step-00000016/model.safetensors) <(data_bytes $T/b/checkpoints/step-00000016/model.safetensors)
verdict "8 + 8 steps with a resume give bit-identical weights to 16 (both networks)"
run $P train --data $T/shards --batch 8 --steps 16 --resume -o $T/b2 --threads 1 --save-every 0 --stop-after 4 --model $T/m.json
run $P train --data $T/shards --batch 8 --steps 16 --resume -o $T/b2 --threads 1 --save-every 0 --objective electra
[ $rc = 2 ] && has $T/err "was trained with --objective mlm"
verdict "a resume keeps the run's objective"

nod=(--dropout 0 --attention-dropout 0)
run $P train "${common[@]}" "${nod[@]}" -o $T/c --steps 4
run $P train "${common[@]}" "${nod[@]}" -o $T/d --steps 4 --micro-batch 2
run $TESTTOOL st-diff $T/c/checkpoints/step-00000004/model.safetensors $T/d/checkpoints/step-00000004/model.safetensors
# (the figure read first: a command substitution in verdict's argument would set the $? it reads)
d=$(cat $T/out); awk '{ exit !($2 < 1e-5) }' $T/out
verdict "4 micro-batches of 2 give the weights of one batch of 8 ($d)"
if have_mpi; then
    mpi_run -np 2 $P train "${common[@]}" "${nod[@]}" -o $T/e --steps 4
    run $TESTTOOL st-diff $T/c/checkpoints/step-00000004/model.safetensors $T/e/checkpoints/step-00000004/model.safetensors
    d=$(cat $T/out); awk '{ exit !($2 < 1e-5) }' $T/out
    verdict "two ranks give the weights of one process ($d)"
else
    skip "two ranks give the weights of one process" "$NO_MPI"
fi

run $P eval --checkpoint $T/a/checkpoints/step-00000016 --data $T/shards --threads 1 --format json
[ $rc = 0 ] && has $T/out '"val_disc_acc":' && has $T/out '"val_replaced":' && has $T/out '"val_disc_auc":0.' &&
    has $T/out '"val_disc_precision":' && has $T/out '"val_disc_recall":' && grep -q '"val_disc_auc":' $T/a/metrics.jsonl
verdict "eval reports the discriminator's loss, accuracy, replaced fraction, AUC, precision and recall"
cp $T/out $T/eval1
run $P eval --checkpoint $T/a/checkpoints/step-00000016 --data $T/shards --threads 1 --format json --micro-batch 3
[ $rc = 0 ] && [ "$(sed 's/"checkpoint":[^,]*,//' $T/out)" = "$(sed 's/"checkpoint":[^,]*,//' $T/eval1)" ]
verdict "the evaluation's masks and noise do not depend on the batching"
if have_mpi; then
    mpi_run -np 2 $P eval --checkpoint $T/a/checkpoints/step-00000016 --data $T/shards --threads 1 --format json
    [ $rc = 0 ] && [ "$(sed 's/"checkpoint":[^,]*,//' $T/out)" = "$(sed 's/"checkpoint":[^,]*,//' $T/eval1)" ]
    verdict "two ranks evaluate as one process (the AUC over both ranks' tokens)"
else
    skip "two ranks evaluate as one process (the AUC over both ranks' tokens)" "$NO_MPI"
fi
# issue 30's encodings in both networks: each trains, and evaluates past the trained length
tupe-shard write -q -o $T/long --seq-len 64 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.3 --shards 1 $T/ids.tok
ok=1
for v in rope alibi nope; do
    run $P train "${common[@]}" --position $v -o $T/pe-$v --steps 2
    [ $rc = 0 ] && has $T/pe-$v/config.json "\"position\": \"$v\"" && grep -q '"disc_acc"' $T/pe-$v/metrics.jsonl || ok=0
    run $P eval --checkpoint $T/pe-$v/checkpoints/step-00000002 --data $T/long --seq-len 64 --threads 1 --format json
    [ $rc = 0 ] && has $T/out '"seq_len":64' && has $T/out '"val_disc_acc":' || ok=0
done
[ $ok = 1 ]
verdict "ELECTRA with rope, alibi and nope in both networks trains and evaluates at twice its length"
# --recipe electra: ELECTRA's optimizer (the first update at learning rate 0), kept by a resume
run $P train "${common[@]}" --recipe electra -o $T/rec --steps 4 --stop-after 2
[ $rc = 0 ] && has $T/err "--recipe electra: Adam without bias correction" &&
    grep '"step":1,' $T/rec/metrics.jsonl | grep -q '"lr":0,' && grep '"step":2,' $T/rec/metrics.jsonl | grep -q '"lr":0.0009375,'
verdict "--recipe electra: the warmup times a decay from step 0 (lr 0 at step 1, 5e-3 x 3/4 x 1/4 at step 2)"
run $P train "${common[@]}" -o $T/rec --steps 4 --resume
[ $rc = 2 ] && has $T/err "was trained with --recipe electra; resume with the same (now tupe)"
verdict "a resume keeps the run's --recipe"

# tupe-glue fine-tunes the discriminator of a pair (ELECTRA's recipe: layer-wise decay 0.8)
sample_glue $T/glue
S=$TUPE_SRC/share/tupe/sample/corpus.txt.zst
tupe-tokenize train -q --vocab-size 1000 -o $T/vocab.txt $S
tupe-tokenize encode -q --docs line --vocab $T/vocab.txt $S | tupe-shard write -q -o $T/gshards --seq-len 32 --valid-fraction 0.02 --shards 1
run $P train --data $T/gshards --model $T/m.json --batch 8 --steps 2 --warmup 1 --lr 5e-3 --save-every 0 --eval-every 0 --threads 1 --objective electra --generator-size 0.5 --recipe electra -o $T/gpre
run $TUPE_BIN/tupe-glue train --task RTE --data $T/glue --checkpoint $T/gpre/checkpoints/step-00000002 --vocab $T/vocab.txt -o $T/gft --recipe electra --max-len 32 --max-train 32 --max-dev 8 --epochs 1 --threads 1
[ $rc = 0 ] && has $T/gft/results.json '"recipe": "electra"' && has $T/gft/results.json '"layer_decay": 0.8' &&
    lacks $T/gft/best/model.safetensors generator && has $T/gft/best/model.safetensors 'embedding_size' &&
    has $T/gft/best/model.safetensors embeddings_project
verdict "tupe-glue --recipe electra fine-tunes a pair's discriminator (its encoder, not the generator)"
exit $_failed
