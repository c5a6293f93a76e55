#!/usr/bin/env bash
# End-to-end pre-training step of tupe-pretrain (shard reading and decompression, masking,
# batching, forward, backward, clipping, AdamW, logging) against the bare model step of
# tests/bench/model.c on the same preset, variant, batch, sequence length, vocabulary and
# thread count, in the same run: the data path must cost under 5% of the step.
# Knobs: TUPE_BENCH_THREADS (2), TUPE_BENCH_PRETRAIN_STEPS (30), TUPE_BENCH_PRETRAIN_PRESET (small).
set -u
: "${TUPE_BUILD:?run through make bench}" "${TUPE_SRC:?}" "${TUPE_BIN:?}"
TH=${TUPE_BENCH_THREADS:-2}
STEPS=${TUPE_BENCH_PRETRAIN_STEPS:-30}
PRESET=${TUPE_BENCH_PRETRAIN_PRESET:-small}
B=16 SEQ=128 WARM=4
T=$(mktemp -d "${TMPDIR:-/tmp}/tupe-bench-pretrain.XXXXXX")
trap 'rm -rf "$T"' EXIT
export PATH="$TUPE_BIN:$PATH"
vocab=$TUPE_DATA/vocab/bert-base-uncased-vocab.txt
corpus=$TUPE_DATA/corpus/debian-104m.txt.zst
[ -r "$corpus" ] || corpus=$TUPE_SRC/share/tupe/sample/corpus.txt.zst
# Real text, the BERT vocabulary (30,522 ids), about 4 MB of it: more than the steps read.
zstd -dc "$corpus" | head -c 4000000 | tupe-tokenize encode -q --vocab "$vocab" |
    tupe-shard write -q -o "$T/shards" --seq-len $SEQ --valid-sequences 64 --shards 4
V=$(tupe-shard info "$T/shards" | awk '/^vocabulary:/ { print $2 }')

for v in bert-a tupe-r; do
    "$TUPE_BUILD/bench/model" --preset $PRESET --position $v --batch $B --seq $SEQ --steps $((STEPS - WARM)) \
        --warmup $WARM --vocab-size "$V" --threads "$TH" >"$T/bare.json" 2>>"$T/log" || { echo "model bench failed" >&2; cat "$T/log" >&2; exit 1; }
    cat "$T/bare.json" >&2
    bare=$(sed -n 's/.*"step_s": \([0-9.]*\).*/\1/p' "$T/bare.json")
    tupe-pretrain train -q --data "$T/shards" -o "$T/run-$v" --model $PRESET --position $v --batch $B \
        --steps "$STEPS" --warmup 2 --log-every 1 --eval-every 0 --save-every 0 --threads "$TH" --eval-sequences 16 2>>"$T/log"
    # Median of the step times after the warmup steps, from the elapsed times in metrics.jsonl.
    e2e=$(grep '"loss"' "$T/run-$v/metrics.jsonl" | sed 's/.*"elapsed_s":\([0-9.]*\).*/\1/' |
          awk -v w=$WARM 'NR > 1 { d[++n] = $1 - prev } { prev = $1 } END {
              m = 0; for (i = w; i <= n; i++) a[++m] = d[i]
              for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
              print a[int((m + 1) / 2)] }')
    echo "{\"variant\": \"$v\", \"bare_step_s\": $bare, \"pretrain_step_s\": $e2e}" >&2
    awk -v v=$v -v p=$PRESET -v a="$e2e" -v b="$bare" -v bt=$((B * SEQ)) 'BEGIN {
        printf "| tupe-pretrain end to end, `%s` %s b16 t128, tokens/s | %.0f | bare model step: %.0f | %.3f (data path %.1f%% of the step) |\n",
               p, v, bt / a, bt / b, b / a, 100 * (a - b) / a }'
done
