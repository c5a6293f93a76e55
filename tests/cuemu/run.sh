#!/usr/bin/env bash
# make check-cuemu: the CUDA backend (kernels/) run on cuemu, the CPU emulation
# of a GPU (tests/cuemu/README.md), against the CPU backend, in fp32 (`cuda`) and bf16
# (`cuda-bf16`). Parts, several at a time (CUEMU_JOBS, default: the cores):
#
#   selftest            the emulator's own tests (cuemu-selftest)
#   guard               without CUEMU=1 the programs see no GPU: --device auto computes on the
#                       CPU with its notice, --device cuda is a usage error that says why
#   ops-DEV             every operation of lib/backend/backend.h (tupe-parity ops), full shapes, the
#                       default schedule; every product through cuBLASLt
#   ops-warps-DEV       the same with one warp running ahead (CUEMU_SCHEDULE=warps-reverse):
#                       a missing __syncthreads shows
#   ops-legacy-DEV      the same with cuBLASLt's heuristic finding nothing (CUEMU_LT_NOALGO=1,
#                       =2 for bf16: its two answers), every product through cuBLAS's GEMM
#   limits-DEV          shapes at the launch limits (tupe-parity ops --only limits)
#   step-small-DEV      a training step of every variant (bert-a, bert-r, bert-ad, tupe-a,
#                       tupe-a --tie-cls, tupe-r) of small, batch 4, T = 77
#   step-t512-DEV       the same of tiny, batch 2, T = 512
#   step-pe-DEV         a training step of the later encodings (rope interleaved and half-split,
#                       alibi, nope) of small, batch 4, T = 77
#   step-deberta-DEV    a training step of deberta (DeBERTa's disentangled attention, its
#                       per-sequence bias) of small, batch 4, T = 77, through the flash
#                       attention and again materialised (TUPE_ATTN=materialised)
#   step-electra-DEV    a training step of ELECTRA pairs (tupe-r, bert-a, rope; generator 1/4)
#                       of small, batch 4, T = 77: both losses, the generator's logits, its
#                       draws and the labels (the same on both backends), the discriminator's
#                       scores, every gradient of both networks
#   curve-DEV           10 AdamW steps of tiny from the same seed: the loss curves
#   counters            what the emulated GPU counts in a training step of small (cuda-bf16,
#                       T = 128, batch 4, BERT-A and TUPE-R): launches (per layer too), host
#                       waits, dropout's Philox calls and decisions, device memory, and that
#                       two steps of different masked counts made the same launches of the
#                       same shapes (launch_digests); one JSON line each (tupe-parity
#                       counters; README.md, "GPU", has them at T = 256 and 512); and tupe-parity bench --per-op runs (its times mean nothing)
#   pretrain            tupe-pretrain train --device cuda (fp32, bf16) against --device cpu:
#                       the loss of every step and the final validation loss (tiny, 10 steps);
#                       and fp32 with lazy streams bit-identical to the default streams (the
#                       next batch's upload ahead on its copy stream: a take that did not wait
#                       for it reads the step before's batch)
#   pretrain-electra    the same with --objective electra --recipe electra: every loss of both
#                       networks at every step, and the validation's
#   glue                tupe-glue train (RTE) --device cuda (fp32, bf16) against --device cpu:
#                       training losses and dev accuracy at every evaluation (2, 4 steps)
#   nccl                cuemu's NCCL (cuemu-nccltest), 2 to 4 processes, its topology and counts
#   ranks, ranks-faults data parallelism on 2 and 4 emulated GPUs (below)
#   volume              the bytes each rank sends per step inside its node and across nodes,
#                       4 ranks as 2 nodes x 2, against a ring's volume; and the gradients'
#                       path alone at 2 nodes x 8 (16 ranks)
#   asan-*              selftest, ops and steps (tiny, T = 40) in the ASan+UBSan build
#
# A part passes when its commands succeed, every comparison passes, and the emulator reported
# nothing ("cuemu: error|FAULT|misuse" lines) and no sanitizer did. One line per part, "ok -
# cuemu/PART (seconds; details)" or "not ok - ..." with the lines that failed, then, last,
# "N passed, N failed". Exit status 0 only when every part passed.
#
# Environment: TUPE_SRC, TUPE_DATA, CUEMU_BUILD and CUEMU_SAN_BUILD (build directories, from
# the Makefile); CUEMU_PARTS, an extended regular expression: only the parts it matches;
# CUEMU_PARITY, a tupe-parity to use instead of CUEMU_BUILD's (tests/cuemu/mutants.sh);
# CUEMU_FIRST_FAILURE=1: one part at a time, stopping at the first that fails; CUEMU_KEEP=1:
# the parts' files (logs, runs) are kept, in the directory named first; CUEMU_PART_TIMEOUT,
# the seconds a part may take (default 600): one that runs longer (a kernel that never ends,
# a process that deadlocks at exit) is killed, with everything it started, and fails with
# "timed out", so that a broken kernel fails the suite within minutes, never hangs it.
#
# The sanitizer parts run with symbolize=0: a report then symbolizes nothing inside the
# process. With symbolization on, a report from an interceptor followed by LeakSanitizer's
# check at exit (matching tests/lsan.supp) could re-enter the symbolizer's lock and wait on
# it forever, single-threaded. The suppressions name libraries, which LeakSanitizer matches
# by module without the symbolizer; a report's frames are "(module+0xoffset)", which
#   llvm-symbolizer --obj=MODULE 0xOFFSET   (or addr2line -fe MODULE 0xOFFSET)
# turns into lines.
set -u
: "${TUPE_SRC:?run through make check-cuemu}" "${CUEMU_BUILD:?run through make check-cuemu}"
: "${CUEMU_SAN_BUILD:=}" "${TUPE_DATA:=$TUPE_SRC/../shared/data}"
CB=$CUEMU_BUILD
SB=$CUEMU_SAN_BUILD
X=${CUEMU_PARITY:-$CB/tests/tupe-parity}
only=${CUEMU_PARTS:-}
first_failure=${CUEMU_FIRST_FAILURE:-0}
jobs=${CUEMU_JOBS:-$(nproc 2>/dev/null || echo 2)}
[ "$first_failure" = 1 ] && jobs=1

