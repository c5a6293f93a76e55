#!/usr/bin/env bash
# tupe-attnviz against what a user would otherwise run: numpy + matplotlib (PyPI;
# tests/reference/bench_attnviz.py, the same matrices as the fixture script), on the same
# bert-base-sized checkpoints (random weights after one tupe-pretrain step; 12 layers, 12 heads,
# 768 hidden, a 100-word vocabulary) and the same inputs, both writing a PNG:
#   pos     TUPE-R, 512 positions, the softmax view of 12 heads (a 3 x 4 grid)
#   decomp  BERT-A, --decomp exact, 256 sentences of 60 to 140 words cut to 128 tokens, the
#           five terms averaged over heads and inputs
# Wall time of the whole command on both sides (process start, imports, checkpoint reading and
# the figure included), best of TUPE_BENCH_ATTNVIZ_RUNS (2); peak RSS on stderr.
# Knobs: TUPE_BENCH_THREADS (2), TUPE_BENCH_PYTHON (python3).
set -u
: "${TUPE_BUILD:?run through make bench}" "${TUPE_SRC:?}"
BIN=${TUPE_BIN:-$TUPE_BUILD/bin}
PY=${TUPE_BENCH_PYTHON:-python3}
TH=${TUPE_BENCH_THREADS:-2}
RUNS=${TUPE_BENCH_ATTNVIZ_RUNS:-2}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tupe-bench-attnviz.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=$TH OPENBLAS_NUM_THREADS=$TH
V=$TUPE_SRC/tests/fixtures/attnviz/vocab.txt
REF=$TUPE_SRC/tests/reference/bench_attnviz.py

# Checkpoints: one pre-training step of bert-base on a small synthetic shard directory.
awk 'BEGIN { srand(3); for (d = 0; d < 200; d++) { n = 30 + int(rand() * 60); s = "";
     for (i = 0; i < n; i++) s = s (i ? " " : "") "w" (5 + int(rand() * 95)); print s; print "" } }' >$TMP/c.txt
"$BIN/tupe-tokenize" encode -q --vocab $V $TMP/c.txt | "$BIN/tupe-shard" write -q -o $TMP/sh --seq-len 64 --shards 1
for p in tupe-r bert-a; do
    "$BIN/tupe-pretrain" train -q --data $TMP/sh --model bert-base --position $p --batch 2 --steps 1 \
        --warmup 1 --eval-every 0 --save-every 0 --threads $TH -o $TMP/$p >&2 || exit 1
done
awk 'BEGIN { srand(1); for (k = 0; k < 256; k++) { n = 60 + int(rand() * 81); s = "";
     for (i = 0; i < n; i++) s = s (i ? " " : "") "w" (5 + int(rand() * 95)); print s } }' >$TMP/s.txt
ck() { echo $TMP/$1/checkpoints/step-00000001; }

# best OUT CMD...: the fastest wall time of RUNS runs (seconds), and the peak RSS (KB) to stderr.
best() {
    local out=$1 b="" t r; shift
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f "%e %M" -o $TMP/time "$@" >/dev/null 2>$TMP/err || { cat $TMP/err >&2; echo ""; return; }
        read -r t r <$TMP/time
        b=$(awk -v a="$b" -v t="$t" 'BEGIN { print (a == "" || t + 0 < a + 0) ? t : a }')
        echo "  $out: ${t} s, peak RSS ${r} KB" >&2
    done
    echo "$b"
}
row() { # what ours competitor
    local r
    r=$(awk -v a="$2" -v b="$3" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2fx", a / b }')
    echo "| $1 | ${2:-failed} s | ${3:-failed} s | $r |"
}

ours=$(best "tupe-attnviz pos" "$BIN/tupe-attnviz" pos "$(ck tupe-r)" -n 512 --view softmax -o $TMP/pos.png --threads $TH -q)
theirs=$(best "numpy+matplotlib pos" $PY $REF pos "$(ck tupe-r)" 512 $TMP/pos-py.png)
row "attnviz pos: bert-base TUPE-R, 512 positions, softmax of 12 heads to PNG" "$ours" "$theirs"

ours=$(best "tupe-attnviz decomp" "$BIN/tupe-attnviz" decomp "$(ck bert-a)" --vocab $V --input $TMP/s.txt \
    --decomp exact --max-len 128 -o $TMP/d.png --threads $TH -q)
theirs=$(best "numpy+matplotlib decomp" $PY $REF decomp "$(ck bert-a)" $V $TMP/s.txt 128 $TMP/d-py.png)
row "attnviz decomp --decomp exact: bert-base BERT-A, 256 inputs of up to 128 tokens, to PNG" "$ours" "$theirs"
