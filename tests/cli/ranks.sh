#!/usr/bin/env bash
# Data-parallel tupe-pretrain without MPI (lib/train/rendezvous.c, gradsync.c) on the CPU: ranks
# started by a plain `for` loop meet at MASTER_ADDR:MASTER_PORT (torchrun's and Slurm's
# environment) or through TUPE_RENDEZVOUS_FILE, and end with the weights of one process that
# computes the same micro-batches, bit for bit, with the optimizer sharded (ZeRO-1) or not;
# ranks that disagree stop with a message naming what differs; a rank that dies, stops or
# never comes stops the others with a message naming it, within TUPE_COMM_TIMEOUT.
# tests/cuemu/run.sh (part ranks) does the same on emulated GPUs, through NCCL.
. "$(dirname "$0")/lib.sh"
P=tupe-pretrain
cd $T || exit 1
small_world 5 300 2 tupe-r >/dev/null 2>&1
printf '{"position": "tupe-r", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64}\n' >m2.json
common=(--data $T/shards --model $T/m2.json --batch 8 --warmup 2 --lr 5e-3 --log-every 1
        --eval-every 0 --save-every 0 --threads 1 --steps 6 --bucket-mb 0.01 -q)
# A port for this test's rank 0 (tests run side by side), below the kernel's ephemeral range
# (32768 and up), where the ranks' own listening ports (TCP mesh) and every client port come from.
port=$((20000 + ($$ * 7 + RANDOM) % 12000))
export TUPE_COMM_TIMEOUT=30

# ranks N VAR=VALUE... -- ARGS...: N ranks of tupe-pretrain train started by a loop, each with
# RANK/WORLD_SIZE/LOCAL_RANK and the assignments given (HOSTS=A,B,...: rank r's node is
# HOSTS[r], as NCCL_HOSTID); stderr of rank r in $T/err.r, exit statuses in $T/rcs ("0 0 ...");
# rc is the first non-zero one.
ranks() {
    local n=$1 r pids=() envs=() hosts=()
    shift
    while [ "$1" != -- ]; do
        case $1 in HOSTS=*) IFS=, read -ra hosts <<<"${1#HOSTS=}" ;; *) envs+=("$1") ;; esac
        shift
    done
    shift
    for ((r = 0; r < n; r++)); do
        env "${envs[@]}" ${hosts[r]:+NCCL_HOSTID=${hosts[r]}} RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n \
            $P train "$@" 2>$T/err.$r >/dev/null &
        pids+=($!)
    done
    rc=0
    : >$T/rcs
    for p in "${pids[@]}"; do
        wait $p
        local s=$?
        printf '%s ' $s >>$T/rcs
        [ $rc = 0 ] && rc=$s
    done
    cp $T/err.0 $T/err
}
W() { echo $T/$1/checkpoints/step-0000000${2:-6}/model.safetensors; }
same() { # RUN RUN: bit-identical weights, and the same optimizer state in the checkpoints
    run $TESTTOOL st-diff "$(W $1 ${3:-})" "$(W $2 ${3:-})"
    has $T/out "max_abs_diff 0 " && cmp "$(dirname "$(W $1 ${3:-})")/optimizer.safetensors" \
        "$(dirname "$(W $2 ${3:-})")/optimizer.safetensors" >>$T/out
}

run $P train "${common[@]}" -o one4 --micro-batch 4
run $P train "${common[@]}" -o one2 --micro-batch 2
run $P train "${common[@]}" -o one1 --micro-batch 1
[ $rc = 0 ] && [ -d one1/checkpoints/step-00000006 ]
verdict "one process, micro-batches of 4, 2 and 1"

ranks 2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port -- "${common[@]:0:${#common[@]}-1}" -o tcp2
[ $rc = 0 ] && has $T/err "ranks meet through tcp (env); 1 node x 2 ranks; gradients through host" && same one4 tcp2
verdict "2 ranks at MASTER_ADDR:MASTER_PORT (a for loop): the weights of one process, bit for bit"
ranks 2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port -- "${common[@]}" -o tcp2z0 --zero 0
[ $rc = 0 ] && same one4 tcp2z0
verdict "... with the optimizer state whole on every rank (--zero 0)"
# 3 ranks of 2 sequences each: the host collectives straight between the ranks (the mesh) or
# through rank 0 (TUPE_COMM_MESH=0, the star) give the same bits as one process
run $P train "${common[@]}" --batch 6 -o one6 --micro-batch 2
ranks 3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port -- "${common[@]}" --batch 6 -o tcp3
[ $rc = 0 ] && same one6 tcp3
verdict "3 ranks (the mesh between every pair): the weights of one process, bit for bit"
ranks 3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TUPE_COMM_MESH=0 -- "${common[@]}" --batch 6 -o star3
[ $rc = 0 ] && same one6 star3 && same tcp3 star3
verdict "3 ranks through rank 0 (TUPE_COMM_MESH=0): the same weights as the mesh and one process"
ranks 4 TUPE_RENDEZVOUS_FILE=$T/rdzv -- "${common[@]}" -o file4
[ $rc = 0 ] && same one2 file4 && [ ! -e $T/rdzv ]
verdict "4 ranks through TUPE_RENDEZVOUS_FILE: the weights of one process (the file removed)"
ranks 4 TUPE_RENDEZVOUS_FILE=$T/rdzv HOSTS=a,b,a,b -- "${common[@]:0:${#common[@]}-1}" -o nodes4
[ $rc = 0 ] && has $T/err "2 nodes x 2 ranks; gradients through host" && same one2 nodes4
verdict "4 ranks as 2 nodes x 2 (NCCL_HOSTID, every other rank): the weights of one process"
ranks 4 TUPE_RENDEZVOUS_FILE=$T/rdzv HOSTS=a,a,b,c -- "${common[@]:0:${#common[@]}-1}" -o uneven4
[ $rc = 0 ] && has $T/err "the 3 hosts have unequal numbers of ranks" && same one2 uneven4
verdict "4 ranks on hosts of 2, 1 and 1: summed as one node, the weights of one process"
ranks 2 TUPE_RENDEZVOUS_FILE=$T/rdzv -- "${common[@]}" -o red --grad-reduce nccl
[ "$(cat $T/rcs)" = "2 2 " ] && has $T/err.0 "--grad-reduce nccl needs ranks on GPUs with NCCL" &&
    has $T/err.1 "--grad-reduce nccl needs ranks on GPUs with NCCL"
