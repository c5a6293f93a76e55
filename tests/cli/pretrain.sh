#!/usr/bin/env bash
# tupe-pretrain end to end on a small synthetic corpus (a learnable pattern): training lowers
# the loss; N + N steps with a resume end with bit-identical weights to 2N steps; two MPI ranks
# and gradient accumulation give the weights of one process; signals, non-finite values, a
# corrupted shard and a mismatched vocabulary are handled as documented.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-pretrain

# 800 documents over 100 ids (mask 4, cls 2, sep 3, pad 0, unk 1): runs of a skewed, Zipf-like
# unigram distribution, each id repeated a few times, so that a tiny model learns quickly.
awk 'BEGIN { srand(7); for (d = 0; d < 800; d++) { n = 20 + int(rand() * 40); line = "";
     for (i = 0; i < n; i++) { if (i % 3 == 0) t = 5 + int(95 * rand() ^ 4); line = line (i ? " " : "") t } print line } }' >$T/ids.txt
$TESTTOOL tok-write --vocab-size 100 -o $T/ids.tok $T/ids.txt
tupe-shard write -q -o $T/shards --seq-len 32 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.05 --shards 2 $T/ids.tok
cat >$T/m.json <<'J'
{"position": "tupe-r", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64}
J
common=(--data $T/shards --model $T/m.json --batch 8 --warmup 4 --lr 5e-3 --log-every 1 --eval-every 0 --save-every 0 --threads 2)
data_bytes() { # the data section of a safetensors file (after its header)
    local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((n + 9)) "$1"
}

run $P train "${common[@]}" -o $T/long --steps 60 --dropout 0
first=$(grep '"loss"' $T/long/metrics.jsonl | head -5 | awk -F'"loss":' '{ split($2, v, ","); s += v[1] } END { print s / 5 }')
last=$(grep '"loss"' $T/long/metrics.jsonl | tail -5 | awk -F'"loss":' '{ split($2, v, ","); s += v[1] } END { print s / 5 }')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }'
verdict "the loss falls ($first -> $last)"
run $P train "${common[@]}" -o $T/a --steps 24
[ $rc = 0 ] && [ -s $T/a/config.json ] && [ -s $T/a/checkpoints/step-00000024/model.safetensors ] && \
    [ -s $T/a/checkpoints/step-00000024/optimizer.safetensors ] && [ "$(grep -c '"loss"' $T/a/metrics.jsonl)" = 24 ]
verdict "training runs and writes config, metrics, a checkpoint"
grep -q '"val_loss"' $T/a/metrics.jsonl
verdict "the final validation is logged"
has $T/err "step 24/24  loss" && has $T/err "training sequences of 32 tokens; batch 8 (1 rank x 1 micro-batch of 8)" && has $T/err "done: step 24, loss of that step "
verdict "progress lines on stderr"
$TESTTOOL tfevents $T/a/metrics.jsonl -o $T/a-ref.tfevents && $TESTTOOL tfevents-cat $T/a-ref.tfevents >$T/a-ref.txt
run $TESTTOOL tfevents-cat $T/a/tensorboard/events.out.tfevents.*
[ $rc = 0 ] && cmp -s $T/out $T/a-ref.txt && has $T/out "24 loss_bits " && has $T/out "24 val_acc "
verdict "the values of metrics.jsonl as TensorBoard scalars in tensorboard/"
run $P train "${common[@]}" -o $T/tb1 --steps 2 --no-tensorboard
[ $rc = 0 ] && [ ! -e $T/tb1/tensorboard ] && [ -s $T/tb1/metrics.jsonl ]
verdict "--no-tensorboard: metrics.jsonl only"
run $P train "${common[@]}" -o $T/tb2 --steps 2 --tensorboard $T/tbdir/run2
[ $rc = 0 ] && [ ! -e $T/tb2/tensorboard ] && ls $T/tbdir/run2/events.out.tfevents.* >/dev/null
verdict "--tensorboard DIR: the event files there"
# --tensorboard is an output like -o: refused before any directory is made when it names a
# file, and never inside the checkpoint being resumed (pruning it would take the events along).
echo x >$T/tbfile
run $P train "${common[@]}" -o $T/tb4 --steps 2 --tensorboard $T/tbfile
[ $rc = 73 ] && has $T/err "tbfile: exists and is not a directory" && [ ! -e $T/tb4 ]
verdict "--tensorboard naming a file: refused (73) before the run directory is made"
run $P train "${common[@]}" -o $T/a --resume --steps 26 --tensorboard $T/a/checkpoints/step-00000024/tb
[ $rc = 73 ] && has $T/err "lies inside $T/a/checkpoints/step-00000024, a checkpoint" &&
    [ ! -e $T/a/checkpoints/step-00000024/tb ] && [ ! -d $T/a/checkpoints/step-00000026 ]
