#!/usr/bin/env bash
# Pre-train the `small` model (4 layers of 256) with BERT-A, BERT-R, TUPE-A and TUPE-R on the
# same shards with the same budget, and tabulate the final validation MLM loss of each: a
# small-scale version of the paper's Figure 5a. Sized to run in under an hour on 2 cores.
#
#   pretrain-variants.sh [CORPUS [OUT]]
#
# CORPUS: any text tupe-tokenize reads (default: the test corpus of the source tree when it is
# there, else the bundled sample). Environment: STEPS (default 1200), BATCH (32), SEQ (128),
# VARIANTS ("bert-a bert-r tupe-a tupe-r"), THREADS (all cores).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
share=$(cd "$here/.." && pwd)
corpus=${1:-}
if [ -z "$corpus" ]; then
    for c in "$share/../../../shared/data/corpus/debian-104m.txt.zst" "$share/sample/corpus.txt.zst"; do
        [ -r "$c" ] && { corpus=$c; break; }
    done
fi
out=${2:-pretrain-variants}
STEPS=${STEPS:-1200}
BATCH=${BATCH:-32}
SEQ=${SEQ:-128}
VARIANTS=${VARIANTS:-"bert-a bert-r tupe-a tupe-r"}
THREADS=${THREADS:-0}
th=()
[ "$THREADS" != 0 ] && th=(--threads "$THREADS")
mkdir -p "$out"
echo "corpus: $corpus; $STEPS steps of $BATCH x $SEQ per variant; output in $out" >&2

[ -s "$out/vocab.txt" ] || tupe-tokenize train --vocab-size 16384 -o "$out/vocab.txt" "$corpus"
[ -d "$out/shards" ] || tupe-tokenize encode -q --vocab "$out/vocab.txt" "$corpus" |
    tupe-shard write -o "$out/shards" --seq-len "$SEQ" --valid-sequences 1000 --shards 4 --seed 1

for v in $VARIANTS; do
    if [ -s "$out/$v/done" ]; then echo "$v: done before" >&2; continue; fi
    start=$(date +%s)
    tupe-pretrain train "${th[@]}" --data "$out/shards" -o "$out/$v" --model small --position "$v" \
        --steps "$STEPS" --warmup $((STEPS / 10)) --batch "$BATCH" --lr 5e-4 --seed 1 \
        --log-every 50 --eval-every $((STEPS / 6)) --save-every $((STEPS / 3)) --keep 1 --resume
    echo $(($(date +%s) - start)) >"$out/$v/done"
done

# The table: final validation loss (nats and bits) and the curve of validation losses.
{
    echo "| variant | validation MLM loss (nats) | bits | accuracy | validation loss during training | minutes |"
    echo "|---|---|---|---|---|---|"
    for v in $VARIANTS; do
        m=$out/$v/metrics.jsonl
        [ -s "$m" ] || continue
        last=$(grep '"val_loss"' "$m" | tail -1)
        loss=$(sed 's/.*"val_loss":\([0-9.]*\).*/\1/' <<<"$last")
        bits=$(sed 's/.*"val_loss_bits":\([0-9.]*\).*/\1/' <<<"$last")
        acc=$(sed 's/.*"val_acc":\([0-9.]*\).*/\1/' <<<"$last")
        curve=$(grep '"val_loss"' "$m" | sed 's/.*"val_loss":\([0-9.]*\).*/\1/' | awk '{ printf "%s%.3f", (NR > 1 ? " " : ""), $1 }')
        printf '| %s | %.4f | %.4f | %.2f%% | %s | %.0f |\n' "$v" "$loss" "$bits" "$(awk -v a="$acc" 'BEGIN { print 100 * a }')" \
            "$curve" "$(awk -v s="$(cat "$out/$v/done" 2>/dev/null || echo 0)" 'BEGIN { print s / 60 }')"
    done
} >"$out/table.md"
cat "$out/table.md"