# Every part: the emulated GPU on, one host thread each (parts run side by side instead), no
# OpenMP spinning (the machine is shared), sanitizers that stop at the first report.
export CUEMU=1 CUEMU_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$TUPE_SRC/tests/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TUPE_PROGRESS_INTERVAL=0
part_timeout=${CUEMU_PART_TIMEOUT:-600}
# The sanitizer parts' options (see above): never symbolize inside the process.
SAN_ENV="export ASAN_OPTIONS=$ASAN_OPTIONS:symbolize=0 UBSAN_OPTIONS=$UBSAN_OPTIONS:symbolize=0 LSAN_OPTIONS=$LSAN_OPTIONS:symbolize=0;"

logs=$(mktemp -d "${TMPDIR:-/tmp}/cuemu-run.XXXXXX")
if [ "${CUEMU_KEEP:-0}" = 1 ]; then echo "# the parts' files are kept in $logs"; else trap 'rm -rf "$logs"' EXIT; fi

# ---- the parts (each prints what it compares; its exit status says whether it passed) -----

steps() { # PARITY DEV MODEL BATCH SEQ [VARIANT...]
    local rc=0 v p=$1 dev=$2 model=$3 b=$4 t=$5
    shift 5
    [ $# -gt 0 ] || set -- bert-a bert-r bert-ad tupe-a "tupe-a --tie-cls" tupe-r
    for v in "$@"; do
        # shellcheck disable=SC2086
        "$p" step --ref cpu --dev "$dev" --model "$model" --position $v --batch "$b" --seq "$t" || rc=1
    done
    return $rc
}

# GEMM line of a parity run: every product on the path `want` (lt: cuBLASLt, legacy: cuBLAS).
gemm_path() { # WANT LOG
    if [ "$1" = lt ]; then grep -q '^GEMM .*, 0 through cuBLAS$' "$2"
    else grep -q '^GEMM .*: 0 products through cuBLASLt, [1-9][0-9]* through cuBLAS' "$2"; fi ||
        { echo "GEMM path: expected every product through ${1/lt/cuBLASLt}"; return 1; }
}

# tupe-parity ops on DEV (with the environment assignments after it), and its GEMM line.
ops_on() { # PATH DEV [VAR=VALUE]...
    local want=$1 dev=$2 s
    shift 2
    env "$@" "$X" ops --ref cpu --dev "$dev" >"$log.out"
    s=$?
    cat "$log.out"
    [ $s = 0 ] && gemm_path "$want" "$log.out"
}

# Data for the programs: a WordPiece vocabulary and shards of the bundled sample corpus, and a
# tiny model pre-trained briefly on the CPU.
prepare() { # DIR
    local d=$1 b=$CB/bin s=$TUPE_SRC/share/tupe/sample/corpus.txt.zst
    mkdir -p "$d"
    "$b/tupe-tokenize" train -q --vocab-size 1000 -o "$d/vocab.txt" "$s" &&
        "$b/tupe-tokenize" encode -q --docs line --vocab "$d/vocab.txt" "$s" |
        "$b/tupe-shard" write -q -o "$d/shards" --seq-len 32 --valid-fraction 0.02 --shards 1
}

# Largest relative difference of the numbers after KEY in two files, field by field.
reldiff() { # KEY FILE FILE
    paste <(grep -o "\"$1\":[-0-9.e+]*" "$2" | cut -d: -f2) \
          <(grep -o "\"$1\":[-0-9.e+]*" "$3" | cut -d: -f2) |
        awk 'BEGIN { w = 0; n = 0 }
             { n++; d = $1 - $2; if (d < 0) d = -d; r = $1 < 0 ? -$1 : $1; if (r < 1e-9) r = 1e-9
               if (d / r > w) w = d / r }
             END { if (n == 0) { print "none"; exit 1 } printf "%.3g\n", w }'
}

part_pretrain() { # [NAME OPTION...]: the run's options added to every side
    local name=${1:-pretrain}
    [ $# -gt 0 ] && shift
    local d=$logs/$name b=$CB/bin rc=0 p w
    prepare "$d" || return 1
    local common=(-q --data "$d/shards" --model tiny --steps 10 --warmup 2 --batch 4 --lr 1e-3
                  --save-every 0 --eval-every 0 --eval-sequences 8 --log-every 1 --threads 1 "$@")
    "$b/tupe-pretrain" train "${common[@]}" -o "$d/cpu" --device cpu || return 1
    for p in fp32 bf16; do
        "$b/tupe-pretrain" train "${common[@]}" -o "$d/$p" --device cuda --precision $p || return 1
        local tol=1e-4
        [ $p = bf16 ] && tol=1e-2
        w=$(reldiff '[a-z_]*loss' "$d/cpu/metrics.jsonl" "$d/$p/metrics.jsonl") || rc=1
        echo "DETAIL $p losses within $w (tolerance $tol)"
        awk -v w="$w" -v t=$tol 'BEGIN { exit !(w <= t) }' || rc=1
    done
    # the next step's batch is uploaded on a copy stream while the step runs, and taken into
    # the model's inputs at the step's start: with streams that run only when waited for, a
    # take that did not wait for its upload would read the step before's batch every time
    CUEMU_STREAMS=lazy "$b/tupe-pretrain" train "${common[@]}" -o "$d/lazy" --device cuda --precision fp32 \
        --save-every 10 || return 1
    "$b/tupe-pretrain" train "${common[@]}" -o "$d/fp32s" --device cuda --precision fp32 \
        --save-every 10 || return 1
    if cmp -s <(grep -o '"[a-z_]*loss":[-0-9.e+]*' "$d/fp32s/metrics.jsonl") \
              <(grep -o '"[a-z_]*loss":[-0-9.e+]*' "$d/lazy/metrics.jsonl") &&
        "$CB/tests/tupe-testtool" st-diff "$d/fp32s/checkpoints/step-00000010/model.safetensors" \
            "$d/lazy/checkpoints/step-00000010/model.safetensors" | grep -q '^max_abs_diff 0 '; then
        echo "DETAIL lazy streams (CUEMU_STREAMS=lazy): every loss and the weights bit-identical"
    else
        echo "lazy streams: the losses or weights differ from the default streams'"
        rc=1
    fi
    return $rc
}

part_glue() {
    local d=$logs/glue b=$CB/bin rc=0 p w
    prepare "$d" || return 1
    "$b/tupe-pretrain" train -q --data "$d/shards" -o "$d/pre" --model tiny --steps 10 --warmup 2 \
        --batch 8 --lr 1e-3 --save-every 0 --eval-every 0 --eval-sequences 8 --device cpu --threads 1 ||
        return 1
    local common=(-q --task RTE --data "$TUPE_DATA/glue" --checkpoint "$d/pre/checkpoints/step-00000010"
                  --vocab "$d/vocab.txt" --max-len 32 --epochs 1 --batch 8 --max-train 32 --max-dev 16
                  --evals-per-epoch 2 --lr 1e-3 --threads 1)
    "$b/tupe-glue" train "${common[@]}" -o "$d/cpu" --device cpu >/dev/null || return 1
    for p in fp32 bf16; do
        "$b/tupe-glue" train "${common[@]}" -o "$d/$p" --device cuda --precision $p >/dev/null || return 1
        local tol=1e-4 acc=0
        [ $p = bf16 ] && tol=1e-2 acc=0.125 # bf16 may flip a borderline example: 2 of 16
        w=$(reldiff train_loss "$d/cpu/metrics.jsonl" "$d/$p/metrics.jsonl") || rc=1
        a=$(paste <(grep -o '"acc":[0-9.]*' "$d/cpu/metrics.jsonl" | cut -d: -f2) \
                  <(grep -o '"acc":[0-9.]*' "$d/$p/metrics.jsonl" | cut -d: -f2) |
            awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { print m + 0 }')
        echo "DETAIL $p training losses within $w (tolerance $tol), dev accuracy within $a (tolerance $acc)"
        awk -v w="$w" -v t=$tol -v a="$a" -v at=$acc 'BEGIN { exit !(w <= t && a <= at) }' || rc=1
    done
    return $rc
}

# ---- data parallelism on emulated GPUs: NCCL (cuemu's), rendezvous and mpirun ---------------
# A model of 2 layers (2 or 3 buckets of --bucket-mb 0.01), 4 steps of a batch of 8, in fp32.
ranks_setup() { # DIR
    prepare "$1" || return 1
    printf '{"position": "tupe-r", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 64}\n' >"$1/m2.json"
    RC=(-q --data "$1/shards" --model "$1/m2.json" --batch 8 --steps 4 --warmup 2 --lr 1e-3
        --save-every 0 --eval-every 0 --eval-sequences 8 --log-every 1 --threads 1 --bucket-mb 0.01
        --precision fp32)
    RPORT=$((20000 + ($$ * 13 + RANDOM) % 12000))
}

# for_ranks N OUT VAR=VALUE... -- ARGS...: N ranks started by a loop (RANK, WORLD_SIZE,
# LOCAL_RANK; N emulated GPUs), the full log of rank 0 in OUT.log; fails when one fails.
# HOSTS=A,B,... among the assignments puts rank r on node HOSTS[r] (NCCL_HOSTID, which cuemu's
# NCCL groups its ranks by, as NCCL does).
for_ranks() {
    local n=$1 out=$2 r pids=() envs=() hosts=() rc=0
    shift 2
    while [ "$1" != -- ]; do
        case $1 in HOSTS=*) IFS=, read -ra hosts <<<"${1#HOSTS=}" ;; *) envs+=("$1") ;; esac
        shift
    done
    shift
    for ((r = 0; r < n; r++)); do
        env "${envs[@]}" ${hosts[r]:+NCCL_HOSTID=${hosts[r]}} CUEMU_DEVICES=$n RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n \
            "$CB/bin/tupe-pretrain" train "${RC[@]/-q/-v}" -o "$out" "$@" >/dev/null 2>"$out.$r.log" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    mv "$out.0.log" "$out.log"
    cat "$out".*.log "$out.log" | grep -E '^cuemu: |tupe-pretrain: .*(error|failed|disagree)'
    rm -f "$out".*.log
    return $rc
}

# same_weights A B WHAT [PATH]: bit-identical weights at the last step, the same optimizer state in the
# checkpoints, and the gradients through NCCL
# (or PATH) in more than one bucket (B.log, when there is one).
same_weights() {
    local d
    d=$("$CB/tests/tupe-testtool" st-diff "$1/checkpoints/step-00000004/model.safetensors" \
        "$2/checkpoints/step-00000004/model.safetensors") || { echo "st-diff failed: $d"; return 1; }
    if [ -e "$2.log" ] && ! grep -Eq "gradients through ${4:-nccl} in [2-9] buckets" "$2.log"; then
        echo "$3: not through ${4:-nccl} in buckets:"; grep 'ranks meet' "$2.log"; return 1
    fi
    cmp "$1/checkpoints/step-00000004/optimizer.safetensors" \
        "$2/checkpoints/step-00000004/optimizer.safetensors" || return 1
    case $d in
    "max_abs_diff 0 "*) echo "DETAIL $3: bit-identical"; return 0 ;;
    *) echo "$3: $d (not bit-identical)"; return 1 ;;
    esac
}

