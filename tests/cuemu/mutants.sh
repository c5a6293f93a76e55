#!/usr/bin/env bash
# make check-cuemu-mutants: shows that make check-cuemu catches broken kernels. Each mutant is a
# copy of the kernels (kernels/*.cu and *.cuh) with one deliberate bug in the one file its
# substitution applies to; the .cu files that change (that file, or every .cu including a
# changed header) are compiled and linked ahead of the CUDA=emu build's library into a
# tupe-parity of its own (so their objects replace the library's), and the parity
# parts of check-cuemu (tests/cuemu/run.sh: ops, ops-warps, ops-legacy, step-small,
# step-t512, curve, for cuda then cuda-bf16) run on it until one fails. A mutant is caught
# when a part fails; one line per mutant, naming the part, then "N passed, N failed" (a
# mutant that survives is a failure: the check missed a bug).
#
# Environment (from the Makefile, in the CUDA=emu configuration): TUPE_SRC, CUEMU_BUILD, NVCC,
# NVFLAGS, CC, LDFLAGS, LDLIBS; CUEMU_MUTANTS, a regular expression: only the mutants it
# matches.
set -u
: "${TUPE_SRC:?run through make check-cuemu-mutants}" "${CUEMU_BUILD:?}" "${NVCC:?}" "${CC:?}"
: "${NVFLAGS:=}" "${LDFLAGS:=}" "${LDLIBS:=}"
K=$TUPE_SRC/kernels
M=$CUEMU_BUILD/mutants
only=${CUEMU_MUTANTS:-}

# name|the bug|a Perl substitution that must change the file exactly once
MUTANTS=(
    'barrier-block-reduce|block_reduce without its leading __syncthreads (a warp that runs ahead overwrites the partial sums a slower one still reads)|s{\n\s*__syncthreads\(\); /\* sh may still be read by a previous call \*/}{}'
    'hang-block-reduce|block_reduce spins forever before its first barrier (a kernel that never ends: caught by the part time limit, CUEMU_PART_TIMEOUT, within minutes)|s{(\n\s*)__syncthreads\(\); /\* sh may still be read by a previous call \*/}{$1for (volatile int spin = 1; spin;) {} /* never ends */}'
    'barrier-column-sums|k_colsum_part reads the shared partial sums without the __syncthreads after they are written|s{(\[threadIdx\.x\] = ab;)\n\s*__syncthreads\(\);}{$1}'
    'transpose-cublaslt|the cuBLASLt descriptor takes op(A) from ta and op(B) from tb (the row-major to column-major swap forgotten)|s{opa = k->tb \? CUBLAS_OP_T : CUBLAS_OP_N;\n(\s*)cublasOperation_t opb = k->ta}{opa = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;\n$1cublasOperation_t opb = k->tb}'
    'transpose-legacy-gemm|the cuBLAS fallback passes the transposes of A and B the wrong way round|s{cublasGemmStridedBatchedEx\(pr->blas, tb \? CUBLAS_OP_T : CUBLAS_OP_N,\n(\s*)ta \? CUBLAS_OP_T : CUBLAS_OP_N}{cublasGemmStridedBatchedEx(pr->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N,\n$1tb ? CUBLAS_OP_T : CUBLAS_OP_N}'
    'transpose-attention|the attention scores as Q^T K instead of Q K^T|s{lt_gemm\(pr, 0, 1, T_, T_, dh, \(float\)alpha, Q \+ }{lt_gemm(pr, 1, 0, T_, T_, dh, (float)alpha, Q + }'
    'bucket-bias|the relative bias reads the bucket of (i, j + 1) for (i, j)|s{rel, \(size_t\)buckets\[\(size_t\)i \* ldb \+ j\]}{rel, (size_t)buckets[(size_t)i * ldb + j + 1]}'
    'ln-backward-first-block|the one-kernel LayerNorm backward: the first block to finish, not the last, sums the blocks'"'"' dgamma and dbeta partials (some not written yet)|s{last = atomicAdd\(count, 1u\) == gridDim\.x - 1;}{last = atomicAdd(count, 1u) == 0;}'
    'ln-backward-count-kept|the one-kernel LayerNorm backward leaves its count of finished blocks as it is (the next launch finds no last block)|s{\n\s*if \(threadIdx\.x == 0\)\n\s*\*count = 0;}{}'
    'bias-epilogue-twice|a linear layer adds its bias in the cuBLASLt epilogue and again in k_bias_act|s{\n(\s*)b = NULL;\n(\s*T \*av)}{\n$1(void)b;\n$2}'
    'bucket-gradient|the relative-table gradient sorts (i, j) under bucket + 1|s{keys\[x\] = \(unsigned\)buckets\[\(size_t\)i \* ldb \+ j\];}{keys[x] = (unsigned)(buckets[(size_t)i * ldb + j] + 1);}'
    'flash-bias-tile|the flash attention adds the bias of (i, j + 1) to the score of (i, j)|s{S\[x\] \+= bias\[\(size_t\)\(i0 \+ r\) \* T_ \+ j0 \+ c\];}{S[x] += bias[(size_t)(i0 + r) * T_ + j0 + c + 1];}'
    'flash-key-block|the flash forward takes the keys of its last tile up to T, past the sequence'"'"'s length|s#for \(int j0 = 0; j0 < L; j0 \+= t\) \{ (/\* key tiles past[^\n]*)\n(\s*)int nc = min\(t, L - j0\);#for (int j0 = 0; j0 < L; j0 += t) { $1\n$2int nc = min(t, T_ - j0);#'
    'flash-dropout-index|the flash forward drops the score of (i, j) by the decision of (i, j + 1)|s{fl_drop\(S, t, d, g0 \+ \(size_t\)j0, T_, nr, nc\);}{fl_drop(S, t, d, g0 + (size_t)j0 + 1, T_, nr, nc);}'
    'xent-pad-columns|the cross-entropy reads its rows to the leading dimension, the padded vocabulary'"'"'s pad columns entering the maximum, the argmax and the sum|s{xent_scan\(l, V, vec, mx, s, arg\);}{xent_scan(l, ld, vec, mx, s, arg);}'
    'xent-ignored-row|the cross-entropy scores an ignored row (label -1, a padding row of the masked-LM head) as a real one: its loss taken with the logit of column -1|s#if \(lab < 0\) \{ /\* an ignored row#if (lab < -1) { /* an ignored row#'
    'dropout-block-slot|the dropout kernels take the sample offset of micro-batch 0 from the step'"'"'s parameter block, whatever their micro-batch (every later micro-batch of a step repeats the first one'"'"'s dropout)|s{TUPE_PAR_OFFSET \+ d\.slot\]}{TUPE_PAR_OFFSET]}'
    'flash-dbias-order|the flash backward adds the sequences'"'"' bias gradients last to first|s#for \(int b = 0; b < B; b\+\+\) \{\n(\s*)int L = lens\[b\], nc = min\(nk, L - j0\);#for (int b = B - 1; b >= 0; b--) {\n$1int L = lens[b], nc = min(nk, L - j0);#'
)

