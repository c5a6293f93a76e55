#!/usr/bin/env bash
# The TUPE paper's Table 4 in miniature: ELECTRA (BERT-A positions in the generator and the
# discriminator), ELECTRA-TUPE (TUPE-R in both) and, as the sanity row, a masked-LM BERT-A of
# the discriminator's size, pre-trained on the same shards with the same seeds and steps
# (shared/docs/electra.md section 6). For every arm: the validation MLM loss (the generator's
# for ELECTRA), the discriminator's AUC on its own generator's fakes and on one fixed probe
# (the ELECTRA arm's last generator's corruption, `tupe-pretrain eval --write-probe`, scored by
# every discriminator with --probe: the number that compares across arms), and the median dev
# score of small GLUE tasks over fine-tuning seeds with their range. ELECTRA-TUPE is also
# evaluated at 60% of the steps (the paper's ELECTRA-TUPE^mid). Every run's results are kept
# as JSON (OUT/ARM/seed-S/results.json), so a finished run is read, not redone; an unfinished
# one resumes from its last checkpoint (one every tenth of the steps), so the hours of
# BUDGET=small may be spread over several calls.
#
#   table4.sh [CORPUS [OUT]]
#
# CORPUS: any text tupe-tokenize reads (default: the shared debian-104m corpus beside the source
# tree when it is there, else the bundled sample). BUDGET names the defaults below:
#   mini   discriminator 128 wide, 2 layers, 2 heads, FFN 512; T 64, batch 16, 600 steps,
#          vocabulary 4096; RTE and MRPC, 3 fine-tuning seeds (minutes to an hour on 2 cores)
#   small  electra.md's plan: the small preset (256 wide, 4 layers), T 128, batch 32, 12000
#          steps, vocabulary 8192; RTE, MRPC, CoLA, STS-B, SST-2, 5 seeds (hours per arm)
# and each can be changed: MODEL (preset or JSON), GEN (the generator's width fraction: 0.25),
# STEPS, BATCH, SEQ, LR (5e-4, ELECTRA-Small's), WARMUP (STEPS / 10), VOCAB_SIZE, SEEDS
# (pre-training seeds: "1"), RECIPE (electra: ELECTRA's optimizer for every arm), TASKS,
# GLUE_SEEDS, GLUE_LR (1e-4), GLUE_OPTS (more tupe-glue sweep options), GLUE (a glue_data
# directory; default the shared one when it is there; none: no fine-tuning), THREADS, ARMS
# (the arms this call runs, "electra electra-tupe mlm"; the table shows every arm run so far,
# so two calls with different ARMS may run at once on two cores: an ELECTRA-TUPE arm's probe
# evaluation needs the ELECTRA arm's probe, and stops, to be rerun, until it is written).
# Fine-tuning is ELECTRA's recipe for every arm (tupe-glue --recipe electra: layer-wise decay
# 0.8), the MLM arm included, so that only the pre-training differs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
share=$(cd "$here/.." && pwd)
# shellcheck source=corpus.sh
. "$here/corpus.sh"
corpus=${1:-$(default_corpus "$share")}
out=${2:-table4}
BUDGET=${BUDGET:-mini}
mkdir -p "$out"
case $BUDGET in
mini)
    cat >"$out/mini.json" <<'J'
{"position": "bert-a", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 512, "max_position_embeddings": 128}
J
    d_model=$out/mini.json d_steps=600 d_batch=16 d_seq=64 d_vocab=4096 d_tasks="RTE MRPC" d_gseeds=3 ;;
small) d_model=small d_steps=12000 d_batch=32 d_seq=128 d_vocab=8192 d_tasks="RTE MRPC CoLA STS-B SST-2" d_gseeds=5 ;;
*) echo "table4.sh: BUDGET must be mini or small, not '$BUDGET'" >&2; exit 2 ;;
esac
MODEL=${MODEL:-$d_model}
GEN=${GEN:-0.25}
STEPS=${STEPS:-$d_steps}
BATCH=${BATCH:-$d_batch}
SEQ=${SEQ:-$d_seq}
LR=${LR:-5e-4}
WARMUP=${WARMUP:-$((STEPS / 10))}
VOCAB_SIZE=${VOCAB_SIZE:-$d_vocab}
SEEDS=${SEEDS:-1}
RECIPE=${RECIPE:-electra}
TASKS=${TASKS-$d_tasks}
GLUE_SEEDS=${GLUE_SEEDS:-$d_gseeds}
GLUE_LR=${GLUE_LR:-1e-4}
GLUE_OPTS=${GLUE_OPTS:-}
GLUE=${GLUE:-}
[ -z "$GLUE" ] && [ -d "$share/../../../shared/data/glue" ] && GLUE=$share/../../../shared/data/glue
[ "$GLUE" = none ] && GLUE=
[ -n "$GLUE" ] || TASKS=
THREADS=${THREADS:-0}
th=()
[ "$THREADS" != 0 ] && th=(--threads "$THREADS")
MID=$((STEPS * 6 / 10))
ARMS=${ARMS:-"electra electra-tupe mlm"}
for a in $ARMS; do
    case $a in electra | electra-tupe | mlm) ;; *) echo "table4.sh: ARMS: no arm '$a' (electra, electra-tupe, mlm)" >&2; exit 2 ;; esac