part_ranks() {
    local d=$logs/ranks b=$CB/bin rc=0 w
    ranks_setup "$d" || return 1
    "$b/tupe-pretrain" train "${RC[@]}" -o "$d/cpu" --device cpu --micro-batch 4 || return 1
    "$b/tupe-pretrain" train "${RC[@]}" -o "$d/one4" --device cuda --micro-batch 4 || return 1
    "$b/tupe-pretrain" train "${RC[@]}" -o "$d/one2" --device cuda --micro-batch 2 || return 1
    w=$("$CB/tests/tupe-testtool" st-diff "$d/cpu/checkpoints/step-00000004/model.safetensors" \
        "$d/one4/checkpoints/step-00000004/model.safetensors" | awk '{ print $2 }')
    # fp32: the weights within 1e-5 (Adam's steps are about lr wherever a gradient is near
    # zero, whatever its rounding, so not much tighter), the losses as in part pretrain
    local l
    l=$(reldiff '[a-z_]*loss' "$d/cpu/metrics.jsonl" "$d/one4/metrics.jsonl") || rc=1
    echo "DETAIL one GPU within $w of the CPU's weights (tolerance 1e-5), losses within $l (1e-4)"
    awk -v w="$w" -v l="$l" 'BEGIN { exit !(w <= 1e-5 && l <= 1e-4) }' || rc=1
    local tcp=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$RPORT TUPE_COMM_TIMEOUT=120)
    local file=(TUPE_RENDEZVOUS_FILE=$d/rdzv TUPE_COMM_TIMEOUT=120)
    for_ranks 2 "$d/tcp2" "${tcp[@]}" -- --device cuda && same_weights "$d/one4" "$d/tcp2" "2 ranks, MASTER_ADDR, ZeRO-1" || rc=1
    for_ranks 2 "$d/tcp2z0" "${tcp[@]}" -- --device cuda --zero 0 && same_weights "$d/one4" "$d/tcp2z0" "2 ranks, MASTER_ADDR, --zero 0" || rc=1
    for_ranks 4 "$d/file4" "${file[@]}" -- --device cuda && same_weights "$d/one2" "$d/file4" "4 ranks, TUPE_RENDEZVOUS_FILE, ZeRO-1" || rc=1
    for_ranks 4 "$d/file4z0" "${file[@]}" -- --device cuda --zero 0 && same_weights "$d/one2" "$d/file4z0" "4 ranks, file, --zero 0" || rc=1
    for_ranks 2 "$d/mb2" "${file[@]}" -- --device cuda --micro-batch 2 && same_weights "$d/one2" "$d/mb2" "2 ranks x 2 micro-batches" || rc=1
    # nodes: the fixed order within then across them, wherever the ranks are
    for_ranks 4 "$d/n22" "${file[@]}" HOSTS=a,a,b,b -- --device cuda && grep -q '2 nodes x 2 ranks' "$d/n22.log" &&
        same_weights "$d/one2" "$d/n22" "4 ranks as 2 nodes x 2 (NCCL_HOSTID)" || rc=1
    for_ranks 4 "$d/n22z0" "${file[@]}" HOSTS=a,b,a,b -- --device cuda --zero 0 &&
        same_weights "$d/one2" "$d/n22z0" "4 ranks as 2 nodes x 2, every other rank, --zero 0" || rc=1
    for_ranks 4 "$d/n41" "${file[@]}" HOSTS=a,b,c,d -- --device cuda && grep -q '4 nodes x 1 rank;' "$d/n41.log" &&
        same_weights "$d/one2" "$d/n41" "4 ranks as 4 nodes x 1" || rc=1
    for_ranks 4 "$d/n22h" "${file[@]}" HOSTS=b,a,a,b TUPE_NCCL=0 -- --device cuda &&
        same_weights "$d/one2" "$d/n22h" "4 ranks as 2 nodes x 2, TUPE_NCCL=0 (host copies)" host || rc=1
    # NCCL's own sums: another order (cuemu's NCCL folds in rank order), so close, not the same
    local w
    for_ranks 4 "$d/n22n" "${file[@]}" HOSTS=a,a,b,b -- --device cuda --grad-reduce nccl &&
        grep -q "summed by NCCL's own collectives" "$d/n22n.log" &&
        w=$("$CB/tests/tupe-testtool" st-diff "$d/one2/checkpoints/step-00000004/model.safetensors" \
            "$d/n22n/checkpoints/step-00000004/model.safetensors" | awk '{ print $2 }') &&
        echo "DETAIL 4 ranks, --grad-reduce nccl: within $w of one GPU's weights (tolerance 1e-5)" &&
        awk -v w="$w" 'BEGIN { exit !(w <= 1e-5) }' || { echo "--grad-reduce nccl: $w"; rc=1; }
    "$b/tupe-pretrain" train "${RC[@]/fp32/bf16}" -o "$d/one4b" --device cuda --micro-batch 4 &&
        for_ranks 2 "$d/bf2" "${tcp[@]}" -- --device cuda --precision bf16 &&
        same_weights "$d/one4b" "$d/bf2" "2 ranks in bf16" || rc=1
    for_ranks 2 "$d/host2" "${tcp[@]}" TUPE_NCCL=0 -- --device cuda && same_weights "$d/one4" "$d/host2" "2 ranks, TUPE_NCCL=0 (host copies)" host || rc=1
    for_ranks 2 "$d/lazy2" "${tcp[@]}" CUEMU_STREAMS=lazy -- --device cuda && same_weights "$d/one4" "$d/lazy2" "2 ranks, streams run only when waited for (CUEMU_STREAMS=lazy)" || rc=1
    # the overlaps (the gradients' buckets behind the backward pass, the parameters' gathers
    # behind the next forward pass, layer by layer): NCCL's work started late, so that the
    # compute stream runs ahead wherever it does not wait; and streams run only when waited for
    for_ranks 4 "$d/n22d" "${file[@]}" HOSTS=a,a,b,b CUEMU_NCCL_DELAY_MS=20 -- --device cuda &&
        same_weights "$d/one2" "$d/n22d" "4 ranks as 2 nodes x 2, NCCL's work 20 ms late" || rc=1
    for_ranks 4 "$d/n22l" "${file[@]}" HOSTS=a,b,a,b CUEMU_NCCL_DELAY_MS=5 CUEMU_STREAMS=lazy -- --device cuda &&
        same_weights "$d/one2" "$d/n22l" "4 ranks as 2 nodes x 2, NCCL 5 ms late, lazy streams" || rc=1
    # tests/gpu/run.sh's measure of NCCL's bandwidth runs (its numbers mean nothing here)
    local r pids=()
    for r in 0 1; do
        env TUPE_RENDEZVOUS_FILE=$d/rdzv-bench WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r CUEMU_DEVICES=2 \
            "$CB/tests/tupe-commtest" gpu-bench 1 2 >"$d/bench.$r" &
        pids+=($!)
    done
    wait "${pids[0]}" && wait "${pids[1]}" && grep -q '^ALLREDUCE ranks=2 bytes=1048576 ' "$d/bench.0" &&
        grep -q '^GRADPATH ranks=2 ' "$d/bench.0" && echo "DETAIL tupe-commtest gpu-bench runs" ||
        { echo "tupe-commtest gpu-bench failed"; cat "$d/bench.0"; rc=1; }
    if [ -n "$(command -v mpirun)" ] && ldd "$b/tupe-pretrain" | grep -q 'libmpi'; then
        local n mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
        for n in 2 4; do
            local ref=$d/one4
            [ $n = 4 ] && ref=$d/one2
            "${mpi[@]}" -np $n -x CUEMU_DEVICES=$n -x CUEMU -x CUEMU_THREADS -x OMP_NUM_THREADS \
                -x TUPE_PROGRESS_INTERVAL "$b/tupe-pretrain" train "${RC[@]/-q/-v}" -o "$d/mpi$n" \
                --device cuda >/dev/null 2>"$d/mpi$n.log" &&
                same_weights "$ref" "$d/mpi$n" "$n ranks, mpirun (NCCL id through MPI)" ||
                { rc=1; grep -E '^cuemu: |error|fail' "$d/mpi$n.log" | head -5; }
        done
    else
        echo "DETAIL mpirun parts skipped: no MPI in this build"
    fi
    return $rc
}

