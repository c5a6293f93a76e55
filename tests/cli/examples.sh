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

# The data-parallel examples on CPU ranks: pretrain-ranks.sh (a loop of processes) and
# pretrain-slurm.sbatch under a stand-in for srun and scontrol (tasks on this machine, with
# Slurm's variables) end with the weights of one process computing the same micro-batches.
mkdir -p $T/dp && cd $T/dp || exit 1
small_world 4 200 1 tupe-r >/dev/null 2>&1
dp=(--data $T/dp/shards --model $T/dp/m.json --batch 8 --steps 4 --warmup 1 --save-every 2
    --eval-every 0 --threads 1 --device cpu -q)
port=$((20000 + ($$ * 17 + RANDOM) % 12000))
tupe-pretrain train "${dp[@]}" -o one --micro-batch 4
run env MASTER_PORT=$port TUPE_COMM_TIMEOUT=30 $TUPE_SRC/share/tupe/examples/pretrain-ranks.sh 2 \
    tupe-pretrain train "${dp[@]}" -o loop
[ $rc = 0 ] && $TESTTOOL st-diff one/checkpoints/step-00000004/model.safetensors \
    loop/checkpoints/step-00000004/model.safetensors | grep -q '^max_abs_diff 0 '
verdict "pretrain-ranks.sh 2 tupe-pretrain ...: the weights of one process"
mkdir -p fake
cat >fake/scontrol <<'S'
#!/bin/sh
[ "$1 $2" = "show hostnames" ] && echo localhost
S
cat >fake/srun <<'S'
#!/bin/bash
while [[ $1 == --* ]]; do shift; done
for ((r = 0; r < SLURM_NTASKS; r++)); do SLURM_PROCID=$r SLURM_LOCALID=$r "$@" & done
rc=0; for ((r = 0; r < SLURM_NTASKS; r++)); do wait -n || rc=1; done; exit $rc
S
chmod +x fake/scontrol fake/srun
run env PATH=$T/dp/fake:$PATH SLURM_JOB_NODELIST=node[01-02] SLURM_JOB_ID=4242 SLURM_NTASKS=2 \
    SLURM_CPUS_PER_TASK=1 DEVICE=cpu DATA=$T/dp/shards OUT=slurm MODEL=$T/dp/m.json BATCH=8 STEPS=4 \
    TUPE_COMM_TIMEOUT=30 bash $TUPE_SRC/share/tupe/examples/pretrain-slurm.sbatch --warmup 1 \
    --save-every 2 --eval-every 0 --threads 1 -q
[ $rc = 0 ] && $TESTTOOL st-diff one/checkpoints/step-00000004/model.safetensors \
    slurm/checkpoints/step-00000004/model.safetensors | grep -q '^max_abs_diff 0 '
verdict "pretrain-slurm.sbatch under a stand-in srun (2 tasks): the weights of one process"
exit $_failed
