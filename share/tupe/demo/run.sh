#!/usr/bin/env bash
# `make demo`: the whole pipeline on the bundled sample corpus, in about five minutes on two cores:
# vocabulary, encoding, shards, a short TUPE-R pre-training, fine-tuning on a GLUE-format task
# made from the sample itself (original sentences against the same words shuffled, in CoLA's
# layout: "acceptable or not"), the dev score, the positional-correlation picture and the loss
# curve. Every output is under $TUPE_DEMO_DIR (default build/demo).
#
# The budget is a number of steps, not a time, so that the numbers the demo prints are the
# same on every machine (up to the order of floating-point sums): a slower machine takes
# longer, it does not learn less. At the end the demo checks its own story (the validation loss
# fell, the fine-tuned model is well above chance) and says so in one line; exit 1 if not.
# The tests run it with a smaller budget: TUPE_DEMO_STEPS, TUPE_DEMO_EPOCHS,
# TUPE_DEMO_MAX_TRAIN, TUPE_DEMO_LR (pre-training) and the thresholds TUPE_DEMO_MIN_DROP
# (nats) and TUPE_DEMO_MIN_MCC.
set -euo pipefail
: "${TUPE_BIN:?run through make demo}" "${TUPE_SRC:?run through make demo}"
export PATH="$TUPE_BIN:$PATH"
OUT=${TUPE_DEMO_DIR:-$TUPE_SRC/build/demo}
SAMPLE=$TUPE_SRC/share/tupe/sample/corpus.txt.zst
STEPS=${TUPE_DEMO_STEPS:-3000}        # pre-training steps of 32 x 128 tokens
EPOCHS=${TUPE_DEMO_EPOCHS:-2}         # fine-tuning epochs
MAX_TRAIN=${TUPE_DEMO_MAX_TRAIN:-20000}
LR=${TUPE_DEMO_LR:-1e-3}
MIN_DROP=${TUPE_DEMO_MIN_DROP:-3}     # the validation loss must fall at least this much (nats)
MIN_MCC=${TUPE_DEMO_MIN_MCC:-0.5}     # and the dev Matthews correlation reach this (chance: 0)
PROBE=12                              # steps of the measurement that sizes the wait
rm -rf "$OUT"
mkdir -p "$OUT"
t0=$(date +%s)
say() { printf '\n== %s (%ds)\n' "$*" $(($(date +%s) - t0)); }
# The value of a field in the last line of a JSON Lines file that has it (numbers only).
lastnum() { grep -o "\"$2\": *[-0-9.eE+]*" "$1" | tail -1 | cut -d: -f2 | tr -d ' '; }
fail() {
    printf '\ndemo check: FAILED: %s\n' "$*" >&2
    echo "  (a slower machine takes longer but learns the same: the budget is in steps; the run's" \
         "settings and every loss are in $OUT/pretrain/metrics.jsonl)" >&2
    exit 1
}

say "1/7 vocabulary: 8000 WordPiece tokens learned from the sample ($(zstd -dc "$SAMPLE" | wc -c) bytes)"
tupe-tokenize train --vocab-size 8000 -o "$OUT/vocab.txt" "$SAMPLE"

say "2/7 encode (one document per paragraph) and shard: sequences of 128, 2% held out for validation"
tupe-tokenize encode --docs line --vocab "$OUT/vocab.txt" "$SAMPLE" |
    tupe-shard write -o "$OUT/shards" --seq-len 128 --valid-fraction 0.02 --shards 4
tupe-shard info "$OUT/shards"

say "3/7 pre-train the tiny TUPE-R model for $STEPS steps of 32 x 128 tokens"
# The wait, measured: $PROBE steps of the same model with the learning rate at 0, so that their
# validation loss is also the untrained model's, the 'before' of the check at the end.
tupe-pretrain train -q --data "$OUT/shards" -o "$OUT/probe" --model tiny --position tupe-r \
    --steps $PROBE --warmup 1 --batch 32 --lr 0 --log-every 4 --eval-every $PROBE --save-every $PROBE
before=$(lastnum "$OUT/probe/metrics.jsonl" val_loss | awk '{ printf "%.2f", $1 }')
per_step=$(grep -o '"elapsed_s":[0-9.]*' "$OUT/probe/metrics.jsonl" | cut -d: -f2 |
    awk -v n=$PROBE 'NR == 1 { a = $1 } { b = $1 } END { print (b - a) / (n - 4) }')
# Fine-tuning and the rest cost about a tenth of pre-training at the default budget.
awk -v s="$per_step" -v n="$STEPS" 'BEGIN {
    t = s * n; printf "measured %.0f ms per step here: pre-training about %d min %02d s, the whole demo about %d min\n",
        s * 1000, t / 60, t % 60, (t * 1.12 + 30) / 60 + 0.5 }'