verdict "--grad-reduce nccl on CPU ranks: every rank stops (2), saying why"
ranks 2 TUPE_RENDEZVOUS_FILE=$T/rdzv -- "${common[@]}" -o mb2 --micro-batch 2 --zero 0
[ $rc = 0 ] && same one2 mb2
verdict "2 ranks x 2 micro-batches: the weights of one process with 4"
ranks 4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port -- "${common[@]}" -o mb4 --micro-batch 1
[ $rc = 0 ] && same one1 mb4
verdict "4 ranks x 2 micro-batches of 1: the weights of one process with 8"
# srun's own variables name the ranks (a Slurm script sets only MASTER_ADDR/MASTER_PORT)
pids=()
for r in 0 1; do
    env SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r SLURM_JOB_ID=77 MASTER_ADDR=localhost \
        MASTER_PORT=$port $P train "${common[@]:0:${#common[@]}-1}" -o srun2 2>$T/err.$r >/dev/null &
    pids+=($!)
done
wait ${pids[0]}; rc=$?; wait ${pids[1]}; rc1=$?
cp $T/err.0 $T/err
[ $rc = 0 ] && [ $rc1 = 0 ] && has $T/err "ranks meet through tcp (srun)" && same one4 srun2
verdict "srun's SLURM_PROCID/SLURM_NTASKS with MASTER_ADDR: the weights of one process"

# ---- ranks that disagree --------------------------------------------------------------------
# (--batch 12 divides among 2 and 3 ranks: each rank's own world passes the check before the
# rendezvous, train/comm.h's tupe_comm_fit, and the disagreement is rank 0's to find)
pids=()
env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=0 $P train "${common[@]}" --batch 12 -o dis 2>$T/err.0 &
pids+=($!)
env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=3 RANK=1 $P train "${common[@]}" --batch 12 -o dis 2>$T/err.1 &
pids+=($!)
wait ${pids[0]}; rc=$?; wait ${pids[1]}; rc1=$?
cat $T/err.0 $T/err.1 >$T/err
[ $rc = 2 ] && [ $rc1 = 2 ] && has $T/err.0 "ranks disagree on the world size: rank 1 was started as one of 3 ranks, rank 0 as one of 2" &&
    has $T/err.1 "rank 0 turned rank 1 away" && [ ! -d dis ]
verdict "ranks started with different world sizes: both stop (2), naming the sizes"
cp -r shards shards-other
# one rank with other options: launched by hand
opts_differ() { # RUN ARGS-OF-RANK-1...
    local out=$1
    shift
    env TUPE_RENDEZVOUS_FILE=$T/rdzv WORLD_SIZE=2 RANK=0 $P train "${common[@]}" -o $out 2>$T/err.0 &
    local p0=$!
    env TUPE_RENDEZVOUS_FILE=$T/rdzv WORLD_SIZE=2 RANK=1 $P train "${common[@]}" -o $out "$@" 2>$T/err.1
    rc1=$?
    wait $p0; rc=$?
    cat $T/err.0 $T/err.1 >$T/err
}
opts_differ dis3 --lr 1e-3
[ $rc = 2 ] && [ $rc1 = 2 ] && has $T/err.0 'ranks disagree on the options: rank 1 has "--lr 0.001' &&
    has $T/err.1 'ranks disagree on the options: rank 1 has "--lr 0.001'