verdict "--tensorboard inside the checkpoint being resumed: refused (73), nothing written"
# A run resumed from an earlier checkpoint than it logged to (killed between checkpoints):
# its event files hold each step once, like metrics.jsonl, and the new file starts with the
# SessionLog START on which TensorBoard discards the replayed steps of other files.
run $P train "${common[@]}" -o $T/tbr --steps 8 --save-every 4
rm -rf $T/tbr/checkpoints/step-00000008
run $P train "${common[@]}" -o $T/tbr --steps 8 --save-every 4 --resume
for f in $T/tbr/tensorboard/events.out.tfevents.*; do $TESTTOOL tfevents-cat $f; done >$T/tbr.txt
[ $rc = 0 ] && [ "$(grep -c ' loss ' $T/tbr.txt)" = 8 ] && [ "$(grep -c '^6 loss ' $T/tbr.txt)" = 1 ] &&
    [ "$(grep -c '"loss"' $T/tbr/metrics.jsonl)" = 8 ] && grep -q '^5 session_log 1$' $T/tbr.txt
verdict "resumed after logging past its checkpoint: each step once in the event files, a START at step 5"
# The same into a --tensorboard DIR of the caller's that also holds another run's file: the
# files this run wrote there (listed in RUN/.tupe-events) are cut back, the other one is kept.
run $P train "${common[@]}" -o $T/tbo --steps 3 --tensorboard $T/tbu
other=$(ls $T/tbu/events.out.tfevents.*) && cp "$other" $T/tbu-other
run $P train "${common[@]}" -o $T/tbs --steps 8 --save-every 4 --tensorboard $T/tbu
rm -rf $T/tbs/checkpoints/step-00000008
run $P train "${common[@]}" -o $T/tbs --steps 8 --save-every 4 --resume --tensorboard $T/tbu
for f in $T/tbu/events.out.tfevents.*; do [ "$f" = "$other" ] || $TESTTOOL tfevents-cat "$f"; done >$T/tbu.txt
[ $rc = 0 ] && [ "$(ls $T/tbu/events.out.tfevents.* | wc -l)" = 3 ] && cmp -s "$other" $T/tbu-other &&
    [ "$(grep -c ' loss ' $T/tbu.txt)" = 8 ] && [ "$(grep -c '^6 loss ' $T/tbu.txt)" = 1 ] &&
    grep -q '^5 session_log 1$' $T/tbu.txt && [ "$(wc -l <$T/tbs/.tupe-events)" = 2 ]
verdict "resumed into --tensorboard DIR: its own files there cut back (each step once, a START at 5), another run's kept"
# The rendezvous file is an output like -o, whichever way it is named: never inside an input.
cp $T/shards/manifest.json $T/manifest.bak
run env TUPE_RENDEZVOUS_FILE=$T/shards/manifest.json RANK=0 WORLD_SIZE=2 TUPE_COMM_TIMEOUT=5 \
    $P train "${common[@]}" -o $T/rz --steps 2
[ $rc = 73 ] && has $T/err "TUPE_RENDEZVOUS_FILE $T/shards/manifest.json: lies inside the input --data" &&
    cmp -s $T/shards/manifest.json $T/manifest.bak && [ ! -e $T/rz ]
verdict "TUPE_RENDEZVOUS_FILE naming the shards' manifest.json: refused (73) before anything is written"
# What a run killed before its first checkpoint leaves: metrics.jsonl and an event file.
mkdir -p $T/tb3/tensorboard && cp $T/a/metrics.jsonl $T/a/.tupe-kind $T/tb3/ &&
    cp $T/a/tensorboard/events.out.tfevents.* $T/tb3/tensorboard/
old_events=$(basename $T/a/tensorboard/events.out.tfevents.*)
run $P train "${common[@]}" -o $T/tb3 --steps 2
[ $rc = 0 ] && [ $(ls $T/tb3/tensorboard | wc -l) = 1 ] && [ ! -e $T/tb3/tensorboard/$old_events ]
verdict "a new run in a run directory replaces the event files of tensorboard/"