rm -rf "$OUT/probe"
tupe-pretrain train --data "$OUT/shards" -o "$OUT/pretrain" --model tiny --position tupe-r \
    --steps "$STEPS" --warmup $((STEPS / 10)) --batch 32 --lr "$LR" --log-every 20 \
    --eval-every $(((STEPS + 11) / 12)) --save-every $(((STEPS + 1) / 2))
after=$(lastnum "$OUT/pretrain/metrics.jsonl" val_loss | awk '{ printf "%.2f", $1 }')
drop=$(awk -v a="$before" -v b="$after" 'BEGIN { printf "%.2f", a - b }')
awk -v d="$drop" -v m="$MIN_DROP" 'BEGIN { exit !(d >= m) }' ||
    fail "pre-training learned too little: validation loss $before -> $after nats (fell $drop, expected at least $MIN_DROP); fine-tuning it would score at chance"
ckpt=$(ls -d "$OUT/pretrain/checkpoints/step-"* | tail -1)

say "4/7 the loss curve"
if command -v gnuplot >/dev/null; then
    gnuplot -e "metrics='$OUT/pretrain/metrics.jsonl'; out='$OUT/loss.png'; title='tiny TUPE-R on the sample corpus'" \
        "$TUPE_SRC/share/tupe/plot-loss.gp" && echo "$OUT/loss.png"
else
    echo "gnuplot is not installed: skipped (apt-get install gnuplot-nox)"
fi

say "5/7 a GLUE-format task from the sample: is the sentence as written, or its words shuffled?"
mkdir -p "$OUT/glue/CoLA"
# Sentences of 6 to 30 words; half of them get their words shuffled (label 0).
zstd -dc "$SAMPLE" | tr -s '\n' ' ' | sed 's/\([.!?]\) \([A-Z]\)/\1\n\2/g' |
    awk -v dir="$OUT/glue/CoLA" 'BEGIN { srand(20210); print "index\tsentence" > (dir "/test.tsv") }
    NF >= 6 && NF <= 30 && !/\t/ {
        n = split($0, w, " ")
        if (rand() < 0.5) { label = 1; s = $0 }
        else { for (i = n; i > 1; i--) { j = int(rand() * i) + 1; t = w[i]; w[i] = w[j]; w[j] = t }
               s = w[1]; for (i = 2; i <= n; i++) s = s " " w[i]; label = (s == $0) }
        k++
        if (k % 20 == 0) print "demo\t" label "\t\t" s > (dir "/dev.tsv")
        else if (k % 20 == 1) print m++ "\t" s > (dir "/test.tsv")
        else if (k <= 60000) print "demo\t" label "\t\t" s > (dir "/train.tsv")
    }'
wc -l "$OUT/glue/CoLA/"*.tsv
tupe-glue info --task CoLA --data "$OUT/glue"

say "6/7 fine-tune on it ($EPOCHS epochs) and score the dev set (Matthews correlation: 0 is chance, 1 perfect)"
tupe-glue train --task CoLA --data "$OUT/glue" --checkpoint "$ckpt" --vocab "$OUT/vocab.txt" \
    -o "$OUT/finetune" --max-len 48 --epochs "$EPOCHS" --max-train "$MAX_TRAIN" --max-dev 1000 --lr 3e-4 --evals-per-epoch 2
tupe-glue eval --task CoLA --data "$OUT/glue" --checkpoint "$OUT/finetune/best" --vocab "$OUT/vocab.txt" --max-dev 1000

say "7/7 what the positions learned: per-head positional correlation of the pre-trained model"
tupe-attnviz pos "$ckpt" --max-pos 64 --view bias,softmax -o "$OUT/positions" --npy "$OUT/positions-npy"
tupe-attnviz pos "$ckpt" --max-pos 24 --view softmax --heads 0 --term 2>/dev/null | head -30 || true

mcc=$(lastnum "$OUT/finetune/results.json" select)

say "done"
cat <<MSG
Outputs in $OUT:
  vocab.txt                   the WordPiece vocabulary
  shards/                     packed, shuffled, compressed training and validation sequences
  pretrain/metrics.jsonl      training and validation loss per step
  pretrain/checkpoints/       the pre-trained model ($ckpt)
  loss.png                    the loss curve
  glue/CoLA/                  the task made from the sample
  finetune/best/              the fine-tuned model; finetune/results.json its dev scores
  positions/pos-bias.png      the positional term of every head (the same in every layer)
  positions/pos-softmax.png   its softmax over keys: where each position looks, before content
  positions-npy/              the matrices behind the pictures, as .npy, with meta.json
MSG
awk -v c="$mcc" -v m="$MIN_MCC" 'BEGIN { exit !(c >= m) }' ||
    fail "the fine-tuned model is near chance: dev Matthews correlation $mcc (expected at least $MIN_MCC) though pre-training's validation loss fell $before -> $after nats"
printf '\ndemo check: passed: validation loss %s -> %s nats (fell %s, expected at least %s); dev Matthews correlation %.3f (chance 0, expected at least %s); %d s\n' \
    "$before" "$after" "$drop" "$MIN_DROP" "$mcc" "$MIN_MCC" $(($(date +%s) - t0))
