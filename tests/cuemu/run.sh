#!/usr/bin/env bash
# make check-cuemu: the CUDA backend (kernels/backend_cuda.cu) run on cuemu, the CPU emulation
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
#   curve-DEV           10 AdamW steps of tiny from the same seed: the loss curves
#   pretrain            tupe-pretrain train --device cuda (fp32, bf16) against --device cpu:
#                       the loss of every step and the final validation loss (tiny, 10 steps)
#   glue                tupe-glue train (RTE) --device cuda (fp32, bf16) against --device cpu:
#                       training losses and dev accuracy at every evaluation (2, 4 steps)
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
# CUEMU_FIRST_FAILURE=1: one part at a time, stopping at the first that fails.
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

logs=$(mktemp -d "${TMPDIR:-/tmp}/cuemu-run.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# ---- the parts (each prints what it compares; its exit status says whether it passed) -----

steps() { # PARITY DEV MODEL BATCH SEQ
    local rc=0 v
    for v in bert-a bert-r bert-ad tupe-a "tupe-a --tie-cls" tupe-r; do
        # shellcheck disable=SC2086
        "$1" step --ref cpu --dev "$2" --model "$3" --position $v --batch "$4" --seq "$5" || rc=1
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

part_pretrain() {
    local d=$logs/pretrain b=$CB/bin rc=0 p w
    prepare "$d" || return 1
    local common=(-q --data "$d/shards" --model tiny --steps 10 --warmup 2 --batch 4 --lr 1e-3
                  --save-every 0 --eval-every 0 --eval-sequences 8 --log-every 1 --threads 1)
    "$b/tupe-pretrain" train "${common[@]}" -o "$d/cpu" --device cpu || return 1
    for p in fp32 bf16; do
        "$b/tupe-pretrain" train "${common[@]}" -o "$d/$p" --device cuda --precision $p || return 1
        local tol=1e-4
        [ $p = bf16 ] && tol=1e-2
        w=$(reldiff '[a-z_]*loss' "$d/cpu/metrics.jsonl" "$d/$p/metrics.jsonl") || rc=1
        echo "DETAIL $p losses within $w (tolerance $tol)"
        awk -v w="$w" -v t=$tol 'BEGIN { exit !(w <= t) }' || rc=1
    done
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
        "curve-$dev|10 steps of tiny|\$X curve --ref cpu --dev $dev --model tiny --steps 10 --batch 4 --seq 64"
    )
done
PARTS+=(
    "pretrain|tupe-pretrain cuda vs cpu|part_pretrain"
    "glue|tupe-glue cuda vs cpu|part_glue"
)
if [ -n "$SB" ]; then
    PARTS+=("asan-selftest|ASan+UBSan: cuemu's own tests|$SB/tests/cuemu-selftest")
    for dev in cuda cuda-bf16; do
        PARTS+=(
            "asan-ops-$dev|ASan+UBSan: ops|$SB/tests/tupe-parity ops --ref cpu --dev $dev"
            "asan-step-$dev|ASan+UBSan: 6 variants, tiny, B=2, T=40|steps $SB/tests/tupe-parity $dev tiny 2 40"
        )
    done
fi

# ---- running and judging ----------------------------------------------------------------

run_part() { # INDEX
    local spec=${PARTS[$1]} name what cmd log=$logs/$1 t0
    name=${spec%%|*} spec=${spec#*|} what=${spec%%|*} cmd=${spec#*|}
    t0=$(date +%s%N)
    (
        export log X CB SB
        export -f steps gemm_path ops_on prepare reldiff part_pretrain part_glue part_guard
        export logs
        bash -c "$cmd"
    ) >"$log" 2>&1
    echo $? >"$log.rc"
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
    if [ "$npass" = 0 ] && ! grep -q '^DETAIL ' "$log"; then
        bad="nothing was compared"
    fi
    if [ "$rc" = 0 ] && [ "$nfail" = 0 ] && [ -z "$bad" ]; then
        echo "ok - cuemu/$name: $what ($detail)"
        return 0
    fi
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
            [[ ${PARTS[$i]%%|*} =~ ^(asan-step|step-|curve-|glue|pretrain) ]] && long=1
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