run $P train "${common[@]}" -o $T/a --steps 4
[ $rc = 73 ] && has $T/err "$T/a already holds a run (checkpoints up to step 24): --resume continues it" && \
    [ -d $T/a/checkpoints/step-00000024 ] && [ ! -d $T/a/checkpoints/step-00000004 ] && \
    [ "$(grep -c '"loss"' $T/a/metrics.jsonl)" = 24 ]
verdict "a new run in a run directory with checkpoints is refused (exit 73), the old run untouched"
mkdir -p $T/hf && echo '{"model_type": "bert"}' >$T/hf/config.json
run $P train "${common[@]}" -o $T/hf --steps 2
[ $rc = 73 ] && has $T/err "$T/hf: exists and is not a pre-training run" && [ "$(cat $T/hf/config.json)" = '{"model_type": "bert"}' ] && \
    [ "$(ls $T/hf)" = config.json ]
verdict "a directory of something else as -o is refused (exit 73), its config.json untouched"
touch $T/file
run $P train "${common[@]}" -o $T/file --steps 4
[ $rc = 73 ] && has $T/err "$T/file"
verdict "a file as the run directory: exit 73"

run $P train "${common[@]}" -o $T/new --steps 2 --resume
[ $rc = 0 ] && has $T/err "--resume: no checkpoint in $T/new/checkpoints yet: a new run"
verdict "--resume with nothing to resume says that it starts a new run"

run env TUPE_PROGRESS_INTERVAL=0 $P train "${common[@]}" -o $T/slow --steps 3 --log-every 100
[ $rc = 0 ] && has $T/err "step 1/3  loss" && has $T/err "step 2/3  loss" && [ "$(grep -c '"loss"' $T/slow/metrics.jsonl)" = 1 ]
verdict "between --log-every lines, a progress line on stderr at the progress interval (not in metrics)"

# Exact resume: 12 steps, stop, resume for 12 more == 24 in one go (dropout on).
run $P train "${common[@]}" -o $T/b --steps 24 --stop-after 12
[ $rc = 0 ] && [ -d $T/b/checkpoints/step-00000012 ] && has $T/err "stopped after step 12"
verdict "--stop-after leaves with a checkpoint"
run $P train "${common[@]}" -o $T/b --steps 24 --resume
[ $rc = 0 ] && has $T/err "resumed from" && [ -d $T/b/checkpoints/step-00000024 ]
verdict "--resume continues from the latest checkpoint"
cmp -s <(data_bytes $T/a/checkpoints/step-00000024/model.safetensors) <(data_bytes $T/b/checkpoints/step-00000024/model.safetensors)
verdict "N + N steps with a resume give bit-identical weights to 2N steps"
cmp -s <(data_bytes $T/a/checkpoints/step-00000024/optimizer.safetensors) <(data_bytes $T/b/checkpoints/step-00000024/optimizer.safetensors)
verdict "... and the same optimizer state"
[ "$(grep -c '"loss"' $T/b/metrics.jsonl)" = 24 ]
verdict "... and one metrics line per step"
# Each step's sequences are read while the step before runs; a validation reads into the same
# rows, so the next step's are read again: validations every 5 steps change nothing.
run $P train "${common[@]}" -o $T/ev --steps 24 --eval-every 5
[ $rc = 0 ] && [ "$(grep -c '"val_loss"' $T/ev/metrics.jsonl)" = 5 ] &&
    cmp -s <(data_bytes $T/a/checkpoints/step-00000024/model.safetensors) <(data_bytes $T/ev/checkpoints/step-00000024/model.safetensors) &&
    cmp -s <(grep -o '"loss":[^,]*' $T/a/metrics.jsonl) <(grep -o '"loss":[^,]*' $T/ev/metrics.jsonl)
verdict "validations between steps (--eval-every 5): the same losses and weights as without"
$TESTTOOL tfevents $T/b/metrics.jsonl -o $T/b-ref.tfevents && $TESTTOOL tfevents-cat $T/b-ref.tfevents | sort >$T/b-ref.txt
for f in $T/b/tensorboard/events.out.tfevents.*; do $TESTTOOL tfevents-cat $f; done | grep -v " session_log " | sort >$T/b-tb.txt
[ $(ls $T/b/tensorboard | wc -l) = 2 ] && [ -s $T/b-ref.txt ] && cmp -s $T/b-tb.txt $T/b-ref.txt
verdict "... and an event file of its own beside the first run's, together the values of metrics.jsonl"
cp $T/b/metrics.jsonl $T/b.metrics
run $P train "${common[@]}" -o $T/b --steps 24 --resume
[ $rc = 0 ] && has $T/err "is at step 24, --steps is 24: nothing to do" && lacks $T/err "done: step 0" && \
    cmp -s $T/b.metrics $T/b/metrics.jsonl
