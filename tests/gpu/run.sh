#!/usr/bin/env bash
# The GPU session's one script: on a machine with an NVIDIA GPU, builds tupe with CUDA=1 and
# checks the CUDA backend against the CPU backend, then measures it. Parts (each under its own
# time budget; a failing part never stops the later ones; the whole run stays under 8 minutes):
#
#   env      nvidia-smi, driver and runtime versions
#   build    make CUDA=1 (sm_80 + sm_90) of the programs and the test tools, or, where this
#            machine lacks the libraries, the bundle tests/gpu/bundle.sh made (build/gpu)
#   ops      every operation of lib/backend/backend.h on random inputs (T = 77, padded sequences,
#            H = 12, dh = 64), and shapes at the launch limits: cuda vs cpu, then cuda-bf16 vs
#            cpu; one line per output, and which products cuBLASLt had no algorithm for (they
#            ran through cuBLAS's GEMM: a "GEMM" line)
#   step     a training step of tiny and small for every variant (bert-a, bert-r, bert-ad,
#            tupe-a, tupe-a tie-cls, tupe-r): loss, logits, gradient norm, every gradient
#   curve    50 AdamW steps of small from the same seed on both backends: the loss curves
#   bench    bert-base training step, bf16, BERT-A and TUPE-R at (seq, batch) = (512, 32) and
#            (128, 128): real tokens/s (padding excluded) and their MFU over --peak (989
#            TFLOP/s, H100 SXM / H200) at 588 / 545 MFLOP per token (lib/model/flops.h), the
#            TUPE-R / BERT-A step-time ratio; then the same steps with --per-op: the device time
#            of every backend operation (CUDA events), the slowest first; TUPE-R at (512, 16);
#            TUPE-R at (512, 32) with TUPE_ATTN=materialised: the flash attention's gain
#            for the projection of 1M steps at batch 256 on 16 GPUs
#   nccl     skipped with a note when one GPU (NCCL needs a GPU per rank); with several: 2 ranks
#            started as a loop of processes (the rendezvous, no MPI), 10 steps of tiny in fp32,
#            through NCCL (the default) and through host copies (TUPE_NCCL=0), both
#            bit-identical to one process computing the same micro-batches; NCCL's bandwidth
#            over all the GPUs (tupe-commtest gpu-bench: an all-reduce of 256 MiB, and the
#            gradients' own path); the step time of bert-base (bf16, seq 128, 32 sequences per
#            GPU) on 1 GPU and on all of them, whence the share of the communication hidden
#            behind the backward pass and the next forward pass; then the 16-GPU projection from
#            these numbers and the bytes across nodes that check-cuemu counts
#            (README.md, "Projecting 16 GPUs")
#
# `tests/gpu/run.sh --project STEP_MS BUSBW_GBS OVERLAP [RANKS PARAMS BYTES STEPS ACROSS]` prints
# only the projection from numbers given (no GPU needed).
#
# Compact results on stdout (the lines that matter, FAIL lines first 40 per part); the full
# output of every part in $OUT (the device tool's folder) or build/gpu-run. Exit status 0 when
# every part passed or was skipped for a stated reason, 1 otherwise.
set -u

