#!/usr/bin/env bash
# `make demo`: the whole pipeline on the bundled sample corpus, in a few minutes on two cores:
# vocabulary, encoding, shards, a short TUPE-R pre-training, fine-tuning on a GLUE-format task
# made from the sample itself (original sentences against the same words shuffled, in CoLA's
# layout: "acceptable or not"), the dev score, the positional-correlation picture and the loss
# curve. Every output is under $TUPE_DEMO_DIR (default build/demo).
set -euo pipefail
: "${TUPE_BIN:?run through make demo}" "${TUPE_SRC:?run through make demo}"
export PATH="$TUPE_BIN:$PATH"
OUT=${TUPE_DEMO_DIR:-$TUPE_SRC/build/demo}
SAMPLE=$TUPE_SRC/share/tupe/sample/corpus.txt.zst
MINUTES=${TUPE_DEMO_MINUTES:-3}
rm -rf "$OUT"
mkdir -p "$OUT"
t0=$(date +%s)
say() { printf '\n== %s (%ds)\n' "$*" $(($(date +%s) - t0)); }

say "1/7 vocabulary: 8000 WordPiece tokens learned from the sample ($(zstd -dc "$SAMPLE" | wc -c) bytes)"
tupe-tokenize train --vocab-size 8000 -o "$OUT/vocab.txt" "$SAMPLE"

say "2/7 encode (one document per paragraph) and shard: sequences of 128, 2% held out for validation"
tupe-tokenize encode --docs line --vocab "$OUT/vocab.txt" "$SAMPLE" |
    tupe-shard write -o "$OUT/shards" --seq-len 128 --valid-fraction 0.02 --shards 4
tupe-shard info "$OUT/shards"

say "3/7 pre-train the tiny TUPE-R model for about $MINUTES minutes"
# About 60,000 tokens/s on two quiet cores for this model: size the schedule for that, and
# stop at the time budget on a slower machine (--max-time; the checkpoint is written anyway).
steps=$((MINUTES * 60 * 60000 / (32 * 128)))
tupe-pretrain train --data "$OUT/shards" -o "$OUT/pretrain" --model tiny --position tupe-r \
    --steps $steps --warmup $((steps / 10)) --batch 32 --lr 1e-3 --log-every 20 \
    --eval-every $((steps / 12)) --save-every $((steps / 2)) --max-time $((MINUTES * 60))
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

say "6/7 fine-tune on it (2 epochs) and score the dev set (Matthews correlation: 0 is chance, 100 perfect)"
tupe-glue train --task CoLA --data "$OUT/glue" --checkpoint "$ckpt" --vocab "$OUT/vocab.txt" \
    -o "$OUT/finetune" --max-len 48 --epochs 2 --max-train 20000 --max-dev 1000 --lr 3e-4 --evals-per-epoch 2
tupe-glue eval --task CoLA --data "$OUT/glue" --checkpoint "$OUT/finetune/best" --vocab "$OUT/vocab.txt" --max-dev 1000

say "7/7 what the positions learned: per-head positional correlation of the pre-trained model"
tupe-attnviz pos "$ckpt" --max-pos 64 --view bias,softmax -o "$OUT/positions" --npy "$OUT/positions-npy"
tupe-attnviz pos "$ckpt" --max-pos 24 --view softmax --heads 0 --term 2>/dev/null | head -30 || true

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
