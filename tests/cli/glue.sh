#!/usr/bin/env bash
# tupe-glue: data inspection, scoring and submission on the real GLUE files, and an end-to-end
# run: a tiny model pre-trained briefly on the bundled sample corpus, fine-tuned on a subset of
# SST-2, must beat the majority class on the dev set by at least 5 points. Without the real
# files (../shared/data/glue) those are skipped, and the rest (how train, eval, predict and
# sweep behave) runs on GLUE-layout tasks made from the sample corpus (sample_glue in lib.sh).
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-glue
if need_data glue; then
    G=$TUPE_DATA/glue real=1
else
    G=$T/glue real=0
    sample_glue $G
fi
# real NAME: whether the test NAME can run (the real GLUE files are here); skipped otherwise.
real() { [ $real = 1 ] || { skip "$1" "$NO_DATA"; return 1; }; }

if real "info: rows per split and the label distribution"; then
    run $P info --task MRPC --data $G
    [ $rc = 0 ] && has $T/out "train               3668 rows" && \
        has $T/out "dev                  408 rows, 0 skipped; 0 129 (31.6%), 1 279 (68.4%)"
    verdict "info: rows per split and the label distribution"
fi
run $P info --task QQP --data $TUPE_SRC/tests/fixtures/glue/data --format json
[ $rc = 0 ] && \
    has $T/err "QQP/train.tsv:7: skipped: expected 6 fields, got 4" && has $T/out '"skipped": 2'
verdict "info: malformed training rows are skipped and named file:line"
if real "info: absent files are reported, present ones read"; then
    mkdir -p $T/qnli/QNLI && ln -s $G/QNLI/dev.tsv $T/qnli/QNLI/dev.tsv
    run $P info --task QNLI --data $T/qnli
    [ $rc = 0 ] && has $T/out "train            absent" && has $T/out "dev                 5463 rows"
    verdict "info: absent files are reported, present ones read"
fi
run $P info --task Nope --data $G
[ $rc = 2 ] && has $T/err "unknown task 'Nope'"
verdict "info: an unknown task is a usage error"

# AX has no training or dev file: completion offers it only where it can be used.
for sub in train sweep eval score; do
    [ "$($P $sub --completion-helper | awk -F'\t' '$2 == "--task" && / AX/' | wc -l)" = 0 ]
    verdict "completion: $sub does not offer AX"
done
$P predict --completion-helper | awk -F'\t' '$2 == "--task"' | grep -q ' AX'
verdict "completion: predict offers AX"

for g in , 1e-5,2e-5,1e-5; do
    run $P sweep --task RTE --data $G --checkpoint x --vocab x -o $T/swg --lr-grid $g
    [ $rc = 2 ] && has $T/err "--lr-grid: " && [ ! -e $T/swg ]
    verdict "sweep: --lr-grid $g is a usage error"
done

for sub in train sweep predict; do
    run sh -c "cd $T && $P $sub --task RTE --data $G --checkpoint x --vocab x -o -"
    [ $rc = 2 ] && has $T/err "$sub writes a directory, not '-'" && [ ! -e $T/- ]
    verdict "$sub: -o - is a usage error (it writes a directory)"
done

# Score a majority-class prediction file for MRPC dev (279 of 408 are "1").
if real "score: the task's metrics for a leaderboard-format file"; then
    { printf 'index\tprediction\n'; for i in $(seq 0 407); do printf '%d\t1\n' $i; done; } >$T/mrpc.tsv
    run $P score --task MRPC --data $G $T/mrpc.tsv --format json
    [ $rc = 0 ] && has $T/out '"acc":0.6838' && has $T/out '"f1":0.812'
    verdict "score: the task's metrics for a leaderboard-format file"
fi
dev=$(($(wc -l <$G/MRPC/dev.tsv) - 1))
{ printf 'index\tprediction\n'; for i in $(seq 0 98); do printf '%d\t1\n' $i; done; } >$T/short.tsv
run $P score --task MRPC --data $G $T/short.tsv
[ $rc = 65 ] && has $T/err "99 predictions for $dev examples"
verdict "score: a file with missing rows is refused"

# submit: refuses an incomplete set; zips a complete one.
mkdir -p $T/sub
run $P submit --predictions $T/sub -o $T/s.zip
[ $rc = 65 ] && has $T/err "missing" && [ ! -e $T/s.zip ]
verdict "submit: an incomplete set is refused"