# The time of STEPS steps on RANKS GPUs (README.md, "Projecting 16 GPUs"): each step computes for
# STEP_MS (the per-GPU batch on one GPU) and moves 2(W-1)/W of the gradients' PARAMS x BYTES
# through every rank's link (a reduce of the gradients and a gather of the parameters, ZeRO-1)
# at BUSBW_GBS, NCCL's ring bus bandwidth over the 2 nodes (bounded by the links between them);
# --grad-reduce tree sends ACROSS of a ring's bytes over those links (0.533 at 2 nodes x 8, as
# check-cuemu part volume counts them), so its communication takes ACROSS of the ring's time;
# the share OVERLAP of it is hidden behind the backward and the next forward pass.
project() { # STEP_MS BUSBW_GBS OVERLAP [RANKS PARAMS BYTES STEPS ACROSS]
    awk -v ms="$1" -v bw="$2" -v o="$3" -v w="${4:-16}" -v p="${5:-110e6}" -v b="${6:-2}" \
        -v steps="${7:-1e6}" -v a="${8:-0.533}" 'BEGIN {
        mb = 2 * (w - 1) / w * p * b / 1e6; comm = a * mb / (bw * 1e3) * 1e3; t = ms + comm * (1 - o)
        printf "projection: %g steps on %d GPUs: compute %.1f ms + communication %.1f ms (%.0f MB " \
               "per rank per step, %.3f of a ring'"'"'s across nodes, at %g GB/s bus bandwidth), %.0f%% " \
               "of it hidden = %.1f ms/step, %.1f days\n", steps, w, ms, comm, mb, a, bw, o * 100, t,
               t * steps / 1e3 / 86400 }'
}
if [ "${1:-}" = --project ]; then
    [ $# -ge 4 ] || { echo "usage: $0 --project STEP_MS BUSBW_GBS OVERLAP [RANKS PARAMS BYTES STEPS ACROSS]" >&2; exit 2; }
    shift
    project "$@"
    exit
fi

cd "$(dirname "$0")/../.." || exit 1
START=$(date +%s)
TOTAL=${TUPE_GPU_BUDGET:-470}
LOGS=${OUT:-build/gpu-run}
mkdir -p "$LOGS"
declare -a SUMMARY=()
FAILED=0

left() { echo $((TOTAL - ($(date +%s) - START))); }
note() { SUMMARY+=("$1"); }

# part NAME BUDGET_S CMD...: runs CMD with its output in $LOGS/NAME.log, under
# min(BUDGET, time left); sets prc to its exit status (124/137 for a timeout).
part() {
    local name=$1 budget=$2 l
    shift 2
    l=$(left)
    if [ "$l" -lt 10 ]; then
        echo "== $name: SKIP (no time left in the ${TOTAL}s budget)"
        note "$name: SKIP (out of time)"
        FAILED=1
        prc=125
        return
    fi
    [ "$budget" -gt "$l" ] && budget=$l
    local t0
    t0=$(date +%s)
    timeout --signal=KILL "$budget" "$@" >"$LOGS/$name.log" 2>&1
    prc=$?
    echo "== $name: exit $prc in $(($(date +%s) - t0))s (budget ${budget}s)"
}

# The PARITY lines of a part's log: the FAIL ones (at most 40) and the summary.
report_parity() {
    local name=$1 log=$LOGS/$1.log nfail npass
    nfail=$(grep -c '^PARITY .* FAIL$' "$log")
    npass=$(grep -c '^PARITY .* PASS$' "$log")
    grep '^PARITY .* FAIL$' "$log" | head -40
    [ "$nfail" -gt 40 ] && echo "... $((nfail - 40)) more FAIL lines in $log"
    grep '^SUMMARY' "$log"
    if [ "$prc" = 0 ] && [ "$nfail" = 0 ] && [ "$npass" -gt 0 ]; then
        note "$name: PASS ($npass comparisons)"
    else
        [ "$prc" = 0 ] || tail -5 "$log" | sed 's/^/    /'
        note "$name: FAIL (exit $prc, $nfail of $((npass + nfail)) comparisons failed)"
        FAILED=1
    fi
}

# ---- env ----------------------------------------------------------------------------------
echo "== env"
nvidia-smi 2>&1 | head -20 | tee "$LOGS/env.log"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 | tee -a "$LOGS/env.log"
/usr/local/cuda/bin/nvcc --version 2>&1 | tail -2 | tee -a "$LOGS/env.log"
echo "(the CUDA 13 build needs driver >= 580; 'CUDA Version' above is the driver's)"

# ---- build ----------------------------------------------------------------------------------
# A lent machine may lack the Debian libraries and cannot fetch them; and device minutes are
# scarce. So the bundle that tests/gpu/bundle.sh built elsewhere (build/gpu: programs, test
# tools, their libraries) is used whenever it was carried; TUPE_GPU_BUNDLE=0 builds here
# instead, and TUPE_GPU_SKIP_BUILD=1 uses this machine's default build directory as it is.
BUNDLE=$PWD/build/gpu
use_bundle=${TUPE_GPU_BUNDLE:-auto}
if [ "$use_bundle" = auto ]; then
    use_bundle=0
    [ -x "$BUNDLE/tests/tupe-parity" ] && use_bundle=1
fi
if [ "$use_bundle" = 0 ] && ! pkg-config --exists jansson libzstd libarchive openblas libpng libxxhash cairo 2>/dev/null; then
    echo "(this machine lacks the build's libraries: $(for p in jansson libzstd libarchive openblas libpng libxxhash cairo; do pkg-config --exists $p 2>/dev/null || printf '%s ' $p; done); carry the bundle of tests/gpu/bundle.sh)"
fi
if [ "$use_bundle" = 1 ]; then
    B=$BUNDLE
    # Only the libraries this machine lacks come from the bundle: its own (libstdc++, libzstd...)
    # are newer, and CUDA's libraries may need them.
    GAPS=/tmp/tupe-gpu-libs
    rm -rf "$GAPS"
    mkdir -p "$GAPS"
    for f in "$B"/lib/*; do
        ldconfig -p | grep -q "^[[:space:]]*$(basename "$f") " || ln -s "$f" "$GAPS/"
    done
    echo "(from the bundle: $(ls "$GAPS" | tr '\n' ' '))"
    export LD_LIBRARY_PATH="$GAPS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    prc=0
    [ -x "$B/tests/tupe-parity" ] || prc=1
    echo "== build: the carried bundle $B (tests/gpu/bundle.sh)"
    note "build: carried bundle (built by tests/gpu/bundle.sh elsewhere)"
else
    if [ "${TUPE_GPU_SKIP_BUILD:-0}" = 1 ]; then
        prc=0
        echo "== build: skipped (TUPE_GPU_SKIP_BUILD=1)"
    else
        part build 300 make NODEPS=1 CUDA=1 -j"$(nproc)" all tests
    fi
    B=$(make -s NODEPS=1 CUDA=1 info 2>/dev/null | sed -n 's/^tupe .*: build //p')
fi
X=$B/tests/tupe-parity
# CUDA's libraries outside the runpath (/usr/local/cuda/lib64): look where images put them.
if [ -x "$X" ] && ldd "$X" | grep -q 'not found'; then
    for m in $(ldd "$X" | awk '/not found/ { print $1 }'); do
        f=$(find /usr/local /usr/lib /opt -name "$m" 2>/dev/null | head -1)
        if [ -n "$f" ]; then
            export LD_LIBRARY_PATH="$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            echo "($m from $(dirname "$f"))"
        else
            echo "($m: not found on this machine)"
        fi
    done
fi
if [ "$prc" != 0 ] && [ -x "$X" ]; then
    echo "build: FAILED (exit $prc), but $X exists from before: going on with it"
    tail -15 "$LOGS/build.log"
    note "build: FAIL (exit $prc; the older binaries in $B were used)"
    FAILED=1
    prc=0
fi
if [ "$prc" != 0 ] || [ ! -x "$X" ]; then
    [ -f "$LOGS/build.log" ] && tail -30 "$LOGS/build.log"
    echo "== SUMMARY"
    echo "build: FAIL (exit $prc): nothing else can run"
    exit 1
fi
[ -f "$LOGS/build.log" ] && grep -i 'warning' "$LOGS/build.log" | head -10
[ "$FAILED" = 0 ] && [ "$use_bundle" != 1 ] && note "build: PASS ($B)"
"$B/bin/tupe-pretrain" --version | tail -1

# ---- ops ------------------------------------------------------------------------------------
# One process per group of operations, so that a kernel that faults (a sticky CUDA error) costs
# only its group; a group that fails with a device error is rerun with CUDA_LAUNCH_BLOCKING=1,
# which names the kernel that faulted.
for dev in cuda cuda-bf16; do
    : >"$LOGS/ops-$dev.log"
    orc=0
    for g in memory gemm linear act ln embed attn pos heads adamw limits; do
        part "ops-one" 60 "$X" ops --ref cpu --dev "$dev" --only $g
        [ "$prc" = 0 ] || orc=$prc
        { echo "# group $g: exit $prc"; cat "$LOGS/ops-one.log"; } >>"$LOGS/ops-$dev.log"
        if grep -q 'backend .* error' "$LOGS/ops-one.log"; then
            part "ops-blocking" 60 env CUDA_LAUNCH_BLOCKING=1 "$X" ops --ref cpu --dev "$dev" --only $g
            echo "    $g with CUDA_LAUNCH_BLOCKING=1: $(grep -m1 'backend .* error' "$LOGS/ops-blocking.log")"
            { echo "# group $g again, CUDA_LAUNCH_BLOCKING=1: exit $prc"; cat "$LOGS/ops-blocking.log"; } >>"$LOGS/ops-$dev.log"
        fi
    done
    prc=$orc
    report_parity "ops-$dev"
    grep '^GEMM' "$LOGS/ops-$dev.log" | grep -v ', 0 through cuBLAS$' | head -5
done
rm -f "$LOGS/ops-one.log" "$LOGS/ops-blocking.log"

# ---- step ------------------------------------------------------------------------------------
for dev in cuda cuda-bf16; do
    : >"$LOGS/step-$dev.log"
    srcs=0
    for model in tiny small; do
        for v in bert-a bert-r bert-ad tupe-a "tupe-a --tie-cls" tupe-r; do
            # shellcheck disable=SC2086
            part "step-one" 40 "$X" step --ref cpu --dev "$dev" --model $model --position $v --batch 4 --seq 77
            [ "$prc" = 0 ] || srcs=$prc
            { echo "# $model $v: exit $prc"; cat "$LOGS/step-one.log"; } >>"$LOGS/step-$dev.log"
        done
    done
    prc=$srcs
    report_parity "step-$dev"
    grep -h '^PARITY step  .*grad_norm\|^PARITY step  .*loss' "$LOGS/step-$dev.log" | head -24
done
rm -f "$LOGS/step-one.log"

# ---- curve -----------------------------------------------------------------------------------
for dev in cuda cuda-bf16; do
    part "curve-$dev" 120 "$X" curve --ref cpu --dev "$dev" --model small --steps 50 --batch 8 --seq 128
    grep '^CURVE small loss' "$LOGS/curve-$dev.log"
    awk '/^CURVE small step/ && ($4 % 10 == 0 || $4 == 1) { printf "    step %s ref %s dev %s\n", $4, $6, $8 }' "$LOGS/curve-$dev.log"
    report_parity "curve-$dev"
done

# ---- bench -----------------------------------------------------------------------------------
echo "== bench (bf16; real-token MFU over ${TUPE_PEAK_TFLOPS:-989} TFLOP/s)"
: >"$LOGS/bench.log"
declare -A MS=()
bench_ok=1
# bench_one SEQ BATCH POSITION [--per-op]: one line BENCH (and OPTIME lines), MS[POSITION-SEQ-BATCH]
bench_one() {
    local line
    part "bench-one" 90 "$X" bench --dev cuda-bf16 --model bert-base --position "$3" --seq "$1" \
        --batch "$2" --steps 10 --peak "${TUPE_PEAK_TFLOPS:-989}" ${4:+"$4"}
    cat "$LOGS/bench-one.log" >>"$LOGS/bench.log"
    line=$(grep '^BENCH' "$LOGS/bench-one.log")
    if [ "$prc" = 0 ] && [ -n "$line" ]; then
        echo "$line"
        if [ -n "${4:-}" ]; then
            grep '^OPTIME' "$LOGS/bench-one.log" | head -12 | sed 's/^/    /'
        else
            MS[$3-$1-$2]=$(echo "$line" | sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p')
        fi
    else
        tail -3 "$LOGS/bench-one.log" | sed 's/^/    /'
        bench_ok=0
    fi
}
for cfg in "512 32" "128 128"; do
    set -- $cfg
    for pos in bert-a tupe-r; do bench_one "$1" "$2" $pos; done
    for pos in bert-a tupe-r; do bench_one "$1" "$2" $pos --per-op; done
done
bench_one 512 16 tupe-r
# the flash attention (the default) against the materialised one, TUPE-R at (512, 32)
flash_ms=${MS[tupe-r-512-32]:-}
TUPE_ATTN=materialised bench_one 512 32 tupe-r
mat_ms=${MS[tupe-r-512-32]:-}
MS[tupe-r-512-32]=$flash_ms
if [ -n "$flash_ms" ] && [ -n "$mat_ms" ]; then
    awk -v f="$flash_ms" -v m="$mat_ms" 'BEGIN { printf "flash / materialised attention, TUPE-R step time at seq 512 batch 32: %.3f\n", f / m }'
fi
rm -f "$LOGS/bench-one.log"
for cfg in "512 32" "128 128"; do
    set -- $cfg
    if [ -n "${MS[bert-a-$1-$2]:-}" ] && [ -n "${MS[tupe-r-$1-$2]:-}" ]; then
        awk -v a="${MS[bert-a-$1-$2]}" -v r="${MS[tupe-r-$1-$2]}" -v s="$1" -v b="$2" \
            'BEGIN { printf "TUPE-R / BERT-A step time at seq %d batch %d: %.3f (goal <= 1.05)\n", s, b, r / a }'
    fi
done
if [ $bench_ok = 1 ]; then note "bench: PASS (measured)"; else note "bench: FAIL (see $LOGS/bench.log)"; FAILED=1; fi

# ---- nccl ------------------------------------------------------------------------------------
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
BUSBW="" OVERLAP=""
# ranks N OUT ARGS...: N ranks of tupe-pretrain train as a loop of processes (the rendezvous)
ranks() {
    local n=$1 out=$2 r pids=() rc=0 port=$((29500 + RANDOM % 1000))
    shift 2
    for ((r = 0; r < n; r++)); do
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$n RANK=$r LOCAL_RANK=$r \
            "$B/bin/tupe-pretrain" train "$@" -o "$out" 2>"$out.$r.log" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}
# the tokens/s of a run's last 5 logged steps
tps() { grep -o '"tokens_per_s":[0-9.]*' "$1/metrics.jsonl" 2>/dev/null | tail -5 | cut -d: -f2 |
        awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n }'; }
if [ "$ngpu" -ge 2 ]; then
    D=$LOGS/nccl-data
    rm -rf "$D"; mkdir -p "$D"
    awk 'BEGIN { srand(5); for (d = 0; d < 400; d++) { l = ""; for (i = 0; i < 40; i++) l = l (i ? " " : "") 5 + int(90 * rand() ^ 3); print l } }' >"$D/ids.txt"
    "$B/tests/tupe-testtool" tok-write --vocab-size 100 -o "$D/ids.tok" "$D/ids.txt"
    "$B/bin/tupe-shard" write -q -o "$D/shards" --seq-len 32 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --shards 2 "$D/ids.tok"
    common=(-v --data "$D/shards" --model tiny --batch 8 --steps 10 --log-every 1 --eval-every 0 --save-every 0
            --device cuda --precision fp32 --bucket-mb 1)
    nccl_ok=1
    part nccl-one 60 "$B/bin/tupe-pretrain" train "${common[@]}" --micro-batch 4 -o "$D/one"
    [ "$prc" = 0 ] || nccl_ok=0
    for path in nccl host; do
        nv=1
        [ $path = host ] && nv=0
        part nccl-$path 90 env TUPE_NCCL=$nv TUPE_COMM_TIMEOUT=60 bash -c "$(declare -f ranks); B=$B; ranks 2 $D/$path ${common[*]}"
        d=$("$B/tests/tupe-testtool" st-diff "$D/one/checkpoints/step-00000010/model.safetensors" \
            "$D/$path/checkpoints/step-00000010/model.safetensors" 2>&1)
        echo "nccl: 2 ranks through $path vs one process: $d; $(grep -h 'ranks meet' "$D/$path.0.log")"
        [ "$prc" = 0 ] && [[ $d == "max_abs_diff 0 "* ]] && grep -q "gradients through $path" "$D/$path.0.log" || nccl_ok=0
    done
    # NCCL's bandwidth over every GPU of this machine
    part nccl-bench 90 bash -c "for ((r = 0; r < $ngpu; r++)); do MASTER_ADDR=127.0.0.1 MASTER_PORT=29499 \
        WORLD_SIZE=$ngpu RANK=\$r LOCAL_RANK=\$r $B/tests/tupe-commtest gpu-bench 256 20 & done; wait"
    grep -E '^(ALLREDUCE|GRADPATH)' "$LOGS/nccl-bench.log" || nccl_ok=0
    BUSBW=$(sed -n 's/^GRADPATH .*busbw_GBs=\([0-9.]*\).*/\1/p' "$LOGS/nccl-bench.log")
    # bert-base on 1 GPU and on all: what the communication adds to a step, against what it
    # would take unhidden (the bf16 gradients at the bandwidth measured)
    bb=(--model bert-base --position tupe-r --steps 15 --warmup 1 --log-every 1 --eval-every 0
        --save-every 0 --device cuda --precision bf16)
    awk 'BEGIN { srand(7); for (d = 0; d < 3000; d++) { l = ""
        for (i = 0; i < 126; i++) l = l (i ? " " : "") 5 + int(30000 * rand()); print l } }' >"$D/bb.txt"
    "$B/tests/tupe-testtool" tok-write --vocab-size 30522 -o "$D/bb.tok" "$D/bb.txt"
    "$B/bin/tupe-shard" write -q -o "$D/bb" --seq-len 128 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --shards 4 "$D/bb.tok"
    part nccl-step1 90 "$B/bin/tupe-pretrain" train "${bb[@]}" --data "$D/bb" --batch 32 -o "$D/bb1"
    part nccl-stepN 120 bash -c "$(declare -f ranks); B=$B; ranks $ngpu $D/bbN ${bb[*]} --data $D/bb --batch $((32 * ngpu))"
    t1=$(tps "$D/bb1") tn=$(tps "$D/bbN")
    if [ -n "$t1" ] && [ -n "$tn" ] && [ -n "$BUSBW" ]; then
        OVERLAP=$(awk -v t1="$t1" -v tn="$tn" -v w="$ngpu" -v bw="$BUSBW" 'BEGIN {
            s1 = 32 * 128 / t1 * 1e3; sn = 32 * 128 * w / tn * 1e3    # ms per step
            comm = 2 * (w - 1) / w * 110e6 * 2 / (bw * 1e9) * 1e3
            o = 1 - (sn - s1) / comm; if (o < 0) o = 0; if (o > 1) o = 1
            printf "%.2f", o
            printf "step: 1 GPU %.1f ms, %d GPUs %.1f ms; unhidden communication %.1f ms\n", s1, w, sn, comm > "/dev/stderr" }')
        echo "nccl: bert-base seq 128, 32 sequences per GPU: $t1 tokens/s on 1 GPU, $tn on $ngpu; hidden share $OVERLAP"
    else
        nccl_ok=0
    fi
    if [ $nccl_ok = 1 ]; then
        note "nccl: PASS (2 ranks bit-identical to one process through NCCL and host copies; bus bandwidth $BUSBW GB/s over $ngpu GPUs; hidden share $OVERLAP)"
    else
        note "nccl: FAIL (see $LOGS/nccl-*.log)"; FAILED=1
    fi
else
    echo "== nccl: SKIP: needs 2 GPUs (this machine: $ngpu GPU)"
    note "nccl: SKIP ($ngpu GPU; NCCL needs a GPU per rank)"
fi

# ---- the 16-GPU projection --------------------------------------------------------------------
# From the step time of TUPE-R at seq 512 and 16 sequences per GPU (bench), the bus bandwidth
# (measured above, else TUPE_ASSUMED_BUSBW_GBS, 100) and the hidden share (measured above,
# else none: the worst case).
if [ -n "${MS[tupe-r-512-16]:-}" ]; then
    project "${MS[tupe-r-512-16]}" "${BUSBW:-${TUPE_ASSUMED_BUSBW_GBS:-100}}" "${OVERLAP:-0}"
    [ -n "$BUSBW" ] || echo "(bus bandwidth assumed: ${TUPE_ASSUMED_BUSBW_GBS:-100} GB/s; hidden share assumed 0)"
fi

echo "== SUMMARY ($(($(date +%s) - START))s; logs in $LOGS)"
for s in "${SUMMARY[@]}"; do echo "$s"; done
exit $FAILED