done
echo "corpus: $corpus; budget $BUDGET: $MODEL, generator $GEN, $STEPS steps of $BATCH x $SEQ," \
    "seeds $SEEDS; output in $out" >&2

[ -s "$out/vocab.txt" ] || tupe-tokenize train --vocab-size "$VOCAB_SIZE" -o "$out/vocab.txt" "$corpus"
[ -d "$out/shards" ] || tupe-tokenize encode -q --vocab "$out/vocab.txt" "$corpus" |
    tupe-shard write -q -o "$out/shards" --seq-len "$SEQ" --valid-sequences 500 --shards 4 --seed 1

arm_args() { # ARM: what tupe-pretrain train is told besides the budget
    case $1 in
    electra) echo "--position bert-a --objective electra --generator-size $GEN" ;;
    electra-tupe) echo "--position tupe-r --objective electra --generator-size $GEN" ;;
    mlm) echo "--position bert-a" ;;
    esac
}
field() { # FILE KEY: the first number (or null) after "KEY": in a JSON file, else null
    local v
    v=$(grep -o "\"$2\": *[-0-9.e]*\(null\)\?" "$1" 2>/dev/null | head -1 | cut -d: -f2 | tr -d ' ')
    echo "${v:-null}"
}
probe=$out/probe.bin

# The evaluations of one checkpoint: on its own corruption, and on the fixed probe (ELECTRA
# arms). The probe is the first ELECTRA run's, written by its last checkpoint's evaluation.
evaluate() { # CHECKPOINT ARM DIR TAG
    local ck=$1 arm=$2 dir=$3 tag=$4 f
    f=$dir/eval-$tag.json
    if [ ! -s "$f" ]; then
        local w=()
        [ "$arm" = electra ] && [ ! -s "$probe" ] && [ "$tag" = last ] && w=(--write-probe "$probe")
        tupe-pretrain eval "${th[@]}" -q -c "$ck" --data "$out/shards" --format json "${w[@]}" >"$f.tmp"
        mv "$f.tmp" "$f"
    fi
    f=$dir/probe-$tag.json
    if [ "$arm" != mlm ] && [ ! -s "$f" ]; then
        [ -s "$probe" ] || { echo "table4.sh: $probe is not written yet: run the electra arm" \
            "(ARMS=electra) to its end, then this again" >&2; exit 1; }
        tupe-pretrain eval "${th[@]}" -q -c "$ck" --data "$out/shards" --format json --probe "$probe" >"$f.tmp"
        mv "$f.tmp" "$f"
    fi
}

# Fine-tuning of one checkpoint on every task: the median over seeds and its range.
finetune() { # CHECKPOINT DIR: prints the JSON object of the tasks
    local ck=$1 dir=$2 t g=""
    for t in $TASKS; do
        # shellcheck disable=SC2086
        tupe-glue sweep "${th[@]}" -q --task "$t" --data "$GLUE" --checkpoint "$ck" --vocab "$out/vocab.txt" \
            --recipe electra --lr-grid "$GLUE_LR" --seeds "$GLUE_SEEDS" --max-len "$SEQ" $GLUE_OPTS -o "$dir/$t" >&2
        local r
        r=$(awk -F'\t' 'NR > 1 { x[n++] = $4 } END { lo = hi = x[0]; for (i = 1; i < n; i++) {
            lo = x[i] < lo ? x[i] : lo; hi = x[i] > hi ? x[i] : hi } printf "%s,%s", lo, hi }' "$dir/$t/sweep.tsv")
        g="$g${g:+,}\"$t\":{\"median\":$(field "$dir/$t/sweep.json" median),\"range\":[$r]}"
    done
    echo "{$g}"
}

