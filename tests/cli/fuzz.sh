#!/usr/bin/env bash
# The fuzz targets' corpora, replayed: every seed (tests/fuzz/corpus/T) and every input that
# once made a reader crash, hang, overread or answer wrongly (tests/fuzz/regress/T) goes
# through the same entry point as under libFuzzer (`make fuzz`), here with the replay driver:
# the readers must stay fixed. Under SANITIZE=address,undefined this is the sanitizers' check.
. "$(dirname "$0")/lib.sh"

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
n=0
for src in "$TUPE_SRC"/tests/fuzz/fuzz_*.c; do
    t=$(basename "$src" .c)
    t=${t#fuzz_}
    bin=$TUPE_BUILD/tests/fuzz-$t
    dirs=()
    for d in corpus regress; do
        [ -d "$TUPE_SRC/tests/fuzz/$d/$t" ] && dirs+=("$TUPE_SRC/tests/fuzz/$d/$t")
    done
    run "$bin" "${dirs[@]}"
    count=$(cat "$T/out")
    check "fuzz target $t: ${count:-no inputs} replayed" eval '[ $rc = 0 ] && [ -n "$count" ] && [ "${count% inputs}" -gt 0 ]'
    n=$((n + 1))
done
check "every reader has a fuzz target ($n)" [ "$n" -ge 14 ]
exit $_failed
