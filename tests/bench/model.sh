#!/usr/bin/env bash
# Model training-step throughput: ours (tests/bench/model.c on the CPU backend) against the
# PyTorch reference model (tests/reference/tupe_ref.py, eager PyTorch from PyPI) in the same
# run, same thread count, same presets, batch, sequence length, vocabulary (32,769) and 15%
# masked positions; both in train mode with the preset's dropout, a step being zero_grad,
# forward, backward, clipping and AdamW. Also the OpenBLAS sgemm peak of this machine (one
# 2048^3 product with OpenBLAS's own threads, best over 4 s, measured before and after the
# runs), the share of it our step achieves, TUPE-R's step time against BERT-A's, and the peak
# memory (RSS) of a bert-base step.
#
# Throughput is the fastest of the timed steps on both sides (the median is in the JSON on
# stderr): on a shared machine the fastest step is what the code can do.
#
# OPENBLAS_CORETYPE, when the environment sets it, is reported both as set and unset (for these
# commands only). Knobs: TUPE_BENCH_THREADS (2), TUPE_BENCH_MODEL_RUNS ("small:16 bert-base:8"),
# TUPE_BENCH_MODEL_VARIANTS (all six), TUPE_BENCH_MODEL_STEPS (6), TUPE_BENCH_PYTHON (python3).
#
# Markdown rows on stdout; the JSON lines behind them on stderr.
set -u
: "${TUPE_BUILD:?run through make bench}" "${TUPE_SRC:?}"
BIN=$TUPE_BUILD/bench/model
PY=${TUPE_BENCH_PYTHON:-python3}
TH=${TUPE_BENCH_THREADS:-2}
RUNS=${TUPE_BENCH_MODEL_RUNS:-small:16 bert-base:8}
VARIANTS=${TUPE_BENCH_MODEL_VARIANTS:-bert-a bert-r bert-ad tupe-a tupe-a-tie tupe-r}
STEPS=${TUPE_BENCH_MODEL_STEPS:-6}
SEQ=128
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tupe-bench-model.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# field FILE KEY: a number from a one-line JSON object
field() { sed -n "s/.*\"$2\": \([0-9.eE+-]*\).*/\1/p" "$1" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2fx", a / b }'; }
maxof() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }

modes=(set)
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then modes=(set unset); fi
label() { # mode -> text
    if [ "$1" = unset ]; then echo "OPENBLAS_CORETYPE unset"
    elif [ -n "${OPENBLAS_CORETYPE:-}" ]; then echo "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
    else echo "OPENBLAS_CORETYPE unset"; fi
}
ours() { # mode args...
    local m=$1; shift
    if [ "$m" = unset ]; then env -u OPENBLAS_CORETYPE "$BIN" "$@"; else "$BIN" "$@"; fi
}
sgemm() { # mode -> GFLOP/s
    ours "$1" --sgemm --threads "$TH" >"$TMP/sgemm" || echo "{}" >"$TMP/sgemm"
    cat "$TMP/sgemm" >&2
    field "$TMP/sgemm" sgemm_gflops
}

have_torch=1
"$PY" -c 'import torch' 2>/dev/null || { have_torch=0; echo "model.sh: PyTorch not importable by $PY: competitor columns empty" >&2; }

declare -A peak
for m in "${modes[@]}"; do peak[$m]=$(sgemm "$m"); done

shares=()
for run in $RUNS; do
    preset=${run%%:*} batch=${run##*:}
    for v in $VARIANTS; do
        pos=$v tie=()
        [ "$v" = tupe-a-tie ] && { pos=tupe-a; tie=(--tie); }
        if [ "$have_torch" = 1 ]; then
            "$PY" "$TUPE_SRC/tests/reference/bench_torch.py" --runs "$preset:$batch" --variants "$v" \
                --seq $SEQ --threads "$TH" --steps "$STEPS" >"$TMP/torch.$preset.$v" || true
            cat "$TMP/torch.$preset.$v" >&2
        else
            : >"$TMP/torch.$preset.$v"
        fi
        tt=$(field "$TMP/torch.$preset.$v" tokens_per_s_best)
        for m in "${modes[@]}"; do
            f=$TMP/ours.$m.$preset.$v
            ours "$m" --preset "$preset" --position "$pos" "${tie[@]}" --batch "$batch" --seq $SEQ \
                --threads "$TH" --steps "$STEPS" >"$f" || echo "{}" >"$f"
            cat "$f" >&2
            ot=$(field "$f" tokens_per_s_best)
            echo "| $preset b$batch t$SEQ $v: training step tokens/s, $TH threads, best of $STEPS steps ($(label "$m")) | $ot | $tt | $(ratio "$ot" "$tt") |"
            shares+=("$m $preset b$batch t$SEQ $v|$(field "$f" gflops_best)")
        done
    done
    for m in "${modes[@]}"; do
        a=$TMP/ours.$m.$preset.bert-a r=$TMP/ours.$m.$preset.tupe-r
        if [ -s "$a" ] && [ -s "$r" ]; then
            echo "| $preset: TUPE-R step time / BERT-A step time, fastest steps ($(label "$m")) | $(ratio "$(field "$r" step_s_min)" "$(field "$a" step_s_min)") | $(ratio "$(field "$TMP/torch.$preset.tupe-r" step_s_min)" "$(field "$TMP/torch.$preset.bert-a" step_s_min)") | |"
        fi
    done
    if [ "$preset" = bert-base ]; then
        for v in $VARIANTS; do
            f=$TMP/ours.${modes[0]}.$preset.$v t=$TMP/torch.$preset.$v
            op=$(field "$f" peak_rss_mib) tp=$(field "$t" peak_rss_mib)
            echo "| bert-base b$batch t$SEQ $v: peak memory of a training step, MiB (RSS) | $op | $tp | $(ratio "$op" "$tp") |"
            od=$(awk -v a="$op" -v b="$(field "$f" base_rss_mib)" 'BEGIN { if (a != "") printf "%.1f", a - b }')
            td=$(awk -v a="$tp" -v b="$(field "$t" base_rss_mib)" 'BEGIN { if (a != "") printf "%.1f", a - b }')
            echo "| bert-base b$batch t$SEQ $v: peak memory above the process's start (model, step), MiB | $od | $td | $(ratio "$od" "$td") |"
        done
    fi
done

for m in "${modes[@]}"; do
    peak[$m]=$(maxof "${peak[$m]}" "$(sgemm "$m")")
    echo "| OpenBLAS sgemm peak, $TH threads, 2048^3, best before and after ($(label "$m")) | ${peak[$m]} GFLOP/s | | |"
done
for s in "${shares[@]}"; do
    m=${s%% *} rest=${s#* } what=${rest%%|*} g=${rest##*|}
    echo "| $what: step GFLOP/s as share of sgemm peak ($(label "$m")) | $(awk -v g="$g" -v p="${peak[$m]}" 'BEGIN { if (p > 0 && g != "") printf "%.0f%% (%.1f GFLOP/s)", 100 * g / p, g }') | | |"
done
