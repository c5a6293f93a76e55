#!/usr/bin/env bash
# Builds, on this machine, what tests/gpu/run.sh needs on a GPU machine that cannot build tupe
# (a lent machine may lack the Debian libraries and has no network to fetch them): the programs
# and test tools with the CUDA backend (CUDA=1 MPI=0, -march=x86-64-v3 so that any recent x86-64
# runs them) in build/gpu, and beside them in build/gpu/lib every shared library they need that
# is neither glibc's nor CUDA's. Carry build/gpu/bin, build/gpu/tests and build/gpu/lib to the
# GPU machine; run.sh uses them when the machine cannot build (or with TUPE_GPU_BUNDLE=1).
set -eu
cd "$(dirname "$0")/../.."
B=build/gpu
make --no-print-directory CUDA=1 MPI=0 MARCH=x86-64-v3 B="$PWD/$B" -j"${JOBS:-2}" all tests >/dev/null
rm -rf "$B/lib"
mkdir -p "$B/lib"
progs="$B/bin/tupe-pretrain $B/bin/tupe-shard $B/tests/tupe-parity $B/tests/tupe-testtool"
for f in $progs; do
    ldd "$f" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case $(basename "$lib") in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libcuda.so* | \
        libcudart.so* | libcublas*.so* | libnccl.so*) ;;
    *) cp -L "$lib" "$B/lib/" ;;
    esac
done
# Only what run.sh runs travels: strip the programs' debug information.
keep="$B/bin/tupe-pretrain $B/bin/tupe-shard $B/tests/tupe-parity $B/tests/tupe-testtool"
for f in "$B"/bin/* "$B"/tests/*; do
    case " $keep " in *" $f "*) strip "$f" ;; *) rm -rf "$f" ;; esac
done
strip "$B"/lib/*.so*
du -sh "$B/bin" "$B/tests" "$B/lib"
echo "carry: $B/bin $B/tests $B/lib"
