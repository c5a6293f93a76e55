#!/usr/bin/env bash
# Model training-step throughput: ours (tests/bench/model.c on the CPU backend) against the
# PyTorch reference model (tests/reference/tupe_ref.py, eager PyTorch from PyPI) in the same
# run, same thread count, same presets, batch, sequence length, vocabulary (32,769) and 15%
# masked positions; both in train mode with the preset's dropout, a step being zero_grad,
# forward, backward, clipping and AdamW. Also the BLAS kernels that ran (lib/backend/blas: the
# processor's, nothing set: oneDNN's sgemm and OpenBLAS's core), the sgemm peak of this machine
# with them and with OpenBLAS's best core for the processor (one 2048^3 product with the
# library's own threads, best over 4 s, measured before and after the runs), the share of the peak our step achieves, the time of
# each backend operation in a step (--profile) for BERT-A and TUPE-R, TUPE-R's step time
# against BERT-A's, and the peak memory (RSS) of a bert-base step.
#
# Throughput is the fastest of the timed steps on both sides (the median is in the JSON on
# stderr): on a shared machine the fastest step is what the code can do. Beside it, the work
# itself: tokens per CPU-second (the least CPU time of a step, all threads; OpenMP threads wait
# passively on both sides, OMP_WAIT_POLICY=passive, so that CPU time is work done), TUPE-R /
# BERT-A and the share of the sgemm peak by CPU time as well. Other jobs on the machine lower
# the wall-clock figures; they change the CPU-time ones much less.
#
# Our rows are out of the box (OPENBLAS_CORETYPE unset); when the environment sets it, they are
# also given as set (for these commands only). Knobs: TUPE_BENCH_THREADS (2),
# TUPE_BENCH_MODEL_RUNS ("small:16 bert-base:8"), TUPE_BENCH_MODEL_VARIANTS (all six),
# TUPE_BENCH_MODEL_STEPS (6), TUPE_BENCH_PYTHON (python3).
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
export OMP_WAIT_POLICY=passive
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tupe-bench-model.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# field FILE KEY: a number from a one-line JSON object; sfield: a string (without quotes in it)
field() { sed -n "s/.*\"$2\": \([0-9.eE+-]*\).*/\1/p" "$1" | head -1; }
sfield() { sed -n "s/.*\"$2\": \"\([^\"]*\)\".*/\1/p" "$1" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2fx", a / b }'; }
maxof() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 > b + 0) ? a : b }'; }

# Modes: unset (out of the box), set (the environment's OPENBLAS_CORETYPE, when it has one),
# best (the best core for this processor, for the sgemm peak only).
modes=(unset)
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then modes=(unset set); fi
label() { # mode -> text
    case $1 in
    unset) echo "out of the box" ;;
    set) echo "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE" ;;
    *) echo "OPENBLAS_CORETYPE=$best" ;;
    esac
}
ours() { # mode args...
    local m=$1; shift
    case $m in
    unset) env -u OPENBLAS_CORETYPE "$BIN" "$@" ;;
    set) "$BIN" "$@" ;;
    *) OPENBLAS_CORETYPE=$best "$BIN" "$@" ;;
    esac
}
sgemm() { # mode -> "GFLOP/s GFLOP per CPU-second"
    ours "$1" --sgemm --threads "$TH" >"$TMP/sgemm.$1" || echo "{}" >"$TMP/sgemm.$1"
    cat "$TMP/sgemm.$1" >&2
    echo "$(field "$TMP/sgemm.$1" sgemm_gflops) $(field "$TMP/sgemm.$1" sgemm_gflops_per_cpu_s)"
}
# tokens per CPU-second of the least CPU time of a step
tokcpu() { awk -v c="$(field "$1" cpu_s_min)" -v n="$2" 'BEGIN { if (c + 0 > 0) printf "%.1f", n / c }'; }

have_torch=1
"$PY" -c 'import torch' 2>/dev/null || { have_torch=0; echo "model.sh: PyTorch not importable by $PY: competitor columns empty" >&2; }

declare -A peak cpeak
setpeak() { # mode: the best of the peaks measured so far
    local g c
    read -r g c <<<"$(sgemm "$1")"
    peak[$1]=$(maxof "${peak[$1]:-}" "$g") cpeak[$1]=$(maxof "${cpeak[$1]:-}" "$c")
}
for m in "${modes[@]}"; do setpeak "$m"; done
best=$(sfield "$TMP/sgemm.unset" blas_best)
pmodes=("${modes[@]}")
[ -n "$best" ] && pmodes+=(best) && setpeak best
for m in "${modes[@]}"; do
    echo "| BLAS kernels of our step ($(label "$m")) | $(sfield "$TMP/sgemm.$m" blas) | | |"
