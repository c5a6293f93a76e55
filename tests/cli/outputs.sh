#!/usr/bin/env bash
# Nothing lost, whatever the user types (tupe(7), OUTPUTS): an output that is an input (by any
# name), lies inside an input directory, or contains an input it would replace is refused with
# 73 and the input untouched, in every program; a directory is replaced or written into only
# when it is the program's own kind (its .tupe-kind says so), so that no mistyped -o deletes a
# run, a model or a shard directory; an empty -o is a usage error everywhere.
. "$(dirname "$0")/lib.sh"
rules_setup

# ---- a small world: text, a token stream, shards, a checkpoint, a run, an export --------------
small_world 3 300 2 tupe-a
tupe-pretrain train -q --data shards --model m.json --batch 4 --steps 2 --warmup 1 --save-every 1 \
    --eval-every 0 --threads 2 -o run
tupe-convert export -q --to hf ck --vocab $V -o hf
tree() { find "$1" -type f -exec md5sum {} + | sort; }
tree run >run.sum; tree shards >shards.sum; tree hf >hf.sum; tree ck >ck.sum
md5sum text.txt ids.tok >files.sum
intact() { tree run | cmp -s - run.sum && tree shards | cmp -s - shards.sum && tree hf | cmp -s - hf.sum &&
           tree ck | cmp -s - ck.sum && md5sum -c --quiet files.sum; }
[ -s run/checkpoints/step-00000002/model.safetensors ] && [ -s shards/manifest.json ] && [ -s hf/config.json ]
verdict "setup: a token stream, shards, a checkpoint, a pre-training run and a Hugging Face export"

# ---- the output is an input ------------------------------------------------------------------
mkdir -p sub && ln -s text.txt link.txt && ln text.txt hard.txt
for o in text.txt ./text.txt sub/../text.txt link.txt hard.txt "$T/text.txt"; do
    run tupe-tokenize encode --vocab $V -o "$o" text.txt
    [ $rc = 73 ] && has $T/err "is the input" && intact
    verdict "tokenize encode -o $o: the input by another name is refused (73), untouched"
done
run tupe-tokenize train --vocab-size 200 -o text.txt text.txt
[ $rc = 73 ] && has $T/err "text.txt: is the input" && intact
verdict "tokenize train -o the corpus: refused (73)"
run sh -c "tupe-tokenize encode --vocab $V -o text.txt <text.txt"
[ $rc = 73 ] && has $T/err "is the input (stdin)" && intact
verdict "tokenize encode -o the file standard input reads: refused (73)"
cp text.txt app.txt
run sh -c "tupe-tokenize encode --vocab $V --format text app.txt >>app.txt"
[ $rc = 73 ] && has $T/err "(stdout): is the input" && cmp -s app.txt text.txt
verdict "standard output appended to the input: refused (73), nothing written"
run tupe-tokenize decode --vocab $V -o ids.tok ids.tok
[ $rc = 73 ] && intact
verdict "tokenize decode -o its input: refused (73)"
cp $V v.txt
run tupe-tokenize encode --vocab v.txt -o v.txt text.txt
[ $rc = 73 ] && has $T/err "is the input --vocab v.txt" && cmp -s v.txt $V
verdict "tokenize encode -o its vocabulary: refused (73), naming the option"
run tupe-convert cast --dtype bf16 ck -o ck
[ $rc = 73 ] && has $T/err "is the input" && intact
verdict "convert cast -o its input: refused (73), the checkpoint untouched"
run tupe-convert import --from hf hf -o hf
[ $rc = 73 ] && intact
verdict "convert import -o its input: refused (73)"
run tupe-convert export --to hf ck --vocab $V -o ck
[ $rc = 73 ] && intact
verdict "convert export -o the checkpoint: refused (73)"
run tupe-convert npy ck -o ck
[ $rc = 73 ] && intact
verdict "convert npy -o the checkpoint: refused (73)"
run tupe-pretrain train --data shards --model m.json --steps 1 -o shards
[ $rc = 73 ] && intact
verdict "pretrain -o the shard directory: refused (73)"
run tupe-glue train --task RTE --data $G --checkpoint ck --vocab $V -o ck --max-train 8 --max-dev 4
[ $rc = 73 ] && intact
verdict "glue train -o the checkpoint: refused (73)"
run tupe-attnviz pos ck -o ck
[ $rc = 73 ] && intact
verdict "attnviz -o the checkpoint: refused (73)"
run tupe-attnviz pos ck --npy ck
[ $rc = 73 ] && intact
verdict "attnviz --npy the checkpoint: refused (73)"