verdict "--resume of a finished run does nothing and says so"
run $P train "${common[@]}" -o $T/b --steps 30 --resume --seed 2
[ $rc = 2 ] && has $T/err "was trained with --seed 1; resume with the same seed (now 2)" && [ ! -d $T/b/checkpoints/step-00000025 ]
verdict "--resume with another --seed is refused (another data order and masks)"
run $P train "${common[@]}" -o $T/b --steps 30 --resume --position bert-a
[ $rc = 2 ] && has $T/err "is a tupe-r model, not bert-a" && [ ! -d $T/b/checkpoints/step-00000025 ]
verdict "--resume with another --position is refused, not ignored"
run $P train "${common[@]}" -o $T/b --steps 30 --resume --tie-cls
[ $rc = 2 ] && has $T/err "its untie_cls differs"
verdict "... and with --tie-cls on an untied run"

# Gradient accumulation and data parallelism compute the same step (dropout off: its streams
# are named by rank and micro-batch).
nod=(--dropout 0 --attention-dropout 0)
run $P train "${common[@]}" "${nod[@]}" -o $T/c --steps 6
run $P train "${common[@]}" "${nod[@]}" -o $T/d --steps 6 --micro-batch 2
run $TESTTOOL st-diff $T/c/checkpoints/step-00000006/model.safetensors $T/d/checkpoints/step-00000006/model.safetensors
d=$(cat $T/out); awk '{ exit !($2 < 1e-5) }' $T/out
verdict "4 micro-batches of 2 give the weights of one batch of 8 ($d)"
if have_mpi; then
    mpi_run -np 2 $P train "${common[@]}" "${nod[@]}" --threads 1 -o $T/e --steps 6
    [ $rc = 0 ] && [ -d $T/e/checkpoints/step-00000006 ]
    verdict "mpirun -np 2 trains (rank 0 writes the run)"
    run $TESTTOOL st-diff $T/c/checkpoints/step-00000006/model.safetensors $T/e/checkpoints/step-00000006/model.safetensors
    d=$(cat $T/out); awk '{ exit !($2 < 1e-5) }' $T/out
    verdict "two ranks give the weights of one process with the same global batch ($d)"
else
    skip "mpirun -np 2 trains (rank 0 writes the run)" "$NO_MPI"
    skip "two ranks give the weights of one process with the same global batch" "$NO_MPI"
fi

# SIGINT: finish the step, checkpoint, exit 0; then resume.
$P train "${common[@]}" -o $T/f --steps 100000 >$T/out 2>$T/err &
pid=$!
for i in $(seq 1 100); do grep -q "step 3/" $T/err 2>/dev/null && break; sleep 0.1; done
kill -INT $pid
wait $pid; rc=$?
[ $rc = 0 ] && has $T/err "stopping after this step, with a checkpoint" && has $T/err "interrupted after step" && \
    [ -n "$(ls $T/f/checkpoints 2>/dev/null)" ]
verdict "SIGINT: a checkpoint and exit 0"
# A second signal during a step of a second or more (a wider model, a larger batch); a second
# after the first, since one sooner is taken for a copy of it (cli/process.h).
cat >$T/m256.json <<'J'
{"position": "tupe-r", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
 "intermediate_size": 1024, "max_position_embeddings": 64}
J
$P train --data $T/shards --model $T/m256.json --batch 512 --log-every 1 --threads 2 -o $T/f2 --steps 100 >$T/out 2>$T/err &
pid=$!
for i in $(seq 1 1000); do grep -q "step 1/" $T/err 2>/dev/null && break; sleep 0.05; done
kill -TERM $pid; sleep 1.3; kill -TERM $pid
wait $pid; rc=$?
[ $rc = 130 ] && [ ! -d $T/f2/checkpoints/step-00000002 ]
verdict "a second SIGTERM stops at once with exit status 130 (got $rc)"
run $P train "${common[@]}" -o $T/f --steps 100000 --resume --stop-after 2
[ $rc = 0 ] && has $T/err "resumed from"
verdict "an interrupted run resumes"

run $P train "${common[@]}" -o $T/t --steps 100000 --max-time 1
[ $rc = 0 ] && has $T/err "stopped after step" && [ -n "$(ls $T/t/checkpoints)" ]
verdict "--max-time leaves with a checkpoint"