one_run() { # ARM SEED
    local arm=$1 s=$2 run=$out/$1/seed-$2 ck mid
    [ -s "$run/results.json" ] && { echo "$arm seed $s: done before" >&2; return 0; }
    # shellcheck disable=SC2046
    tupe-pretrain train "${th[@]}" -q --data "$out/shards" -o "$run/pretrain" --model "$MODEL" \
        $(arm_args "$arm") --recipe "$RECIPE" --steps "$STEPS" --warmup "$WARMUP" --batch "$BATCH" \
        --lr "$LR" --seed "$s" --log-every 50 --eval-every 0 --save-every $(((STEPS + 9) / 10)) --keep 1 \
        --keep-step "$MID" --resume
    ck=$run/pretrain/checkpoints/$(printf 'step-%08d' "$STEPS")
    mid=$run/pretrain/checkpoints/$(printf 'step-%08d' "$MID")
    evaluate "$ck" "$arm" "$run" last
    local extra="" glue
    glue=$(finetune "$ck" "$run/glue")
    if [ "$arm" = electra-tupe ]; then
        evaluate "$mid" "$arm" "$run" mid
        extra=",\"mid\":{\"step\":$MID,\"eval\":$(cat "$run/eval-mid.json"),\"probe\":$(cat "$run/probe-mid.json"),\"glue\":$(finetune "$mid" "$run/glue-mid")}"
    fi
    local pr=null
    [ -s "$run/probe-last.json" ] && pr=$(cat "$run/probe-last.json")
    printf '{"arm":"%s","seed":%s,"corpus":"%s","budget":"%s","model":"%s","generator_size":%s,"steps":%s,"batch":%s,"seq_len":%s,"lr":%s,"recipe":"%s","glue_seeds":%s,"checkpoint":"%s","eval":%s,"probe":%s,"glue":%s%s}\n' \
        "$arm" "$s" "$corpus" "$BUDGET" "$MODEL" "$GEN" "$STEPS" "$BATCH" "$SEQ" "$LR" "$RECIPE" "$GLUE_SEEDS" "$ck" "$(cat "$run/eval-last.json")" \
        "$pr" "$glue" "$extra" >"$run/results.json.tmp"
    mv "$run/results.json.tmp" "$run/results.json"
}

for arm in $ARMS; do
    for s in $SEEDS; do
        one_run "$arm" "$s"
    done
done

# The table: per row the mean over pre-training seeds (spread when more than one), per task
# the median dev score x 100 and the range over fine-tuning seeds.
stats() { # values on stdin, one a line ("null" skipped)
    awk -v d="${1:-4}" '$1 != "null" && $1 != "" { x[n++] = $1 } END {
        if (!n) { print "n/a"; exit }
        for (i = 0; i < n; i++) s += x[i]; m = s / n
        for (i = 0; i < n; i++) v += (x[i] - m) ^ 2
        if (n > 1) printf "%.*f ± %.*f", d, m, d, sqrt(v / (n - 1)); else printf "%.*f", d, m }'
}
row() { # NAME ARM SUFFIX (last or mid)
    local name=$1 arm=$2 tag=$3 f t
    printf '| %s |' "$name"
    printf ' %s |' "$(for f in "$out/$arm"/seed-*/eval-"$tag".json; do field "$f" val_loss; done | stats)"
    printf ' %s |' "$(for f in "$out/$arm"/seed-*/eval-"$tag".json; do field "$f" val_disc_auc; done | stats)"
    printf ' %s |' "$(for f in "$out/$arm"/seed-*/probe-"$tag".json; do field "$f" val_disc_auc; done | stats)"
    local sum=0 k=0 m
    for t in $TASKS; do
        local dir=glue
        [ "$tag" = mid ] && dir=glue-mid
        m=$(for f in "$out/$arm"/seed-*/"$dir"/"$t"/sweep.json; do field "$f" median; done |
            awk '$1 != "null" { s += $1; n++ } END { if (n) printf "%.2f", 100 * s / n; else print "n/a" }')
        local r
        r=$(cat "$out/$arm"/seed-*/"$dir"/"$t"/sweep.tsv 2>/dev/null | awk -F'\t' '$1 != "task" {
            v = 100 * $4; lo = n++ ? (v < lo ? v : lo) : v; hi = n > 1 ? (v > hi ? v : hi) : v }
            END { if (n) printf "%.1f-%.1f", lo, hi }')
        printf ' %s (%s) |' "$m" "$r"
        [ "$m" != n/a ] && sum=$(awk -v a="$sum" -v b="$m" 'BEGIN { print a + b }') && k=$((k + 1))
    done
    [ -n "$TASKS" ] && printf ' %s |' "$(awk -v s="$sum" -v k="$k" 'BEGIN { if (k) printf "%.2f", s / k; else print "n/a" }')"
    echo
}
{
    printf '| arm | validation MLM loss | discriminator AUC (own fakes) | AUC on the fixed probe |'
    for t in $TASKS; do printf ' %s dev (seed range) |' "$t"; done
    [ -n "$TASKS" ] && printf ' average |'
    echo
    printf '|---|---|---|---|'
    for t in $TASKS; do printf -- '---|'; done
    [ -n "$TASKS" ] && printf -- '---|'
    echo
    row "ELECTRA (BERT-A)" electra last
    row "ELECTRA-TUPE (TUPE-R), step $STEPS" electra-tupe last
    row "ELECTRA-TUPE (TUPE-R), step $MID (60%)" electra-tupe mid
    row "MLM BERT-A (sanity row)" mlm last
    echo
    echo "Budget $BUDGET: $MODEL, generator $GEN, $STEPS steps of $BATCH x $SEQ, lr $LR ($RECIPE)," \
        "pre-training seeds $SEEDS; fine-tuning: tupe-glue --recipe electra, lr $GLUE_LR, $GLUE_SEEDS seeds" \
        "(median x 100, range over seeds); corpus $(basename "$corpus")."
} >"$out/table.md"
cat "$out/table.md"
