#!/usr/bin/env bash
# Compare positional encodings on equal terms: pre-train the same model with every encoding
# (the TUPE paper's six and RoPE, ALiBi, NoPE, DeBERTa) on the same shards, with the same budget,
# masks and seeds, then tabulate for each the validation MLM loss (mean and spread over the
# seeds), the loss on the first 2x and 4x the training length of longer validation sequences
# (n/a for a learned position table, which has no rows there), and dev scores of small GLUE
# tasks. Every run's results are kept as JSON, so the runs may be spread over time: a finished
# run is read, not redone.
#
#   compare-positions.sh [CORPUS [OUT]]
#
# CORPUS: any text tupe-tokenize reads (default: the test corpus of the source tree when it is
# there, else the bundled sample). Environment: MODEL (small), STEPS (1200), BATCH (32),
# SEQ (128), LR (5e-4), SEEDS ("1 2 3"), ENCODINGS ("bert-a bert-r bert-ad tupe-a tupe-a-tie
# tupe-r rope alibi nope deberta"), GLUE (a glue_data directory; default: the source tree's when it
# is there), TASKS ("RTE MRPC"; empty: no fine-tuning), GLUE_EPOCHS (3), VOCAB_SIZE (16384),
# THREADS (all cores).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
share=$(cd "$here/.." && pwd)
corpus=${1:-}
if [ -z "$corpus" ]; then
    for c in "$share/../../../shared/data/corpus/debian-104m.txt.zst" "$share/sample/corpus.txt.zst"; do
        [ -r "$c" ] && { corpus=$c; break; }
    done
fi
out=${2:-compare-positions}
MODEL=${MODEL:-small}
STEPS=${STEPS:-1200}
BATCH=${BATCH:-32}
SEQ=${SEQ:-128}
LR=${LR:-5e-4}
SEEDS=${SEEDS:-"1 2 3"}
ENCODINGS=${ENCODINGS:-"bert-a bert-r bert-ad tupe-a tupe-a-tie tupe-r rope alibi nope deberta"}
TASKS=${TASKS-"RTE MRPC"}
GLUE=${GLUE:-}
[ -z "$GLUE" ] && [ -d "$share/../../../shared/data/glue" ] && GLUE=$share/../../../shared/data/glue
GLUE_EPOCHS=${GLUE_EPOCHS:-3}
VOCAB_SIZE=${VOCAB_SIZE:-16384}
THREADS=${THREADS:-0}
th=()
[ "$THREADS" != 0 ] && th=(--threads "$THREADS")
[ -n "$GLUE" ] || TASKS=
mkdir -p "$out"
echo "corpus: $corpus; $MODEL, $STEPS steps of $BATCH x $SEQ, seeds $SEEDS; output in $out" >&2

# Every run finished (their JSON kept, or copied alone into OUT, as the README's table is in the
# source tree's results/compare-positions): nothing to train, so no vocabulary or shards either.
todo=0
for e in $ENCODINGS; do for s in $SEEDS; do [ -s "$out/$e/seed-$s/results.json" ] || todo=1; done; done
[ $todo = 0 ] || [ -s "$out/vocab.txt" ] || tupe-tokenize train --vocab-size "$VOCAB_SIZE" -o "$out/vocab.txt" "$corpus"
[ $todo = 0 ] || [ -d "$out/shards" ] || tupe-tokenize encode -q --vocab "$out/vocab.txt" "$corpus" |
    tupe-shard write -q -o "$out/shards" --seq-len "$SEQ" --valid-sequences 1000 --shards 4 --seed 1
# The extrapolation set: the same held-out fraction of documents packed 4x as long.
[ $todo = 0 ] || [ -d "$out/long" ] || tupe-tokenize encode -q --vocab "$out/vocab.txt" "$corpus" |
    tupe-shard write -q -o "$out/long" --seq-len $((4 * SEQ)) --valid-sequences 250 --shards 1 --seed 1

position_args() { # ENCODING: the tupe-pretrain options that select it
    case $1 in
    tupe-a-tie) echo "--position tupe-a --tie-cls" ;;
    *) echo "--position $1" ;;
    esac
}