# Killed while saving: the temporary checkpoint directory (as large as a checkpoint) does not
# outlive the next save.
run env TUPE_FAULT=ckpt.optimizer:2 $P train "${common[@]}" -o $T/kill --steps 6 --save-every 2
[ $rc = 137 ] && ls -a $T/kill/checkpoints | grep -q '^\.step-00000004\.tmp\.'
run $P train "${common[@]}" -o $T/kill --steps 6 --save-every 2 --resume
[ $rc = 0 ] && [ -d $T/kill/checkpoints/step-00000006 ] && ! ls -a $T/kill/checkpoints | grep -q '\.tmp\.'
verdict "a run killed while saving leaves no temporary directory after the next save"

# Non-finite values: stop with the last good checkpoint, or skip with --skip-nonfinite.
run env TUPE_FAULT=trainer.nonfinite:3 $P train "${common[@]}" -o $T/g --steps 6
[ $rc = 1 ] && has $T/err "step 3: non-finite loss"
verdict "a non-finite loss stops the run (exit 1, clear message)"
run env TUPE_FAULT=trainer.nonfinite:3 $P train "${common[@]}" -o $T/g --steps 6 --skip-nonfinite
[ $rc = 0 ] && has $T/err "update skipped" && has $T/err "some updates skipped"
verdict "--skip-nonfinite skips the update and goes on"
grep '^{"step":3,' $T/g/metrics.jsonl | grep -q '"loss":null' && ! grep -qE 'nan|inf' $T/g/metrics.jsonl
verdict "the skipped step's loss is null in metrics.jsonl (JSON), not printf's nan"

# Evaluation with fixed masks: the same number twice.
ck=$T/a/checkpoints/step-00000024
run $P eval --checkpoint $ck --data $T/shards --format json
v1=$(cat $T/out)
run $P eval --checkpoint $ck --data $T/shards --format json
[ $rc = 0 ] && [ "$v1" = "$(cat $T/out)" ] && has $T/out '"val_acc"'
verdict "eval is deterministic and reports loss and accuracy"
run $P eval --checkpoint $ck --data $T/shards --format json --eval-sequences 1 --mask-prob 0.001
[ $rc = 1 ] && has $T/err "no position of the 1 sequence evaluated was masked" && lacks $T/out nan
verdict "eval with nothing masked: an error, not 'validation loss nan'"
mkdir -p "$T/we\"ird"; cp -r $ck "$T/we\"ird/"
run $P eval --checkpoint "$T/we\"ird/step-00000024" --data $T/shards --format json
[ $rc = 0 ] && has $T/out 'we\"ird/step-00000024",'
verdict "eval --format json escapes the checkpoint path"

tupe-convert import -q --from hf $TUPE_SRC/tests/fixtures/convert/hf-cls -o $T/cls
run $P eval --checkpoint $T/cls --data $T/shards
[ $rc = 65 ] && has $T/err "$T/cls is a fine-tuned classifier (3 labels): it has no masked-LM head"
verdict "eval of a fine-tuned classifier: a clear refusal (exit 65)"

# Bad inputs.
cp -r $T/shards $T/bad
for f in $T/bad/train-*.shard; do printf '\xff' | dd of=$f bs=1 seek=5000 conv=notrunc 2>/dev/null; done
f=train-
run $P train "${common[@]}" --data $T/bad -o $T/h --steps 2
[ $rc = 65 ] && has $T/err "$f" && has $T/err "frame"
verdict "a corrupted shard is refused, naming file and frame (exit 65)"
$TESTTOOL tok-write --vocab-size 120 -o $T/ids120.tok $T/ids.txt
tupe-shard write -q -o $T/shards120 --seq-len 32 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.05 --shards 2 $T/ids120.tok
run $P train "${common[@]}" --data $T/shards120 -o $T/a --steps 30 --resume
[ $rc = 65 ] && has $T/err "the shards use a vocabulary of 120 tokens, the model 100"
verdict "resuming on other shards is refused"
# Same size, other vocabulary (the hash the shards record): ids that mean other tokens.
for h in 1111 2222; do
    $TESTTOOL tok-write --vocab-size 100 --vocab-hash $h -o $T/ids$h.tok $T/ids.txt
    tupe-shard write -q -o $T/shards$h --seq-len 32 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.05 --shards 1 $T/ids$h.tok