# The bytes each rank sends per step inside its node and across nodes, as cuemu's NCCL counts
# them (CUEMU_NCCL_BYTES): 4 ranks as 2 nodes x 2, the difference between runs of 4 and 2
# steps (the start and the end cancel), against a ring's: 2 (W-1)/W of the gradients G (and
# the step's scalars S) per rank in all, and 2 (W-1)/W of the node's over its L links across
# nodes.
volume() { # NAME LIMIT VAR=VALUE... -- ARGS...: prints a line per rank and DETAIL; 1 when the
    # total is not the ring's or a rank sends more than LIMIT times the ring's share across nodes
    local name=$1 limit=$2 d=$logs/volume s n=4 L=2
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    for s in 2 4; do
        rm -f "$d/$name.$s.bytes"
        for_ranks $n "$d/$name.$s" "${envs[@]}" HOSTS=node-a,node-a,node-b,node-b \
            CUEMU_NCCL_BYTES="$d/$name.$s.bytes" -- --device cuda --steps $s "$@" || return 1
    done
    local G
    G=$(sed -n 's/.*buckets (\([0-9]*\) reals).*/\1/p' "$d/$name.4.log" | head -1)
    [ -n "$G" ] || { echo "$name: no gradient size in the log"; return 1; }
    # S: the step's scalars, one all-reduce of doubles: the norm's runs' sums (one per 4096
    # reals) and the 4 micro-batches' losses
    awk -v name="$name" -v G=$((G * 4)) -v S=$(((G / 4096 + 4) * 8)) -v W=$n -v L=$L -v limit="$limit" '
        FNR == 1 { f++ }
        { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          r = v["rank"]; intra[f, r] = v["intra"]; inter[f, r] = v["inter"]; nodes = v["nodes"] }
        END {
            ring = 2 * (W - 1) / W * (G + S); across = ring / L; bad = 0; worst = 0; lo = 1e9; hi = 0
            for (r = 0; r < W; r++) {
                a = (intra[2, r] - intra[1, r]) / 2; x = (inter[2, r] - inter[1, r]) / 2; t = (a + x) / ring
                printf "%s: rank %d: %.0f bytes per step inside its node, %.0f across (%.3f of the ring'"'"'s total, %.3f of its share across)\n", name, r, a, x, t, x / across
                if (t > 1.001 || t < 0.999) bad = 1
                if (t < lo) lo = t
                if (t > hi) hi = t
                if (x / across > worst) worst = x / across
                if (a > ma) ma = a
                if (x > mx) mx = x
            }
            printf "DETAIL %s (%d nodes x %d, G = %d bytes): per rank and step at most %.0f bytes inside its node and %.0f across, %.3f to %.3f of a ring'"'"'s 2(W-1)/W G in all, across nodes %.3f of its 2(W-1)/W G/L\n", name, nodes, W / nodes, G, ma, mx, lo, hi, worst
            if (worst > limit) { printf "%s: across nodes %.3f of the ring'"'"'s share, more than %.2f\n", name, worst, limit; bad = 1 }
            exit bad
        }' "$d/$name.2.bytes" "$d/$name.4.bytes"
}