if [ -x "$TUPE_BIN/tupe-pretrain" ] && [ -x "$TUPE_BIN/tupe-tokenize" ] && [ -x "$TUPE_BIN/tupe-shard" ]; then
    S=$TUPE_SRC/share/tupe/sample/corpus.txt.zst
    tupe-tokenize train -q --vocab-size 4000 -o $T/vocab.txt $S
    tupe-tokenize encode -q --docs line --vocab $T/vocab.txt $S | tupe-shard write -q -o $T/shards --seq-len 64 --valid-fraction 0.02 --shards 2
    tupe-pretrain train -q --data $T/shards -o $T/pre --model tiny --steps 40 --warmup 4 --batch 32 --lr 1e-3 --save-every 0 --eval-every 0 --threads 2
    ck=$T/pre/checkpoints/step-00000040
    run $P train --task SST-2 --data $G --checkpoint $ck --vocab $T/vocab.txt -o $T/ft --max-len 64 --epochs 2 --max-train 3000 --lr 1e-3 --threads 2
    acc=$(awk '{ print $3 }' $T/out)
    [ $rc = 0 ]
    verdict "train: SST-2 fine-tunes"
    if real "end to end: a tiny model beats the SST-2 majority class (50.92%) by 5 points"; then
        awk -v a="$acc" 'BEGIN { exit !(a >= 0.5592) }'
        verdict "end to end: a tiny model beats the SST-2 majority class (50.92%) by 5 points (got $acc)"
    fi
    [ -s $T/ft/best/model.safetensors ] && [ -s $T/ft/results.json ] && [ -s $T/ft/metrics.jsonl ]
    verdict "train keeps the best checkpoint and its scores"
    $TESTTOOL tfevents $T/ft/metrics.jsonl -o $T/ft-ref.tfevents && $TESTTOOL tfevents-cat $T/ft-ref.tfevents >$T/ft-ref.txt
    run $TESTTOOL tfevents-cat $T/ft/tensorboard/events.out.tfevents.*
    [ $rc = 0 ] && [ $(ls $T/ft/tensorboard | wc -l) = 1 ] && cmp -s $T/out $T/ft-ref.txt && has $T/out " dev/SST-2/acc "
    verdict "train writes the values of metrics.jsonl as TensorBoard scalars (tensorboard/)"
    run $P eval --task SST-2 --data $G --checkpoint $T/ft/best --vocab $T/vocab.txt --format json
    [ $rc = 0 ] && awk -v a="$acc" -F'"acc":' '{ exit !(($2 + 0) - a < 1e-4 && a - ($2 + 0) < 1e-4) }' $T/out
    verdict "eval reproduces the best dev score"
    run $P predict --task SST-2 --data $G --checkpoint $T/ft/best --vocab $T/vocab.txt -o $T/sub
    lines=1822; [ $real = 1 ] || lines=$(wc -l <$G/SST-2/test.tsv)
    [ $rc = 0 ] && [ "$(wc -l <$T/sub/SST-2.tsv)" = $lines ] && \
        [ "$(head -1 $T/sub/SST-2.tsv)" = "$(printf 'index\tprediction')" ]
    verdict "predict writes the leaderboard file with its line count"
    mkdir -p $T/gbad/SST-2 && printf 'index\tsentence\n0\n' >$T/gbad/SST-2/test.tsv
    run $P predict --task SST-2 --data $T/gbad --checkpoint $T/ft/best --vocab $T/vocab.txt -o $T/sub-bad
    [ $rc = 65 ] && [ ! -e $T/sub-bad ]
    verdict "predict with a malformed test row: refused (65), no output directory left"
    run $P eval --task RTE --data $G --checkpoint $T/ft/best --vocab $T/vocab.txt
    [ $rc = 2 ] && has $T/err "fine-tuned on SST-2, not RTE"
    verdict "a checkpoint of another task is refused"
    run $P train --task SST-2 --data $G --checkpoint $ck --vocab $BERT_VOCAB -o $T/ft2
    [ $rc = 65 ] && has $T/err "vocabulary"
    verdict "a vocabulary other than the model's is refused"
    run env TUPE_PROGRESS_INTERVAL=0 $P train --task RTE --data $G --checkpoint $ck --vocab $T/vocab.txt \
        -o $T/ftp --max-len 32 --epochs 1 --max-train 64 --max-dev 32 --evals-per-epoch 1 --threads 2
    [ $rc = 0 ] && has $T/err "fine-tune: 50% 1 steps of 2 steps" && has $T/err "fine-tune: 2 steps in"
    verdict "train: progress between the dev evaluations"
    mkdir -p $T/hf && echo '{"model_type": "bert"}' >$T/hf/config.json
    run $P train --task RTE --data $G --checkpoint $ck --vocab $T/vocab.txt -o $T/hf --max-len 32 --max-train 32 --max-dev 8
    [ $rc = 73 ] && has $T/err "$T/hf: exists and is not a fine-tuning run" && \
        [ "$(ls $T/hf)" = config.json ]
    verdict "train: a directory of something else as -o is refused (exit 73), as tupe-pretrain refuses it"
    mkdir -p $T/ftd/metrics.jsonl
    echo '{"task": "RTE", "select": 0.9}' >$T/ftd/results.json
    echo 'fine-tuning run' >$T/ftd/.tupe-kind # an earlier run of its own kind
    run $P train --task RTE --data $G --checkpoint $ck --vocab $T/vocab.txt -o $T/ftd --max-len 32 --max-train 32 --max-dev 8
    [ $rc = 73 ] && has $T/err "ftd/metrics.jsonl: cannot create: Is a directory"
    verdict "train: an output that cannot be created says why"
    [ ! -e $T/ftd/results.json ]
    verdict "train: a failed run does not leave an earlier run's results.json (a finished look)"
    # One dev example: Pearson is undefined at every evaluation, so no checkpoint is the best.
    sts="--task STS-B --data $G --checkpoint $ck --vocab $T/vocab.txt --max-len 32 --epochs 1 --max-train 64 --max-dev 1 --threads 2"
    run $P train $sts -o $T/ftn --lr 1e-3
    [ $rc = 1 ] && has $T/err "no dev evaluation gave a defined pearson" && lacks $T/err "checkpoint $T/ftn/best" && \
        [ ! -e $T/ftn/best ] && has $T/ftn/results.json '"select": null'
    verdict "train: no defined dev score is a failure, not 'best nan' and a missing checkpoint"
    run $P sweep $sts -o $T/swn --lr-grid 1e-3 --seeds 2
    [ $rc = 0 ] && has $T/err "no checkpoint kept" && has $T/swn/sweep.json '"median": null' && \
        has $T/swn/sweep.md "undefined"
    verdict "sweep: a run without a defined score counts as the lowest, the sweep goes on"
    run $P train $sts -o $T/fts --lr 1e-3 --max-dev 20
    run $P eval --task STS-B --data $G --checkpoint $T/fts/best --vocab $T/vocab.txt --max-dev 1 --format json
    [ $rc = 0 ] && has $T/out '"pearson":null'
    verdict "eval --format json: an undefined score is null, not nan"
    # sweep: runs live in lr-X/seed-N with N the seed; another seed is a new run, and a run of
    # another task in the same directory is refused rather than counted.
    sw="--data $G --checkpoint $ck --vocab $T/vocab.txt -o $T/sw --max-len 32 --epochs 1 --max-train 64 --max-dev 32 --lr-grid 1e-3 --seeds 1 --threads 2"
    run $P sweep --task RTE $sw --seed 7
    [ $rc = 0 ] && [ -s $T/sw/lr-0.001/seed-7/results.json ] && has $T/sw/sweep.tsv "RTE	0.001	7	"
    verdict "sweep: a run's directory is named for its seed"
    run $P sweep --task RTE $sw --seed 8
    [ $rc = 0 ] && [ -s $T/sw/lr-0.001/seed-8/results.json ] && lacks $T/err "done before"
    verdict "sweep: another --seed trains new runs, not the old seed's"
    run $P sweep --task MRPC $sw --seed 7
    [ $rc = 2 ] && has $T/err "a run of RTE" && has $T/err "not of MRPC"
    verdict "sweep: the runs of another task in the directory are refused"
    run $P sweep --task RTE $sw --seed 7
    [ $rc = 0 ] && has $T/err "done before"
    verdict "sweep: finished runs are read, not redone"
    # The other files of a submission, as any system would write them: every row predicted "0"
    # or the first label, then submit.
    if real "submit: the 11 files checked and zipped (WNLI filled with its majority class)"; then
        for f in AX:1104:entailment CoLA:1063:0 MNLI-m:9796:entailment MNLI-mm:9847:entailment MRPC:1725:0 \
                 QNLI:5463:entailment QQP:390965:0 RTE:3000:entailment STS-B:1379:2.500; do
            IFS=: read name n v <<<"$f"
            awk -v n=$n -v v=$v 'BEGIN { print "index\tprediction"; for (i = 0; i < n; i++) print i "\t" v }' >$T/sub/$name.tsv
        done
        run $P submit --predictions $T/sub -o $T/s.zip --wnli-majority --data $G
        [ $rc = 0 ] && \
            [ "$(head -c 2 $T/s.zip)" = PK ] && [ "$(wc -l <$T/sub/WNLI.tsv)" = 147 ]
        verdict "submit: the 11 files checked and zipped (WNLI filled with its majority class)"
    fi
fi
exit $_failed