mkdir -p "$M"
pass=0 fail=0
for m in "${MUTANTS[@]}"; do
    name=${m%%|*} m=${m#*|} what=${m%%|*} sub=${m#*|}
    [ -z "$only" ] || [[ $name =~ $only ]] || continue
    d=$M/$name
    rm -rf "$d" && mkdir -p "$d/kernels"
    cp "$K"/*.cu "$K"/*.cuh "$d/kernels/"
    # the one file the substitution changes, exactly once
    hits=() n=0
    for f in "$K"/*.cu "$K"/*.cuh; do
        c=$(SUB=$sub perl -0777 -ne 'my $n = eval "\$_ =~ $ENV{SUB}g"; die $@ if $@; print $n + 0' "$f")
        [ "$c" -gt 0 ] && hits+=("$(basename "$f")") && n=$((n + c))
    done
    if [ "$n" != 1 ]; then
        echo "not ok - mutant/$name: the substitution applies $n times to kernels/ (once wanted: it changed?)"
        fail=$((fail + 1))
        continue
    fi
    f=${hits[0]}
    SUB=$sub perl -0777 -pe 'eval "\$_ =~ $ENV{SUB}"; die $@ if $@' "$K/$f" >"$d/kernels/$f"
    # the changed file if it is a .cu, else the .cu files that include it (through headers too)
    units=("$f") objs=() built=1
    while [ ${#units[@]} -gt 0 ]; do
        u=${units[0]} units=("${units[@]:1}")
        case $u in
        *.cuh) mapfile -t -O ${#units[@]} units < <(cd "$d/kernels" &&
                   grep -l "#include \"${u//./\\.}\"" -- *.cu *.cuh | sort -u) ;;
        *) o=$d/${u%.cu}.o
           [ -e "$o" ] && continue
           # shellcheck disable=SC2086
           $NVCC $NVFLAGS -DTUPE_HAVE_CUDA=1 -c "$d/kernels/$u" -o "$o" >>"$d/build.log" 2>&1 ||
               built=0
           objs+=("$o") ;;
        esac
    done
    # shellcheck disable=SC2086
    if [ $built = 0 ] || [ ${#objs[@]} = 0 ] ||
       ! $CC $LDFLAGS "$CUEMU_BUILD/obj/tools/tupe-parity.o" "${objs[@]}" "$CUEMU_BUILD/libtupe.a" $LDLIBS \
           -o "$d/tupe-parity" >>"$d/build.log" 2>&1; then
        echo "not ok - mutant/$name: does not build"
        sed 's/^/#   /' "$d/build.log" | tail -10
        fail=$((fail + 1))
        continue
    fi
    t0=$(date +%s)
    CUEMU_PARITY=$d/tupe-parity CUEMU_FIRST_FAILURE=1 CUEMU_PART_TIMEOUT=${CUEMU_PART_TIMEOUT:-120} \
        CUEMU_PARTS='^(ops|ops-warps|ops-legacy|step-small|step-t512|curve)-cuda' \
        CUEMU_BUILD=$CUEMU_BUILD CUEMU_SAN_BUILD= "$TUPE_SRC/tests/cuemu/run.sh" >"$d/run.log" 2>&1
    rc=$?
    caught=$(grep -m1 '^not ok - cuemu/' "$d/run.log" | sed 's/^not ok - cuemu\/\([^:]*\):.*/\1/')
    first=$(grep -m1 '^#   ' "$d/run.log" | sed 's/^#   //' | cut -c1-150)
    if [ $rc != 0 ] && [ -n "$caught" ]; then
        echo "ok - mutant/$name: caught by cuemu/$caught after $(($(date +%s) - t0)) s ($what; $first)"
        pass=$((pass + 1))
    else
        echo "not ok - mutant/$name: not caught ($what)"
        tail -5 "$d/run.log" | sed 's/^/#   /'
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