part_volume() {
    local rc=0 tcp=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$RPORT TUPE_COMM_TIMEOUT=120)
    ranks_setup "$logs/volume" || return 1
    # the fixed order (within the nodes, then across): at most the ring's share across nodes
    # (2 (N-1)/N of G/L: 2/3 of it at 2 x 2), the goal being 1.1
    volume tree 1.1 "${tcp[@]}" -- || rc=1
    volume tree-zero0 1.1 "${tcp[@]}" -- --zero 0 || rc=1
    # NCCL's own (cuemu's counts: rings): the ring's share exactly
    volume nccl 1.001 "${tcp[@]}" -- --grad-reduce nccl || rc=1
    path16 || rc=1
    return $rc
}

# The gradients' path alone (tupe-commtest gpu-path: the fixed-order reduce and gather of
# 1 MiB) at the paper's 2 nodes x 8, 16 ranks: the bytes of each rank inside its node and
# across, against the ring's (tests/gpu/run.sh and README's projection take the share across).
path16() {
    local d=$logs/volume r pids=() rc=0 h G=1048576 W=16 L=8
    rm -f "$d/path16.bytes"
    for ((r = 0; r < W; r++)); do
        h=node-a
        [ $r -ge $L ] && h=node-b
        env NCCL_HOSTID=$h TUPE_RENDEZVOUS_FILE="$d/rdzv16" TUPE_COMM_TIMEOUT=120 CUEMU_DEVICES=$W \
            CUEMU_NCCL_BYTES="$d/path16.bytes" WORLD_SIZE=$W RANK=$r LOCAL_RANK=$r \
            "$CB/tests/tupe-commtest" gpu-path 1 >/dev/null 2>"$d/path16.$r.log" &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    grep -h -E '^cuemu: |tupe-commtest: ' "$d"/path16.*.log
    [ $rc = 0 ] || { echo "path16: a rank failed"; return 1; }
    awk -v G=$G -v W=$W -v L=$L '
        { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          n++; t = (v["intra"] + v["inter"]) / (2 * (W - 1) / W * G); x = v["inter"] / (2 * (W - 1) / W * G / L)
          if (n == 1 || t < lo) lo = t; if (t > hi) hi = t; if (x > worst) worst = x }
        END {
            printf "DETAIL the gradients'"'"' path at 2 nodes x 8 (16 ranks, 1 MiB): %.3f to %.3f of a ring'"'"'s 2(W-1)/W G in all, across nodes %.3f of its share (2 (N-1)/N G/L over 2 (W-1)/W G/L: 0.533)\n", lo, hi, worst
            exit !(n == W && lo >= 0.999 && hi <= 1.001 && worst <= 0.534)
        }' "$d/path16.bytes" || { echo "path16: not the expected volume"; cat "$d/path16.bytes"; return 1; }
}

