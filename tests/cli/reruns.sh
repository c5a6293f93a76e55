#!/usr/bin/env bash
# A run or a sweep records everything that determines its results, and a rerun into the same
# directory with other settings is refused (a usage error naming the option and both values)
# rather than reporting the old results as its own or continuing a hybrid; a result file that
# cannot be read is an error naming it, never skipped.
. "$(dirname "$0")/lib.sh"
rules_setup

small_world 8 300 1 tupe-r
$MT init --vocab-size 100 --seed 2 -o ck2

# ---- a sweep rerun with other settings --------------------------------------------------------
sw=(--task RTE --data $G --vocab $V --max-len 32 --max-train 8 --max-dev 4 --lr-grid 1e-3 --seeds 1 --threads 2)
run tupe-glue sweep "${sw[@]}" --checkpoint ck --epochs 1 -o sw
[ $rc = 0 ] && [ -s sw/sweep.json ]
verdict "a sweep"
cp sw/sweep.json sweep.keep
for change in "--checkpoint ck2 --epochs 1" "--checkpoint ck --epochs 2" \
              "--checkpoint ck --epochs 1 --recipe bert" "--checkpoint ck --epochs 1 --batch 4" \
              "--checkpoint ck --epochs 1 --dropout 0" "--checkpoint ck --epochs 1 --weight-decay 0.1" \
              "--checkpoint ck --epochs 1 --max-train 6" "--checkpoint ck --epochs 1 --cased"; do
    run tupe-glue sweep "${sw[@]}" $change -o sw
    [ $rc = 2 ] && has $T/err "made with" && cmp -s sw/sweep.json sweep.keep && lacks $T/out "median"
    verdict "sweep rerun with $change: refused (2), naming the option, the old results not reported"
done
run tupe-glue sweep "${sw[@]}" --checkpoint ck2 --epochs 1 -o sw
has $T/err "--checkpoint" && has $T/err "ck2"
verdict "... the message names the option and both values"
run tupe-glue sweep "${sw[@]}" --checkpoint ck --epochs 1 -o sw
[ $rc = 0 ] && has $T/err "done before" && has $T/out "median"
verdict "the same settings: the finished runs are read, not redone"
run tupe-glue sweep "${sw[@]}" --checkpoint ck --epochs 1 --lr-grid 1e-3,2e-3 -o sw
[ $rc = 0 ] && [ -s sw/lr-0.002/seed-1/results.json ]
verdict "more learning rates or seeds extend the same sweep"

# ---- a fine-tuning run rerun with other settings ----------------------------------------------
ft=(--task RTE --data $G --vocab $V --max-len 32 --max-train 8 --max-dev 4 --epochs 1 --threads 2)
run tupe-glue train "${ft[@]}" --checkpoint ck -o ft
[ $rc = 0 ]
run tupe-glue train "${ft[@]}" --checkpoint ck --lr 1e-3 -o ft
[ $rc = 0 ] && has ft/results.json '"lr"'
verdict "a fine-tuning run replaced by another with other settings says so in its results"

# ---- tupe-glue table: a result file that cannot be read is named ------------------------------
mkdir -p tab && cp -r sw tab/RTE && cp -r sw tab/MRPC
printf '{"task": "MRPC", "best' >tab/MRPC/sweep.json
run tupe-glue table tab
[ $rc = 65 ] && has $T/err "tab/MRPC/sweep.json" && [ ! -e tab/table.md ]
verdict "table: a damaged sweep.json is an error naming it, not skipped"
chmod 000 tab/MRPC/sweep.json
run tupe-glue table tab
[ $(id -u) = 0 ] || { [ $rc != 0 ] && has $T/err "tab/MRPC/sweep.json"; }
verdict "table: an unreadable sweep.json is an error naming it"
chmod 644 tab/MRPC/sweep.json
rm -r tab/MRPC
run tupe-glue table tab
[ $rc = 0 ] && [ -s tab/table.md ]
verdict "table: a task without a sweep is a gap in the table, not an error"

# ---- tupe-pretrain --resume with other settings ------------------------------------------------
pre=(--data shards --model m.json --batch 4 --warmup 2 --eval-every 0 --save-every 2 --threads 2 --steps 8)
run tupe-pretrain train "${pre[@]}" --stop-after 2 -o run
[ $rc = 0 ] && [ -d run/checkpoints/step-00000002 ]
verdict "a run stopped after 2 steps"
for change in "--lr 5e-4:--lr:0.0001:0.0005" "--mask-prob 0.2:--mask-prob:0.15:0.2" \
              "--weight-decay 0.1:--weight-decay:0.01:0.1" "--dropout 0.2:--dropout:0.1:0.2" \
              "--attention-dropout 0:--attention-dropout:0.1:0" "--warmup 3:--warmup:2:3" \
              "--end-lr 1e-5:--end-lr:0:1e-05" "--clip 0.5:--clip:1:0.5" "--beta2 0.98:--beta2:0.999:0.98" \
              "--steps 9:--steps:8:9"; do
    IFS=: read -r opt name old new <<<"$change"
    run tupe-pretrain train "${pre[@]}" $opt --resume -o run
    [ $rc = 2 ] && has $T/err "$name" && has $T/err "$old" && has $T/err "$new" && [ ! -d run/checkpoints/step-00000004 ]
    verdict "--resume with $opt: a usage error naming $name, $old and $new"
done
run tupe-pretrain train "${pre[@]}" --resume --stop-after 2 -o run
[ $rc = 0 ] && has $T/err "resumed from" && [ -d run/checkpoints/step-00000004 ]
verdict "--resume with the run's own settings continues it"
exit $_failed