# One run: training, evaluation at 1x, 2x, 4x (a refusal is n/a) and fine-tuning; its
# results in RUN/results.json.
one_run() { # ENCODING SEED
    local e=$1 s=$2 run=$out/$1/seed-$2 ck n f
    [ -s "$run/results.json" ] && { echo "$e seed $s: done before" >&2; return 0; }
    # shellcheck disable=SC2046
    tupe-pretrain train "${th[@]}" --data "$out/shards" -o "$run/pretrain" --model "$MODEL" \
        $(position_args "$e") --steps "$STEPS" --warmup $((STEPS / 10)) --batch "$BATCH" \
        --lr "$LR" --seed "$s" --log-every 50 --eval-every 0 --save-every $((STEPS / 3)) --keep 1 --resume
    ck=$(ls -d "$run/pretrain/checkpoints"/step-* | tail -1)
    local evals=""
    for n in $SEQ $((2 * SEQ)) $((4 * SEQ)); do
        f=$run/eval-$n.json
        if [ ! -s "$f" ]; then
            if ! tupe-pretrain eval "${th[@]}" -c "$ck" --data "$out/long" --seq-len "$n" \
                --bucket "$SEQ" --format json >"$f.tmp" 2>"$run/eval-$n.err"; then
                printf '{"n/a":"%s"}\n' "$(tail -1 "$run/eval-$n.err" | tr -d '"\\')" >"$f.tmp"
            fi
            mv "$f.tmp" "$f"
        fi
        evals="$evals${evals:+,}\"$n\":$(cat "$f")"
    done
    local glue=""
    for t in $TASKS; do
        tupe-glue sweep "${th[@]}" --task "$t" --data "$GLUE" --checkpoint "$ck" --vocab "$out/vocab.txt" \
            --lr-grid 1e-4 --seeds 1 --epochs "$GLUE_EPOCHS" --max-len "$SEQ" -o "$run/glue/$t" >&2
        glue="$glue${glue:+,}\"$t\":$(field "$run/glue/$t/sweep.json" median | sed 's,n/a,null,')"
    done
    glue="{$glue}"
    printf '{"encoding":"%s","seed":%s,"model":"%s","steps":%s,"batch":%s,"seq_len":%s,"checkpoint":"%s","eval":{%s},"glue":%s}\n' \
        "$e" "$s" "$MODEL" "$STEPS" "$BATCH" "$SEQ" "$ck" "$evals" "$glue" >"$run/results.json.tmp"
    mv "$run/results.json.tmp" "$run/results.json"
}
field() { # FILE KEY: the first number after "KEY": in a JSON file (or n/a)
    local v
    v=$(grep -o "\"$2\": *[-0-9.e]*" "$1" | head -1 | cut -d: -f2 | tr -d ' ')
    echo "${v:-n/a}"
}

for e in $ENCODINGS; do
    for s in $SEEDS; do
        one_run "$e" "$s"
    done
done

# The table: mean and spread (sample standard deviation) over the seeds of every column.
stats() { # values on stdin, one a line ("n/a" skipped): "mean ± sd (k)" or "n/a"
    awk '$1 != "n/a" && $1 != "" { x[n++] = $1 } END {
        if (!n) { print "n/a"; exit }
        for (i = 0; i < n; i++) s += x[i]; m = s / n
        for (i = 0; i < n; i++) v += (x[i] - m) ^ 2
        if (n > 1) printf "%.4f ± %.4f", m, sqrt(v / (n - 1)); else printf "%.4f", m }'
}
{
    printf '| encoding | validation MLM loss at %s | at %s (2x) | at %s (4x) |' "$SEQ" $((2 * SEQ)) $((4 * SEQ))
    for t in $TASKS; do printf ' %s dev |' "$t"; done
    echo
    printf '|---|---|---|---|'
    for t in $TASKS; do printf -- '---|'; done
    echo
    for e in $ENCODINGS; do
        ls "$out/$e"/seed-*/results.json >/dev/null 2>&1 || continue
        printf '| %s |' "$e"
        for n in $SEQ $((2 * SEQ)) $((4 * SEQ)); do
            printf ' %s |' "$(for f in "$out/$e"/seed-*/eval-"$n".json; do field "$f" val_loss; done | stats)"
        done
        for t in $TASKS; do # the task's median dev score (x 100)
            printf ' %s |' "$(for f in "$out/$e"/seed-*/glue/"$t"/sweep.json; do field "$f" median; done |
                awk '$1 == "n/a" { print; next } { print 100 * $1 }' | stats)"
        done
        echo
    done
} >"$out/table.md"
cat "$out/table.md"