part_ranks_faults() {
    local d=$logs/ranksf b=$CB/bin rc=0 t0 p0 p1 s0 s1
    ranks_setup "$d" || return 1
    local tcp=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$RPORT CUEMU_DEVICES=2 WORLD_SIZE=2)
    "$b/tupe-pretrain" train "${RC[@]}" -o "$d/one4" --device cuda --micro-batch 4 || return 1
    # rank 1 killed (SIGKILL) in the middle of step 3, after the checkpoint of step 2
    t0=$(date +%s)
    env "${tcp[@]}" TUPE_COMM_TIMEOUT=60 RANK=0 LOCAL_RANK=0 "$b/tupe-pretrain" train "${RC[@]}" \
        -o "$d/kill" --device cuda --save-every 2 2>"$d/kill.0.log" &
    p0=$!
    env "${tcp[@]}" TUPE_COMM_TIMEOUT=60 RANK=1 LOCAL_RANK=1 TUPE_FAULT=trainer.step:3 \
        "$b/tupe-pretrain" train "${RC[@]}" -o "$d/kill" --device cuda --save-every 2 2>"$d/kill.1.log" &
    p1=$!
    wait $p0; s0=$?
    wait $p1; s1=$?
    if [ $s0 = 1 ] && [ $s1 = 137 ] && grep -q 'rank 1 exited or was killed' "$d/kill.0.log" &&
        [ -d "$d/kill/checkpoints/step-00000002" ] && [ ! -d "$d/kill/checkpoints/step-00000003" ]; then
        echo "DETAIL rank 1 killed mid-step: rank 0 stopped naming it ($(($(date +%s) - t0)) s after both started)"
    else
        echo "rank 1 killed mid-step: rank 0 exit $s0, rank 1 exit $s1:"; cat "$d/kill.0.log"; rc=1
    fi
    for_ranks 2 "$d/kill" MASTER_ADDR=127.0.0.1 MASTER_PORT=$RPORT TUPE_COMM_TIMEOUT=120 -- \
        --device cuda --save-every 2 --resume &&
        same_weights "$d/one4" "$d/kill" "--resume after the kill: the uninterrupted run's weights" || rc=1
    # rank 1 on the CPU: both stop (2), naming it
    env "${tcp[@]}" TUPE_COMM_TIMEOUT=60 RANK=0 LOCAL_RANK=0 "$b/tupe-pretrain" train "${RC[@]}" \
        -o "$d/dev" --device cuda 2>"$d/dev.0.log" &
    p0=$!
    env "${tcp[@]}" TUPE_COMM_TIMEOUT=60 RANK=1 LOCAL_RANK=1 "$b/tupe-pretrain" train "${RC[@]}" \
        -o "$d/dev" --device cpu 2>"$d/dev.1.log"
    s1=$?
    wait $p0; s0=$?
    if [ $s0 = 2 ] && [ $s1 = 2 ] && grep -q 'ranks disagree on the device: rank 1 computes on the CPU' "$d/dev.1.log" &&
        grep -q 'ranks disagree on the device: rank 1 computes on the CPU or has TUPE_NCCL=0' "$d/dev.0.log"; then
        echo "DETAIL rank 1 on the CPU, rank 0 on a GPU: both stop (2), naming it"
    else
        echo "rank 1 on the CPU: exit $s0 and $s1:"; cat "$d/dev.0.log" "$d/dev.1.log"; rc=1
    fi
    # rank 1 stopped (SIGSTOP) while rank 0 waits in NCCL: the silence is named, NCCL aborted
    env "${tcp[@]}" TUPE_COMM_TIMEOUT=4 RANK=0 LOCAL_RANK=0 "$b/tupe-pretrain" train "${RC[@]}" \
        -o "$d/stop" --device cuda --steps 100000 2>"$d/stop.0.log" &
    p0=$!
    env "${tcp[@]}" TUPE_COMM_TIMEOUT=4 RANK=1 LOCAL_RANK=1 "$b/tupe-pretrain" train "${RC[@]}" \
        -o "$d/stop" --device cuda --steps 100000 2>"$d/stop.1.log" &
    p1=$!
    for _ in $(seq 1 300); do [ -s "$d/stop/metrics.jsonl" ] && break; sleep 0.1; done
    kill -STOP $p1
    t0=$(date +%s)
    wait $p0; s0=$?
    kill -KILL $p1; kill -CONT $p1; wait $p1
    local took=$(($(date +%s) - t0))
    if [ $s0 = 1 ] && grep -q 'rank 1 stopped responding: not a word from it for 4 s' "$d/stop.0.log" && [ $took -lt 30 ]; then
        echo "DETAIL rank 1 stopped: rank 0 stopped in $took s naming it (TUPE_COMM_TIMEOUT=4)"
    else
        echo "rank 1 stopped: rank 0 exit $s0 after $took s:"; tail -3 "$d/stop.0.log"; rc=1
    fi
    return $rc
}