# ---- the output lies inside an input directory ------------------------------------------------
run tupe-shard cat shards -o shards/train-00000.shard
[ $rc = 73 ] && has $T/err "lies inside the input" && intact
verdict "shard cat -o a shard of its input: refused (73), the shard untouched"
run tupe-pretrain train --data shards --model m.json --steps 1 -o shards/run
[ $rc = 73 ] && has $T/err "lies inside the input" && [ ! -e shards/run ] && intact
verdict "pretrain -o inside the shard directory: refused (73)"
mkdir -p P && printf 'index\tprediction\n0\t1\n' >P/CoLA.tsv && cp P/CoLA.tsv CoLA.keep
for o in P/CoLA.tsv P/submission.zip; do
    run tupe-glue submit --predictions P -o $o
    [ $rc = 73 ] && has $T/err "lies inside the input" && cmp -s P/CoLA.tsv CoLA.keep && [ ! -e P/submission.zip ]
    verdict "glue submit -o $o inside --predictions: refused (73)"
done
run tupe-glue predict --task RTE --data $G --checkpoint ck --vocab $V -o ck/preds
[ $rc = 73 ] && [ ! -e ck/preds ] && intact
verdict "glue predict -o inside the checkpoint: refused (73)"
run tupe-convert npy ck -o ck/npy
[ $rc = 73 ] && [ ! -e ck/npy ] && intact
verdict "convert npy -o inside the checkpoint: refused (73)"

# ---- the output contains an input it would replace ---------------------------------------------
mkdir -p wrap && cp ids.tok wrap/ids.tok && md5sum wrap/ids.tok >wrap.sum
run tupe-shard -o wrap --seq-len 32 wrap/ids.tok
[ $rc = 73 ] && has $T/err "contains the input" && md5sum -c --quiet wrap.sum
verdict "re-sharding into the directory that holds the token stream: refused (73), the stream kept"
run tupe-convert import --from hf hf -o .
[ $rc = 73 ] && has $T/err "contains the input" && intact
verdict "convert import -o a directory holding the input: refused (73)"
run tupe-pretrain train --data shards --model m.json --steps 1 --checkpoint run/checkpoints/step-00000002 -o run
[ $rc = 73 ] && intact
verdict "pretrain -o the run that holds its --checkpoint: refused (73)"
# Files added to a directory (figures) may sit next to the inputs.
mkdir -p figs && cp -r ck figs/ck
run tupe-attnviz pos figs/ck -o figs --view abs
[ $rc = 0 ] && [ -s figs/pos-abs.png ]
verdict "attnviz -o a directory that holds the checkpoint: figures are added beside it"