verdict "a rank with another --lr: every rank stops (2) naming the option and both values"
small_world 6 300 2 tupe-r >/dev/null 2>&1 # other text: other shards
mv shards shards-b && mv shards-other shards
opts_differ dis4 --data $T/shards-b
[ $rc = 2 ] && [ $rc1 = 2 ] && has $T/err.0 "ranks disagree on the data (--data)"
verdict "a rank reading other shards: every rank stops (2) naming the data"
{ cat $TUPE_SRC/tests/fixtures/attnviz/vocab.txt; echo zzz; } >vocab2.txt
tupe-tokenize encode -q --vocab vocab2.txt -o ids2.tok text.txt &&
    tupe-shard -q -o shards-v --seq-len 32 --shards 2 --valid-fraction 0.1 ids2.tok
opts_differ dis5 --data $T/shards-v
[ $rc = 2 ] && [ $rc1 = 2 ] && has $T/err.0 "ranks disagree on the vocabulary: rank 1 has \"vocabulary of 101 tokens"
verdict "a rank reading shards of another vocabulary: every rank stops (2) naming the vocabulary"
run $P train "${common[@]}" -o res --micro-batch 4 --stop-after 2
mkdir elsewhere
env TUPE_RENDEZVOUS_FILE=$T/rdzv WORLD_SIZE=2 RANK=0 $P train "${common[@]}" -o res --resume 2>$T/err.0 &
p0=$!
env TUPE_RENDEZVOUS_FILE=$T/rdzv WORLD_SIZE=2 RANK=1 $P train "${common[@]}" -o elsewhere/res --resume 2>$T/err.1
rc1=$?
wait $p0; rc=$?
cat $T/err.0 $T/err.1 >$T/err
[ $rc = 2 ] && [ $rc1 = 2 ] && has $T/err.0 "ranks disagree on the checkpoint to resume (is -o on a file system every rank sees?): rank 1 has \"no checkpoint to resume from\", rank 0 \"step-00000002\"" &&
    [ ! -d res/checkpoints/step-00000003 ]
verdict "a rank that sees no checkpoint to resume where rank 0 sees one: every rank stops (2)"

# ---- ranks that die ---------------------------------------------------------------------------
# rank 1 killed (SIGKILL) in the middle of step 5, after the checkpoint of step 4
TUPE_COMM_TIMEOUT=20
pids=()
env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=0 $P train "${common[@]}" -o kill --save-every 2 2>$T/err.0 &
pids+=($!)
env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=1 TUPE_FAULT=trainer.step:5 $P train "${common[@]}" -o kill --save-every 2 2>$T/err.1 &
pids+=($!)
t0=$(date +%s)
wait ${pids[0]}; rc=$?; wait ${pids[1]}; rc1=$?
dt=$(($(date +%s) - t0)); cp $T/err.0 $T/err
[ $rc = 1 ] && [ $rc1 = 137 ] && has $T/err "rank 1 exited or was killed" && [ $dt -lt 20 ] &&
    [ -d kill/checkpoints/step-00000004 ] && [ ! -d kill/checkpoints/step-00000006 ]
verdict "rank 1 killed mid-step: rank 0 stops (1) at once, naming it ($dt s)"
ranks 2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port -- "${common[@]}" -o kill --save-every 2 --resume
[ $rc = 0 ] && same one4 kill
verdict "... and --resume of both ranks ends with the weights of one uninterrupted process"
# rank 1 stopped (SIGSTOP): silent, not gone
pids=()
TUPE_COMM_TIMEOUT=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=0 $P train "${common[@]}" -o stop --steps 100000 2>$T/err.0 &
pids+=($!)
TUPE_COMM_TIMEOUT=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=1 $P train "${common[@]}" -o stop --steps 100000 2>$T/err.1 &
pids+=($!)
for i in $(seq 1 100); do [ -s stop/metrics.jsonl ] && break; sleep 0.1; done
kill -STOP ${pids[1]}
t0=$(date +%s)
wait ${pids[0]}; rc=$?; dt=$(($(date +%s) - t0))
kill -KILL ${pids[1]}; kill -CONT ${pids[1]}; wait ${pids[1]}
cp $T/err.0 $T/err
[ $rc = 1 ] && has $T/err "rank 1 stopped responding: not a word from it for 3 s" && [ $dt -lt 10 ]
verdict "rank 1 stopped (SIGSTOP): rank 0 stops after TUPE_COMM_TIMEOUT=3, naming it ($dt s)"
t0=$(date +%s)
run env TUPE_COMM_TIMEOUT=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=0 $P train "${common[@]}" -o never
[ $rc = 1 ] && has $T/err "rank 1 of 2 did not come within 2 s" && [ ! -d never ]
verdict "a rank that never comes: rank 0 stops after TUPE_COMM_TIMEOUT, naming it"
# The rendezvous file is an output like -o: never inside an input (the shard directory here).
run env TUPE_RENDEZVOUS_FILE=$T/shards/rdzv WORLD_SIZE=2 RANK=0 $P train "${common[@]}" -o inside
[ $rc = 73 ] && has $T/err "TUPE_RENDEZVOUS_FILE $T/shards/rdzv: lies inside" && [ ! -e $T/shards/rdzv ] && [ ! -d inside ]
verdict "TUPE_RENDEZVOUS_FILE inside the shard directory: refused (73) before anything is written"
exit $_failed