part_counters() {
    local rc=0 v line k
    for v in bert-a tupe-r; do
        line=$("$X" counters --dev cuda-bf16 --model small --position $v --seq 128 --batch 4) ||
            { echo "tupe-parity counters failed ($v)"; rc=1; continue; }
        for k in launches launches_per_layer gemms host_syncs philox_calls dropout_decisions \
                 peak_device_bytes largest_buffer_bytes; do
            echo "$line" | grep -Eq "\"$k\":[1-9][0-9]*[,}]" ||
                { echo "counters ($v): no positive \"$k\" in $line"; rc=1; }
        done
        # P1 of issue 28: at most one Philox call per 8 dropout decisions
        local calls dec
        calls=$(echo "$line" | grep -o '"philox_calls":[0-9]*' | cut -d: -f2)
        dec=$(echo "$line" | grep -o '"dropout_decisions":[0-9]*' | cut -d: -f2)
        [ -n "$calls" ] && [ -n "$dec" ] && [ $((calls * 8)) -le "$dec" ] ||
            { echo "counters ($v): $calls Philox calls for $dec dropout decisions (at most 1 per 8)"; rc=1; }
        # issue 28 (a CUDA graph's prerequisite): two steps of different masked counts, the
        # head over the capacity's rows, made the same launches of the same shapes
        local m1 m2
        m1=$(echo "$line" | sed -n 's/.*"masked":\[\([0-9]*\),\([0-9]*\)\].*/\1/p')
        m2=$(echo "$line" | sed -n 's/.*"masked":\[\([0-9]*\),\([0-9]*\)\].*/\2/p')
        [ -n "$m1" ] && [ "$m1" != "$m2" ] && echo "$line" | grep -q '"same_launches":true' ||
            { echo "counters ($v): steps of $m1 and $m2 masked positions: not the same launches"; rc=1; }
        echo "DETAIL $line"
    done
    "$X" bench --dev cuda-bf16 --model tiny --position tupe-r --seq 64 --batch 2 --steps 1 --per-op \
        >"$log.bench" || { echo "tupe-parity bench --per-op failed"; cat "$log.bench"; return 1; }
    for k in attn_fwd attn_bwd linear_fwd adamw '(rest)'; do
        grep -q "^OPTIME cuda-bf16 $k  *ms_per_step=" "$log.bench" ||
            { echo "bench --per-op: no OPTIME line of $k"; cat "$log.bench"; rc=1; }
    done
    [ $rc = 0 ] && echo "DETAIL bench --per-op: $(grep -c '^OPTIME' "$log.bench") OPTIME lines"
    return $rc
}

part_guard() {
    local d=$logs/guard b=$CB/bin rc=0
    prepare "$d" || return 1
    local common=(--data "$d/shards" --model tiny --steps 1 --batch 4 --save-every 0 --eval-every 0
                  --eval-sequences 4 --threads 1)
    env -u CUEMU "$b/tupe-pretrain" train "${common[@]}" -o "$d/auto" --device auto 2>"$d/err" &&
        grep -q 'no CUDA device (.*CUEMU=1.*): computing on the CPU' "$d/err" ||
        { echo "--device auto without CUEMU=1 did not compute on the CPU with its notice"; cat "$d/err"; rc=1; }
    env -u CUEMU "$b/tupe-pretrain" train "${common[@]}" -o "$d/cuda" --device cuda 2>"$d/err"
    [ $? = 2 ] && grep -q "device 'cuda': no usable GPU (.*CUEMU=1" "$d/err" && [ ! -e "$d/cuda" ] ||
        { echo "--device cuda without CUEMU=1 was not a usage error naming CUEMU=1"; cat "$d/err"; rc=1; }
    [ $rc = 0 ] && echo "DETAIL auto computes on the CPU, cuda is refused naming CUEMU=1"
    return $rc
}

part_time_limit() {
    local t0 out rc
    t0=$(date +%s)
    out=$(CUEMU_TEST_HANG=1 CUEMU_PART_TIMEOUT=3 CUEMU_PARTS= "$TUPE_SRC/tests/cuemu/run.sh" 2>&1)
    rc=$?
    local took=$(($(date +%s) - t0))
    echo "$out" | sed 's/^/  /'
    [ $rc != 0 ] && echo "$out" | grep -q '^not ok - cuemu/hang: .*timed out after 3 s' &&
        echo "$out" | grep -q '^0 passed, 1 failed' && [ $took -lt 60 ] ||
        { echo "a part that hangs was not failed within its 3-second limit (exit $rc, $took s)"; return 1; }
    echo "DETAIL a hanging part failed after $took s under a 3-second limit"
}

# name|what the line says|command (run by bash, with the functions above)
PARTS=(
    "selftest|cuemu's own tests|$CB/tests/cuemu-selftest"
    "guard|no GPU without CUEMU=1|part_guard"
)
for dev in cuda cuda-bf16; do
    noalgo=1
    [ $dev = cuda-bf16 ] && noalgo=2
    PARTS+=(
        "ops-$dev|ops|ops_on lt $dev"
        "ops-warps-$dev|ops, warps-reverse|ops_on lt $dev CUEMU_SCHEDULE=warps-reverse"
        "ops-legacy-$dev|ops, no cuBLASLt algorithm|ops_on legacy $dev CUEMU_LT_NOALGO=$noalgo"
        "limits-$dev|launch limits|\$X ops --ref cpu --dev $dev --only limits"
        "step-small-$dev|6 variants, small, B=4, T=77|steps \$X $dev small 4 77"
        "step-t512-$dev|6 variants, tiny, B=2, T=512|steps \$X $dev tiny 2 512"
        "step-pe-$dev|rope, rope half, alibi, nope, small, B=4, T=77|steps \$X $dev small 4 77 rope 'rope --rope-half' alibi nope"
        "step-deberta-$dev|deberta, small, B=4, T=77, flash and materialised|steps \$X $dev small 4 77 deberta && TUPE_ATTN=materialised steps \$X $dev small 4 77 deberta"
        "step-electra-$dev|ELECTRA pairs (generator 1/4) of tupe-r, bert-a, rope, small, B=4, T=77|steps \$X $dev small 4 77 'tupe-r --electra 0.25' 'bert-a --electra 0.25' 'rope --electra 0.25'"
        "curve-$dev|10 steps of tiny|\$X curve --ref cpu --dev $dev --model tiny --steps 10 --batch 4 --seq 64"
    )