done
run $P train "${common[@]}" --data $T/shards1111 -o $T/v1111 --steps 2
run $P eval --checkpoint $T/v1111/checkpoints/step-00000002 --data $T/shards2222
[ $rc = 65 ] && has $T/err "was trained with another vocabulary (xxh3:0000000000001111) than the shards of $T/shards2222"
verdict "eval on shards of another vocabulary of the same size is refused"
run $P train "${common[@]}" --data $T/shards2222 -o $T/v2222 --steps 2 --checkpoint $T/v1111/checkpoints/step-00000002
[ $rc = 65 ] && has $T/err "was trained with another vocabulary"
verdict "... and so is --checkpoint"
run $P train "${common[@]}" --data $T/shards120 -o $T/i --steps 2 --checkpoint $ck
[ $rc = 65 ] && has $T/err "vocab_size differs"
verdict "weights of another vocabulary are refused"
run $P train --data $T/shards --batch 8 --threads 2 -o $T/i2 --steps 2 --eval-every 0 --checkpoint $ck
[ $rc = 0 ] && grep -q '"hidden_size": 32' $T/i2/config.json
verdict "--checkpoint without --model takes the checkpoint's configuration"
run $P train --data $T/shards --model $T/m.json --batch 8 --threads 2 --eval-every 0 -o $T/w --steps 2
[ $rc = 0 ] && has $T/err "warning: --warmup 10000 is longer than --steps 2: the learning rate rises to 2e-08 at most"
verdict "a warmup longer than the run is pointed out"
run $P train "${common[@]}" -o $T/j0 --steps 4 --keep-step 2,5 --keep 1
[ $rc = 0 ] && has $T/err "warning: --keep-step 5 is past the last step (--steps 4): no such checkpoint" && \
    [ -d $T/j0/checkpoints/step-00000002 ]
verdict "a --keep-step past --steps is pointed out, not silently never kept"
run $P train "${common[@]}" -o $T/j --steps 2 --position bert-r --tie-cls
[ $rc = 2 ] && has $T/err "--tie-cls applies to tupe-a and tupe-r, not to a bert-r model"
verdict "--tie-cls on a BERT variant: usage error, not ignored"
run $P train --data $T/no-such-shards --model $T/m.json -o $T/jp --steps 2 --position bert-x
[ $rc = 2 ] && has $T/err "unknown position variant 'bert-x'" && lacks $T/err "no-such-shards" && [ ! -e $T/jp ]
verdict "a bad --position is refused before any data is opened"
run sh -c "cd $T && $P train ${common[*]} -o - --steps 2"
[ $rc = 2 ] && has $T/err "train writes a run directory, not '-'" && [ ! -e $T/- ]
verdict "-o - is a usage error (a run is a directory)"
run $P train "${common[@]}" -o $T/j --steps 2 --batch 6 --micro-batch 4
[ $rc = 2 ] && has $T/err "does not divide"
verdict "a micro-batch that does not divide the batch: usage error"
# The launcher's world size against what the run can use, before any rank is waited for: a
# batch of 8 does not divide among 65536 ranks (no rank 1 is ever started here).
start=$(date +%s)
run timeout 60 env MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 12000)) RANK=0 WORLD_SIZE=65536 \
    TUPE_COMM_TIMEOUT=30 $P train "${common[@]}" -o $T/ws --steps 2
[ $rc = 2 ] && has $T/err "--batch 8 is not a multiple of the 65536 ranks" && [ ! -e $T/ws ] &&
    [ $(($(date +%s) - start)) -lt 20 ]
verdict "WORLD_SIZE=65536 with --batch 8: a usage error before the rendezvous, not a wait for the ranks"
run $P train --data $T/shards --model tiny -o $T/k --steps 2 --device cuda
if nvidia-smi -L 2>/dev/null | grep -q '^GPU' && $P --version | grep -q 'Built with:.*cuda'; then
    [ $rc = 0 ]
    verdict "--device cuda trains where a GPU is"
else
    [ $rc = 2 ] && has $T/err "device 'cuda': "
    verdict "--device cuda without the CUDA backend or a GPU is a usage error"
fi

# gnuplot-nox is one of DEB_PKGS (make demo draws its loss curve with it).
run gnuplot -e "metrics='$T/a/metrics.jsonl'; out='$T/loss.png'" $TUPE_SRC/share/tupe/plot-loss.gp
[ $rc = 0 ] && [ "$(head -c 4 $T/loss.png | od -An -c | tr -d ' ')" = '211PNG' ]
verdict "share/tupe/plot-loss.gp draws the loss curve"
exit $_failed
