#!/usr/bin/env bash
# A signal is counted once, whatever delivers it (cli/process.h): timeout(1) sends SIGTERM to
# tupe-pretrain and then to its whole process group, so the program receives it twice within
# moments; each try must still finish its step, write its checkpoint and exit 0. Run with the
# launcher itself, many times (the old handler lost about 1 try in 15), alone and as 2 ranks.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-pretrain
awk 'BEGIN { srand(3); for (d = 0; d < 200; d++) { line = ""; for (i = 0; i < 40; i++) line = line (i ? " " : "") 5 + int(90 * rand()); print line } }' >$T/ids.txt
$TESTTOOL tok-write --vocab-size 100 -o $T/ids.tok $T/ids.txt
tupe-shard write -q -o $T/shards --seq-len 32 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --shards 1 $T/ids.tok
cat >$T/m.json <<'J'
{"position": "tupe-r", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 64}
J
common=(--data $T/shards --model $T/m.json --batch 4 --log-every 1000 --eval-every 0 --save-every 0 --threads 1 --steps 10000000)
# try I: one run under timeout(1), which passes the SIGTERM it is sent on as it does its own
# (to the program, then to its group) once the run trains: a signal before the first step ends
# the run as tupe(7) says (130, nothing to keep), and a loaded machine can take seconds to start
# it. "I RC" into $T/rcs, and whether it left a checkpoint.
try() {
    timeout --preserve-status -s TERM 600 $P train "${common[@]}" --log-every 1 -o $T/r$1 >/dev/null 2>$T/err.$1 &
    local t=$! s i
    for i in $(seq 1 1500); do [ -s $T/r$1/metrics.jsonl ] && break; sleep 0.2; done
    kill -TERM $t; wait $t; s=$?
    [ -n "$(ls $T/r$1/checkpoints 2>/dev/null)" ] || s="$s-no-checkpoint"
    echo "$1 $s" >>$T/rcs
}
: >$T/rcs
for round in 0 1 2 3 4 5 6 7; do
    for k in 0 1 2; do try $((round * 3 + k)) & done
    wait
done
bad=$(awk '$2 != 0' $T/rcs | tr '\n' ' ')
rc="tries that lost their checkpoint: ${bad:-none}"
[ "$(wc -l <$T/rcs)" = 24 ] && [ -z "$bad" ]
verdict "timeout -s TERM, 24 tries: each finishes its step, checkpoints and exits 0"
# Two ranks, each under its own timeout (both signalled twice, as Slurm signals every task).
port=$((20000 + ($$ * 7 + RANDOM) % 12000))
: >$T/rcs2
for i in 0 1 2 3 4 5; do
    for r in 0 1; do
        env MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + i)) TUPE_COMM_TIMEOUT=60 RANK=$r WORLD_SIZE=2 \
            timeout --preserve-status -s TERM 4 $P train "${common[@]}" -o $T/w$i >/dev/null 2>$T/werr.$i.$r &
        pids[r]=$!
    done
    wait ${pids[0]}; a=$?; wait ${pids[1]}; b=$?
    [ -n "$(ls $T/w$i/checkpoints 2>/dev/null)" ] || a="$a-no-checkpoint"
    echo "$i $a $b" >>$T/rcs2
done
bad=$(awk '$2 != 0 || $3 != 0' $T/rcs2 | tr '\n' ' ')
rc="tries that failed: ${bad:-none}"
[ -z "$bad" ]
verdict "2 ranks under timeout -s TERM, 6 tries: both ranks checkpoint and exit 0"
exit $_failed