# ---- each kind of output replaces only its own kind ---------------------------------------------
run tupe-convert export --to hf run/checkpoints/step-00000002 --vocab $V -o run
[ $rc = 73 ] && intact
verdict "export of a run's checkpoint over the run: refused (73), every checkpoint and metrics.jsonl kept"
run tupe-convert export --to hf ck --vocab $V -o run
[ $rc = 73 ] && has $T/err "run: is a pre-training run" && has $T/err "not a Hugging Face model" && intact
verdict "export into a pre-training run: refused (73), naming what it is"
run tupe-glue train --task RTE --data $G --checkpoint ck --vocab $V -o run --max-train 8 --max-dev 4
[ $rc = 73 ] && has $T/err "is a pre-training run" && intact
verdict "glue train into a pre-training run: refused (73), its metrics.jsonl untouched"
run tupe-convert export --to hf ck --vocab $V -o shards
[ $rc = 73 ] && has $T/err "is a shard directory" && intact
verdict "export into a shard directory: refused (73)"
run tupe-shard -o hf --seq-len 32 ids.tok
[ $rc = 73 ] && has $T/err "is a Hugging Face model" && intact
verdict "shards into a Hugging Face export: refused (73)"
run tupe-pretrain train --data shards --model m.json --steps 1 -o hf
[ $rc = 73 ] && has $T/err "is a Hugging Face model" && intact
verdict "pretrain into a Hugging Face export: refused (73)"
run tupe-convert import --from hf hf -o shards
[ $rc = 73 ] && intact
verdict "import into a shard directory: refused (73)"
run tupe-tokenize train --model bpe --merges 20 -o run text.txt
[ $rc = 73 ] && intact
verdict "a BPE vocabulary into a run: refused (73)"
run tupe-convert npy ck -o run
[ $rc = 73 ] && intact
verdict "npy files into a run: refused (73)"
run tupe-attnviz pos ck -o shards
[ $rc = 73 ] && has $T/err "is a shard directory" && intact
verdict "figures into a shard directory: refused (73)"
run tupe-glue predict --task RTE --data $G --checkpoint ck --vocab $V -o hf
[ $rc = 73 ] && intact
verdict "predictions into a Hugging Face export: refused (73)"
mkdir -p mine && echo keep >mine/notes.txt
for cmd in "tupe-convert export --to hf ck --vocab $V" "tupe-convert import --from hf hf" \
           "tupe-shard --seq-len 32 ids.tok" "tupe-convert npy ck"; do
    run $cmd -o mine
    [ $rc = 73 ] && has $T/err "has no .tupe-kind" && [ "$(cat mine/notes.txt)" = keep ]
    verdict "${cmd%% *} ${cmd#* }: a directory of the user's is not replaced (73, says what to do)"
done
run tupe-attnviz pos ck -o mine --view abs
[ $rc = 0 ] && [ -s mine/pos-abs.png ] && [ "$(cat mine/notes.txt)" = keep ]
verdict "figures are added to a directory of the user's"

# A directory from before kinds were recorded: refused with the way out in the message.
mkdir -p old && cp hf/config.json hf/model.safetensors old/
run tupe-convert export --to hf ck --vocab $V -o old
[ $rc = 73 ] && has $T/err "old: exists and is not a Hugging Face model" && has $T/err "remove it yourself or choose another output" && [ -s old/model.safetensors ]
verdict "an unmarked (older) export is not replaced: 73, saying how to proceed"

# ---- an empty -o is a usage error everywhere ---------------------------------------------------
for cmd in "tupe-tokenize encode --vocab $V text.txt" "tupe-tokenize train text.txt" \
           "tupe-tokenize decode --vocab $V ids.tok" "tupe-shard ids.tok" "tupe-shard cat shards" \
           "tupe-pretrain train --data shards --model m.json" \
           "tupe-glue train --task RTE --data $G --checkpoint ck --vocab $V" \
           "tupe-glue predict --task RTE --data $G --checkpoint ck --vocab $V" \
           "tupe-glue submit --predictions P" "tupe-convert cast --dtype bf16 ck" \
           "tupe-convert export --to hf ck --vocab $V" "tupe-convert import --from hf hf" \
           "tupe-convert npy ck" "tupe-attnviz pos ck"; do
    run $cmd -o ''
    [ $rc = 2 ] && has $T/err "an empty path" && lacks $T/err "rename"
    verdict "${cmd%% --*} -o '': a usage error"
done
run tupe-tokenize encode --vocab '' text.txt
[ $rc = 2 ] && has $T/err "--vocab: an empty path"
verdict "an empty input path is a usage error too"
intact
verdict "after all of it, every input is as it was"

# the same kind again: replaced, and marked
run tupe-shard -q -o shards --seq-len 32 --shards 2 --valid-fraction 0.1 --seed 9 ids.tok
[ $rc = 0 ] && [ "$(cat shards/.tupe-kind)" = "shard directory" ] && has shards/manifest.json '"seed": 9'
verdict "a shard directory is replaced by shards, and says what it is"
run tupe-convert export -q --to hf ck --vocab $V --dtype bf16 -o hf
[ $rc = 0 ] && [ "$(cat hf/.tupe-kind)" = "Hugging Face model" ]
verdict "an export replaces an export"
[ "$(cat run/.tupe-kind)" = "pre-training run" ] && [ "$(cat run/checkpoints/step-00000002/.tupe-kind)" = checkpoint ]
verdict "a run and its checkpoints say what they are"
exit $_failed
