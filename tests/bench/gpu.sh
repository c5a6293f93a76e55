#!/usr/bin/env bash
# The GPU training step: tupe's CUDA backend (bf16) against PyTorch + transformers
# (BertForMaskedLM, bf16 autocast, fused AdamW) on the same GPU, bert-base, masked-LM training
# steps of random token ids: tokens/s at seq 128 batch 64 and seq 512 batch 16 (BERT-A; TUPE-R
# is ours only: transformers has no TUPE). Skips (exit 0, a note on stderr) without a GPU or
# without the CUDA backend in this build. Commands (from the repository root):
#   build/CFG/tests/tupe-parity bench --dev cuda-bf16 --model bert-base --position bert-a --seq 128 --batch 64 --steps 10
#   python3 (the script below) 128 64
set -u
: "${TUPE_BUILD:?run through make bench}"
X=$TUPE_BUILD/tests/tupe-parity
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "gpu.sh: skipped: no NVIDIA GPU on this machine" >&2
    exit 0
fi
if ! "$TUPE_BUILD/bin/tupe-pretrain" --version | grep -q 'Built with:.*cuda'; then
    echo "gpu.sh: skipped: this build has no CUDA backend (make CUDA=1)" >&2
    exit 0
fi
torch_tps() { # seq batch -> tokens/s of PyTorch, or nothing
    python3 - "$1" "$2" <<'PY' 2>/dev/null
import sys, time, torch
from transformers import BertConfig, BertForMaskedLM
T, B = int(sys.argv[1]), int(sys.argv[2])
if not torch.cuda.is_available(): sys.exit(1)
m = BertForMaskedLM(BertConfig(max_position_embeddings=512)).cuda()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
ids = torch.randint(5, 30522, (B, T), device="cuda")
labels = torch.where(torch.rand(B, T, device="cuda") < 0.15, ids, torch.full_like(ids, -100))
def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(input_ids=ids, labels=labels).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
for _ in range(3): step()
torch.cuda.synchronize(); t = time.time()
for _ in range(10): step()
torch.cuda.synchronize(); print(B * T * 10 / (time.time() - t))
PY
}
for cfg in "128 64" "512 16"; do
    set -- $cfg
    for pos in bert-a tupe-r; do
        line=$("$X" bench --dev cuda-bf16 --model bert-base --position $pos --seq "$1" --batch "$2" --steps 10 2>&2)
        echo "$line" >&2
        ours=$(echo "$line" | sed -n 's/.*tokens_per_s=\([0-9]*\).*/\1/p')
        theirs=
        [ $pos = bert-a ] && theirs=$(torch_tps "$1" "$2")
        if [ -n "$ours" ] && [ -n "$theirs" ]; then
            awk -v o="$ours" -v t="$theirs" -v s="$1" -v b="$2" 'BEGIN {
                printf "| GPU train step bert-base BERT-A seq %d batch %d (tokens/s, bf16) | %.0f | %.0f | %.2f |\n", s, b, o, t, o / t }'
        else
            echo "| GPU train step bert-base $pos seq $1 batch $2 (tokens/s, bf16) | ${ours:-failed} | ${theirs:-n/a} | |"
        fi
    done
done