done
PARTS+=(
    "counters|the emulated GPU's counters of a training step|part_counters"
    "pretrain|tupe-pretrain cuda vs cpu|part_pretrain"
    "pretrain-electra|tupe-pretrain --objective electra --recipe electra cuda vs cpu|part_pretrain pretrain-electra --objective electra --generator-size 0.5 --recipe electra"
    "nccl|cuemu's NCCL, 2 to 4 processes|$CB/tests/cuemu-nccltest"
    "ranks|2 and 4 ranks (rendezvous, mpirun) vs one GPU vs the CPU|part_ranks"
    "ranks-faults|a rank killed mid-step, --resume; a rank on the CPU; a rank stopped|part_ranks_faults"
    "volume|bytes per rank per step inside and across nodes, 2 nodes x 2|part_volume"
    "glue|tupe-glue cuda vs cpu|part_glue"
)
if [ -n "$SB" ]; then
    PARTS+=("asan-selftest|ASan+UBSan: cuemu's own tests|$SAN_ENV $SB/tests/cuemu-selftest")
    for dev in cuda cuda-bf16; do
        PARTS+=(
            "asan-ops-$dev|ASan+UBSan: ops|$SAN_ENV $SB/tests/tupe-parity ops --ref cpu --dev $dev"
            "asan-step-$dev|ASan+UBSan: 6 variants, tiny, B=2, T=40|$SAN_ENV steps $SB/tests/tupe-parity $dev tiny 2 40"
        )
    done
fi
# The time limit itself: a part that never ends (as a hung kernel would) fails within the
# limit given it, and the run goes on. Run here as a run of its own, with a 3-second limit.
PARTS+=("time-limit|a part that hangs is killed and fails the run, quickly|part_time_limit")
# The sanitizer parts' rule (above, and tests/cuemu/README.md): each starts with $SAN_ENV.
for spec in "${PARTS[@]}"; do
    cmd=${spec#*|}; cmd=${cmd#*|}
    [[ $spec != asan-* || $cmd == "$SAN_ENV"* ]] ||
        { echo "tests/cuemu/run.sh: part ${spec%%|*} does not start with \$SAN_ENV (symbolize=0)"; exit 2; }
done
[ "${CUEMU_TEST_HANG:-0}" = 1 ] && PARTS=("hang|a part that never ends|sleep 100000")

# ---- running and judging ----------------------------------------------------------------

run_part() { # INDEX
    local spec=${PARTS[$1]} name what cmd log=$logs/$1 t0
    name=${spec%%|*} spec=${spec#*|} what=${spec%%|*} cmd=${spec#*|}
    t0=$(date +%s%N)
    (
        export log X CB SB
        export -f steps gemm_path ops_on prepare reldiff part_pretrain part_glue part_guard part_counters \
            ranks_setup for_ranks same_weights part_ranks part_ranks_faults volume path16 part_volume \
            part_time_limit
        export logs TUPE_SRC
        # timeout runs it in a process group of its own and signals the whole group: the limit
        # ends all it started (ranks, mpirun), not only the shell
        exec timeout --kill-after=10 "$part_timeout" bash -c "$cmd"
    ) >"$log" 2>&1
    local s=$?
    [ $s = 124 ] || [ $s = 137 ] && echo "$part_timeout" >"$log.timeout"
    echo $s >"$log.rc"
    echo $((($(date +%s%N) - t0) / 1000000)) >"$log.ms"
}

judge() { # INDEX -> prints the part's line; returns 0 when it passed
    local spec=${PARTS[$1]} name what log=$logs/$1 rc ms bad npass nfail
    name=${spec%%|*} spec=${spec#*|} what=${spec%%|*}
    rc=$(cat "$log.rc" 2>/dev/null || echo 1)
    ms=$(cat "$log.ms" 2>/dev/null || echo 0)
    npass=$(grep -c '^PARITY .* PASS$\|^ok - ' "$log")
    nfail=$(grep -c '^PARITY .* FAIL$\|^not ok - \|^PARITY .* error' "$log")
    bad=$(grep -E '^cuemu: (error|FAULT|misuse):|ERROR: (Address|Leak)Sanitizer|runtime error:' "$log" | head -5)
    local detail="$((ms / 1000)).$((ms % 1000 / 100)) s"
    [ "$npass" -gt 0 ] && detail="$detail, $npass comparisons passed"
    grep -q '^DETAIL ' "$log" && detail="$detail; $(sed -n 's/^DETAIL //p' "$log" | paste -sd';' | sed 's/;/; /g')"
    if [ -e "$log.timeout" ]; then
        bad="timed out after $(cat "$log.timeout") s (CUEMU_PART_TIMEOUT): killed"
    elif [ "$npass" = 0 ] && ! grep -q '^DETAIL ' "$log"; then
        bad="nothing was compared"
    fi
    if [ "$rc" = 0 ] && [ "$nfail" = 0 ] && [ -z "$bad" ]; then
        echo "ok - cuemu/$name: $what ($detail)"
        return 0
    fi
    [ -e "$log.timeout" ] && detail="$detail, timed out after $(cat "$log.timeout") s"
    echo "not ok - cuemu/$name: $what (exit $rc, $detail, $nfail failed)"
    { grep -E '^PARITY .* FAIL$|^not ok - |^PARITY .* error|^GEMM path|^DETAIL |^--device' "$log" | head -20
      [ -n "$bad" ] && echo "$bad"
      [ "$rc" != 0 ] && [ "$nfail" = 0 ] && tail -8 "$log"; } | sed 's/^/#   /'
    return 1
}

sel=()
for i in "${!PARTS[@]}"; do
    name=${PARTS[$i]%%|*}
    [ -z "$only" ] || [[ $name =~ $only ]] && sel+=("$i")
done
[ ${#sel[@]} -gt 0 ] || { echo "cuemu/run.sh: no part matches CUEMU_PARTS=$only" >&2; exit 2; }

start=$(date +%s)
pass=0 fail=0
if [ "$first_failure" = 1 ]; then
    for i in "${sel[@]}"; do
        run_part "$i"
        if judge "$i"; then pass=$((pass + 1)); else fail=$((fail + 1)); break; fi
    done
else
    # the long parts first, so that the last ones to finish are short
    order=()
    for want in 1 0; do
        for i in "${sel[@]}"; do
            long=0
            [[ ${PARTS[$i]%%|*} =~ ^(asan-step|step-|curve-|glue|pretrain|ranks|counters|volume) ]] && long=1
            [ $long = $want ] && order+=("$i")
        done
    done
    running=0
    for i in "${order[@]}"; do
        run_part "$i" &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    done
    wait
    for i in "${sel[@]}"; do
        if judge "$i"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done
fi
echo "# ${#sel[@]} parts in $(($(date +%s) - start)) s, $jobs at a time (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
