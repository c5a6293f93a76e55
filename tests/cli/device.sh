#!/usr/bin/env bash
# --device and --precision of tupe-pretrain and tupe-glue on a machine without a usable GPU
# (the case `make check` meets; skipped where nvidia-smi sees a GPU): auto computes on the CPU,
# with one notice line when the build has the CUDA backend; an explicit cuda, or bf16 on the
# CPU, is a usage error (exit 2) that creates nothing; a checkpoint written with --device cpu
# continues under --device auto.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-pretrain
unset TUPE_DEVICE   # tests/run pins the CPU; here the default itself is under test
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    ok "skipped: a GPU is present (tests/gpu/run.sh covers this machine)"
    exit 0
fi
cuda_build=0
$P --version | grep -q 'Built with:.*cuda' && cuda_build=1

awk 'BEGIN { srand(3); for (d = 0; d < 120; d++) { line = "";
     for (i = 0; i < 30; i++) line = line (i ? " " : "") 5 + int(40 * rand() ^ 3); print line } }' >$T/ids.txt
$TESTTOOL tok-write --vocab-size 50 -o $T/ids.tok $T/ids.txt
tupe-shard write -q -o $T/shards --seq-len 16 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --valid-fraction 0.1 --shards 1 $T/ids.tok
cat >$T/m.json <<'J'
{"position": "tupe-r", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 32}
J
common=(--data $T/shards --model $T/m.json --batch 4 --warmup 1 --log-every 1 --eval-every 0 --save-every 0 --threads 1)

run $P train "${common[@]}" -o $T/cpu --steps 2 --device cpu
[ $rc = 0 ] && lacks $T/err "computing on the CPU" && [ -s $T/cpu/checkpoints/step-00000002/model.safetensors ]
verdict "--device cpu trains without a notice"

run $P train "${common[@]}" -o $T/auto --steps 2
if [ $cuda_build = 1 ]; then
    [ $rc = 0 ] && [ "$(grep -c 'computing on the CPU' $T/err)" = 1 ] && \
        grep -q '^tupe-pretrain: no CUDA device (.*): computing on the CPU$' $T/err
    verdict "--device auto (default) falls back to the CPU with a one-line notice"
else
    [ $rc = 0 ] && lacks $T/err "computing on the CPU"
    verdict "--device auto (default) is the CPU in a build without CUDA, silently"
fi
data_bytes() { # the data section of a safetensors file (after its header)
    local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((n + 9)) "$1"
}
cmp -s <(data_bytes $T/cpu/checkpoints/step-00000002/model.safetensors) \
    <(data_bytes $T/auto/checkpoints/step-00000002/model.safetensors)
verdict "--device auto computes what --device cpu does"

run env TUPE_DEVICE=cpu $P train "${common[@]}" -o $T/env --steps 1
[ $rc = 0 ] && lacks $T/err "computing on the CPU"
verdict "TUPE_DEVICE=cpu is the default device: no notice"
run env TUPE_DEVICE=tpu $P train "${common[@]}" -o $T/env2 --steps 1
[ $rc = 2 ] && has $T/err "unknown device 'tpu' (from TUPE_DEVICE)" && [ ! -e $T/env2 ]
verdict "a bad TUPE_DEVICE is a usage error naming the variable"
run env TUPE_DEVICE=tpu $P train "${common[@]}" -o $T/env3 --steps 1 --device cpu
[ $rc = 0 ]
verdict "--device wins over TUPE_DEVICE"

run $P train "${common[@]}" -o $T/auto-q --steps 1 -q
[ $rc = 0 ] && is_empty $T/err
verdict "-q silences the fallback notice"

run $P train "${common[@]}" -o $T/cuda --steps 1 --device cuda
[ $rc = 2 ] && has $T/err "tupe-pretrain: device 'cuda': " && [ ! -e $T/cuda ] && \
    { [ $cuda_build = 0 ] && has $T/err "no CUDA backend" || has $T/err "no usable GPU ("; }
verdict "--device cuda without a GPU: exit 2, the reason, nothing created"

run $P train "${common[@]}" -o $T/bf --steps 1 --device cpu --precision bf16
[ $rc = 2 ] && has $T/err "precision bf16 needs the CUDA backend" && [ ! -e $T/bf ]
verdict "--precision bf16 on the CPU is a usage error"
run $P train "${common[@]}" -o $T/bf --steps 1 --precision bf16
[ $rc = 2 ] && has $T/err "precision bf16 needs the CUDA backend" && [ ! -e $T/bf ]
verdict "--precision bf16 where auto finds no GPU is a usage error"
run $P train "${common[@]}" -o $T/f16 --steps 1 --precision fp16
[ $rc = 2 ] && has $T/err "fp16" && [ ! -e $T/f16 ]
verdict "--precision accepts only fp32 and bf16"
run $P train "${common[@]}" -o $T/f32 --steps 1 --device cpu --precision fp32
[ $rc = 0 ]
verdict "--precision fp32 on the CPU trains"
run $P train "${common[@]}" -o $T/dev --steps 1 --device tpu
[ $rc = 2 ] && has $T/err "tpu"
verdict "an unknown --device is a usage error"

# The checkpoint of a --device cpu run continues under --device auto (the same files whatever
# the device computes on).
run $P train "${common[@]}" -o $T/cont --steps 4 --stop-after 2 --device cpu
run $P train "${common[@]}" -o $T/cont --steps 4 --resume --device auto
[ $rc = 0 ] && [ -s $T/cont/checkpoints/step-00000004/model.safetensors ]
verdict "a run continues across --device values"

run $P eval --checkpoint $T/cpu/checkpoints/step-00000002 --data $T/shards --device cuda
[ $rc = 2 ] && has $T/err "device 'cuda': "
verdict "eval: --device cuda without a GPU is exit 2"
run $P eval --checkpoint $T/cpu/checkpoints/step-00000002 --data $T/shards --device cpu --precision fp32
[ $rc = 0 ]
verdict "eval: --device cpu --precision fp32"

G=$TUPE_BIN/tupe-glue
run $G train --task RTE --data $TUPE_DATA/glue --checkpoint $T/cpu/checkpoints/step-00000002 \
    --vocab /dev/null -o $T/glue --device cuda
[ $rc = 2 ] && has $T/err "tupe-glue: device 'cuda': " && [ ! -e $T/glue ]
verdict "tupe-glue train: --device cuda without a GPU is exit 2"
run $G train --task RTE --data $TUPE_DATA/glue --checkpoint $T/cpu/checkpoints/step-00000002 \
    --vocab /dev/null -o $T/glue --device cpu --precision bf16
[ $rc = 2 ] && has $T/err "precision bf16 needs the CUDA backend" && [ ! -e $T/glue ]
verdict "tupe-glue train: --precision bf16 on the CPU is a usage error"
if [ $cuda_build = 1 ]; then
    ldd $P >$T/out 2>&1
    lacks $T/out libnccl && has $T/out libcublasLt
    verdict "the CUDA build does not link NCCL (opened at run time, when ranks on GPUs need it)"
fi
exit $_failed
