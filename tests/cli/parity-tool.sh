#!/usr/bin/env bash
# The backend parity tool of tests/gpu/run.sh, run here on the CPU (cpu against cpu64) so that
# the harness itself is tested where no GPU is: every operation of lib/backend/backend.h, a training
# step of each variant, a short loss curve; one PARITY line per comparison, a SUMMARY line, and
# the exit status.
. "$(dirname "$0")/lib.sh"
X=$TUPE_BUILD/tests/tupe-parity

run $X ops --ref cpu64 --dev cpu --small
n=$(grep -c '^PARITY .* PASS$' $T/out)
missing=
for op in upload zero scale sumsq gemm linear_fwd linear_bwd act_fwd act_bwd ln_fwd ln_bwd \
          resid_ln_fwd resid_ln_bwd embed_fwd embed_bwd attn_fwd attn_bwd \
          pos_bias_fwd pos_bias_bwd qk_pos_add qk_pos_grad gather_rows scatter_rows \
          xent_fwd xent_bwd mse_fwd mse_bwd adamw; do
    grep -q "^PARITY $op " $T/out || missing="$missing $op"
done
[ $rc = 0 ] && [ "$n" -ge 100 ] && ! grep -q FAIL $T/out && [ -z "$missing" ] && \
    grep -q '^SUMMARY ops cpu vs cpu64: [0-9]* checks, 0 failed$' $T/out
verdict "ops: every operation of the backend interface compared ($n comparisons${missing:+; missing:$missing})"

ok_all=1
for v in "bert-a" "bert-ad" "tupe-r" "tupe-a --tie-cls"; do
    run $X step --ref cpu64 --dev cpu --model tiny --position $v --batch 2 --seq 13
    [ $rc = 0 ] && grep -q '^PARITY step  *tiny/[a-z-]*[+a-z-]* *loss ' $T/out && \
        grep -q '^PARITY step-grad .*word_embeddings' $T/out || ok_all=0
done
[ $ok_all = 1 ]
verdict "step: loss, logits, gradient norm and every gradient of four variants"

run $X curve --ref cpu64 --dev cpu --model tiny --steps 3 --batch 2 --seq 13
[ $rc = 0 ] && [ "$(grep -c '^CURVE tiny step' $T/out)" = 3 ] && grep -q '^PARITY curve .* PASS$' $T/out
verdict "curve: the loss of AdamW steps on both backends"

run $X ops --ref cpu --dev nope
[ $rc = 2 ] && has $T/err "--dev nope"
verdict "an unknown backend is a setup error (exit 2)"

# bench on the CPU: real tokens and their MFU at model/flops.h's count (tiny at T = 16: 6 N +
# 12 L d T + 6 m (d^2 + d V) = 589,824 + 24,576 + 1,761,753.6 = 2.4 MFLOP per token)
run $X bench --dev cpu --model tiny --position bert-a --seq 16 --batch 2 --steps 1
[ $rc = 0 ] && grep -Eq '^BENCH cpu tiny bert-a seq=16 batch=2 step_ms=[0-9.]+ tokens_per_s=[0-9]+ padded_tokens_per_s=[0-9]+ mflop_per_token=2.4 tflops=[0-9.]+ mfu=[0-9.]+% loss=[0-9.]+$' $T/out
verdict "bench: real tokens/s and their MFU at the model's FLOPs per token"
run $X bench --dev cpu --model tiny --seq 16 --batch 2 --steps 1 --per-op
[ $rc = 2 ] && has $T/err "--per-op"
verdict "bench --per-op on the CPU: an error (the timing is the CUDA backend's events)"
run $X counters --dev cpu --model tiny --seq 16 --batch 2
[ $rc = 2 ] && has $T/err "counters"
verdict "counters on the CPU: an error (the emulated GPU counts)"

# The rest of tests/gpu/run.sh that runs without a GPU: it parses, and the 16-GPU projection
# from given numbers (README.md, "Projecting 16 GPUs").
G=$TUPE_SRC/tests/gpu/run.sh
run bash -n $G
check "tests/gpu/run.sh parses" [ $rc = 0 ]
run $G --project 300 50 0.5
[ $rc = 0 ] && has $T/out "projection: 1e+06 steps on 16 GPUs: compute 300.0 ms + communication 4.4 ms (412 MB per rank per step, 0.533 of a ring's across nodes, at 50 GB/s bus bandwidth), 50% of it hidden = 302.2 ms/step, 3.5 days"
verdict "tests/gpu/run.sh --project: the 16-GPU projection from a step time, a bus bandwidth and a hidden share"
run $G --project 300 50 0.5 16 110e6 2 1e6 1
[ $rc = 0 ] && has $T/out "compute 300.0 ms + communication 8.2 ms (412 MB per rank per step, 1.000 of a ring's across nodes, at 50 GB/s bus bandwidth), 50% of it hidden = 304.1 ms/step"
verdict "tests/gpu/run.sh --project with a ring's bytes across nodes (--grad-reduce nccl)"
run $TUPE_BUILD/tests/tupe-commtest gpu-bench
[ $rc != 0 ] && [ -s $T/err ]
verdict "tupe-commtest gpu-bench without GPUs: an error, not a measure"
run $TUPE_BUILD/tests/tupe-commtest gpu-path 1
[ $rc != 0 ] && [ -s $T/err ]
verdict "tupe-commtest gpu-path without GPUs: an error"
exit $_failed
