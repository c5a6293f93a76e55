#!/usr/bin/env bash
# share/tupe/examples/Makefile, the paper's pipeline as make targets: `make -n` prints the
# workflow for one CPU, mpirun and Slurm; a miniature of it runs end to end (tiny model, two
# small GLUE tasks) and a second `make` finds nothing to redo.
. "$(dirname "$0")/lib.sh"
EX=$TUPE_SRC/share/tupe/examples/Makefile
mkx() { make --no-print-directory -f "$EX" "$@"; }

run mkx -n CORPUS=wiki/ GLUE=glue_data/
[ $rc = 0 ] && [ "$(grep -oE '^[ ]*(\$\(RUN\) )?tupe-[a-z]+ [a-z]+' $T/out | awk '{print $1, $2}' | uniq | tr '\n' ' ')" \
    = "tupe-tokenize train tupe-tokenize encode tupe-shard write tupe-pretrain train tupe-glue sweep tupe-glue table " ]
verdict "make -n: vocabulary, encode|shard, pre-training, one sweep per task, the table"
[ "$(grep -c '^tupe-glue sweep' $T/out)" = 8 ] && has $T/out "--steps 1000000" \
    && has $T/out "--keep-step 100000,300000,600000" && has $T/out "--seq-len 512" \
    && has $T/out "--vocab-size 32768" && has $T/out "--batch 256" && has $T/out "--seeds 5"
verdict "make -n: the paper's settings by default (8 tasks, 1M steps, 512, 32k, batch 256)"

run mkx -n CORPUS=wiki/ RUN=srun DEVICE=cuda THREADS=8 pretrain
[ $rc = 0 ] && has $T/out "srun tupe-pretrain train --threads 8 --device cuda --data" \
    && has $T/out "--resume"
verdict "make -n RUN=srun DEVICE=cuda: the 16-GPU Slurm job's command, resumable"
run mkx -n CORPUS=wiki/ RUN='mpirun -np 16' THREADS=4 PRECISION=fp32 pretrain
[ $rc = 0 ] && has $T/out "mpirun -np 16 tupe-pretrain train --threads 4 --device auto --precision fp32"
verdict "make -n RUN='mpirun -np 16': 16 CPU processes"

mkdir -p $T/ex/corpus
zstd -dcq "$TUPE_SRC/share/tupe/sample/corpus.txt.zst" >$T/ex/corpus/sample.txt
# The real GLUE files where they are (../shared/data), otherwise tasks in their layout made
# from the sample corpus: the pipeline's steps are under test here, not the scores.
G=$TUPE_DATA/glue
need_data glue || { G=$T/glue; sample_glue $G; }
set -- -C $T/ex CORPUS=corpus GLUE="$G" OUT=run MODEL=tiny SEQ=64 STEPS=20 \
    BATCH=8 WARMUP=2 VOCAB_SIZE=2000 VALID=0.05 KEEP=10 TASKS="RTE MRPC" SEEDS=1 THREADS=1 \
    DEVICE=cpu GLUE_OPTS="--max-train 64 --max-dev 32 --epochs 1 --lr-grid 5e-5 --max-len 64"
run mkx "$@"
[ $rc = 0 ] && [ -s $T/ex/run/vocab.txt ] && [ -s $T/ex/run/shards/manifest.json ] \
    && [ -s $T/ex/run/pretrain/checkpoints/step-00000020/model.safetensors ] \
    && [ -s $T/ex/run/pretrain/checkpoints/step-00000010/model.safetensors ] \
    && [ -s $T/ex/run/glue/RTE/sweep.json ] && [ -s $T/ex/run/glue/MRPC/sweep.json ]
verdict "the miniature pipeline runs: vocabulary, shards, the last checkpoint and KEEP's step 10 (off the --save-every grid), two sweeps"
grep -qE '^\| \| \| \| \| \| \| [0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \| \| [0-9.]+\* \|$' $T/ex/run/glue/table.md \
    && has $T/err "validation loss"
verdict "the table has the MRPC and RTE columns and the average of the two"
run mkx -q "$@" run/glue/table.md
check "a second make has nothing to redo" [ $rc = 0 ]
exit $_failed
