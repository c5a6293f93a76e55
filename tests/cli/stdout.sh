#!/usr/bin/env bash
# Standard output is checked everywhere (tupe(7), EXIT STATUS): every program and subcommand
# that writes to it exits 74 with "(stdout): write failed" when the writes fail (/dev/full) or
# standard output is closed, never 0 with its output lost. The check is made once for every
# program, when the process exits (lib/cli/process.c), so this runs every one of them.
. "$(dirname "$0")/lib.sh"
rules_setup

small_world 4 200 1 tupe-r
$MT init --vocab-size 100 --position bert-a -o cka   # decomp draws an absolute-position model
tupe-pretrain train -q --data shards --model m.json --batch 4 --steps 1 --warmup 1 --eval-every 0 --threads 2 -o run
ft=(--task RTE --data $G --checkpoint ck --vocab $V --max-len 32 --epochs 1 --max-train 8 --max-dev 4 --threads 2)
tupe-glue sweep -q "${ft[@]}" -o sweeps/RTE --lr-grid 1e-3 --seeds 1 >/dev/null
tupe-glue train -q "${ft[@]}" -o ft >/dev/null
{ printf 'index\tprediction\n'; for i in $(seq 0 99); do printf '%d\tentailment\n' $i; done; } >rte.tsv
[ -s sweeps/RTE/sweep.json ] && [ -s ft/best/model.safetensors ] && [ -s run/checkpoints/step-00000001/model.safetensors ]
verdict "setup: shards, a checkpoint, a run, a sweep, a fine-tuned checkpoint"

# full CMD...: CMD with standard output on /dev/full must fail with 74 and say so.
full() {
    local name; name=$(echo "${*:1:3}" | sed "s|$T/||g")
    run sh -c '"$@" >/dev/full' _ "$@"
    [ $rc = 74 ] && has $T/err "(stdout): write failed"
    verdict "$name ... >/dev/full: exit 74"
}
full tupe-tokenize encode --format text --vocab $V text.txt
full tupe-tokenize encode --format tokens --vocab $V text.txt
full tupe-tokenize decode --vocab $V ids.tok
full tupe-tokenize info --vocab $V text.txt
full tupe-tokenize info --vocab $V --format json
full tupe-tokenize train --vocab-size 150 text.txt
full tupe-shard info shards
full tupe-shard cat --format text shards
full tupe-shard cat shards
full tupe-pretrain eval --checkpoint run/checkpoints/step-00000001 --data shards
full tupe-pretrain eval --checkpoint run/checkpoints/step-00000001 --data shards --format json
full tupe-glue info --task RTE --data $G
full tupe-glue info --task RTE --data $G --format json
full tupe-glue score --task RTE --data $G rte.tsv
full tupe-glue score --task RTE --data $G --format json rte.tsv
full tupe-glue eval --task RTE --data $G --checkpoint ft/best --vocab $V --max-dev 4
full tupe-glue eval --task RTE --data $G --checkpoint ft/best --vocab $V --max-dev 4 --format json
full tupe-glue table sweeps
full tupe-glue train "${ft[@]}" -o ft2
full tupe-glue sweep "${ft[@]}" -o sweeps2/RTE --lr-grid 1e-3 --seeds 1
full tupe-convert info ck
full tupe-convert info --format json ck
full tupe-convert cast --dtype bf16 ck -o ck16
full tupe-convert cast --dtype bf16 --format json ck -o ck16b
full tupe-convert npy ck -t encoder.layer.0.output.dense.weight -o -
full tupe-attnviz pos ck --term
full tupe-attnviz pos ck --view abs -o -
full tupe-attnviz attn ck --vocab $V --text "w5 w6 w7" --term --layers 0
full tupe-attnviz decomp cka --vocab $V --text "w5 w6 w7" --term

# Help, version and completion of every program and subcommand.
for p in tupe-tokenize tupe-shard tupe-pretrain tupe-glue tupe-convert tupe-attnviz; do
    for a in --help --version --completion-helper; do
        run sh -c "$p $a >/dev/full"
        [ $rc = 74 ]
        verdict "$p $a >/dev/full: exit 74"
    done
    for sub in $($p --completion-helper | awk -F'\t' '$1 == "cmd" { print $2 }'); do
        run sh -c "$p $sub --help >/dev/full"
        [ $rc = 74 ] && has $T/err "write failed"
        verdict "$p $sub --help >/dev/full: exit 74"
    done
done

# A standard output closed from the start: what is written there fails too.
run sh -c "tupe-convert info ck >&-"
[ $rc = 74 ] && has $T/err "(stdout): write failed"
verdict "tupe-convert info with standard output closed: exit 74"
run sh -c "tupe-shard -q -o shards2 --seq-len 32 --shards 1 ids.tok >&-"
[ $rc = 0 ] && [ -s shards2/manifest.json ]
verdict "a program that writes nothing there is not failed by a closed standard output"
# A failure of its own keeps its code; the write error is reported beside it.
run sh -c "tupe-convert info missing.safetensors >/dev/full"
[ $rc = 66 ]
verdict "an earlier error keeps its exit status (66), not 74"
exit $_failed