done

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
                --threads "$TH" --steps "$STEPS" --profile >"$f" || echo "{}" >"$f"
            cat "$f" >&2
            ot=$(field "$f" tokens_per_s_best)
            echo "| $preset b$batch t$SEQ $v: training step tokens/s, $TH threads, best of $STEPS steps ($(label "$m")) | $ot | $tt | $(ratio "$ot" "$tt") |"
            oc=$(tokcpu "$f" $((batch * SEQ))) tc=$(tokcpu "$TMP/torch.$preset.$v" $((batch * SEQ)))
            echo "| $preset b$batch t$SEQ $v: training step tokens per CPU-second, least CPU time of $STEPS steps ($(label "$m")) | $oc | $tc | $(ratio "$oc" "$tc") |"
            shares+=("$m $preset b$batch t$SEQ $v|$(field "$f" gflops_best)|$(field "$f" step_gflops_per_cpu_s)")
        done
    done
    # Where the time of a step goes: every operation over 0.5% of BERT-A's or TUPE-R's step.
    a=$TMP/ours.unset.$preset.bert-a r=$TMP/ours.unset.$preset.tupe-r
    if [ -s "$a" ] && [ -s "$r" ]; then
        python3 - "$a" "$r" "$preset b$batch t$SEQ" <<'PY' || true
import json, sys
a, r = (json.loads(open(p).read()).get("ops", {}) for p in sys.argv[1:3])
def cell(d, k):
    if k not in d:
        return "-"
    v = d[k]
    g = ", %.0f GFLOP/s" % v["gflops"] if "gflops" in v else ""
    return "%.1f (%.1f%%%s)" % (v["ms"], 100 * v["share"], g)
keys = sorted(set(a) | set(r), key=lambda k: -max(a.get(k, {}).get("share", 0), r.get(k, {}).get("share", 0)))
for k in keys:
    if k == "other" or max(a.get(k, {}).get("share", 0), r.get(k, {}).get("share", 0)) >= 0.005:
        print("| %s: %s, ms per step (share; products' rate), BERT-A / TUPE-R | %s | %s | |" % (sys.argv[3], k, cell(a, k), cell(r, k)))
PY
    fi
    for m in "${modes[@]}"; do
        a=$TMP/ours.$m.$preset.bert-a r=$TMP/ours.$m.$preset.tupe-r
        if [ -s "$a" ] && [ -s "$r" ]; then
            echo "| $preset: TUPE-R step time / BERT-A step time, fastest steps ($(label "$m")) | $(ratio "$(field "$r" step_s_min)" "$(field "$a" step_s_min)") | $(ratio "$(field "$TMP/torch.$preset.tupe-r" step_s_min)" "$(field "$TMP/torch.$preset.bert-a" step_s_min)") | |"
            echo "| $preset: TUPE-R step CPU time / BERT-A step CPU time, least of $STEPS steps ($(label "$m")) | $(ratio "$(field "$r" cpu_s_min)" "$(field "$a" cpu_s_min)") | $(ratio "$(field "$TMP/torch.$preset.tupe-r" cpu_s_min)" "$(field "$TMP/torch.$preset.bert-a" cpu_s_min)") | |"
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

for m in "${pmodes[@]}"; do
    setpeak "$m"
    lib=$(sfield "$TMP/sgemm.$m" sgemm_library)
    [[ $lib == OpenBLAS* ]] && lib="$lib $(sfield "$TMP/sgemm.$m" blas_core)"
    echo "| sgemm peak, $TH threads, 2048^3, best before and after ($(label "$m"): $lib) | ${peak[$m]} GFLOP/s | | |"
    echo "| sgemm peak per CPU-second, $TH threads, 2048^3 ($(label "$m"): $lib) | ${cpeak[$m]} GFLOP/s | | |"
done
pct() { awk -v g="$1" -v p="$2" 'BEGIN { if (p > 0 && g != "") printf "%.0f%% (%.1f GFLOP/s)", 100 * g / p, g }'; }
for s in "${shares[@]}"; do
    m=${s%% *} rest=${s#* } what=${rest%%|*} gs=${rest#*|}
    g=${gs%%|*} gc=${gs##*|}
    echo "| $what: step GFLOP/s as share of sgemm peak ($(label "$m")) | $(pct "$g" "${peak[$m]}") | | |"
    echo "| $what: step GFLOP per CPU-second as share of sgemm's ($(label "$m")) | $(pct "$gc" "${cpeak[$m]}") | | |"
done
