#!/usr/bin/env bash
# Fine-tune a small pre-trained checkpoint on the GLUE tasks that fit a laptop (RTE, MRPC,
# CoLA, STS-B, SST-2) and print the paper's Table 1 row for them. A quick look, not the
# paper's protocol: one learning rate and one seed per task (LR, SEEDS, EPOCHS to change).
#
#   glue-small.sh CHECKPOINT VOCAB GLUE_DATA [OUT]
set -euo pipefail
ck=$1 vocab=$2 glue=$3 out=${4:-glue-small}
LR=${LR:-1e-4}
SEEDS=${SEEDS:-1}
EPOCHS=${EPOCHS:-3}
TASKS=${TASKS:-"RTE MRPC CoLA STS-B SST-2"}
mkdir -p "$out"
for t in $TASKS; do
    tupe-glue sweep --task "$t" --data "$glue" --checkpoint "$ck" --vocab "$vocab" \
        --lr-grid "$LR" --seeds "$SEEDS" --epochs "$EPOCHS" --max-len 128 -o "$out/$t"
done
tupe-glue table "$out"
