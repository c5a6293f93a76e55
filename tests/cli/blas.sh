#!/usr/bin/env bash
# The BLAS kernels of the CPU backend (lib/backend/blas.h), end to end through tupe-pretrain:
# with nothing set, the kernels of this processor's instruction set (from /proc/cpuinfo's
# flags), said in one line on stderr and in metrics.jsonl's start line (again at a resume);
# OPENBLAS_CORETYPE set by the user is kept; OpenBLAS falling back to its generic core (as
# 0.3.21 does on processors it does not know; the test hook TUPE_FAULT=blas.generic) is undone;
# a core whose product fails the start-up check (TUPE_FAULT=blas.check) is not used, with a
# one-line notice. oneDNN's sgemm does the single-precision products, named first in the line,
# unless OPENBLAS_CORETYPE is set; if it fails the check (TUPE_FAULT=blas.onednn), OpenBLAS's
# is used, with a one-line notice. No timing. Skipped where OpenBLAS is not a multi-core x86-64
# build.
. "$(dirname "$0")/lib.sh"
P=$TUPE_BIN/tupe-pretrain

awk 'BEGIN { srand(5); for (d = 0; d < 60; d++) { line = "";
     for (i = 0; i < 20; i++) line = line (i ? " " : "") 5 + int(40 * rand() ^ 3); print line } }' >$T/ids.txt
$TESTTOOL tok-write --vocab-size 50 -o $T/ids.tok $T/ids.txt
tupe-shard write -q -o $T/shards --seq-len 16 --pad 0 --unk 1 --cls 2 --sep 3 --mask 4 --shards 1 $T/ids.tok
cat >$T/m.json <<'J'
{"position": "tupe-r", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 32}
J
common=(--data $T/shards --model $T/m.json --batch 4 --warmup 1 --log-every 1 --eval-every 0 --threads 1 --device cpu)
unset OPENBLAS_CORETYPE TUPE_FAULT

# The instruction set this processor offers, as the kernels line names it.
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
hasf() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
if hasf avx512f avx512vl avx512bw avx512dq; then isa=AVX-512
elif hasf avx2 fma; then isa=AVX2
elif hasf avx; then isa=AVX
else isa=SSE3; fi

kernels() { sed -n 's/^tupe-pretrain: matrix products: //p' $T/err; }
run $P train "${common[@]}" -o $T/a --steps 2 --stop-after 1 --save-every 1
line=$(kernels)
if [ $rc != 0 ] || [[ $line != "oneDNN "*" sgemm "*" for single precision; OpenBLAS "* ]]; then
    not_ok "tupe-pretrain names the BLAS kernels" "rc=$rc" "stderr: $(head -c 600 $T/err)"
    exit 1
fi
if [ "$(uname -m)" != x86_64 ] || [[ $line == *"a build for one core"* ]]; then
    skip "kernel selection" "OpenBLAS here is not a multi-core x86-64 build: $line"
    exit 0
fi
[ "$(grep -c 'matrix products: ' $T/err)" = 1 ] && [[ $line == *" kernels ($isa), "* ]] &&
    head -1 $T/a/metrics.jsonl | grep -qxF "{\"step\":0,\"start\":{\"backend\":\"cpu\",\"kernels\":\"$line\"}}"
verdict "nothing set: the kernels of this processor's $isa, in one line on stderr and metrics.jsonl's first"

run $P train "${common[@]}" -o $T/a --steps 2 --resume
[ $rc = 0 ] && [ "$(grep -c '"start":{"backend":"cpu","kernels":"oneDNN ' $T/a/metrics.jsonl)" = 2 ] &&
    grep -q '^{"step":1,"start":' $T/a/metrics.jsonl && [ "$(grep -c '"loss"' $T/a/metrics.jsonl)" = 2 ]
verdict "a resumed run records its kernels again, at the step it resumes from"

OPENBLAS_CORETYPE=Prescott run $P train "${common[@]}" -o $T/user --steps 1 --save-every 0
[ $rc = 0 ] && [ "$(kernels | sed 's/^OpenBLAS [^ ]* //')" = "Prescott kernels (SSE3), OPENBLAS_CORETYPE=Prescott" ]
verdict "OPENBLAS_CORETYPE set by the user is kept, and OpenBLAS's kernels do every product"

if [ $isa = SSE3 ]; then
    skip "a generic core undone" "this processor has nothing beyond SSE3"
else
    TUPE_FAULT=blas.generic run $P train "${common[@]}" -o $T/gen --steps 1 --save-every 0
    [ $rc = 0 ] && [[ "$(kernels)" == *" kernels ($isa), chosen for this processor: OpenBLAS's own choice was Prescott" ]]
    verdict "OpenBLAS fallen back to Prescott: the $isa kernels chosen instead"
fi

TUPE_FAULT=blas.check run $P train "${common[@]}" -o $T/bad --steps 1 --save-every 0
first=$(echo "$line" | sed 's/.*; OpenBLAS [^ ]* \([^ ]*\) kernels.*/\1/')
[ $rc = 0 ] && [ "$(grep -c 'kernels failed the start-up check' $T/err)" = 1 ] &&
    grep -q "^tupe-pretrain: OpenBLAS [^ ]*'s $first kernels failed the start-up check of matrix products against a plain loop (sgemm NN 5x3x7: C\[2,1\] = .*): using its [A-Za-z0-9_]* kernels$" $T/err &&
    [[ "$(kernels)" == *", in place of $first, which failed the start-up check" ]] &&
    [[ "$(kernels)" != *" $first kernels"* ]]
verdict "a core whose product is wrong is not used: a one-line notice, the next core computes"

TUPE_FAULT=blas.onednn run $P train "${common[@]}" -o $T/dnnl --steps 1 --save-every 0
[ $rc = 0 ] && [ "$(grep -c "sgemm failed the start-up check" $T/err)" = 1 ] &&
    grep -q "^tupe-pretrain: oneDNN [0-9.]*'s sgemm failed the start-up check of matrix products against a plain loop (sgemm NN 5x3x7: C\[0,0\] = .*): using OpenBLAS [^ ]*'s$" $T/err &&
    [ "$(kernels)" = "${line#*; }" ]
verdict "oneDNN's sgemm computing wrong is not used: a one-line notice, OpenBLAS's kernels for every product"
